package tunnel

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
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
