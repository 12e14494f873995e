package tunnel

import (
	"context"
	"crypto/tls"
	"errors"
	"github.com/bondd/bondd/internal/testkit"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bondd/bondd/tun/tuntest"
)

// bondEvents records a concentrator's OnBondUp and OnBondDown calls.
type bondEvents struct {
	mu  sync.Mutex
	got []string // "up van-1 [10.77.0.0/24]", "down van-1"
}

func (b *bondEvents) up(id string, ps []netip.Prefix) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.got = append(b.got, "up "+id+" "+ps[0].String())
}

func (b *bondEvents) down(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.got = append(b.got, "down "+id)
}

func (b *bondEvents) list() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.got)
}

// TestFleetMoveAndDrain runs one edge with two uplinks against two
// concentrator nodes: the edge's bond is up on A (one OnBondUp, however
// many paths); a probe of B reaches it without a bond; A drains, so every
// path ends with a refusal (ErrDraining) and A reports the bond down once;
// the edge is pointed at B, its bond comes up there and carries traffic
// both ways.
// fleetNode is a concentrator of the fleet tests with its TUN, hooks and
// address.
type fleetNode struct {
	c   *Concentrator
	dev *tuntest.Device
	ev  *bondEvents
	at  string
}

var fleetPaths = PathOptions{IdleTimeout: 2 * time.Second, Keepalive: 300 * time.Millisecond, RedialMin: 50 * time.Millisecond, RedialMax: 200 * time.Millisecond}

// startFleetNode starts a concentrator accepting van-1 (10.77.0.0/24).
func startFleetNode(t *testing.T, cert tls.Certificate) fleetNode {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := fleetNode{dev: tuntest.New(testMTU, 8), ev: &bondEvents{}, at: pc.LocalAddr().String()}
	n.c, err = NewConcentrator(ConcentratorOptions{
		Device: n.dev, MTU: testMTU, Conn: pc, TLS: ServerTLS(cert, nil), Paths: fleetPaths,
		Edges:    []EdgeAuth{{ID: "van-1", Token: token, AllowedPrefixes: []netip.Prefix{netip.MustParsePrefix("10.77.0.0/24")}}},
		OnBondUp: n.ev.up, OnBondDown: n.ev.down,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.c.Close() })
	return n
}

// startFleetEdge starts van-1 with two uplinks, dialling node.
func startFleetEdge(t *testing.T, node string, pin []byte, onEnd func(path, node string, err error)) (*Edge, *tuntest.Device) {
	t.Helper()
	tlsConf, err := ClientTLS("concentrator.test", nil, pin, nil)
	if err != nil {
		t.Fatal(err)
	}
	dev := tuntest.New(testMTU, 8)
	e, err := NewEdge(EdgeOptions{
		ID: "van-1", Device: dev, MTU: testMTU, Concentrator: node, TLS: tlsConf, Token: token, Paths: fleetPaths,
		Uplinks:   []UplinkOptions{{Name: "up0", Bind: netip.MustParseAddr("127.0.0.1")}, {Name: "up1", Bind: netip.MustParseAddr("127.0.0.1")}},
		OnPathEnd: onEnd,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.Start()
	t.Cleanup(func() { e.Close() })
	return e, dev
}

// connected counts the paths of van-1 connected to c.
func connected(c *Concentrator) int {
	n := 0
	if b := c.Bond("van-1"); b != nil {
		for _, p := range b.Stats().Paths {
			if p.Conn != nil {
				n++
			}
		}
	}
	return n
}

// edgeConnected reports how many of e's paths have a connection: after a
// concentrator replaces a bond the edge redials, and what it sends before
// then is dropped as no_path.
func edgeConnected(e *Edge) int {
	n := 0
	for _, p := range e.Bond().Stats().Paths {
		if p.Conn != nil && p.Status == "ACTIVE" {
			n++
		}
	}
	return n
}

func TestFleetMoveAndDrain(t *testing.T) {
	testkit.CheckLeaks(t)
	cert, pin, err := SelfSignedCert("concentrator.test")
	if err != nil {
		t.Fatal(err)
	}
	a, b := startFleetNode(t, cert), startFleetNode(t, cert)
	type end struct{ path, node string }
	var (
		mu       sync.Mutex
		refusals []end
	)
	e, edgeDev := startFleetEdge(t, a.at, pin, func(path, node string, err error) {
		if IsRefusal(err) {
			mu.Lock()
			refusals = append(refusals, end{path, node})
			mu.Unlock()
		}
	})
	waitFor(t, func() bool { return connected(a.c) == 2 })
	if got := a.ev.list(); !slices.Equal(got, []string{"up van-1 10.77.0.0/24"}) {
		t.Fatalf("node A hooks: %q, want one up", got)
	}

	// A probe completes a handshake with B and leaves no trace there.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := e.Probe(ctx, b.at); err != nil {
		t.Fatalf("probe of B: %v", err)
	}
	if got := b.ev.list(); len(got) != 0 || b.c.AuthFailures() != 0 {
		t.Fatalf("node B after a probe: hooks %q, %d refusals", got, b.c.AuthFailures())
	}

	// Draining A: both paths end with a refusal by A; one down.
	a.c.Drain()
	waitFor(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(refusals) >= 2
	})
	mu.Lock()
	for _, r := range refusals {
		if r.node != a.at {
			t.Errorf("refusal %+v attributed to another node than A (%s)", r, a.at)
		}
	}
	mu.Unlock()
	waitFor(t, func() bool { return len(a.ev.list()) == 2 })
	if got := a.ev.list(); got[1] != "down van-1" {
		t.Fatalf("node A hooks after drain: %q", got)
	}
	// A draining node no longer answers a probe.
	pctx, pcancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer pcancel()
	if err := e.Probe(pctx, a.at); err == nil {
		t.Error("probe of a draining node succeeded")
	}

	// Moving to B.
	e.SetConcentrator(b.at)
	if e.Concentrator() != b.at {
		t.Fatalf("Concentrator() = %s after SetConcentrator(%s)", e.Concentrator(), b.at)
	}
	// The node counts a path once its side of the handshake is done; the
	// edge sends on it once its own side is, and drops what it sends
	// before then as no_path.
	waitFor(t, func() bool { return connected(b.c) == 2 && edgeConnected(e) == 2 })
	if got := b.ev.list(); !slices.Equal(got, []string{"up van-1 10.77.0.0/24"}) {
		t.Fatalf("node B hooks: %q, want one up", got)
	}
	tb := &testBond{edge: e, conc: b.c}
	tb.exchange(t, edgeDev, b.dev, edgeAddr, srvAddr, 200)
	tb.exchange(t, b.dev, edgeDev, srvAddr, edgeAddr, 200)
}

