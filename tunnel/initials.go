package tunnel

import (
	"context"
	"crypto/rand"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
)

// Initial flights for load tests of a concentrator's handshake admission
// (bondd bench scale --flood): what a hostile sender replays from spoofed
// addresses to make a node keep state and do handshake work.

// InitialFlights returns n first flights of QUIC connection attempts as an
// edge sends them to serverName: each the UDP payloads of its first
// Initial packets (a ClientHello with bondd's ALPN and post-quantum key
// share takes two datagrams of DefaultInitialPacketSize bytes), each
// attempt with its own random connection IDs and keys. Nothing is sent on
// a network: the packets are captured from a socket that delivers
// nothing. It returns fewer than n flights only with ctx's error.
func InitialFlights(ctx context.Context, n int, serverName string) ([][][]byte, error) {
	capture := &captureConn{out: make(chan []byte, 16), done: make(chan struct{})}
	tr := &quic.Transport{Conn: capture}
	defer func() { capture.Close(); tr.Close() }() // the transport's reader returns once the socket is closed
	var pin [32]byte
	rand.Read(pin[:])
	tlsConf, err := ClientTLS(serverName, nil, pin[:], nil)
	if err != nil {
		return nil, err
	}
	tlsConf.ClientSessionCache = nil
	conf := quicConfig(PathOptions{}.withDefaults(), &recorder{})
	to := &net.UDPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 4433} // TEST-NET-1 (RFC 5737): never dialled for real
	out := make([][][]byte, 0, n)
	for len(out) < n {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		dctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { tr.Dial(dctx, to, tlsConf, conf); close(done) }()
		var flight [][]byte
		select {
		case p := <-capture.out:
			flight = append(flight, p)
		case <-time.After(time.Second):
		}
		// The rest of the flight leaves at once.
		for wait := time.After(20 * time.Millisecond); len(flight) > 0 && len(flight) < 2; {
			select {
			case p := <-capture.out:
				flight = append(flight, p)
				continue
			case <-wait:
			}
			break
		}
		cancel()
		<-done
		for len(capture.out) > 0 { // anything the cancelled dial sent
			<-capture.out
		}
		if len(flight) > 0 {
			out = append(out, flight)
		}
	}
	return out, nil
}

// captureConn is a net.PacketConn that keeps what is written to it and
// never delivers anything.
type captureConn struct {
	out  chan []byte
	done chan struct{}
	once sync.Once
}

func (c *captureConn) ReadFrom([]byte) (int, net.Addr, error) {
	<-c.done
	return 0, nil, net.ErrClosed
}

func (c *captureConn) WriteTo(b []byte, _ net.Addr) (int, error) {
	select {
	case c.out <- slices.Clone(b):
	default:
	}
	return len(b), nil
}

func (c *captureConn) Close() error { c.once.Do(func() { close(c.done) }); return nil }

func (c *captureConn) LocalAddr() net.Addr {
	return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9}
}

func (c *captureConn) SetDeadline(time.Time) error      { return nil }
func (c *captureConn) SetReadDeadline(time.Time) error  { return nil }
func (c *captureConn) SetWriteDeadline(time.Time) error { return nil }
