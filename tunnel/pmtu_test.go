package tunnel

import (
	"context"
	"encoding/binary"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bondd/bondd/emu"
	"github.com/bondd/bondd/internal/testkit"
	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/rules"
)

// pmtuProbeRun is a 1 kHz stream of full-size (testMTU) inner packets from
// the edge to the concentrator, each carrying its sequence number and send
// time, and what arrived of it.
type pmtuProbeRun struct {
	tb    *testBond
	down  bool // concentrator to edge, not edge to concentrator
	mu    sync.Mutex
	arr   []pmtuArrival
	seq   uint32
	mixed bool // every other packet is small (pmtuSmall bytes)
}

// pmtuSmall is the size of the small packets of a mixed stream, bytes.
const pmtuSmall = 300

type pmtuArrival struct {
	seq      uint32
	size     int // bytes, the inner packet
	at, sent time.Time
}

func (r *pmtuProbeRun) receive(ctx context.Context) {
	out := r.tb.concDev.Outbound()
	if r.down {
		out = r.tb.edgeDev.Outbound()
	}
	for {
		select {
		case pkt := <-out:
			if len(pkt) < 28+12 {
				continue
			}
			a := pmtuArrival{seq: binary.BigEndian.Uint32(pkt[28:]), size: len(pkt), at: time.Now(),
				sent: time.Unix(0, int64(binary.BigEndian.Uint64(pkt[32:])))}
			r.mu.Lock()
			r.arr = append(r.arr, a)
			r.mu.Unlock()
		case <-ctx.Done():
			return
		}
	}
}

// send injects one packet a millisecond for d, each size bytes long (in a
// mixed stream, every other one pmtuSmall bytes).
func (r *pmtuProbeRun) send(d time.Duration, size int) {
	buf := make([]byte, size-28)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for end := time.Now().Add(d); time.Now().Before(end); {
		<-tick.C
		payload := buf
		if r.mixed && r.seq%2 == 1 {
			payload = buf[:pmtuSmall-28]
		}
		binary.BigEndian.PutUint32(payload, r.seq)
		binary.BigEndian.PutUint64(payload[4:], uint64(time.Now().UnixNano()))
		r.seq++
		if r.down {
			r.tb.concDev.Inject(udp4(srvAddr, edgeAddr, payload))
		} else {
			r.tb.edgeDev.Inject(udp4(edgeAddr, srvAddr, payload))
		}
	}
}

func (r *pmtuProbeRun) arrivals() []pmtuArrival {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]pmtuArrival(nil), r.arr...)
}

// arrivedFrom counts the arrivals of packets numbered seq or later.
func (r *pmtuProbeRun) arrivedFrom(seq uint32) int {
	n := 0
	for _, a := range r.arrivals() {
		if a.seq >= seq {
			n++
		}
	}
	return n
}

// checkNotLate fails t for the first packet delivered more than 1 s after
// it was sent.
func (r *pmtuProbeRun) checkNotLate(t *testing.T) {
	t.Helper()
	for _, a := range r.arrivals() {
		if l := a.at.Sub(a.sent); l > time.Second {
			t.Errorf("packet %d delivered %s after it was sent, want ≤ 1 s", a.seq, l)
			return
		}
	}
}

// TestMTUBlackHole puts an MTU black hole on the path that carries a 1 kHz
// stream of full-size packets (its emu relay drops IP packets over 1250
// bytes both ways; the handshake's 1360-byte packets and the full-size
// datagrams no longer pass, small packets do) and measures the time from
// the onset until full-size packets arrive again (target ≤ 3 s: they move
// to the other path), and that nothing is delivered more than 1 s late.
// Then the other path gets the black hole too: the bond lowers its MTU,
// sets it on the TUN and answers full-size packets with ICMP. When both
// heal, the budgets and the MTU rise again. In the "mixed" case every
// other packet is small, so QUIC's ACKs of the small ones get the large
// ones declared lost (the data-driven black-hole detection, RFC 8899
// §4.3); that case stops after the first measurement.
func TestMTUBlackHole(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the MTU black-hole run in -short mode")
	}
	for _, mixed := range []bool{false, true} {
		name := "large"
		if mixed {
			name = "mixed"
		}
		t.Run(name, func(t *testing.T) { testMTUBlackHole(t, mixed) })
	}
}

