package tunnel

import (
	"sync"
	"time"

	"github.com/bondd/bondd/classify"
	"github.com/bondd/bondd/fec"
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
// routineFlush releases what waited too long.

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
// goroutines), and the doorbell of its flush routine. Safe for concurrent
// use.
type reseqRx struct {
	mu   sync.Mutex
	rs   *resequencer
	wake chan struct{} // capacity 1: a packet was held, re-arm the timer
	bad  uint64        // guarded by mu: malformed flow tags
}

func newReseqRx(o ReseqOptions) *reseqRx {
	return &reseqRx{rs: newResequencer(o), wake: make(chan struct{}, 1)}
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
	v := x.rs.push(now, tag, pkt[off+tl:])
	if v == reseqDeliver {
		write(pkt, off+tl)
	}
	x.drainLocked(write)
	if v == reseqHeld {
		select {
		case x.wake <- struct{}{}:
		default:
		}
	}
	return true
}

func (x *reseqRx) drainLocked(write deliverFunc) {
	for {
		buf, n, ok := x.rs.pop()
		if !ok {
			return
		}
		write(buf[:Headroom+n], Headroom)
		putBuf(buf)
	}
}

// routineFlush releases held packets when their wait bound passes, until
// done closes; then it returns the held buffers to the pool.
func (x *reseqRx) routineFlush(done <-chan struct{}, write deliverFunc) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	defer func() {
		x.mu.Lock()
		x.rs.close()
		x.mu.Unlock()
	}()
	for {
		x.mu.Lock()
		deadline, ok := x.rs.nextDeadline()
		x.mu.Unlock()
		if !ok {
			select {
			case <-x.wake:
				continue
			case <-done:
				return
			}
		}
		timer.Reset(time.Until(deadline))
		select {
		case <-timer.C:
		case <-x.wake: // an earlier deadline, perhaps
			continue
		case <-done:
			return
		}
		x.mu.Lock()
		x.rs.flush(time.Now())
		x.drainLocked(write)
		x.mu.Unlock()
	}
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

// setSpread passes the paths' delay spread to the adaptive bound.
func (x *reseqRx) setSpread(d time.Duration) {
	x.mu.Lock()
	x.rs.setSpread(d)
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

// startReseq starts the bond's resequencing routine on wg: the flush of
// held packets whose wait passed. It stops when done closes. The update
// of the wait's spread hint (reseqSpread) is the bond's spread timer
// (spreadTick).
func (b *Bond) startReseq(wg *sync.WaitGroup, done <-chan struct{}) {
	wg.Go(func() { b.reseq.routineFlush(done, b.reseqWrite) })
}

// spreadTick passes the paths' delay spread to the resequencer, every
// reseqSpreadInterval while the bond is awake (idle.go); waking re-arms
// it. Runs on the node's timer heap.
func (b *Bond) spreadTick(now, _ time.Time) {
	b.reseq.setSpread(reseqSpread(b.paths.Load(), now))
	if !b.asleep() {
		b.idle.spread.Reset(now.Add(reseqSpreadInterval))
	}
}

// reseqSpread is the wait the paths' delays call for: from the lowest
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
func reseqSpread(set *pathSet, now time.Time) time.Duration {
	var lo, hi time.Duration
	n := 0
	for _, p := range set.states {
		r := p.SmoothedRTT()
		if r <= 0 || p.LinkStatus(now) == policy.StatusUnavailable {
			continue
		}
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
		return 0
	}
	return hi - lo + fec.DefaultBudget
}
