package tunnel

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/bondd/bondd/emu"
	"github.com/bondd/bondd/internal/monoclock"
	"github.com/bondd/bondd/internal/testkit"
	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/tun/tuntest"
)

// TestIdleBondSleepsAndWakes checks idle.go end to end over loopback: a
// bond that carried no data for IdleAfter sleeps on both ends; while it
// sleeps the edge sends one keepalive per path per idle keepalive, the
// concentrator sends nothing but the ACKs of them, no path's peer is
// silent past the idle bound and no keepalive goes unanswered on either
// end (a moment of SUSPECT while a slow ACK comes is counted), and the
// node's timer heap fires a few times per path per keepalive rather than
// every livenessTick; no path keeps a send routine; one packet wakes both
// ends at once and is delivered, and their send routines run again.
func TestIdleBondSleepsAndWakes(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the bond to sleep three times: about 20 s")
	}
	testkit.CheckLeaks(t)
	const idleKeepalive = time.Second
	popts := PathOptions{IdleTimeout: 2 * time.Second, Keepalive: 300 * time.Millisecond, IdleKeepalive: idleKeepalive,
		RedialMin: 50 * time.Millisecond, RedialMax: 200 * time.Millisecond, SuspectMin: testSuspectMin}
	edgeDev, concDev := tuntest.New(testMTU, 8), tuntest.New(testMTU, 8)
	conc, addr, tlsConf := startTestConcentrator(t, concDev, popts,
		EdgeAuth{ID: "van-1", Token: token, AllowedPrefixes: []netip.Prefix{netip.MustParsePrefix("10.77.0.0/24")}})
	edge, err := NewEdge(EdgeOptions{ID: "van-1", Device: edgeDev, MTU: testMTU, Concentrator: addr, TLS: tlsConf, Token: token,
		Paths: popts, Uplinks: []UplinkOptions{{Name: "a", Bind: netip.MustParseAddr("127.0.0.1")}, {Name: "b", Bind: netip.MustParseAddr("127.0.0.1")}},
		Listen: func(ctx context.Context, u UplinkOptions) (net.PacketConn, error) { return ListenUplink(ctx, u) }})
	if err != nil {
		t.Fatal(err)
	}
	edge.Start()
	t.Cleanup(func() { edge.Close() })
	tb := &testBond{edge: edge, conc: conc, edgeTun: edgeDev, concTun: concDev, edgeDev: edgeDev, concDev: concDev}
	tb.waitActive(t, 2)
	tb.exchange(t, edgeDev, concDev, edgeAddr, srvAddr, 20)
	eb, cb := edge.Bond(), conc.Bond("van-1")

	waitAsleep(t, eb, cb)

	type counts struct{ keepalives, sent [2]uint64 }
	snap := func(b *Bond) (c counts) {
		for i, p := range b.Stats().Paths[:2] {
			c.keepalives[i] = p.Keepalives
			if p.Conn != nil {
				c.sent[i] = p.Conn.PacketsSent
			}
		}
		return c
	}
	reports := func(b *Bond) (n uint64) {
		for _, p := range b.paths.Load().paths {
			n += p.rc.sentFb.Load()
		}
		return n
	}
	timersArmed := func(b *Bond) bool { return b.idle.fecExpire.Scheduled() || b.idle.spread.Scheduled() }
	// feedbackArmed counts the paths whose rate reports' timer is armed.
	feedbackArmed := func(b *Bond) (n int) {
		for _, p := range b.paths.Load().paths {
			p.rc.fbMu.Lock()
			if p.rc.fbTimer != nil && p.rc.fbTimer.Scheduled() {
				n++
			}
			p.rc.fbMu.Unlock()
		}
		return n
	}
	// sending counts the paths whose send routine runs.
	sending := func(b *Bond) (n int) {
		for _, p := range b.paths.Load().paths {
			if p.pc.sendOn.Load() {
				n++
			}
		}
		return n
	}
	// The send routines find the bond asleep and exit (a moment after
	// the sleep: each has to be woken from its wait).
	for end := time.Now().Add(time.Second); sending(eb)+sending(cb) > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("asleep, send routines still run on edge %d, concentrator %d paths; want none", sending(eb), sending(cb))
		}
	}
	e0, c0 := snap(eb), snap(cb)
	er0, cr0 := reports(eb), reports(cb)
	ef0, _ := edge.timers.Stats()
	cf0, _ := conc.timers.Stats()
	const window = 3500 * time.Millisecond
	const poll = 100 * time.Millisecond
	prev, transient := time.Now(), 0
	for end := time.Now().Add(window); time.Now().Before(end); time.Sleep(poll) {
		now := time.Now()
		// A poll this late means this process did not run (a loaded
		// machine): the keepalives it owed and the ACKs waiting in its
		// sockets are late alike, as liveness.go's livenessStall
		// assumes. Judge the paths at the next poll.
		late := now.Sub(prev) - poll
		prev = now
		if late > 10*livenessStall {
			t.Logf("this process stalled %s: paths judged at the next poll", late)
			continue
		}
		// What sleeping must not do: let the peer's silence pass the
		// idle bound, or leave a keepalive unanswered. A keepalive whose
		// ACK comes later than SuspectAfter (100 ms here) on a loaded
		// machine turns the edge's path SUSPECT until it comes, as it
		// would while awake: counted, not a failure.
		for i, b := range []*Bond{eb, cb} {
			side := [2]string{"edge", "concentrator"}[i]
			for _, s := range b.paths.Load().states {
				st := s.Status(now)
				if st == policy.StatusActive {
					continue
				}
				sil := s.Silence(now)
				sus, unanswered := s.Suspect(now)
				if sil > idleKeepalive+policy.MinSilence || unanswered > idleKeepalive {
					t.Fatalf("path %s of the sleeping bond's %s is %v (%s): silent %s (bound %s), suspect %v (unanswered %s), asleep edge %v concentrator %v; want ACTIVE",
						s.Name, side, st, s.StatusReason(now), sil, idleKeepalive+policy.MinSilence, sus, unanswered, eb.asleep(), cb.asleep())
				}
				transient++
				t.Logf("path %s of the %s %v for a moment: silent %s, unanswered %s", s.Name, side, st, sil, unanswered)
			}
		}
		if !eb.asleep() || !cb.asleep() {
			t.Fatalf("the bond woke without data: edge asleep %v, concentrator %v", eb.asleep(), cb.asleep())
		}
	}
	e1, c1 := snap(eb), snap(cb)
	if er1, cr1 := reports(eb), reports(cb); er1 != er0 || cr1 != cr0 {
		t.Errorf("rate reports sent while asleep: edge %d, concentrator %d; want none", er1-er0, cr1-cr0)
	}
	if timersArmed(eb) || timersArmed(cb) {
		t.Errorf("FEC expiry or resequencer timer armed while asleep: edge %v, concentrator %v", timersArmed(eb), timersArmed(cb))
	}
	if e, c := feedbackArmed(eb), feedbackArmed(cb); e+c != 0 {
		t.Errorf("rate report timers armed while asleep: edge %d, concentrator %d paths; want none", e, c)
	}
	if e, c := sending(eb), sending(cb); e+c != 0 {
		t.Errorf("send routines started while asleep on edge %d, concentrator %d paths; want none", e, c)
	}
	ef1, _ := edge.timers.Stats()
	cf1, _ := conc.timers.Stats()
	for i := range 2 {
		if n := e1.keepalives[i] - e0.keepalives[i]; n < 2 || n > 5 {
			t.Errorf("edge path %d sent %d keepalives in %s at an idle keepalive of %s, want 2..5", i, n, window, idleKeepalive)
		}
		if n := c1.keepalives[i] - c0.keepalives[i]; n != 0 {
			t.Errorf("concentrator path %d sent %d keepalives, want none", i, n)
		}
		// The two ends' counts are read one after the other: the ACK of
		// a packet the edge sent just before its first read may fall
		// inside the concentrator's window (seen under -race).
		if ce, cc := e1.sent[i]-e0.sent[i], c1.sent[i]-c0.sent[i]; cc > ce+1 {
			t.Errorf("concentrator path %d sent %d packets while the edge sent %d: more than the ACKs of them", i, cc, ce)
		}
	}
	t.Logf("asleep %s: %d path states not ACTIVE for a moment; edge keepalives %v, packets sent edge %v, concentrator %v; heap callbacks edge %d, concentrator %d", window, transient, [2]uint64{e1.keepalives[0] - e0.keepalives[0], e1.keepalives[1] - e0.keepalives[1]}, [2]uint64{e1.sent[0] - e0.sent[0], e1.sent[1] - e0.sent[1]}, [2]uint64{c1.sent[0] - c0.sent[0], c1.sent[1] - c0.sent[1]}, ef1-ef0, cf1-cf0)
	// Ticking every livenessTick would be 2 × 700 calls on each node.
	if n := ef1 - ef0; n > 60 {
		t.Errorf("the edge's timer heap ran %d callbacks in %s asleep, want at most 60", n, window)
	}
	if n := cf1 - cf0; n > 20 {
		t.Errorf("the concentrator's timer heap ran %d callbacks in %s asleep, want at most 20", n, window)
	}

	// One packet wakes both ends at once.
	wakes := eb.idle.wakes.Load()
	pkt := udp4(edgeAddr, srvAddr, []byte("wake up"))
	edgeDev.Inject(pkt)
	select {
	case got := <-concDev.Outbound():
		if string(got) != string(pkt) {
			t.Fatalf("delivered %d bytes, want the %d sent", len(got), len(pkt))
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the packet that wakes the bond was not delivered")
	}
	if eb.asleep() || cb.asleep() || eb.idle.wakes.Load() != wakes+1 {
		t.Errorf("after a packet: edge asleep %v (wakes %d, want %d), concentrator asleep %v", eb.asleep(), eb.idle.wakes.Load(), wakes+1, cb.asleep())
	}
	if !timersArmed(eb) || !timersArmed(cb) {
		t.Errorf("awake, FEC expiry and resequencer timers not armed: edge %v, concentrator %v", timersArmed(eb), timersArmed(cb))
	}
	if e, c := feedbackArmed(eb), feedbackArmed(cb); e != 2 || c != 2 {
		t.Errorf("awake, rate report timers armed on edge %d, concentrator %d paths; want 2 each", e, c)
	}
	if e, c := sending(eb), sending(cb); e != 2 || c != 2 {
		t.Errorf("awake, send routines run on edge %d, concentrator %d paths; want 2 each", e, c)
	}
	// Traffic brings the rate reports back.
	cr := reports(cb)
	tb.exchange(t, edgeDev, concDev, edgeAddr, srvAddr, 50)
	for end := time.Now().Add(time.Second); reports(cb) == cr; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("no rate report from the concentrator within 1 s of traffic after waking")
		}
	}

	// Asleep again, a downlink packet the concentrator does not send (too
	// large: answered with ICMP on its own TUN) wakes it, and its probes
	// wake the edge, whose fast keepalives then keep the concentrator's
	// paths from being closed as silent.
	waitAsleep(t, eb, cb)
	edgeWakes := eb.idle.wakes.Load()
	concDev.Inject(udp4(srvAddr, edgeAddr, make([]byte, testMTU)))
	for end := time.Now().Add(time.Second); eb.asleep() || cb.asleep(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("1 s after an oversize downlink packet: edge asleep %v, concentrator asleep %v", eb.asleep(), cb.asleep())
		}
	}
	if eb.idle.wakes.Load() != edgeWakes+1 {
		t.Errorf("edge wakes %d, want %d", eb.idle.wakes.Load(), edgeWakes+1)
	}
	waitAsleep(t, eb, cb)
	for _, p := range cb.Stats().Paths {
		if p.Status != policy.StatusActive.String() || p.Conn == nil {
			t.Errorf("concentrator path %s is %s after waking for nothing, want ACTIVE on its first connection", p.Name, p.Status)
		}
	}
	if n := len(cb.Stats().Paths); n != 2 {
		t.Errorf("concentrator has %d paths, want 2", n)
	}

	// Asleep, a frame queued by something other than a packet that wakes
	// the bond (a resend, a rescue) starts the stopped send routine.
	for end := time.Now().Add(time.Second); sending(eb) > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("asleep, send routines still run on %d edge paths", sending(eb))
		}
	}
	pkt = udp4(edgeAddr, srvAddr, []byte("queued while asleep"))
	buf := getBuf()
	n := copy(buf[Headroom:], pkt)
	h := Header{Type: TypeData, Seq: eb.seq.Add(1) - 1, Timestamp: uint64(time.Now().UnixMicro())}
	off := Headroom - HeaderLen(&h)
	AppendHeader(buf[off:off], &h)
	handOver(eb.paths.Load().paths[0], frame{buf: buf, off: off, end: Headroom + n, enqueued: monoclock.Now()})
	for timeout := time.After(2 * time.Second); ; {
		select {
		case got := <-concDev.Outbound(): // the ICMP answer to the oversize packet above comes first
			if string(got) == string(pkt) {
				return
			}
		case <-timeout:
			t.Fatalf("a frame queued on an asleep bond's path was not sent (edge asleep %v, send routines %d)", eb.asleep(), sending(eb))
		}
	}
}

