package quicfork

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/congestion"
)

// relay forwards UDP between a client and a server address on loopback,
// each packet after delay; while blackhole is set it drops everything.
type relay struct {
	conn      *net.UDPConn
	server    *net.UDPAddr
	delay     time.Duration
	blackhole atomic.Bool
	client    atomic.Pointer[net.UDPAddr]
}

func newRelay(t *testing.T, server net.Addr, delay time.Duration) *relay {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{conn: c, server: server.(*net.UDPAddr), delay: delay}
	t.Cleanup(func() { c.Close() })
	go r.run()
	return r
}

func (r *relay) run() {
	buf := make([]byte, 2048)
	for {
		n, from, err := r.conn.ReadFromUDP(buf)
		if err != nil {
			return
		}
		if r.blackhole.Load() {
			continue
		}
		to := r.server
		if !from.IP.Equal(r.server.IP) || from.Port != r.server.Port {
			r.client.Store(from)
		} else if to = r.client.Load(); to == nil {
			continue
		}
		p := append([]byte(nil), buf[:n]...)
		time.AfterFunc(r.delay, func() { r.conn.WriteToUDP(p, to) })
	}
}

func tlsConfigs(t *testing.T) (server, client *tls.Config) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"hook.test"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	server = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, NextProtos: []string{"hook"}}
	client = &tls.Config{RootCAs: pool, ServerName: "hook.test", NextProtos: []string{"hook"}}
	return server, client
}

// pair is a client connection dialled through a relay of delay to a server
// that counts the DATAGRAM bytes it receives.
type pair struct {
	client   *quic.Conn
	server   *quic.Conn
	relay    *relay
	received atomic.Int64
}

