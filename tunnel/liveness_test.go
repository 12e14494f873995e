package tunnel

import (
	"context"
	"encoding/binary"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/bondd/bondd/emu"
	"github.com/bondd/bondd/internal/monoclock"
	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/rules"
	"github.com/bondd/bondd/tun/tuntest"
)

// TestBlackholeGap black-holes the path that carries a 1 kHz probe (its
// emu relay drops everything both ways, the link stays "up") and checks
// that the longest gap between probes delivered at the concentrator stays
// within max(3 × RTT, 150 ms), with the default rules and with a rule that
// prefers the black-holed path; the datagrams sent into the hole are
// counted (DropSuspect), and the path comes back once the hole closes.
func TestBlackholeGap(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the black-hole run in -short mode")
	}
	const oneWay = 10 * time.Millisecond // RTT 20 ms on the carrying path, 30 ms on the other
	bound := max(3*2*oneWay, 150*time.Millisecond)
	preferFast, err := rules.CompileBytes("prefer.yaml", []byte(`
rules:
  - id: prefer-fast
    priority: 1
    actions: {prefer: {carrier: fast}}
`), rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		rules *rules.Set
	}{{"default", nil}, {"prefer", preferFast}} {
		t.Run(c.name, func(t *testing.T) {
			var relays emu.Relays
			tb := newTestBondWith(t, token, 2, func(o *EdgeOptions) {
				o.FEC = FECOptions{Mode: FECOff}
				o.Uplinks[0].Labels = map[string]string{"carrier": "fast"}
				o.Uplinks[1].Labels = map[string]string{"carrier": "slow"}
				if c.rules != nil {
					src := &staticRules{}
					src.set.Store(c.rules)
					o.Rules = src
				}
				relays = viaRelays(t, o, []emu.RelayLink{
					symmetric(oneWay, 50*emu.Mbps, 0), symmetric(oneWay+5*time.Millisecond, 50*emu.Mbps, 0)}, 3)
			})
			tb.waitActive(t, 2)
			waitFor(t, func() bool {
				p := tb.edge.Bond().Stats().Paths
				return p[0].SmoothedRTT > 0 && p[1].SmoothedRTT > 0
			})

			// The receiver: arrival time of every probe, by sequence number.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var mu sync.Mutex
			var arrivals []time.Time
			var seqs []uint32
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					select {
					case pkt := <-tb.concDev.Outbound():
						mu.Lock()
						arrivals = append(arrivals, time.Now())
						if len(pkt) >= 32 {
							seqs = append(seqs, binary.BigEndian.Uint32(pkt[28:]))
						}
						mu.Unlock()
					case <-ctx.Done():
						return
					}
				}
			}()
			count := func() int { mu.Lock(); defer mu.Unlock(); return len(arrivals) }

			payload := make([]byte, 64)
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			sent := 0
			var sendGap time.Duration // the sender's own longest pause: a gap it hides
			send := func(d time.Duration) {
				end, last := time.Now().Add(d), time.Now()
				for seq := uint32(0); time.Now().Before(end); seq++ {
					now := <-tick.C
					sendGap, last = max(sendGap, now.Sub(last)), now
					binary.BigEndian.PutUint32(payload, seq)
					tb.edgeDev.Inject(udp4(edgeAddr, srvAddr, payload))
					sent++
				}
			}
			// The fast path carries the probe (a loaded machine may make it
			// SUSPECT for an instant: wait until it is ACTIVE again). A
			// stall of the machine in a window (the race detector's, on 2
			// cores) can move the probe for a few tens of milliseconds: one
			// window of three must show it on the fast path.
			send(200 * time.Millisecond)
			var d0, d1 uint64
			for range 3 {
				waitFor(t, func() bool { return tb.edge.Bond().Stats().Paths[0].StatusReason == "" })
				before := tb.edge.Bond().Stats().Paths
				send(200 * time.Millisecond)
				after := tb.edge.Bond().Stats().Paths
				if d0, d1 = after[0].TxPackets-before[0].TxPackets, after[1].TxPackets-before[1].TxPackets; d0 >= 50 && d1 <= d0/4 {
					break
				}
				t.Logf("a window with %d datagrams on the fast path, %d on the other: again", d0, d1)
			}
			if d0 < 50 || d1 > d0/4 {
				t.Fatalf("the fast path did not carry the probe: %d datagrams on it, %d on the other", d0, d1)
			}
			start := count()
			sent = 0
			tx0 := tb.edge.Bond().Stats().Paths[0].TxPackets
			relays[0].SetDown(true)
			send(700 * time.Millisecond)
			st := tb.edge.Bond().Stats().Paths[0]
			t.Logf("sent %d received %d during the hole; up0 tx %d, up1 tx %d", sent, count()-start, st.TxPackets-tx0, tb.edge.Bond().Stats().Paths[1].TxPackets)
			if st.StatusReason == "" {
				t.Errorf("black-holed path: status %s; want SUSPECT", st.Status)
			}
			// What the path took into the hole is counted. (Under the race
			// detector the scheduler may already have moved the probe off
			// it when the hole opened; then there is nothing to count.)
			if st.TxPackets > tx0 && st.Drops[DropSuspect] == 0 {
				t.Errorf("black-holed path took %d datagrams into the hole, suspect drops 0; want them counted", st.TxPackets-tx0)
			}
			relays[0].SetDown(false)
			waitFor(t, func() bool { return tb.edge.Bond().Stats().Paths[0].StatusReason == "" })
			waitSettled(count, 200*time.Millisecond)
			cancel()
			<-done

			mu.Lock()
			defer mu.Unlock()
			var gap time.Duration
			for i := max(start, 1); i < len(arrivals); i++ { // from the last arrival before the hole
				gap = max(gap, arrivals[i].Sub(arrivals[i-1]))
			}
			t.Logf("%s: longest gap %s (bound %s), longest sender pause %s, suspect drops %d, rescued %d",
				c.name, gap, bound, sendGap, st.Drops[DropSuspect], st.Rescued)
			if gap > bound && !raceEnabled {
				t.Errorf("longest gap %s, want ≤ %s", gap, bound)
			}
		})
	}
}

