package tunnel

import (
	"sync"
	"time"

	"github.com/bondd/bondd/classify"
	"github.com/bondd/bondd/fec"
	"github.com/bondd/bondd/internal/timerheap"
	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/rules"
)

// The glue between the send and receive paths and per-flow sequencing.
//
// Send side, in Bond.send after the rules are evaluated and before
// protect: tagPacket writes the flow tag just in front of the inner packet,
// in the headroom; FEC then protects buf[Headroom-tl : Headroom+n], the
// header gets FlagFlow and is written in front of the tag.
//
// Receive side: reseqRx.deliver takes every DATA payload (after the bond
// header, or as the FEC decoder reconstructed it) whose flow is tagged, and
// a timer of the node's heap (flushTick) releases what waited too long.

// tagPacket decides whether the packet in buf[Headroom:Headroom+n], which
// md describes and dir (nil: no rule set) directs, needs resequencing
// (reseqWait) and if so writes its flow tag into buf[Headroom-tl:Headroom]
// and returns tl; 0: untagged (not needed, or the flow table is full). It
// does not allocate. Owned by the TUN reader goroutine, like t.
func (t *flowTable) tagPacket(buf *packetBuf, md *classify.Metadata, dir *rules.Directive, now time.Time) (tl int) {
	wait, ok := reseqWait(md, dir)
	if !ok {
		return 0
	}
	tag, ok := t.next(flowHash(md), now)
	if !ok {
		return 0
	}
	tag.WaitMs = uint16(min(wait, rules.MaxResequence) / time.Millisecond)
	tl = FlowTagLen(tag)
	AppendFlowTag(buf[Headroom-tl:Headroom-tl], tag)
	return tl
}

// deliverFunc writes the inner packet pkt[off:] to the TUN (with the
// bond's checks), using pkt[:off] as headroom; off ≥ tun.MinWriteOffset.
type deliverFunc func(pkt []byte, off int)

// reseqRx is the receive side's resequencing stage of one bond: the
// resequencer, the mutex that serializes it with the TUN writes of what it
// releases (so a flow's order survives the hand-over between receive
// goroutines), and its flush timer in the node's heap, armed for the
// earliest wait bound of what it holds (no goroutine per bond: an idle
// bond's timer is a struct that is never scheduled). Safe for concurrent
// use.
type reseqRx struct {
	mu     sync.Mutex
	rs     *resequencer
	bad    uint64           // guarded by mu: malformed flow tags
	flushT *timerheap.Timer // nil until startFlush
	// armed is the resequencer deadline flushT is scheduled for (zero:
	// none), so that a packet held behind an earlier one costs neither
	// the clock nor the heap's node-wide lock.
	armed  time.Time
	write  deliverFunc // what flushTick releases goes here
	closed bool        // stop was called: nothing more is flushed
}

func newReseqRx(o ReseqOptions) *reseqRx {
	return &reseqRx{rs: newResequencer(o)}
}

// deliver takes pkt[off:], a DATA payload: pkt[off:] starts with a flow
// tag (IsFlowTagged), and pkt[:off] is headroom (the bond header, or the
// reconstruction's Offset). It writes the inner packet with write now, or
// holds a copy, and writes whatever the packet releases, in flow order. It
// reports false, and writes nothing, for a malformed tag (the caller counts
// it). It does not retain pkt and does not allocate.
func (x *reseqRx) deliver(now time.Time, pkt []byte, off int, write deliverFunc) bool {
	tag, tl, err := ParseFlowTag(pkt[off:])
	if err != nil {
		x.mu.Lock()
		x.bad++
		x.mu.Unlock()
		return false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed { // the bond is closing: nothing is held any more
		write(pkt, off+tl)
		return true
	}
	v := x.rs.push(now, tag, pkt[off+tl:])
	if v == reseqDeliver {
		write(pkt, off+tl)
	}
	x.drainLocked(write)
	if v == reseqHeld {
		x.armLocked()
	}
	return true
}

// armLocked schedules the flush timer for the earliest wait bound of what
// is held, unless it is due sooner already. x.mu held.
func (x *reseqRx) armLocked() {
	if x.flushT == nil || x.closed {
		return
	}
	deadline, ok := x.rs.nextDeadline()
	if !ok || !x.armed.IsZero() && !deadline.Before(x.armed) {
		return
	}
	x.armed = deadline
	x.flushT.ResetEarlier(deadline) // the heap keeps monotonic deadlines (internal/monoclock)
}

func (x *reseqRx) drainLocked(write deliverFunc) { x.drainUpTo(write, -1) }

// drainUpTo writes at most limit released packets (< 0: all) and reports
// whether it stopped at limit, with more perhaps waiting. x.mu held.
func (x *reseqRx) drainUpTo(write deliverFunc, limit int) bool {
	for n := 0; limit < 0 || n < limit; n++ {
		buf, l, ok := x.rs.pop()
		if !ok {
			return false
		}
		write(buf[:Headroom+l], Headroom)
		putBuf(buf)
	}
	return true
}

// reseqFlushBatch bounds the packets one flushTick writes to the TUN: the
// heap's goroutine serves every timer of the node, so a long release
// continues at its next pass, after the other timers due.
const reseqFlushBatch = 64

// startFlush makes a timer of heap h release held packets when their
// wait bound passes, writing them with write.
func (x *reseqRx) startFlush(h *timerheap.Heap, write deliverFunc) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.write = write
	x.flushT = h.NewTimer(x.flushTick)
	x.armLocked()
}

