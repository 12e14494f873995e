package tunnel

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/bondd/bondd/internal/monoclock"
	"github.com/bondd/bondd/policy"
)

// Path MTU per path, after RFC 8899 (DPLPMTUD), with black-hole
// detection. quic-go keeps the Initial packet size its handshake proved
// (its own search upwards is off: bondd's datagrams never need more,
// quicConfig) and sends DATAGRAM frames of any size up to it, so a path
// that starts dropping large packets (a tunnel, a misconfigured router, a
// carrier's MTU change) silently eats every large datagram while small
// packets, ACKs and liveness probes still pass. Each path keeps a
// datagram budget, decided by a policy.PMTU:
//
//  1. Every connection's recorder (tracer.go) remembers, by packet number,
//     the datagram size of the last pmtuRing packets sent (sentring.go).
//     QUIC's acknowledgments and loss detection (RFC 9002 §6, and the
//     packets quic-go's probe timeout abandons without a loss), which the
//     controller hook reports packet by packet (cc.go), then say
//     which sizes arrive: the path gathers, per tick, the largest
//     datagram acknowledged and the datagrams lost in the size range the
//     machine watches (path.pmtu).
//  2. The path's liveness check (liveRun.check, every livenessTick while
//     the bond is awake; not while it sleeps, idle.go) feeds the sample
//     to the machine, publishes its budget and watch range, and sends the
//     probe it asks for: a datagram of
//     zeros, which receivers discard (isProbe) and QUIC acknowledges.
//     Probes are neither ack-eliciting sends for liveness nor losses for
//     the path's loss figures (RFC 8899 §4.4).
//  3. The scheduler puts a packet only on paths whose budget carries its
//     datagram (its length + HeaderBudget; Bond.send, sendParity); a frame
//     queued before the budget fell moves to a path that carries it
//     (rerouteOversize). When no path's budget carries a data packet but
//     one was cut on a mere suspicion (policy.PMTU.OnSuspect: an outage
//     of every size looks the same), the packet waits parked beside that
//     path's queue for the probe's answer, within its deadline: it leaves
//     when the budget is back, and is dropped when the probe confirms a
//     smaller one.
//  4. The bond's send MTU is the largest budget of its connected paths
//     (a budget cut on a mere suspicion counts at its confirmed size only
//     while no other path's budget stands), less HeaderBudget, rounded
//     down to a multiple of 8, at most the configured MTU
//     (Bond.updateMTU): when no path carries full-size
//     packets, larger inner packets are answered with ICMP "fragmentation
//     needed" / "packet too big" at the lower MTU, and the edge sets it on
//     its TUN (EdgeOptions.SetTUNMTU). It rises again when a path heals.

// pmtuBase is BASE_PLPMTU as a datagram payload, bytes: QUIC's smallest
// packet (RFC 9000 §14: 1200 bytes) less quicDatagramOverhead.
const pmtuBase = 1200 - quicDatagramOverhead

// pmtuProbe holds the zeros probes are cut from (SendDatagram copies).
var pmtuProbe [1452]byte

// pathPMTU is one path's datagram-size discovery.
type pathPMTU struct {
	// Outcomes since the last tick, written by the recorders of the
	// path's connections: an acknowledgement seen, the largest datagram
	// acknowledged, the datagrams lost in (above, upTo] and the smallest,
	// and the packets lost at or below above.
	acked         atomic.Bool
	dlvMax        atomic.Int64
	lost, lostMin atomic.Int64
	lostSmall     atomic.Int64 // packets lost whose datagrams were at most above (or none)
	above, upTo   atomic.Int64 // the machine's Watch
	// budget is the machine's Budget, bytes: read per packet; confirmed
	// its Confirmed, which the bond's MTU follows.
	budget, confirmed atomic.Int64
	// bigSince is when (monoclock ns) the first datagram larger than pmtuBase
	// left since the peer's ACKs last advanced; 0: none since.
	bigSince atomic.Int64

	mu     sync.Mutex // guards the following
	m      *policy.PMTU
	tickAt time.Time
	sent   uint64 // probes handed to quic-go
}

// init sets up the machine for datagrams up to maxDatagram bytes.
func (pm *pathPMTU) init(maxDatagram int, o PathOptions, now time.Time) {
	pm.m = policy.NewPMTU(policy.PMTUConfig{Base: pmtuBase, Max: maxDatagram, Raise: o.PMTURaise}, now)
	if o.PMTUOff {
		pm.m = policy.NewPMTU(policy.PMTUConfig{Base: maxDatagram, Max: maxDatagram}, now) // disabled: budget Max
	}
	pm.publishLocked()
}