// TestRegate: a SUSPECT path holds its frames back, and moves them with
// its parked frames to the live paths, only once another path is ACTIVE:
// also when that path comes back after every path went silent, not only
// when the suspicion starts.
func TestRegate(t *testing.T) {
	a, b := resendBond(t, PathOptions{})
	now := time.Now()
	b.state.SetConnected(false, now) // every other path down
	a.suspect.Store(true)
	for i := range 3 {
		a.queue.push(dataFrame(100+i, now))
	}
	f, _, _ := a.queue.pop(monoclock.Nanos(now))
	a.queue.park(f)
	queued := func(q *sendQueue) int {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.n + q.parked.n
	}
	a.regate(now)
	if a.gated.Load() || queued(a.queue) != 3 || queued(b.queue) != 0 {
		t.Fatalf("no other path: gated %v, %d frames kept, %d moved; want false, 3, 0", a.gated.Load(), queued(a.queue), queued(b.queue))
	}
	b.state.SetConnected(true, now) // another path is back first
	a.regate(now)
	if !a.gated.Load() || queued(a.queue) != 0 || queued(b.queue) != 3 || a.rescued.Load() != 3 {
		t.Fatalf("another path ACTIVE: gated %v, %d frames kept, %d moved (rescued %d); want true, 0, 3, 3",
			a.gated.Load(), queued(a.queue), queued(b.queue), a.rescued.Load())
	}
	a.regate(now) // still gated: nothing more to move
	if a.rescued.Load() != 3 {
		t.Errorf("rescued %d after a second regate, want 3", a.rescued.Load())
	}
	b.queue.drain()
}

