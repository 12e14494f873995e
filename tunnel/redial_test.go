package tunnel

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bondd/bondd/internal/testkit"
	"github.com/bondd/bondd/tun/tuntest"
)

func TestRedialBackoff(t *testing.T) {
	const minB, maxB = 250 * time.Millisecond, 10 * time.Second
	for _, tc := range []struct {
		name             string
		backoff, downFor time.Duration
		want             time.Duration
	}{
		{"never connected: doubles", time.Second, -1, 2 * time.Second},
		{"never connected: capped at max", 8 * time.Second, -1, maxB},
		{"down long: doubles", time.Second, time.Minute, 2 * time.Second},
		{"down long: capped at max", 8 * time.Second, time.Hour, maxB},
		{"down 30 s: at most 7.5 s", 8 * time.Second, 30 * time.Second, 7500 * time.Millisecond},
		{"down 2 s: at most 500 ms", 4 * time.Second, 2 * time.Second, 500 * time.Millisecond},
		{"down a moment: not below min", 4 * time.Second, 10 * time.Millisecond, minB},
		{"after a fast redial: stays short", 20 * time.Millisecond, 10 * time.Millisecond, 40 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := redialBackoff(tc.backoff, minB, maxB, tc.downFor); got != tc.want {
				t.Errorf("redialBackoff(%s, down %s) = %s, want %s", tc.backoff, tc.downFor, got, tc.want)
			}
		})
	}
}

func TestBusyBackoff(t *testing.T) {
	const minB, maxB = 250 * time.Millisecond, 10 * time.Second
	for _, tc := range []struct {
		name          string
		backoff, want time.Duration
	}{
		{"after a fast redial: twice min", 20 * time.Millisecond, 500 * time.Millisecond},
		{"doubles", time.Second, 2 * time.Second},
		{"capped at max", 8 * time.Second, maxB},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := busyBackoff(tc.backoff, minB, maxB); got != tc.want {
				t.Errorf("busyBackoff(%s) = %s, want %s", tc.backoff, got, tc.want)
			}
		})
	}
}

// listenCounter is a ListenFunc that counts its calls per uplink and
// either fails or opens a loopback socket.
type listenCounter struct {
	fail bool
	mu   sync.Mutex
	n    map[string]int
}

func (l *listenCounter) listen(ctx context.Context, u UplinkOptions) (net.PacketConn, error) {
	l.mu.Lock()
	l.n[u.Name]++
	l.mu.Unlock()
	if l.fail {
		return nil, errors.New("uplink has no carrier")
	}
	return net.ListenPacket("udp", "127.0.0.1:0")
}

func (l *listenCounter) calls(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[name]
}