func (pm *pathPMTU) publishLocked() {
	pm.budget.Store(int64(pm.m.Budget()))
	pm.confirmed.Store(int64(pm.m.Confirmed()))
	a, u := pm.m.Watch()
	pm.above.Store(int64(a))
	pm.upTo.Store(int64(u))
}

// onDelivered records an acknowledged packet whose largest datagram was
// size bytes (0: none). Allocation-free.
func (pm *pathPMTU) onDelivered(size int) {
	if !pm.acked.Load() {
		pm.acked.Store(true)
	}

	for s := int64(size); ; {
		cur := pm.dlvMax.Load()
		if cur >= s || pm.dlvMax.CompareAndSwap(cur, s) {
			return
		}
	}
}

// onLost records a lost packet whose largest datagram was size bytes.
func (pm *pathPMTU) onLost(size int) {
	s := int64(size)
	if s <= pm.above.Load() {
		pm.lostSmall.Add(1)
		return
	}
	if s > pm.upTo.Load() {
		return
	}
	pm.lost.Add(1)
	for {
		cur := pm.lostMin.Load()
		if cur != 0 && cur <= s || pm.lostMin.CompareAndSwap(cur, s) {
			return
		}
	}
}

// onHandshake resets the machine when a connection of the path completed
// its handshake (policy.PMTUCauseHandshake).
func (p *path) pmtuHandshake(now time.Time) {
	pm := &p.pmtu
	pm.mu.Lock()
	before := pm.m.Budget()
	pm.m.OnHandshake(now)
	pm.publishLocked()
	after := pm.m.Budget()
	pm.mu.Unlock()
	if before != after {
		p.bond.log.Info("path datagram budget restored by a new connection", "path", p.name, "from", before, "to", after)
		p.queue.unpark()
	}
}

// pmtuSuspect tells the machine that the path turned SUSPECT at now
// (liveness.go), when datagrams larger than pmtuBase were among the sends
// the peer left unanswered (policy.PMTU.OnSuspect).
func (p *path) pmtuSuspect(now time.Time) {
	pm := &p.pmtu
	if pm.bigSince.Load() == 0 {
		return
	}
	pm.mu.Lock()
	before := pm.m.Budget()
	pm.m.OnSuspect(now)
	pm.publishLocked()
	after, last := pm.m.Budget(), pm.m.Last()
	pm.mu.Unlock()
	if after != before {
		p.bond.log.Info("path datagram budget changed", "path", p.name, "from", before, "to", after,
			"state", policy.PMTUBase.String(), "reason", last.String())
		p.bond.updateMTU()
	}
}

// pmtuTick runs the path's machine at now if it did not run this tick,
// and sends the probe it asks for on conn, the path's connection.
func (p *path) pmtuTick(conn *quic.Conn, now time.Time) {
	pc, pm := &p.pc, &p.pmtu
	if !pm.mu.TryLock() {
		return
	}
	if now.Sub(pm.tickAt) < livenessTick*3/4 {
		pm.mu.Unlock()
		return
	}
	pm.tickAt = now
	s := policy.PMTUSample{Acked: pm.acked.Swap(false), DeliveredMax: int(pm.dlvMax.Swap(0)),
		Lost: int(pm.lost.Swap(0)), LostMin: int(pm.lostMin.Swap(0)), LostSmall: int(pm.lostSmall.Swap(0))}
	before, confBefore, lostBefore := pm.m.Budget(), pm.m.Confirmed(), pm.m.HoleLosses()
	// Large datagrams unanswered for the liveness bound while the peer
	// may still be heard (a one-way black hole leaves the peer's own
	// packets, and so liveness, alone): QUIC declares nothing lost.
	if bs := pm.bigSince.Load(); bs != 0 && monoclock.Nanos(now)-bs > int64(p.state.SuspectAfter()) {
		pm.m.OnSuspect(now)
	}
	size := pm.m.Tick(now, p.state.SmoothedRTT(), s)
	pm.publishLocked()
	after, confAfter, lost := pm.m.Budget(), pm.m.Confirmed(), pm.m.HoleLosses()
	last := pm.m.Last()
	st := pm.m.State()
	if size > 0 && size <= len(pmtuProbe) && pc.unsent.Load() < maxUnsent {
		pc.probeSize.Store(int64(size))
		pc.unsent.Add(1)
		if conn.SendDatagram(pmtuProbe[:size]) != nil {
			pc.unsent.Add(-1)
			pc.probeSize.Store(0)
		} else {
			pm.sent++
		}
	}
	pm.mu.Unlock()
	if after != before || confAfter != confBefore || p.queue.parkedExpired(monoclock.Nanos(now)) {
		p.queue.unpark() // the frames rerouteOversize parked: sent, moved, dropped or parked again
	}
	if lost > lostBefore { // lost before the detection (policy.PMTU.HoleLosses)
		p.drops.addN(DropBlackHole, lost-lostBefore)
	}
	if after != before {
		p.bond.log.Info("path datagram budget changed", "path", p.name, "from", before, "to", after,
			"state", st.String(), "reason", last.String())
	}
	if after != before || confAfter != confBefore {
		p.bond.updateMTU()
	}
}