// TestMoveAged: frames that have waited half their time (max age 200 ms)
// in the queue of path a, ACTIVE but slowed (smoothed RTT 400 ms), move to
// b when b delivers them sooner than a from the head of its queue and
// before their deadline; young frames, frames a rule ties to a, and moves
// that would not deliver sooner or in time stay, and so does everything
// under a baseline scheduler.
func TestMoveAged(t *testing.T) {
	cases := []struct {
		name     string
		age      time.Duration
		life     time.Duration // the frames' own deadline after enqueueing; 0: the max age
		movable  bool
		bRTT     time.Duration
		baseline bool // the bond's picker is not the default
		moved    int
	}{
		{name: "aged frames move", age: 150 * time.Millisecond, movable: true, bRTT: 20 * time.Millisecond, moved: 3},
		{name: "young frames stay", age: 50 * time.Millisecond, movable: true, bRTT: 20 * time.Millisecond},
		{name: "frames a rule ties to the path stay", age: 150 * time.Millisecond, bRTT: 20 * time.Millisecond},
		{name: "the other path is slower", age: 150 * time.Millisecond, movable: true, bRTT: 900 * time.Millisecond},
		{name: "the other path delivers after the deadline", age: 150 * time.Millisecond, movable: true, bRTT: 140 * time.Millisecond},
		{name: "a baseline scheduler keeps its paths", age: 150 * time.Millisecond, movable: true, bRTT: 20 * time.Millisecond, baseline: true},
		// A long deadline: only the slowed path's own delivery from the
		// head of its queue (half its 400-ms RTT) decides.
		{name: "sooner than from the head: moves", age: 600 * time.Millisecond, life: time.Second, movable: true, bRTT: 300 * time.Millisecond, moved: 3},
		{name: "later than from the head: stays", age: 600 * time.Millisecond, life: time.Second, movable: true, bRTT: 500 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := resendBond(t, PathOptions{})
			if !a.bond.movesAged {
				t.Fatal("a bond with the default scheduler does not move aged frames")
			}
			now := time.Now()
			b.state.OnMetrics(c.bRTT, c.bRTT, 1<<20, 0)
			a.state.OnMetrics(400*time.Millisecond, 40*time.Millisecond, 1<<20, 0) // slowed: its RTT grew tenfold
			a.bond.movesAged = !c.baseline
			for i := range 3 {
				f := dataFrame(100+i, now.Add(-c.age))
				f.movable = c.movable
				if c.life > 0 {
					f.expires = f.enqueued + int64(c.life)
				}
				a.queue.push(f)
			}
			a.moveAged(now)
			if got := int(a.rescued.Load()); got != c.moved {
				t.Errorf("moved %d frames, want %d", got, c.moved)
			}
			if got := b.state.QueueLen(); got != c.moved {
				t.Errorf("b's queue holds %d frames, want %d", got, c.moved)
			}
			if got := a.state.QueueLen(); got != 3-c.moved {
				t.Errorf("a's queue holds %d frames, want %d", got, 3-c.moved)
			}
			for f, ok := b.queue.popAged(monoclock.Nanos(now.Add(time.Hour)), func(*frame, int64) bool { return true }); ok; f, ok = b.queue.popAged(monoclock.Nanos(now.Add(time.Hour)), func(*frame, int64) bool { return true }) {
				t.Errorf("a moved frame may move again (enqueued %d)", f.enqueued)
			}
			a.queue.drain()
			b.queue.drain()
		})
	}
	// Only the default scheduler moves aged frames.
	bd, err := newBond("van-1", &discardTUN{Device: tuntest.New(testMTU, 8)}, bondOptions{mtu: testMTU, picker: policy.MinRTT{},
		paths: PathOptions{}.withDefaults(), fec: FECOptions{Mode: FECOff}.withDefaults(), log: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	if bd.movesAged {
		t.Error("a bond with the MinRTT scheduler moves aged frames")
	}
}

// TestMoveAgedAllocs: moving aged frames allocates nothing.
func TestMoveAgedAllocs(t *testing.T) {
	a, b := resendBond(t, PathOptions{})
	now := time.Now()
	a.state.OnMetrics(400*time.Millisecond, 40*time.Millisecond, 1<<20, 0)
	f := dataFrame(100, now.Add(-150*time.Millisecond))
	f.movable = true
	a.queue.push(f)
	a.moveAged(now) // b's queue allocates its band once
	n := testing.AllocsPerRun(100, func() {
		g, _, _ := b.queue.pop(monoclock.Nanos(now))
		g.movable = true
		a.queue.push(g)
		a.moveAged(now)
	})
	if n != 0 {
		t.Errorf("moveAged allocates %v times a call", n)
	}
	if a.rescued.Load() < 100 {
		t.Errorf("%d frames moved in 101 calls, want one a call", a.rescued.Load())
	}
	b.queue.drain()
}

// TestSendMovable: Bond.send marks a frame movable (path.moveAged) unless
// a rule ties it to its path: path preferences, or duplicates.
func TestSendMovable(t *testing.T) {
	set, err := rules.CompileBytes("movable.yaml", []byte(`
rules:
  - id: prefer-free
    priority: 10
    match: {dst_port: 7000}
    actions: {prefer: {cost_class: free}}
  - id: twice
    priority: 10
    match: {dst_port: 6000}
    actions: {duplicate: 2}
  - id: urgent
    priority: 10
    match: {dst_port: 5000}
    actions: {priority: 200, deadline_ms: 80}
`), rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	src := &staticRules{}
	src.set.Store(set)
	b, err := newBond("van-1", &discardTUN{Device: tuntest.New(testMTU, 1)}, bondOptions{mtu: testMTU, paths: PathOptions{}.withDefaults(),
		fec: FECOptions{Mode: FECOff}.withDefaults(), rules: src, log: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, name := range []string{"a", "b"} {
		p, _ := b.pathFor(name, map[string]string{"cost_class": map[string]string{"a": "metered", "b": "free"}[name]})
		p.state.SetConnected(true, now)
		p.state.OnMetrics(20*time.Millisecond, 20*time.Millisecond, 1<<20, 0)
	}
	for _, c := range []struct {
		port    uint16
		movable bool
	}{{8000, true}, {5000, true}, {7000, false}, {6000, false}} {
		buf := getBuf()
		n := copy(buf[Headroom:], udp4(edgeAddr, netip.AddrPortFrom(srvAddr.Addr(), c.port), make([]byte, 100)))
		if !b.send(buf, n, now) {
			t.Fatalf("port %d: not sent", c.port)
		}
		frames := 0
		for _, p := range b.paths.Load().paths {
			for f, ok, _ := p.queue.pop(monoclock.Nanos(now)); ok; f, ok, _ = p.queue.pop(monoclock.Nanos(now)) {
				frames++
				if f.movable != c.movable {
					t.Errorf("port %d: frame on %s movable %v, want %v", c.port, p.name, f.movable, c.movable)
				}
				putBuf(f.buf)
			}
		}
		if frames == 0 {
			t.Errorf("port %d: no frame queued", c.port)
		}
	}
}