func dial(t *testing.T, delay time.Duration, ccfg, scfg *quic.Config, read bool) *pair {
	t.Helper()
	stls, ctls := tlsConfigs(t)
	ln, err := quic.ListenAddr("127.0.0.1:0", stls, scfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := &pair{relay: newRelay(t, ln.Addr(), delay)}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	accepted := make(chan *quic.Conn, 1)
	go func() {
		c, err := ln.Accept(ctx)
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	p.client, err = quic.DialAddr(ctx, p.relay.conn.LocalAddr().String(), ctls, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.client.CloseWithError(0, "") })
	if p.server = <-accepted; p.server == nil {
		t.Fatal("no connection accepted")
	}
	if read {
		go func() {
			for {
				d, err := p.server.ReceiveDatagram(context.Background())
				if err != nil {
					return
				}
				p.received.Add(int64(len(d)))
			}
		}()
	}
	return p
}

// send offers 1000-byte datagrams on c until stop is closed, as fast as
// SendDatagram takes them.
func send(c *quic.Conn, stop <-chan struct{}) {
	b := make([]byte, 1000)
	for {
		select {
		case <-stop:
			return
		default:
		}
		if c.SendDatagram(b) != nil {
			return
		}
	}
}

// fixed is a test controller: a window of window bytes (0: none) and a
// pacer at rate bytes/s (0: none) with a burst of ten packets (as quic-go's own pacer: a timer fires late by up to a millisecond). It records
// the largest bytes in flight and the 1-RTT bytes sent.
type fixed struct {
	window, rate int64

	mu            sync.Mutex
	maxSize       int64
	tokens        float64
	last          time.Time
	maxInFlight   int64
	sent          int64
	firstSent     time.Time
	lastSent      time.Time
	acked, lost   atomic.Int64
	abandoned     atomic.Int64
	handshakeDone atomic.Bool
}

func (f *fixed) refill(now time.Time) {
	if !f.last.IsZero() && now.After(f.last) {
		f.tokens = min(f.tokens+now.Sub(f.last).Seconds()*float64(f.rate), float64(10*f.maxSize))
	}
	f.last = now
}

func (f *fixed) OnPacketSent(t time.Time, inFlight, pn, n int64, eliciting bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.maxInFlight = max(f.maxInFlight, inFlight)
	if f.handshakeDone.Load() {
		if f.firstSent.IsZero() {
			f.firstSent = t
		}
		f.sent += n
		f.lastSent = t
	}
	if f.rate > 0 {
		f.refill(t)
		f.tokens -= float64(n)
	}
}
func (f *fixed) OnPacketAcked(pn, n, prior int64, t time.Time) { f.acked.Add(1) }
func (f *fixed) OnPacketLost(pn, n, prior int64)               { f.lost.Add(1) }
func (f *fixed) OnPacketAbandoned(pn, n int64)                 { f.abandoned.Add(1) }
func (f *fixed) OnSpuriousLoss(int64)                          {}
func (f *fixed) OnRetransmissionTimeout(bool)                  {}
func (f *fixed) MaybeExitSlowStart()                           {}
func (f *fixed) CanSend(inFlight int64) bool                   { return f.window == 0 || inFlight < f.window }
func (f *fixed) SetMaxDatagramSize(n int64)                    { f.mu.Lock(); f.maxSize = n; f.mu.Unlock() }
func (f *fixed) CongestionWindow() int64                       { return f.window }
func (f *fixed) InSlowStart() bool                             { return false }
func (f *fixed) InRecovery() bool                              { return false }
func (f *fixed) HasPacingBudget(now time.Time) bool {
	if f.rate == 0 {
		return true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refill(now)
	return f.tokens >= float64(f.maxSize)
}
func (f *fixed) TimeUntilSend(int64) time.Time {
	if f.rate == 0 {
		return time.Time{}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	need := float64(f.maxSize) - f.tokens
	if need <= 0 {
		return time.Time{}
	}
	return f.last.Add(time.Duration(need / float64(f.rate) * float64(time.Second)))
}

func (f *fixed) stats() (maxInFlight, sent int64, span time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.maxInFlight, f.sent, f.lastSent.Sub(f.firstSent)
}

func config(f congestion.Factory) *quic.Config {
	return &quic.Config{EnableDatagrams: true, CongestionControl: f, InitialPacketSize: 1252}
}

// TestHookWindow: a controller that allows N bytes in flight holds
// quic-go to N (plus the one packet that crosses it), and N binds.
func TestHookWindow(t *testing.T) {
	const window = 60_000
	f := &fixed{window: window}
	p := dial(t, 25*time.Millisecond, config(func(context.Context, congestion.Controller, congestion.RTTStats) congestion.Controller {
		return f
	}), config(nil), true)
	f.handshakeDone.Store(true)
	stop := make(chan struct{})
	go send(p.client, stop)
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	maxInFlight, sent, span := f.stats()
	if maxInFlight > window+1500 {
		t.Errorf("bytes in flight reached %d, window %d", maxInFlight, window)
	}
	if maxInFlight < window*9/10 {
		t.Errorf("bytes in flight reached only %d: the window of %d never bound", maxInFlight, window)
	}
	// A 60-KB window over a 50-ms RTT carries about 1.2 MB/s.
	if rate := float64(sent) / span.Seconds(); rate > 1.5*window/0.05 {
		t.Errorf("sent %.0f B/s, more than the window allows", rate)
	}
	if f.acked.Load() == 0 {
		t.Error("no packet acknowledged through the hook")
	}
}

// TestHookPacing: a controller that paces at R gets R ± 5 %, at the
// controller and at the receiver.
func TestHookPacing(t *testing.T) {
	const rate = 2_000_000 // bytes/s, 16 Mbit/s
	f := &fixed{rate: rate}
	p := dial(t, 5*time.Millisecond, config(func(context.Context, congestion.Controller, congestion.RTTStats) congestion.Controller {
		return f
	}), config(nil), true)
	stop := make(chan struct{})
	go send(p.client, stop)
	time.Sleep(300 * time.Millisecond)
	f.handshakeDone.Store(true)
	startRx, start := p.received.Load(), time.Now()
	time.Sleep(2 * time.Second)
	rx, elapsed := p.received.Load()-startRx, time.Since(start)
	close(stop)
	_, sent, span := f.stats()
	got := float64(sent) / span.Seconds()
	t.Logf("paced at %.0f B/s (target %d), received %.0f B/s of datagrams", got, rate, float64(rx)/elapsed.Seconds())
	if got < 0.95*rate || got > 1.05*rate {
		t.Errorf("paced at %.0f B/s, want %d ± 5 %%", got, rate)
	}
	// The receiver counts DATAGRAM payloads, 1000 of each ~1030-byte packet.
	if goodput := float64(rx) / elapsed.Seconds(); goodput < 0.90*rate || goodput > 1.05*rate {
		t.Errorf("received %.0f B/s of datagrams at a pace of %d B/s", goodput, rate)
	}
}

// TestHookDefault: with no factory, or a factory that returns quic-go's own
// controller, the connection runs quic-go's NewReno: its initial window of
// 32 packets, growing under a loss-free load.
func TestHookDefault(t *testing.T) {
	var def congestion.Controller
	var rtt congestion.RTTStats
	p := dial(t, 10*time.Millisecond, config(func(_ context.Context, d congestion.Controller, r congestion.RTTStats) congestion.Controller {
		def, rtt = d, r
		return d
	}), config(nil), true)
	if def == nil || rtt == nil {
		t.Fatal("the factory was not called")
	}
	stop := make(chan struct{})
	go send(p.client, stop)
	time.Sleep(500 * time.Millisecond)
	close(stop)
	if p.received.Load() == 0 {
		t.Fatal("nothing received")
	}
	// The connection's own goroutine is done with the first window by now;
	// read it once the load stopped.
	time.Sleep(100 * time.Millisecond)
	if w := def.CongestionWindow(); w <= 32*1200 {
		t.Errorf("quic-go's window is %d bytes after a loss-free load: not the controller in use", w)
	}

	// No factory: the same connection setup works, as upstream.
	q := dial(t, 10*time.Millisecond, config(nil), config(nil), true)
	stop = make(chan struct{})
	go send(q.client, stop)
	time.Sleep(300 * time.Millisecond)
	close(stop)
	if q.received.Load() == 0 {
		t.Fatal("nothing received without a factory")
	}
}

// TestHookAbandoned: DATAGRAM packets the probe timeout takes out of flight
// while the path is black-holed reach the controller as abandoned.
func TestHookAbandoned(t *testing.T) {
	f := &fixed{}
	p := dial(t, 5*time.Millisecond, config(func(context.Context, congestion.Controller, congestion.RTTStats) congestion.Controller {
		return f
	}), config(nil), true)
	p.relay.blackhole.Store(true)
	for range 20 {
		p.client.SendDatagram(make([]byte, 500))
	}
	deadline := time.Now().Add(3 * time.Second)
	for f.abandoned.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if f.abandoned.Load() == 0 {
		t.Errorf("no packet reported abandoned (lost %d)", f.lost.Load())
	}
}

// TestDatagramQueueLens: a receive queue set to 1024 holds a burst the
// default 128 drops.
func TestDatagramQueueLens(t *testing.T) {
	for _, tc := range []struct {
		name string
		rcv  int
		want int
	}{
		{"default", 0, 128},
		{"1024", 1024, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scfg := config(nil)
			scfg.DatagramReceiveQueueLen = tc.rcv
			p := dial(t, time.Millisecond, config(nil), scfg, false)
			for range 400 {
				if err := p.client.SendDatagram(make([]byte, 100)); err != nil {
					t.Fatal(err)
				}
				time.Sleep(100 * time.Microsecond)
			}
			time.Sleep(200 * time.Millisecond)
			got := 0
			for {
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				_, err := p.server.ReceiveDatagram(ctx)
				cancel()
				if err != nil {
					break
				}
				got++
			}
			if got != tc.want {
				t.Errorf("the receive queue held %d datagrams, want %d", got, tc.want)
			}
		})
	}
}

// observed is a fixed controller that is also a congestion.Observer: it
// records the DATAGRAM frames reported sent (payload length, and whether
// the packet that carried it was not reported sent before it), the
// packets received and the frames dropped.
type observed struct {
	fixed
	omu         sync.Mutex
	lastSentPN  int64
	lengths     []int64
	outOfOrder  int
	receivedPkt atomic.Int64
	droppedRcv  atomic.Int64
}

func (o *observed) OnPacketSent(t time.Time, inFlight, pn, n int64, eliciting bool) {
	o.omu.Lock()
	o.lastSentPN = pn
	o.omu.Unlock()
	o.fixed.OnPacketSent(t, inFlight, pn, n, eliciting)
}

func (o *observed) OnDatagramSent(pn, n int64) {
	o.omu.Lock()
	defer o.omu.Unlock()
	if pn <= o.lastSentPN {
		o.outOfOrder++
	}
	o.lengths = append(o.lengths, n)
}

func (o *observed) OnDatagramDropped(received bool, n int64) {
	if received {
		o.droppedRcv.Add(1)
	}
}

func (o *observed) OnPacketReceived() { o.receivedPkt.Add(1) }

// TestHookObserver: a controller that is also a congestion.Observer hears
// each DATAGRAM frame sent, in order and before its packet, each packet
// received, and each received frame the full receive queue drops.
func TestHookObserver(t *testing.T) {
	cli, srv := &observed{lastSentPN: -1}, &observed{lastSentPN: -1}
	scfg := config(func(context.Context, congestion.Controller, congestion.RTTStats) congestion.Controller { return srv })
	scfg.DatagramReceiveQueueLen = 4
	p := dial(t, time.Millisecond, config(func(context.Context, congestion.Controller, congestion.RTTStats) congestion.Controller {
		return cli
	}), scfg, false)
	const n = 20
	for i := range n {
		if err := p.client.SendDatagram(make([]byte, 100+i)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	deadline := time.Now().Add(3 * time.Second)
	for srv.droppedRcv.Load() < n-4 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cli.omu.Lock()
	lengths, outOfOrder := cli.lengths, cli.outOfOrder
	cli.omu.Unlock()
	if len(lengths) != n || outOfOrder != 0 {
		t.Fatalf("DATAGRAM frames reported sent: %v (%d after their packet), want %d", lengths, outOfOrder, n)
	}
	for i, l := range lengths {
		if l != int64(100+i) {
			t.Errorf("frame %d: %d bytes reported, want %d", i, l, 100+i)
		}
	}
	if got := srv.droppedRcv.Load(); got != n-4 {
		t.Errorf("the server's receive queue of 4 dropped %d of %d frames, want %d", got, n, n-4)
	}
	if cli.receivedPkt.Load() == 0 || srv.receivedPkt.Load() < n {
		t.Errorf("packets received: client %d, server %d (want ≥ 1 and ≥ %d)", cli.receivedPkt.Load(), srv.receivedPkt.Load(), n)
	}
}