func testMTUBlackHole(t *testing.T, mixed bool) {
	const (
		oneWay = 10 * time.Millisecond
		limit  = 1250 // IP bytes: a testMTU inner packet's datagram does not fit, the handshake's neither
	)
	var relays emu.Relays
	var tunMu sync.Mutex
	var tunMTUs []int
	// A rule prefers the path that gets the black hole, so that it
	// carries the stream at the onset: the bond must move full-size
	// packets off it all the same (directives are advice).
	prefer, err := rules.CompileBytes("prefer.yaml", []byte(`
rules:
  - id: prefer-fast
    priority: 1
    actions: {prefer: {carrier: fast}}
`), rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tb := newTestBondWith(t, token, 2, func(o *EdgeOptions) {
		o.FEC = FECOptions{Mode: FECOff}
		o.Uplinks[0].Labels = map[string]string{"carrier": "fast"}
		o.Uplinks[1].Labels = map[string]string{"carrier": "slow"}
		src := &staticRules{}
		src.set.Store(prefer)
		o.Rules = src
		o.SetTUNMTU = func(mtu int) error {
			tunMu.Lock()
			tunMTUs = append(tunMTUs, mtu)
			tunMu.Unlock()
			return nil
		}
		relays = viaRelays(t, o, []emu.RelayLink{
			symmetric(oneWay, 50*emu.Mbps, 0), symmetric(oneWay+5*time.Millisecond, 50*emu.Mbps, 0)}, 5)
	})
	tb.waitActive(t, 2)
	waitFor(t, func() bool {
		p := tb.edge.Bond().Stats().Paths
		return p[0].SmoothedRTT > 0 && p[1].SmoothedRTT > 0
	})
	full := testMTU + HeaderBudget
	paths := tb.edge.Bond().paths.Load().paths
	for _, p := range paths {
		if b := int(p.pmtu.budget.Load()); b != full {
			t.Fatalf("path %s starts with budget %d, want %d", p.name, b, full)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &pmtuProbeRun{tb: tb, mixed: mixed}
	done := make(chan struct{})
	go func() { defer close(done); r.receive(ctx) }()

	// The fast path carries the stream.
	r.send(300*time.Millisecond, testMTU)
	before := tb.edge.Bond().Stats().Paths
	r.send(200*time.Millisecond, testMTU)
	after := tb.edge.Bond().Stats().Paths
	if d0, d1 := after[0].TxPackets-before[0].TxPackets, after[1].TxPackets-before[1].TxPackets; d0 < 50 || d1 > d0/4 {
		t.Fatalf("the fast path did not carry the stream: %d datagrams on it, %d on the other", d0, d1)
	}

	// Onset on the carrying path; watch its budget.
	var detectedNs atomic.Int64
	onset := time.Now()
	go func() {
		for ctx.Err() == nil && detectedNs.Load() == 0 {
			if int(paths[0].pmtu.budget.Load()) < full {
				detectedNs.Store(int64(time.Since(onset)))
			}
			time.Sleep(time.Millisecond)
		}
	}()
	seq0 := r.seq
	relays[0].SetMaxPacket(emu.Up, limit)
	relays[0].SetMaxPacket(emu.Down, limit)
	r.send(3*time.Second, testMTU)
	seq1 := r.seq
	st := tb.edge.Bond().Stats()
	p0 := st.Paths[0]
	t.Logf("path %s: status %s, budget %d (%s), reason %q, black holes %d, probes %d, drops black_hole %d suspect %d",
		p0.Name, p0.Status, p0.DatagramBudget, p0.PMTUState, p0.PMTUReason, p0.BlackHoles, p0.PMTUProbes, p0.Drops[DropBlackHole], p0.Drops[DropSuspect])
	if p0.DatagramBudget >= full || p0.BlackHoles == 0 || !strings.Contains(p0.PMTUReason, "black hole") {
		t.Errorf("black-holed path: budget %d (want < %d), %d black holes, reason %q", p0.DatagramBudget, full, p0.BlackHoles, p0.PMTUReason)
	}
	if p0.Status != policy.StatusActive.String() {
		t.Errorf("black-holed path is %s (%s); small packets still pass, want ACTIVE", p0.Status, p0.StatusReason)
	}
	if st.MTU != testMTU {
		t.Errorf("bond MTU %d with one path carrying full size, want %d", st.MTU, testMTU)
	}
	restore, gap, lost, late := pmtuMeasure(r.arrivals(), seq0, seq1, onset, testMTU, r.mixed)
	t.Logf("one path black-holed: budget lowered after %s; full-size packets restored %s after the onset; longest gap %s; %d of %d lost; latest delivery %s",
		time.Duration(detectedNs.Load()), restore, gap, lost, seq1-seq0, late)
	if restore > 3*time.Second || restore < 0 {
		t.Errorf("full-size packets restored %s after the onset, want ≤ 3 s", restore)
	}
	if late > time.Second {
		t.Errorf("a packet was delivered %s after it was sent, want ≤ 1 s", late)
	}
	if mixed {
		return
	}

	// Both paths black-holed: the bond MTU falls, full-size packets get ICMP.
	relays[1].SetMaxPacket(emu.Up, limit)
	relays[1].SetMaxPacket(emu.Down, limit)
	icmp0 := st.ICMPSent
	// A black hole shows only to traffic: keep sending until the bond's
	// MTU falls (2 s of it were enough alone; a loaded CI run needed more).
	both := time.Now()
	for tb.edge.Bond().Stats().MTU >= testMTU {
		if time.Since(both) > 10*time.Second {
			t.Fatalf("bond MTU still %d after %s of full-size traffic over two black-holed paths", tb.edge.Bond().Stats().MTU, time.Since(both))
		}
		r.send(200*time.Millisecond, testMTU)
	}
	fell := time.Since(both)
	r.send(200*time.Millisecond, testMTU)
	st = tb.edge.Bond().Stats()
	t.Logf("both paths black-holed: bond MTU %d (configured %d) within %s of traffic: %s; ICMP sent %d; TUN MTUs set %v",
		st.MTU, st.MTUConfigured, fell.Round(time.Millisecond), st.MTUReason, st.ICMPSent-icmp0, tunSet(&tunMu, &tunMTUs))
	if st.MTU >= testMTU || st.MTU < 1000 || st.ICMPSent == icmp0 || st.MTUReason == "" {
		t.Errorf("bond MTU %d, %d ICMP answers, reason %q; want an MTU that fits %d-byte IP packets, answers and a reason",
			st.MTU, st.ICMPSent-icmp0, st.MTUReason, limit)
	}
	if m := tunSet(&tunMu, &tunMTUs); len(m) == 0 || m[len(m)-1] != st.MTU {
		t.Errorf("TUN MTUs set %v, want the last %d", m, st.MTU)
	}
	small := st.MTU - st.MTU%8
	seqSmall := r.seq
	r.send(200*time.Millisecond, small)
	// Packets that fit the lowered MTU pass (the first wait for quic-go's
	// window, collapsed by the black hole's losses, to reopen).
	waitFor(t, func() bool {
		return r.arrivedFrom(seqSmall) >= 100
	})

	// Heal: the budgets and the MTU rise again within a raise period.
	healed := time.Now()
	for _, rl := range relays {
		rl.SetMaxPacket(emu.Up, 0)
		rl.SetMaxPacket(emu.Down, 0)
	}
	testkit.WaitFor(t, "budgets and MTU back", 2*policy.DefaultPMTURaise+2*time.Second, func() bool {
		s := tb.edge.Bond().Stats()
		return s.MTU == testMTU && s.Paths[0].DatagramBudget == full && s.Paths[1].DatagramBudget == full
	})
	t.Logf("healed: budgets and MTU back after %s; TUN MTUs set %v", time.Since(healed), tunSet(&tunMu, &tunMTUs))
	if m := tunSet(&tunMu, &tunMTUs); m[len(m)-1] != testMTU {
		t.Errorf("TUN MTUs set %v, want the last %d", m, testMTU)
	}
	seqHeal := r.seq
	r.send(300*time.Millisecond, testMTU)
	waitFor(t, func() bool {
		return r.arrivedFrom(seqHeal) >= 150
	})
	cancel()
	<-done
	r.checkNotLate(t)
}

// pmtuMeasure returns, for the packets with sequence numbers in
// [from, to) sent from onset on: the time from onset to the first arrival
// after the longest gap between arrivals (when that gap started after the
// onset; else 0), that gap, how many never arrived, and the longest time a
// packet took from send to arrival.
func pmtuMeasure(arr []pmtuArrival, from, to uint32, onset time.Time, size int, mixed bool) (restore, gap time.Duration, lost int, late time.Duration) {
	got := map[uint32]bool{}
	prev := onset
	for _, a := range arr {
		late = max(late, a.at.Sub(a.sent))
		if a.seq < from || a.seq >= to || a.size != size {
			continue
		}
		got[a.seq] = true
		if d := a.at.Sub(prev); d > gap {
			gap, restore = d, a.at.Sub(onset)
		}
		prev = a.at
	}
	if gap < 20*time.Millisecond {
		restore = 0 // no outage worth the name
	}
	want := int(to - from)
	if mixed {
		want = int(to/2 - from/2) // the even sequence numbers are the large packets
	}
	return restore, gap, want - len(got), late
}

func tunSet(mu *sync.Mutex, s *[]int) []int {
	mu.Lock()
	defer mu.Unlock()
	return append([]int(nil), *s...)
}

// TestRecorderPMTU checks the recorder's packet-number ring: each newly
// acknowledged packet's datagram size is reported once, losses find the
// size of a remembered packet, and nothing allocates.
func TestRecorderPMTU(t *testing.T) {
	r := &recorder{}
	var pm pathPMTU
	pm.init(testMTU+HeaderBudget, PathOptions{}, time.Now())
	sizes := []int{0, 1200, 48, 1242, 1242, 100, 1230, 0, 1242, 1242}
	for pn, s := range sizes {
		r.noteSent(int64(pn), pn == 9, s)
	}
	for _, c := range []struct {
		name  string
		acked []int64
		want  int // largest datagram newly acknowledged
	}{
		{"first three", []int64{0, 1, 2}, 1200},
		{"again, nothing new", []int64{0, 1, 2}, 0},
		{"after a gap at 3 and 4", []int64{5, 6}, 1230},
		{"the rest", []int64{7, 8, 5, 6}, 1242},
	} {
		pm.dlvMax.Store(0)
		for _, pn := range c.acked {
			r.onAcked(pn, &pm)
		}
		if got := int(pm.dlvMax.Load()); got != c.want {
			t.Errorf("%s: largest acknowledged %d, want %d", c.name, got, c.want)
		}
	}
	if s, probe, ok := r.sizeOf(9); !ok || !probe || s != 1242 {
		t.Errorf("packet 9: %d bytes, probe %v, known %v; want 1242, a probe", s, probe, ok)
	}
	if _, _, ok := r.sizeOf(9 + pmtuRing); ok {
		t.Error("a packet number never sent was found")
	}
	pm.onLost(1242)
	pm.onLost(100) // at or below Base: not the machine's concern
	if pm.lost.Load() != 1 || pm.lostMin.Load() != 1242 {
		t.Errorf("losses %d (min %d), want 1 (1242)", pm.lost.Load(), pm.lostMin.Load())
	}
	// Every other packet abandoned at a probe timeout.
	pn, now := int64(100), time.Unix(1000, 0)
	var count countingLossSink
	if a := testing.AllocsPerRun(1000, func() {
		r.noteSent(pn, false, 1242)
		r.noteSent(pn+1, false, 1242)
		now = now.Add(10 * time.Millisecond)
		r.onAcked(pn+1, &pm)
		r.onAbandoned(pn, now, &count)
		if _, _, news := r.noteLost(pn); news {
			t.Fatalf("packet %d: quic-go's loss is news after it was abandoned", pn)
		}
		pn += 2
	}); a != 0 {
		t.Fatalf("the recorder's PMTU bookkeeping allocates %v times per packet", a)
	}
	if count < 1000 {
		t.Fatalf("%d losses found, want at least 1000", count)
	}
}

// countingLossSink counts the losses a recorder finds, without
// allocating.
type countingLossSink int

func (c *countingLossSink) datagramLost(int, bool) { *c++ }

// TestMTUBlackHoleDownlink black-holes the concentrator-to-edge direction
// of both paths (IP packets over 1250 bytes dropped) under a 1 kHz
// downlink stream of full-size packets: the concentrator's paths detect
// it, its bond lowers its MTU and answers full-size packets with ICMP
// (its TUN, shared by all bonds, keeps its MTU), packets that fit still
// arrive, and all of it rises again when the paths heal.
func TestMTUBlackHoleDownlink(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the MTU black-hole run in -short mode")
	}
	const limit = 1250
	var relays emu.Relays
	tb := newTestBondWith(t, token, 2, func(o *EdgeOptions) {
		o.FEC = FECOptions{Mode: FECOff}
		relays = viaRelays(t, o, []emu.RelayLink{
			symmetric(10*time.Millisecond, 50*emu.Mbps, 0), symmetric(15*time.Millisecond, 50*emu.Mbps, 0)}, 7)
	})
	tb.waitActive(t, 2)
	conc := tb.conc.Bond("van-1")
	waitFor(t, func() bool { return len(conc.Stats().Paths) == 2 })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &pmtuProbeRun{tb: tb, down: true}
	done := make(chan struct{})
	go func() { defer close(done); r.receive(ctx) }()
	r.send(300*time.Millisecond, testMTU)

	onset := time.Now()
	for _, rl := range relays {
		rl.SetMaxPacket(emu.Down, limit)
	}
	icmp0 := conc.Stats().ICMPSent
	for time.Since(onset) < 3*time.Second && conc.Stats().MTU == testMTU {
		r.send(50*time.Millisecond, testMTU)
	}
	lowered := time.Since(onset)
	r.send(300*time.Millisecond, testMTU)
	st := conc.Stats()
	t.Logf("downlink black hole: concentrator MTU %d after %s (%s); ICMP sent %d", st.MTU, lowered, st.MTUReason, st.ICMPSent-icmp0)
	for _, p := range st.Paths {
		t.Logf("  concentrator path %s: budget %d (%s): %s", p.Name, p.DatagramBudget, p.PMTUState, p.PMTUReason)
	}
	if st.MTU >= testMTU || lowered > 3*time.Second || st.ICMPSent == icmp0 {
		t.Fatalf("concentrator MTU %d after %s, %d ICMP answers; want it lowered within 3 s, and answers", st.MTU, lowered, st.ICMPSent-icmp0)
	}
	seqSmall := r.seq
	r.send(200*time.Millisecond, st.MTU)
	waitFor(t, func() bool {
		return r.arrivedFrom(seqSmall) >= 100
	})
	healed := time.Now()
	for _, rl := range relays {
		rl.SetMaxPacket(emu.Down, 0)
	}
	testkit.WaitFor(t, "the concentrator's MTU back", 2*policy.DefaultPMTURaise+2*time.Second, func() bool {
		return conc.Stats().MTU == testMTU
	})
	t.Logf("healed: concentrator MTU back after %s", time.Since(healed))
	cancel()
	<-done
	r.checkNotLate(t)
}

// TestMTUOutageParks puts an outage of every size on the only path while
// it carries a 1 kHz stream of full-size packets, from its start until
// suspicion cuts the budget and 200 ms beyond. The peer's silence
// cuts the path's datagram budget to BASE on suspicion (policy.PMTU
// OnSuspect) until a probe answers: the full-size packets queued or
// arriving meanwhile, which no other path carries, wait parked for the
// answer (rerouteOversize) instead of being dropped as no_path, and the
// budget is back at full size once the path answers.
func TestMTUOutageParks(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the outage run in -short mode")
	}
	var relays emu.Relays
	tb := newTestBondWith(t, token, 1, func(o *EdgeOptions) {
		o.FEC = FECOptions{Mode: FECOff}
		relays = viaRelays(t, o, []emu.RelayLink{symmetric(10*time.Millisecond, 50*emu.Mbps, 0)}, 7)
	})
	tb.waitActive(t, 1)
	waitFor(t, func() bool { return tb.edge.Bond().Stats().Paths[0].SmoothedRTT > 0 })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &pmtuProbeRun{tb: tb}
	done := make(chan struct{})
	go func() { defer close(done); r.receive(ctx) }()

	r.send(300*time.Millisecond, testMTU)
	full := testMTU + HeaderBudget
	// The path's first search must have reached full size: a budget
	// still rising through it is not a cut on suspicion.
	testkit.WaitFor(t, "full-size budget before the outage", 5*time.Second, func() bool {
		r.send(50*time.Millisecond, testMTU)
		return tb.edge.Bond().Stats().Paths[0].DatagramBudget == full
	})
	before := tb.edge.Bond().Stats()
	seq0 := r.seq
	relays[0].SetDown(true)
	// The outage lasts until suspicion cuts the budget (SuspectAfter,
	// max(3 × sRTT, 100 ms), is longer on a loaded machine), and 200 ms
	// beyond: the packets sent meanwhile are the ones to park.
	testkit.WaitFor(t, "the budget cut on suspicion during the outage", 2*time.Second, func() bool { // before DefaultDeadAfter (3 s) ends the path
		r.send(50*time.Millisecond, testMTU)
		return tb.edge.Bond().Stats().Paths[0].DatagramBudget < full
	})
	r.send(200*time.Millisecond, testMTU)
	relays[0].SetDown(false)
	seq1 := r.seq
	testkit.WaitFor(t, "full-size budget back after the outage", 5*time.Second, func() bool {
		r.send(50*time.Millisecond, testMTU)
		return tb.edge.Bond().Stats().Paths[0].DatagramBudget == full
	})
	seq2 := r.seq
	r.send(300*time.Millisecond, testMTU)
	want := int(r.seq-seq2) * 9 / 10
	waitFor(t, func() bool { return r.arrivedFrom(seq2) >= want }) // full-size packets flow again
	cancel()
	<-done

	after := tb.edge.Bond().Stats()
	p := after.Paths[0]
	noPath := after.Drops[DropNoPath] - before.Drops[DropNoPath]
	_, _, lost, _ := pmtuMeasure(r.arrivals(), seq0, seq1, time.Time{}, testMTU, false)
	t.Logf("outage: %d of %d full-size packets sent during it lost; %d parked for a probe's answer, %d no_path drops; budget %d (%s), reason %q, MTU %d",
		lost, seq1-seq0, p.PMTUHeld-before.Paths[0].PMTUHeld, noPath, p.DatagramBudget, p.PMTUState, p.PMTUReason, after.MTU)
	if p.PMTUHeld == before.Paths[0].PMTUHeld {
		// The send routine parks what it pops; while quic-go's send
		// queue is full (nothing is acknowledged in the outage) it pops
		// nothing, and the frames wait in bondd's queue under the same
		// deadline a parked frame keeps. On a loaded machine suspicion
		// came late enough (517 ms of outage in a `go test -race` run)
		// for quic-go's queue to stay full until the frames expired.
		if expired := after.Drops[DropExpired] - before.Drops[DropExpired]; expired == 0 {
			t.Errorf("no packet was parked and none expired: the outage did not cut the budget on suspicion (reason %q)", p.PMTUReason)
		} else {
			t.Logf("no packet was parked: quic-go's send queue stayed full through the outage, and %d frames expired in bondd's queue, as parked ones would have", expired)
		}
	}
	if noPath != 0 {
		t.Errorf("%d packets dropped as no_path during an outage that only suspicion cut the budget for, want 0", noPath)
	}
	if after.MTU != testMTU {
		t.Errorf("bond MTU %d after an outage of every size, want %d", after.MTU, testMTU)
	}
}
