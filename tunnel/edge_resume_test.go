package tunnel

import (
	"crypto/tls"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bondd/bondd/internal/testkit"
	"github.com/bondd/bondd/tun/tuntest"
)

// TestNodeSessionCacheKeepsTicket: crypto/tls's deletions of a node's
// ticket (a Put of nil after a failed handshake) take effect only at the
// ticketKeepFailures-th in a row; a new ticket starts the count again.
func TestNodeSessionCacheKeepsTicket(t *testing.T) {
	t1, t2 := &tls.ClientSessionState{}, &tls.ClientSessionState{}
	for _, c := range []struct {
		name string
		puts []*tls.ClientSessionState // nil: a deletion
		want *tls.ClientSessionState   // what Get returns after
	}{
		{"a ticket", []*tls.ClientSessionState{t1}, t1},
		{"two failures keep it", []*tls.ClientSessionState{t1, nil, nil}, t1},
		{"the third drops it", []*tls.ClientSessionState{t1, nil, nil, nil}, nil},
		{"a new ticket starts the count again", []*tls.ClientSessionState{t1, nil, nil, t2, nil, nil}, t2},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newResumeState()
			base := &tls.Config{ClientSessionCache: tls.NewLRUClientSessionCache(4)}
			conf := r.tlsFor(base, "node-a")
			for _, cs := range c.puts {
				conf.ClientSessionCache.Put("concentrator.test", cs)
			}
			got, _ := conf.ClientSessionCache.Get("concentrator.test")
			if got != c.want {
				t.Errorf("Get returned %p, want %p", got, c.want)
			}
			if other, _ := r.tlsFor(base, "node-b").ClientSessionCache.Get("concentrator.test"); other != nil {
				t.Error("another node's key holds the ticket")
			}
		})
	}
}

// TestDialResumesAfterFailedHandshake: a dial whose handshake is cut short
// (here cancelled after the node's first packet, as a timeout under load
// does) leaves the edge's session ticket for the node, so the next dial
// resumes; crypto/tls alone forgets it and the next handshake is a full
// one, which costs the node its certificate signature.
func TestDialResumesAfterFailedHandshake(t *testing.T) {
	testkit.CheckLeaks(t)
	_, concAddr, tlsConf := startTestConcentrator(t, tuntest.New(testMTU, 8), dialTestPaths,
		EdgeAuth{ID: "van-1", Token: token, AllowedPrefixes: []netip.Prefix{netip.MustParsePrefix("10.77.0.0/24")}})
	var hold atomic.Bool
	e := dialTestEdge(t, concAddr, tlsConf, func(c net.PacketConn) net.PacketConn {
		if !hold.Load() {
			return c
		}
		return &holdConn{PacketConn: c, release: time.Now().Add(time.Second)} // the first packet passes, the rest waits
	})
	u := e.opts.Uplinks[0]
	dial := func(kick <-chan struct{}) (resumed bool, err error) {
		conn, closeConn, _, err := e.dial(e.ctx, u, time.Second, kick)
		if err != nil {
			return false, err
		}
		resumed = conn.ConnectionState().TLS.DidResume
		time.Sleep(50 * time.Millisecond) // the node's tickets arrive after the handshake
		conn.CloseWithError(codeShutdown, "test done")
		closeConn()
		return resumed, nil
	}
	if _, err := dial(make(chan struct{})); err != nil {
		t.Fatal(err)
	}
	hold.Store(true)
	kick := make(chan struct{})
	time.AfterFunc(300*time.Millisecond, func() { close(kick) })
	if _, err := dial(kick); err == nil {
		t.Fatal("the held dial succeeded; want it cut short")
	}
	hold.Store(false)
	resumed, err := dial(make(chan struct{}))
	if err != nil {
		t.Fatal(err)
	}
	if !resumed {
		t.Error("the dial after a failed handshake did not resume the node's session")
	}
}
