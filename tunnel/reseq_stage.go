package tunnel

import (
	"sync"
	"time"

	"github.com/bondd/bondd/classify"
	"github.com/bondd/bondd/rules"
)

// The glue between the send and receive paths and per-flow sequencing,
// ready for send.go and receive.go to call (not wired in yet).
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