// pmtuStats fills the path MTU fields of s.
func (p *path) pmtuStats(s *PathStats) {
	pm := &p.pmtu
	pm.mu.Lock()
	defer pm.mu.Unlock()
	s.DatagramBudget = pm.m.Budget()
	s.PMTUState = pm.m.State().String()
	s.PMTUReason = pm.m.Reason()
	_, s.BlackHoles, _ = pm.m.Counts()
	s.PMTUProbes = pm.sent
}

// fitScratch is the working space of fit: one per goroutine that picks
// paths.
type fitScratch struct {
	states []*policy.Path
	idx    []int
	picks  []int
}

func newFitScratch() fitScratch {
	return fitScratch{states: make([]*policy.Path, 0, maxPaths), idx: make([]int, 0, maxPaths), picks: make([]int, maxPaths)}
}

// fit returns the states of set's paths whose datagram budget carries a
// datagram of size bytes, and their indexes in set, in f's scratch.
// Allocation-free.
func (f *fitScratch) fit(set *pathSet, size int) ([]*policy.Path, []int) {
	f.states, f.idx = f.states[:0], f.idx[:0]
	for i, p := range set.paths {
		if int(p.pmtu.budget.Load()) >= size {
			f.states, f.idx = append(f.states, p.state), append(f.idx, i)
		}
	}
	return f.states, f.idx
}

// fitConfirmed returns, as fit, the states of set's paths whose
// confirmed budget (policy.PMTU.Confirmed) carries a datagram of size
// bytes: those whose budget fell on a mere suspicion, where the datagram
// waits for the probe's answer (rerouteOversize) instead of being lost.
func (f *fitScratch) fitConfirmed(set *pathSet, size int) ([]*policy.Path, []int) {
	f.states, f.idx = f.states[:0], f.idx[:0]
	for i, p := range set.paths {
		if int(p.pmtu.confirmed.Load()) >= size {
			f.states, f.idx = append(f.states, p.state), append(f.idx, i)
		}
	}
	return f.states, f.idx
}

// fitStates returns the states the scheduler may choose from for a
// datagram of size bytes: set.states and nil while every connected path
// carries it (the common case, one atomic load), else the paths whose
// budget does and their indexes in set (f's scratch), for remap.
func (b *Bond) fitStates(set *pathSet, size int, f *fitScratch) ([]*policy.Path, []int) {
	if size <= int(b.minBudget.Load()) {
		return set.states, nil
	}
	return f.fit(set, size)
}

// remap turns the first k picks, indexes into a fitStates subset, into
// indexes into the path set.
func remap(picks []int, k int, idx []int) {
	if idx == nil {
		return
	}
	for j := range k {
		picks[j] = idx[picks[j]]
	}
}

// rerouteOversize moves f, popped from p's queue but larger than p's
// datagram budget now, to a path whose budget carries it. Without one, f
// waits parked beside p's queue while p's budget is cut on a mere
// suspicion that a probe will settle (policy.PMTU.Confirmed still carries
// f): it is neither sent into a possible black hole nor dropped, and
// pmtuTick puts it back when the budget changes or its deadline passes.
// Otherwise it is dropped (DropNoPath).
func (p *path) rerouteOversize(f frame, now time.Time) {
	b := p.bond
	set := b.paths.Load()
	size := f.end - f.off
	p.fitMu.Lock()
	states, idx := p.fit.fit(set, size)
	var to *path
	if len(states) > 0 && b.picker.Pick(states, now, p.fit.picks) > 0 {
		to = set.paths[idx[p.fit.picks[0]]]
	}
	p.fitMu.Unlock()
	if to == nil || to == p {
		if size <= int(p.pmtu.confirmed.Load()) {
			if !f.held {
				f.held = true
				p.pmtuHeld.Add(1)
			}
			p.queue.park(f)
			// pmtuTick or pmtuHandshake may have changed the budget since
			// this routine read it, and unparked before f was parked: nothing
			// would wake f before its deadline.
			if size <= int(p.pmtu.budget.Load()) || size > int(p.pmtu.confirmed.Load()) {
				p.queue.unpark()
			}
			return
		}
		putBuf(f.buf)
		b.drops.add(DropNoPath)
		return
	}
	handOver(to, f)
	p.rescued.Add(1)
}

