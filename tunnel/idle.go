package tunnel

import (
	"sync/atomic"
	"time"

	"github.com/bondd/bondd/internal/monoclock"
	"github.com/bondd/bondd/internal/timerheap"
)

// An idle bond costs almost nothing. A bond that has carried no data, in
// either direction, for IdleAfter is asleep:
//
//   - the edge checks its paths only at the idle keepalive
//     (PathOptions.IdleKeepalive, 15 s by default), on a 100-ms grid of
//     its clock (keepaliveGrid), and sends a keepalive (a probe datagram,
//     liveness.go) on each path the peer has been silent on for that
//     long, which holds NAT bindings and proves the path; an unanswered
//     keepalive turns the path SUSPECT and it is probed and closed as for
//     any send. The concentrator sends nothing of its own, checks nothing
//     unless it sent something, and expects silence up to the idle
//     keepalive (policy.Path.SetIdle);
//   - no path MTU ticks, no rate feedback (ratectl.go), no path state
//     reports beyond one per idle keepalive (ctrl_edge.go), no FEC expiry
//     or resequencer timers (fec.go, reseq_stage.go);
//   - no send routine: a path's routineSend (send.go) returns once it
//     finds the bond asleep and nothing queued or parked (one waiting for
//     room in quic-go's queue, or on a gated path, returns once that
//     wait ends and it finds the same). The wake starts it again before
//     the waking packet is queued, and so does any frame queued while it
//     is stopped (a resend, a rescue from a path that died while the bond
//     slept: sendQueue.added, pathConn.kick).
//
// The first data packet sent or received wakes the bond at once
// (Bond.touch): every path is checked every livenessTick again and sends
// a probe, so that within one RTT both ends know which paths answer, and
// the timers above resume. A probe from the concentrator wakes the edge
// too: an awake concentrator expects the fast keepalive (it closes a
// connection whose peer was silent for IdleTimeout), and it may have woken
// for a packet it did not send (too large, dropped by a rule).
//
// Every timer of every bond of a node (an Edge, a Concentrator) lives in
// the node's timer heap (internal/timerheap), served by one goroutine: no
// bond or path keeps a ticking goroutine, so an asleep bond's timers cost
// a heap entry each and wake the node only at its keepalives.

// IdleAfter is how long a bond carries no data, in either direction,
// before it sleeps: its paths then keep alive at PathOptions.IdleKeepalive
// and its timers stop (idle.go).
const IdleAfter = 5 * time.Second

// MaxIdleKeepalive bounds PathOptions.IdleKeepalive: 10 minutes, past
// which NAT bindings are gone anyway (RFC 4787 REQ-5 asks UDP mappings to
// live at least 2 minutes).
const MaxIdleKeepalive = 10 * time.Minute

// bondIdle is a bond's idle state and its timers in the node's heap.
type bondIdle struct {
	// lastData is the monoclock ns of the last data packet sent or received
	// (to the millisecond: touch stores it at most once a millisecond).
	lastData atomic.Int64
	asleep   atomic.Bool
	// sleeps and wakes count the bond's idle periods (for the tests).
	sleeps, wakes atomic.Uint64

	heap *timerheap.Heap
	// The bond's timers (nil until startTimers): the idle check, FEC
	// block flush (fec.go), FEC block expiry and the resequencer's spread
	// hint (reseq_stage.go).
	check, fecFlush, fecExpire, spread *timerheap.Timer
	stopped                            atomic.Bool
	// onWake, when set, is called on waking (the edge's control writer).
	onWake func()
}

// touch records data sent or received at now, and wakes the bond if it
// sleeps. Called per packet: an atomic load, and a store at most once a
// millisecond.
func (b *Bond) touch(now time.Time) {
	ns := monoclock.Nanos(now)
	if ns-b.idle.lastData.Load() > int64(time.Millisecond) {
		b.idle.lastData.Store(ns)
	}
	if b.idle.asleep.Load() {
		b.wake(now)
	}
}