// flushTick releases what waited past its bound at now, in flow order, and
// re-arms the timer for what is still held. Runs on the heap's goroutine.
func (x *reseqRx) flushTick(now, _ time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return
	}
	x.armed = time.Time{} // the heap took the timer off
	x.rs.flush(now)
	if x.drainUpTo(x.write, reseqFlushBatch) {
		x.armed = now
		x.flushT.Reset(now)
		return
	}
	x.armLocked()
}

// stop ends the flushes for good (the bond is closing or replaced) and
// returns the held buffers to the pool.
func (x *reseqRx) stop() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.closed = true
	if x.flushT != nil {
		x.flushT.Stop()
	}
	x.rs.close()
}

// reset forgets every flow and drops what is held (the peer restarted and
// numbers its flows afresh); the counters stay.
func (x *reseqRx) reset() {
	x.mu.Lock()
	st := x.rs.st
	x.rs.close()
	x.rs.st = st
	x.mu.Unlock()
}

// setSpread passes the paths' delay spread and a retransmission's
// lateness to the adaptive bound.
func (x *reseqRx) setSpread(spread, resend time.Duration) {
	x.mu.Lock()
	x.rs.setSpread(spread, resend)
	x.mu.Unlock()
}

// stats returns the resequencing counters; BadTags counts malformed flow
// tags.
func (x *reseqRx) stats() (s ReseqStats, badTags uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.rs.stats(), x.bad
}

// reseqSpreadInterval is how often the bond passes its paths' delay spread
// to the resequencer.
const reseqSpreadInterval = 50 * time.Millisecond

// spreadTick passes the paths' delay spread to the resequencer, every
// reseqSpreadInterval while the bond is awake (idle.go); waking re-arms
// it. Runs on the node's timer heap.
func (b *Bond) spreadTick(now, _ time.Time) {
	b.reseq.setSpread(reseqSpread(b.paths.Load(), now))
	if !b.asleep() {
		b.idle.spread.Reset(now.Add(reseqSpreadInterval))
	}
}

// reseqSpread returns the resequencer's hints (resequencer.setSpread).
// spread is the wait the paths' delays call for: from the lowest
// minimum RTT to the highest smoothed RTT of the connected paths (a bound
// on the spread of their one-way delays when the reverse delays are
// alike, queueing within a path included: a packet behind a queue comes
// that much after one that found it empty), plus the FEC block budget
// (fec.DefaultBudget: a reconstruction comes at most that long after the
// block's last packet). With one path that is its queueing delay and the
// FEC budget: a flow is reordered only by reconstructions. 0 before any
// connected path has an RTT sample: then the resequencer waits its cap
// until it learns the bound from what it sees. A real loss holds a flow
// this long, so the hint must not be the cap.
//
// resend is the lateness of a retransmission (resend.go): a data datagram
// whose packet loss detection declares lost after RFC 9002 §6.1.2's time
// threshold, 9/8 of the path's RTT, is queued again and comes that long
// after the datagrams sent with it; the slowest connected path's. Without
// it the resequencer gave up, on the S2 paths, the resent datagrams of
// MPEG-TS flows a few milliseconds before they came (`bondd bench video`:
// 4 of 883 in 10 s, each costing the rest of its GOP). A flow whose cap
// is below it (a GEO path's RTT) waits the spread alone.
func reseqSpread(set *pathSet, now time.Time) (spread, resend time.Duration) {
	var lo, hi time.Duration
	n := 0
	for _, p := range set.states {
		r := p.SmoothedRTT()
		if r <= 0 || p.LinkStatus(now) == policy.StatusUnavailable {
			continue
		}
		resend = max(resend, r*9/8)
		m := p.MinRTT()
		if m <= 0 || m > r {
			m = r
		}
		if n == 0 || m < lo {
			lo = m
		}
		hi = max(hi, r)
		n++
	}
	if n == 0 {
		return 0, 0
	}
	return hi - lo + fec.DefaultBudget, resend
}
