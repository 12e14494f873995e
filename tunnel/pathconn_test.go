package tunnel

import (
	"strings"
	"testing"
	"time"

	"github.com/bondd/bondd/internal/testkit"
	"github.com/bondd/bondd/tunnel/ctrlmsg"
)

func TestPathConnMayHand(t *testing.T) {
	cases := []struct {
		name                   string
		unsent, cwnd, inflight int64
		srtt                   time.Duration
		suspect                bool
		want                   bool
	}{
		{"empty queue always", 0, 10_000, 20_000, 0, false, true},
		{"below the minimum always", minUnsent - 1, 10_000, 20_000, 0, false, true},
		{"no window yet", 10, 0, 0, 0, false, true},
		{"window has room", 4, 100_000, 10_000, 0, false, true},
		{"window full", 4, 14_000, 10_000, 0, false, false},
		{"never past the cap", maxUnsent, 1 << 30, 0, 0, false, false},
		{"never on a suspect path", 0, 100_000, 0, 0, true, false},
		{"within the queue-delay limit", 4, 100_000, 0, 50 * time.Millisecond, false, true},
		// 100 kB per 1 s is 20 kB per 200 ms: 15 packets of 1400 bytes wait longer.
		{"past the queue-delay limit", 15, 100_000, 0, time.Second, false, false},
	}
	for _, c := range cases {
		p := &path{bond: &Bond{popts: PathOptions{MaxQueueDelay: 200 * time.Millisecond}}}
		pc := pathConn{path: p}
		p.gated.Store(c.suspect)
		pc.unsent.Store(c.unsent)
		pc.cwnd.Store(c.cwnd)
		pc.inflight.Store(c.inflight)
		pc.srtt.Store(int64(c.srtt))
		if got := pc.mayHand(); got != c.want {
			t.Errorf("%s: mayHand = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestCheckHelloLane: a path has one connection, so a hello for lane 0 (or
// none, the field omitted) passes, and one for another lane — an edge from
// before lanes were retired dialling its extra connections — is refused,
// so that it cannot replace the path's connection.
func TestCheckHelloLane(t *testing.T) {
	h := ctrlmsg.Hello{Type: ctrlmsg.TypeHello, Version: Version, EdgeID: "van-1", Path: "up0"}
	if err := checkHello(&h); err != nil {
		t.Fatalf("lane 0: %v", err)
	}
	for _, lane := range []int{1, 7, -1} {
		h.Lane = lane
		if err := checkHello(&h); err == nil || !strings.Contains(err.Error(), "lane") {
			t.Errorf("lane %d: %v, want a lane error", lane, err)
		}
	}
}

// TestBondOneConnection: each end serves a path with one QUIC connection;
// when it dies, the edge redials, the new connection replaces it at both
// ends, and traffic flows again.
func TestBondOneConnection(t *testing.T) {
	testkit.CheckLeaks(t)
	tb := newTestBond(t, token, 1)
	tb.waitActive(t, 1)
	tb.exchange(t, tb.edgeDev, tb.concDev, edgeAddr, srvAddr, 100)
	ep := tb.edge.Bond().paths.Load().paths[0]
	first := ep.pc.conn.Load()
	if first == nil || tb.edge.Bond().Stats().Paths[0].Conn == nil {
		t.Fatal("the edge's path has no connection")
	}
	first.CloseWithError(0, "test: connection killed")
	waitFor(t, func() bool {
		c := ep.pc.conn.Load()
		cs := tb.conc.Bond("van-1").Stats()
		return c != nil && c != first && len(cs.Paths) == 1 && cs.Paths[0].Conn != nil && cs.Paths[0].Status == "ACTIVE"
	})
	tb.exchange(t, tb.edgeDev, tb.concDev, edgeAddr, srvAddr, 100)
	tb.exchange(t, tb.concDev, tb.edgeDev, srvAddr, edgeAddr, 100)
}