// updateMTU sets the bond's send MTU from its connected paths' budgets
// (see the top of this file) and the smallest budget the scheduler must
// check packets against.
func (b *Bond) updateMTU() {
	b.mtuMu.Lock()
	defer b.mtuMu.Unlock()
	full := b.mtu + HeaderBudget
	largest, smallest, from := 0, full, ""
	live, liveFrom := 0, "" // the same over the paths whose budget is what evidence supports
	for _, p := range b.paths.Load().paths {
		if !p.connected() {
			continue
		}
		budget := int(p.pmtu.budget.Load())
		smallest = min(smallest, budget)
		bud := int(p.pmtu.confirmed.Load()) // not lowered by a mere suspicion
		if bud > largest {
			largest, from = bud, p.name
		}
		if budget >= bud && bud > live {
			live, liveFrom = bud, p.name
		}
	}
	// A path whose budget is cut on a mere suspicion (an outage looks like
	// a black hole of every size) keeps the bond's MTU only while no other
	// path carries anything: when another does, the MTU is what it carries.
	if live > 0 {
		largest, from = live, liveFrom
	}
	b.minBudget.Store(int64(smallest))
	if largest == 0 {
		return // no connected path: keep the MTU until one is back
	}
	mtu := b.mtu
	if largest < full {
		mtu = max((largest-HeaderBudget)&^7, minSendMTU)
	}
	old := int(b.sendMTU.Swap(int64(mtu)))
	if old == mtu {
		return
	}
	reason := ""
	if mtu < b.mtu {
		reason = "no path carries full-size datagrams; largest datagram budget " + strconv.Itoa(largest) + " bytes, on path " + from
	}
	b.mtuReason.Store(&reason)
	b.ctr.mtuChanges.Add(1)
	b.log.Warn("bond MTU changed by path MTU discovery", "from", old, "to", mtu, "configured", b.mtu, "reason", reason)
	if b.setTUNMTU != nil {
		go b.applyTUNMTU()
	}
}

// minSendMTU is the lowest send MTU, bytes: the IPv4 minimum datagram
// every host must accept (RFC 791).
const minSendMTU = 576

// applyTUNMTU sets the TUN device's MTU to the bond's send MTU, if it is
// not already. One call at a time; the last change wins.
func (b *Bond) applyTUNMTU() {
	b.tunMu.Lock()
	defer b.tunMu.Unlock()
	want := int(b.sendMTU.Load())
	if want == b.tunMTU {
		return
	}
	if err := b.setTUNMTU(want); err != nil {
		b.log.Warn("setting the TUN MTU failed", "mtu", want, "err", err)
		return
	}
	b.tunMTU = want
	b.log.Info("TUN MTU set", "mtu", want)
}

// datagramLost handles the loss of a packet of p whose largest datagram
// was size bytes (0: none or unknown), probe if it was a path MTU probe:
// reported by quic-go (tracer.go) or inferred from the peer's ACKs
// (sentring.go). The path MTU machine hears of it; a datagram larger than
// the budget now is counted as DropBlackHole; a probe's loss is not
// congestion (RFC 8899 §4.4), any other loss counts on the path and, for
// FEC, in its loss intervals (with rate control the receiver's reports
// feed FEC instead, ratectl.go). Allocation-free.
func (p *path) datagramLost(size int, probe bool) {
	if size > 0 {
		p.pmtu.onLost(size)
		if !probe && size > int(p.pmtu.budget.Load()) { // a datagram the path no longer carries
			p.drops.add(DropBlackHole)
		}
	}
	if probe {
		return
	}
	p.state.OnLoss(1)
	if !p.rc.active() {
		p.loss.OnLoss(time.Now(), p.state.SmoothedRTT())
	}
}