// TestFleetSetEdges reloads a concentrator's edge list under a connected
// edge: an unchanged entry keeps its paths; a changed one is re-dialled
// and re-announced; an invalid list changes nothing; a removed edge is
// refused from then on.
func TestFleetSetEdges(t *testing.T) {
	testkit.CheckLeaks(t)
	cert, pin, err := SelfSignedCert("concentrator.test")
	if err != nil {
		t.Fatal(err)
	}
	n := startFleetNode(t, cert)
	var refused sync.Map
	e, edgeDev := startFleetEdge(t, n.at, pin, func(path, _ string, err error) {
		if errors.Is(err, ErrUnauthorized) {
			refused.Store(path, true)
		}
	})
	waitFor(t, func() bool { return connected(n.c) == 2 && edgeConnected(e) == 2 })
	ev := n.ev
	tb := &testBond{edge: e, conc: n.c, edgeDev: edgeDev, concDev: n.dev}
	van1 := EdgeAuth{ID: "van-1", Token: token, AllowedPrefixes: []netip.Prefix{netip.MustParsePrefix("10.77.0.0/24")}}
	van2 := EdgeAuth{ID: "van-2", Token: []byte("another-token-of-16+"), AllowedPrefixes: []netip.Prefix{netip.MustParsePrefix("10.77.2.0/24")}}
	bond := tb.conc.Bond("van-1")

	if err := tb.conc.SetEdges([]EdgeAuth{van1, van2}); err != nil {
		t.Fatal(err)
	}
	if tb.conc.Bond("van-1") != bond || tb.conc.Bond("van-2") == nil {
		t.Fatal("adding an edge replaced an unchanged one, or was not added")
	}
	tb.exchange(t, tb.edgeDev, tb.concDev, edgeAddr, srvAddr, 50)

	overlap := van2
	overlap.AllowedPrefixes = []netip.Prefix{netip.MustParsePrefix("10.77.0.128/25")}
	if err := tb.conc.SetEdges([]EdgeAuth{van1, overlap}); err == nil {
		t.Fatal("overlapping prefixes accepted")
	}
	if tb.conc.Bond("van-1") != bond {
		t.Fatal("a refused list changed the table")
	}

	changed := van1
	changed.AllowedPrefixes = append(slices.Clone(van1.AllowedPrefixes), netip.MustParsePrefix("10.77.5.0/24"))
	if err := tb.conc.SetEdges([]EdgeAuth{changed, van2}); err != nil {
		t.Fatal(err)
	}
	if tb.conc.Bond("van-1") == bond {
		t.Fatal("a changed entry kept its bond")
	}
	waitFor(t, func() bool { return connected(n.c) == 2 && edgeConnected(e) == 2 })
	waitFor(t, func() bool { return slices.Contains(ev.list(), "up van-1 10.77.0.0/24") })
	tb.exchange(t, tb.edgeDev, tb.concDev, edgeAddr, srvAddr, 50)
	tb.exchange(t, tb.concDev, tb.edgeDev, srvAddr, edgeAddr, 50)

	if err := tb.conc.SetEdges([]EdgeAuth{van2}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, ok := refused.Load("up0"); return ok })
	waitFor(t, func() bool { got := ev.list(); return len(got) > 0 && got[len(got)-1] == "down van-1" })
	if tb.conc.Bond("van-1") != nil {
		t.Fatal("removed edge still has a bond")
	}
}