// waitAsleep waits until both ends of a bond sleep, at most IdleAfter + 5 s.
func waitAsleep(t *testing.T, bonds ...*Bond) {
	t.Helper()
	deadline := time.Now().Add(IdleAfter + 5*time.Second)
	for {
		asleep := true
		for _, b := range bonds {
			asleep = asleep && b.asleep()
		}
		if asleep {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not asleep %s after the last data", IdleAfter+5*time.Second)
		}
		time.Sleep(50 * time.Millisecond) // polls the state it waits for
	}
}

// TestIdleBlackholeThenTraffic black-holes the path a sleeping bond would
// send on (its emu relay drops everything both ways; no keepalive is due
// within the test, so nothing has noticed) and then starts a 1 kHz probe:
// the first packet wakes the bond, the dead path turns SUSPECT within its
// bound, and the probe moves to the other path, so the first delivery and
// the longest gap between deliveries stay within max(3 × RTT, 150 ms), as
// for a bond that carried traffic all along (TestBlackholeGap).
func TestIdleBlackholeThenTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the bond to sleep: about 8 s")
	}
	const oneWay = 10 * time.Millisecond
	bound := max(3*2*oneWay, 150*time.Millisecond)
	var relays emu.Relays
	tb := newTestBondWith(t, token, 2, func(o *EdgeOptions) {
		o.FEC = FECOptions{Mode: FECOff}
		relays = viaRelays(t, o, []emu.RelayLink{
			symmetric(oneWay, 50*emu.Mbps, 0), symmetric(oneWay+5*time.Millisecond, 50*emu.Mbps, 0)}, 3)
	})
	tb.waitActive(t, 2)
	tb.exchange(t, tb.edgeDev, tb.concDev, edgeAddr, srvAddr, 20)
	eb, cb := tb.edge.Bond(), tb.conc.Bond("van-1")
	waitAsleep(t, eb, cb)
	relays[0].SetDown(true)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var arrivals []time.Time
	go func() {
		for {
			select {
			case <-tb.concDev.Outbound():
				mu.Lock()
				arrivals = append(arrivals, time.Now())
				mu.Unlock()
			case <-ctx.Done():
				return
			}
		}
	}()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	payload := make([]byte, 64)
	start := time.Now()
	sent := 0
	for end := start.Add(700 * time.Millisecond); time.Now().Before(end); sent++ {
		<-tick.C
		binary.BigEndian.PutUint32(payload, uint32(sent))
		tb.edgeDev.Inject(udp4(edgeAddr, srvAddr, payload))
	}
	time.Sleep(300 * time.Millisecond) // the last probes arrive
	cancel()
	mu.Lock()
	defer mu.Unlock()
	if len(arrivals) == 0 {
		t.Fatalf("none of %d packets arrived", sent)
	}
	first, gap := arrivals[0].Sub(start), time.Duration(0)
	for i := 1; i < len(arrivals); i++ {
		gap = max(gap, arrivals[i].Sub(arrivals[i-1]))
	}
	st := eb.Stats().Paths
	t.Logf("sent %d, delivered %d; first after %s, longest gap %s (bound %s); up0 %s (%s), suspect drops %d, resent %d",
		sent, len(arrivals), first.Round(time.Millisecond), gap.Round(time.Millisecond), bound, st[0].Status, st[0].StatusReason,
		st[0].Drops[DropSuspect], st[0].Resent)
	if raceEnabled {
		return // the bound is for an unhindered process
	}
	if first > bound || gap > bound {
		t.Errorf("first delivery after %s, longest gap %s; want both ≤ %s", first, gap, bound)
	}
	if len(arrivals) < sent*9/10 {
		t.Errorf("%d of %d packets delivered, want at least 90 %%", len(arrivals), sent)
	}
}