// startKickEdge starts an edge of two uplinks dialling concentrator, with
// a redial backoff of an hour: only a kick dials again within a test.
func startKickEdge(t *testing.T, concentrator string, l *listenCounter) *Edge {
	t.Helper()
	_, pin, err := SelfSignedCert("concentrator.test")
	if err != nil {
		t.Fatal(err)
	}
	tlsConf, err := ClientTLS("concentrator.test", nil, pin, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEdge(EdgeOptions{
		ID: "van-1", Device: tuntest.New(testMTU, 8), MTU: testMTU, Concentrator: concentrator, TLS: tlsConf, Token: token,
		Paths:   PathOptions{RedialMin: time.Hour, RedialMax: time.Hour},
		Uplinks: []UplinkOptions{{Name: "up0", Bind: netip.MustParseAddr("127.0.0.1")}, {Name: "up1", Bind: netip.MustParseAddr("127.0.0.1")}},
		Listen:  l.listen,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.Start()
	t.Cleanup(func() { e.Close() })
	return e
}

// waitCalls waits up to d for the uplink's dials to reach n.
func waitCalls(t *testing.T, l *listenCounter, name string, n int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for l.calls(name) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s dialled %d times in %s, want %d", name, l.calls(name), d, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestKickEndsBackoff: a path waiting out its redial backoff (an hour)
// dials at once when its uplink is kicked; the other uplink keeps waiting.
func TestKickEndsBackoff(t *testing.T) {
	testkit.CheckLeaks(t)
	l := &listenCounter{fail: true, n: map[string]int{}}
	e := startKickEdge(t, "127.0.0.1:9", l)
	waitCalls(t, l, "up0", 1, 5*time.Second)
	waitCalls(t, l, "up1", 1, 5*time.Second)
	if e.Kick("up9") {
		t.Error("Kick of an unknown uplink returned true")
	}
	for i := 2; i <= 3; i++ {
		if !e.Kick("up0") {
			t.Fatal("Kick(up0) returned false")
		}
		waitCalls(t, l, "up0", i, 2*time.Second)
	}
	if n := l.calls("up1"); n != 1 {
		t.Errorf("up1 dialled %d times, want 1: a kick of up0 must not touch it", n)
	}
}

// TestKickRestartsHandshake: a handshake under way (to an address that
// never answers, so it would last DefaultHandshakeTimeout) starts over
// at once when its uplink is kicked.
func TestKickRestartsHandshake(t *testing.T) {
	testkit.CheckLeaks(t)
	silent, err := net.ListenPacket("udp", "127.0.0.1:0") // takes the Initials, answers nothing
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	l := &listenCounter{n: map[string]int{}}
	e := startKickEdge(t, silent.LocalAddr().String(), l)
	waitCalls(t, l, "up0", 1, 5*time.Second)
	start := time.Now()
	e.Kick("up0")
	waitCalls(t, l, "up0", 2, DefaultHandshakeTimeout/2)
	t.Logf("handshake restarted %s after the kick", time.Since(start).Round(time.Millisecond))
}

// holdConn passes the first datagram it reads at once and holds every
// later one until release: a concentrator that answers at once and then
// takes its time over the rest of the handshake.
type holdConn struct {
	net.PacketConn
	release time.Time
	reads   atomic.Int64
}

func (c *holdConn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, a, err := c.PacketConn.ReadFrom(b)
	if err == nil && c.reads.Add(1) > 1 {
		time.Sleep(time.Until(c.release))
	}
	return n, a, err
}

// dialTestEdge starts an edge "van-1" of one uplink to concAddr for a test
// that calls Edge.dial itself: the edge's own first dial finds no carrier
// (and its next is an hour away), and the test's dials then get a
// loopback socket, wrapped by wrap when it is not nil.
func dialTestEdge(t *testing.T, concAddr string, tlsConf *tls.Config, wrap func(net.PacketConn) net.PacketConn) *Edge {
	t.Helper()
	var direct atomic.Bool
	noCarrier := make(chan struct{}, 1)
	e, err := NewEdge(EdgeOptions{
		ID: "van-1", Device: tuntest.New(testMTU, 8), MTU: testMTU, Concentrator: concAddr, TLS: tlsConf, Token: token,
		Paths:   dialTestPaths,
		Uplinks: []UplinkOptions{{Name: "up0", Bind: netip.MustParseAddr("127.0.0.1")}},
		Listen: func(ctx context.Context, u UplinkOptions) (net.PacketConn, error) {
			if !direct.Load() {
				select {
				case noCarrier <- struct{}{}:
				default:
				}
				return nil, errors.New("uplink has no carrier")
			}
			c, err := ListenUplink(ctx, u)
			if err != nil || wrap == nil {
				return c, err
			}
			return wrap(c), nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.Start()
	t.Cleanup(func() { e.Close() })
	select {
	case <-noCarrier:
	case <-time.After(5 * time.Second):
		t.Fatal("the edge did not dial its uplink within 5 s")
	}
	direct.Store(true)
	return e
}

// dialTestPaths are the path options of dialTestEdge and its concentrator:
// no redial of the edge's own within the test.
var dialTestPaths = PathOptions{RedialMin: time.Hour, RedialMax: time.Hour}

// TestDialAttemptWaitsForAnswer: a dial's attempt (the short one of a fast
// redial) bounds only the wait for the concentrator's first packet. A
// concentrator that answers within it keeps its handshake and hello up to
// DefaultHandshakeTimeout, however slow the rest is (a loaded node: cutting
// its handshakes short makes a retry storm); a silent one is given up at
// the attempt.
func TestDialAttemptWaitsForAnswer(t *testing.T) {
	testkit.CheckLeaks(t)
	const attempt, hold = 300 * time.Millisecond, 1500 * time.Millisecond
	_, concAddr, tlsConf := startTestConcentrator(t, tuntest.New(testMTU, 8), dialTestPaths,
		EdgeAuth{ID: "van-1", Token: token, AllowedPrefixes: []netip.Prefix{netip.MustParsePrefix("10.77.0.0/24")}})
	silent, err := net.ListenPacket("udp", "127.0.0.1:0") // takes the Initials, answers nothing
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	e := dialTestEdge(t, concAddr, tlsConf, func(c net.PacketConn) net.PacketConn {
		return &holdConn{PacketConn: c, release: time.Now().Add(hold)}
	})
	u := e.opts.Uplinks[0]

	start := time.Now()
	conn, closeConn, _, err := e.dial(e.ctx, u, attempt, make(chan struct{}))
	took := time.Since(start)
	if err != nil {
		t.Fatalf("dial of a concentrator that answered at once and finished in %s failed after %s with attempt %s: %v", hold, took, attempt, err)
	}
	conn.CloseWithError(codeShutdown, "test done")
	closeConn()
	if took < hold-100*time.Millisecond {
		t.Errorf("dial took %s, want at least the %s the concentrator held its packets", took, hold)
	}

	u.Remote = silent.LocalAddr().String()
	start = time.Now()
	_, _, _, err = e.dial(e.ctx, u, attempt, make(chan struct{}))
	took = time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "no answer") {
		t.Fatalf("dial of a silent concentrator: err %v, want no answer", err)
	}
	if took > attempt+time.Second {
		t.Errorf("dial of a silent concentrator gave up after %s, want about the attempt, %s", took, attempt)
	}
	t.Logf("answering node: up; silent node: %v after %s", err, took.Round(time.Millisecond))
}

// TestDialRetryIsAnAnswer: a concentrator under load answers an Initial
// with a QUIC Retry (conc_admit.go); that is its answer within the attempt,
// and the dial waits for the rest of the handshake, however slow, instead
// of giving the node up as silent and sending another Initial without a
// token, which would get another Retry.
func TestDialRetryIsAnAnswer(t *testing.T) {
	testkit.CheckLeaks(t)
	const attempt, hold = 300 * time.Millisecond, 1500 * time.Millisecond
	conc, concAddr, tlsConf := startTestConcentrator(t, tuntest.New(testMTU, 8), dialTestPaths,
		EdgeAuth{ID: "van-1", Token: token, AllowedPrefixes: []netip.Prefix{netip.MustParsePrefix("10.77.0.0/24")}},
		func(o *ConcentratorOptions) { o.Handshakes = HandshakeOptions{RetryAbove: RetryAlways} })
	e := dialTestEdge(t, concAddr, tlsConf, func(c net.PacketConn) net.PacketConn {
		return &holdConn{PacketConn: c, release: time.Now().Add(hold)} // the Retry passes, the rest waits
	})
	start := time.Now()
	conn, closeConn, _, err := e.dial(e.ctx, e.opts.Uplinks[0], attempt, make(chan struct{}))
	if err != nil {
		t.Fatalf("dial of a concentrator that answered with a Retry failed after %s with attempt %s: %v", time.Since(start), attempt, err)
	}
	conn.CloseWithError(codeShutdown, "test done")
	closeConn()
	if r := conc.Handshakes().Retries; r == 0 {
		t.Error("the concentrator sent no Retry")
	}
}