// asleep reports whether the bond sleeps (no data for IdleAfter).
func (b *Bond) asleep() bool { return b.idle.asleep.Load() }

// wake ends the bond's sleep at now: fast liveness, a probe on every
// path, and the timers of a bond that carries traffic.
func (b *Bond) wake(now time.Time) {
	bi := &b.idle
	if !bi.asleep.CompareAndSwap(true, false) || bi.stopped.Load() {
		return
	}
	bi.wakes.Add(1)
	for _, p := range b.paths.Load().paths {
		p.state.SetIdle(0, now)
		p.pc.wakeProbe.Store(true)
		if t := p.pc.live.Load(); t != nil {
			t.Reset(now)
		}
		p.rc.ring(now)
		p.pc.resumeSend()
	}
	if bi.check != nil {
		bi.check.Reset(now.Add(IdleAfter))
		bi.fecExpire.Reset(now.Add(fecExpireInterval))
		bi.spread.Reset(now)
	}
	if bi.onWake != nil {
		bi.onWake()
	}
}

// idleCheck puts the bond to sleep once it has carried no data for
// IdleAfter; until then it re-arms itself for IdleAfter after the last
// data. Runs on the heap's goroutine.
func (b *Bond) idleCheck(now, _ time.Time) {
	bi := &b.idle
	if last := bi.lastData.Load(); monoclock.Nanos(now)-last < int64(IdleAfter) {
		bi.check.Reset(monoclock.Time(last).Add(IdleAfter))
		return
	}
	if !bi.asleep.CompareAndSwap(false, true) {
		return
	}
	bi.sleeps.Add(1)
	for _, p := range b.paths.Load().paths {
		p.state.SetIdle(b.popts.IdleKeepalive, now)
		p.queue.ring() // a send routine waiting on its queue finds the bond asleep and exits (pathConn.idleExit)
	}
	// touch stores lastData before it reads asleep; this stored asleep
	// before it reads lastData: a packet that raced with the sleep is
	// seen by one of the two.
	if monoclock.Nanos(now)-bi.lastData.Load() < int64(IdleAfter) {
		b.wake(time.Now())
	}
}

// startTimers creates the bond's timers in heap h and arms them: the bond
// starts awake. A nil h makes a heap that never runs (unit tests that
// drive the bond by hand).
func (b *Bond) startTimers(h *timerheap.Heap) {
	if h == nil {
		h = timerheap.New()
	}
	bi := &b.idle
	bi.heap = h
	now := time.Now()
	bi.lastData.Store(monoclock.Nanos(now))
	bi.check = h.NewTimer(b.idleCheck)
	bi.fecExpire = h.NewTimer(b.fecExpireTick)
	bi.spread = h.NewTimer(b.spreadTick)
	if b.fecTx != nil {
		bi.fecFlush = h.NewTimer(b.fecFlushTick)
		b.fecTx.flush.Store(bi.fecFlush)
	}
	b.reseq.startFlush(h, b.reseqWrite)
	bi.check.Reset(now.Add(IdleAfter))
	bi.fecExpire.Reset(now.Add(fecExpireInterval))
	bi.spread.Reset(now)
}

// stopTimers stops the bond's timers for good (the bond is closing or
// replaced). Path liveness timers stop with their connections.
func (b *Bond) stopTimers() {
	bi := &b.idle
	bi.stopped.Store(true)
	for _, t := range []*timerheap.Timer{bi.check, bi.fecFlush, bi.fecExpire, bi.spread} {
		if t != nil {
			t.Stop()
		}
	}
	b.reseq.stop()
}

// newTimer returns a timer of the bond's heap calling fn; nil before
// startTimers.
func (b *Bond) newTimer(fn func(now, due time.Time)) *timerheap.Timer {
	if b.idle.heap == nil {
		return nil
	}
	return b.idle.heap.NewTimer(fn)
}
