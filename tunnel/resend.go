package tunnel

import (
	"sync"
	"time"

	"github.com/bondd/bondd/internal/monoclock"
	"github.com/bondd/bondd/policy"
)

// Retransmission of lost datagrams. QUIC never retransmits a DATAGRAM
// frame (RFC 9221 §5.2), and FEC repairs only what its parity covers: an
// uplink that stalls for a few hundred milliseconds (a satellite
// reconfiguration, a capacity dip of the trace, a handover) loses whole
// blocks, data and parity alike. So the path's send routine keeps each data
// datagram it hands to quic-go until the packet that carried it is
// acknowledged, and when loss detection declares that packet lost (quic-go's
// RFC 9002 §6.1 events, or the time threshold the recorder applies itself,
// sentring.go) it queues the datagram once more, at the head of its
// priority band (path.resend: on the same path while it is ACTIVE),
// provided the datagram is expected to arrive before it expires (its
// rule's deadline_ms; without one it waits anew, up to max_queue_delay
// and within three times that of its first queueing, unless the path's queue
// is more than half full). A
// path that turns SUSPECT, or whose connection ends, sends what it keeps
// to the other paths at once (resendAll). The receiver's
// duplicate window drops a copy whose original arrived after all.
//
// What is retransmitted: DATA datagrams only, each at most once. Parity is
// not: a late parity shard repairs nothing the retransmitted data does not.
//
// Matching datagrams to packets. quic-go packs the datagrams of a
// connection in the order SendDatagram took them, and its controller hook
// reports each packet's DATAGRAM frames with their lengths before the
// packet (congestion.Observer, cc.go). The path records every datagram it
// hands over, kept or not, in the connection's handed FIFO before it calls
// SendDatagram; each DATAGRAM frame reported takes the FIFO's head when
// the lengths agree, and the head moves to
// the packet number's slot of the held ring. A frame of a length no entry
// has is one the path did not hand (a liveness probe, a path MTU probe) and
// leaves the FIFO as it is; one that matches a later entry takes it and
// frees the entries before it, so that a FIFO out of step with quic-go
// (it should never be) catches up at the next datagram. The held ring has
// one slot per slot of the recorder's sent ring (pmtuRing packets): a
// packet the ring forgets before it is settled frees its datagrams unsent
// again.

// handedCap bounds the handed FIFO: more than the datagrams a path keeps
// inside quic-go (maxUnsent).
const handedCap = 64

// heldSlot is the datagrams one packet carried, kept until it is settled.
type heldSlot struct {
	pn     int64
	frames []frame // reused: allocation-free once warm
}

// resendState is a connection's datagrams handed to quic-go and not yet
// acknowledged (see the top of this file). The zero value is ready; safe
// for concurrent use (the path's send routine hands, quic-go's routines
// report packets, acknowledgements and losses).
type resendState struct {
	mu     sync.Mutex
	g      *resendRings // allocated by the first datagram handed: an idle connection costs nothing
	closed bool         // the connection ended: nothing more is kept
}

// resendRings is a connection's handed FIFO and held ring (about 36 KiB).
type resendRings struct {
	handed [handedCap]frame // ring; a frame without buf is one not kept (only its length matters)
	hHead  int
	hN     int
	held   [pmtuRing]heldSlot
	lastPN int64 // the largest packet number packed
}

// hand records a datagram of f's length about to be handed to quic-go; keep
// says whether its buffer is kept for a retransmission (then the resend
// state owns f.buf from now on, and the caller must not return it). It
// reports whether f.buf is now owned here.
func (r *resendState) hand(f frame, keep bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	if r.g == nil {
		r.g = new(resendRings)
	}
	g := r.g
	if !keep {
		f.buf = nil
	}
	if g.hN == handedCap { // quic-go never packed the oldest: forget it
		old := &g.handed[g.hHead]
		if old.buf != nil {
			putBuf(old.buf)
		}
		*old = frame{}
		g.hHead = (g.hHead + 1) % handedCap
		g.hN--
	}
	g.handed[(g.hHead+g.hN)%handedCap] = f
	g.hN++
	return keep
}

// unhand takes back buf, the datagram hand kept last, after SendDatagram
// refused it; it reports whether buf is the caller's again. It is not when
// a packet took the entry meanwhile (a probe of the same length was packed
// in its place): then the held ring owns buf and frees it.
func (r *resendState) unhand(buf *packetBuf) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.g
	if g == nil || g.hN == 0 {
		return false
	}
	tail := &g.handed[(g.hHead+g.hN-1)%handedCap]
	if tail.buf != buf {
		return false
	}
	*tail = frame{}
	g.hN--
	return true
}

// popHanded removes and returns the oldest datagram of length n in
// the FIFO, normally its head. Entries before it were packed or dropped
// without their event matching (they cannot be packed later: quic-go packs
// in order), and are freed; a length no entry has is a datagram the path
// did not hand, and leaves the FIFO as it is.
func (g *resendRings) popHanded(n int) (frame, bool) {
	for i := range g.hN {
		h := &g.handed[(g.hHead+i)%handedCap]
		if h.end-h.off != n {
			continue
		}
		for range i {
			if old := g.handed[g.hHead]; old.buf != nil {
				putBuf(old.buf)
			}
			g.handed[g.hHead] = frame{}
			g.hHead = (g.hHead + 1) % handedCap
			g.hN--
		}
		f := *h
		*h = frame{}
		g.hHead = (g.hHead + 1) % handedCap
		g.hN--
		return f, true
	}
	return frame{}, false
}

// packed records that packet pn carried a DATAGRAM frame of n bytes. The
// first frame of a packet must come with first set: the slot then drops
// what an older packet left in it.
func (r *resendState) packed(pn int64, n int, first bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.g
	if g == nil {
		return
	}
	s := &g.held[pn&(pmtuRing-1)]
	if first && (s.pn != pn || len(s.frames) > 0) {
		releaseFrames(s)
		s.pn = pn
		g.lastPN = max(g.lastPN, pn)
	}
	f, ok := g.popHanded(n)
	if !ok || f.buf == nil {
		return
	}
	if r.closed || s.pn != pn {
		putBuf(f.buf)
		return
	}
	s.frames = append(s.frames, f)
}

// dropped records that quic-go dropped a datagram of n bytes instead of
// packing it (too large for the packet after all).
func (r *resendState) dropped(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.g == nil {
		return
	}
	if f, ok := r.g.popHanded(n); ok && f.buf != nil {
		putBuf(f.buf)
	}
}

// acked frees what packet pn carried.
func (r *resendState) acked(pn int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.g == nil {
		return
	}
	if s := &r.g.held[pn&(pmtuRing-1)]; s.pn == pn {
		releaseFrames(s)
	}
}

// lost hands what packet pn carried to p.resend.
func (r *resendState) lost(pn int64, p *path, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.g == nil {
		return
	}
	s := &r.g.held[pn&(pmtuRing-1)]
	if s.pn != pn {
		return
	}
	for i := range s.frames {
		p.resend(s.frames[i], now, false)
		s.frames[i] = frame{}
	}
	s.frames = s.frames[:0]
}

// resendAll hands every datagram kept and not settled to p.resend, the
// newest first, so that the oldest ends at the head of its band, and
// returns how many went: p turned SUSPECT while another path is ACTIVE,
// and what it carried since the peer was last heard would otherwise wait
// for p to answer. It stops at the first datagram no other path can take,
// which keeps it and the rest.
func (r *resendState) resendAll(p *path, now time.Time) (n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.g
	if g == nil {
		return 0
	}
	for pn := g.lastPN; pn >= 0 && pn > g.lastPN-pmtuRing; pn-- {
		s := &g.held[pn&(pmtuRing-1)]
		if s.pn != pn {
			continue
		}
		for len(s.frames) > 0 {
			i := len(s.frames) - 1
			if !p.resend(s.frames[i], now, true) {
				return n
			}
			s.frames[i] = frame{}
			s.frames = s.frames[:i]
			n++
		}
	}
	return n
}

// close frees everything kept: the connection ended. What it carried and
// was not settled may have arrived; the frames still queued on the path
// are the path's (rescue).
func (r *resendState) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	g := r.g
	if g == nil {
		return
	}
	for g.hN > 0 {
		if f := g.handed[g.hHead]; f.buf != nil {
			putBuf(f.buf)
		}
		g.handed[g.hHead] = frame{}
		g.hHead = (g.hHead + 1) % handedCap
		g.hN--
	}
	for i := range g.held {
		releaseFrames(&g.held[i])
	}
}

// releaseFrames returns the buffers of s's frames to the pool.
func releaseFrames(s *heldSlot) {
	for i := range s.frames {
		putBuf(s.frames[i].buf)
		s.frames[i] = frame{}
	}
	s.frames = s.frames[:0]
}

// resendable reports whether f, a frame the path is about to send, is kept
// for a retransmission: a DATA datagram not sent before, on a bond that
// retransmits.
func (p *path) resendable(f *frame) bool {
	return !p.bond.popts.RetransmitOff && !f.resent && f.end > f.off && f.buf[f.off]&0x0f == TypeData
}

// resend queues f, a datagram lost on p, once more, at the head of its
// priority band: on p while p is ACTIVE (the scheduler chose p for it,
// and a rule may have preferred it to the others: a metered one) and p
// is expected to deliver it before it expires, else on the path the
// bond's picker chooses among the others, or on p again when none can
// take it, where it waits for p to be usable or expires. A path that
// loses in a capacity dip fills its queue as it loses, so a datagram
// late there may still be in time on another. A datagram that the chosen
// path is not expected to deliver before it expires
// (policy.Path.ExpectedDelivery: its queue and bytes in flight at its
// rate, and half its RTT) is dropped and counted in ResendLate. A
// datagram without a rule's deadline expires max_queue_delay (a
// keyframe: its longer wait) after it is queued again, not after it was
// first queued, but no later than three times that wait, nor stale_after,
// after it was first queued; unless onlyOthers, it is dropped the same
// way when the chosen path's queue is more than half full: on a
// saturated path it would only take the place of a newer one. With
// onlyOthers set it goes to another path or stays with the caller: resend
// then reports false, and leaves f to the caller, when no other path can
// take it.
//
// Like path.rescue, a datagram that leaves p follows the bond's picker,
// not the rules.
func (p *path) resend(f frame, now time.Time, onlyOthers bool) bool {
	to := p
	if onlyOthers || p.state.Status(now) != policy.StatusActive {
		switch to = p.resendPath(now); {
		case to == nil && onlyOthers:
			return false
		case to == nil:
			to = p
		}
	}
	if !f.ruled {
		// No rule's deadline: max_queue_delay (or a keyframe's longer
		// wait) bounds a datagram's wait in a queue, and the
		// retransmission waits anew. Counted from the first queueing,
		// the round trip that found the loss left no time on any path
		// of more than about 100 ms. Its whole life is bounded too: at
		// most three times its first wait from its first queueing (a
		// datagram that old is late for all but bulk transfer), and
		// never past stale_after, the age past which a receiver with
		// this end's settings would not deliver it. Twice its wait,
		// once a path's queue held max_queue_delay at its rate
		// (sendQueue.resize), left 23–376 of steady-udp-90's
		// retransmissions a run too late, against 0–204 at three
		// times (bondd bench capacity, seeds 1–4).
		ns, first := monoclock.Nanos(now), f.enqueued
		wait := p.queue.maxAge
		if f.expires != 0 {
			wait = f.expires - first
		}
		end := first + int64(p.bond.popts.StaleAfter)
		if wait > 0 {
			end = min(end, ns+wait, first+3*wait)
		}
		f.enqueued, f.expires = ns, end
	}
	expires := p.queue.deadline(&f)
	late := func(q *path) bool {
		// A queue more than half full is saturated: a retransmission
		// without a rule's deadline would only take the place of a
		// newer datagram there, and arrive a round trip late. A path
		// that hands its datagrams over (onlyOthers: it turned SUSPECT
		// or lost its connection) fills the others' queues instead.
		return !f.ruled && !onlyOthers && q.queue.halfFull() ||
			monoclock.Nanos(now)+int64(q.state.ExpectedDelivery()) >= expires
	}
	if to == p && late(p) {
		if q := p.resendPath(now); q != nil {
			to = q
		}
	}
	if late(to) {
		putBuf(f.buf)
		p.resendLate.Add(1)
		return true
	}
	f.resent, f.movable = true, false
	to.queue.requeue(f)
	p.resent.Add(1)
	return true
}

// resendScratch is a path's scratch space for resendPath, reused under its
// mutex: losses are reported on quic-go's goroutines and the path's own.
type resendScratch struct {
	mu     sync.Mutex
	states []*policy.Path
	idx    []int
	picks  []int
}

// resendPath returns the path the bond's picker chooses at now among the
// paths other than p, nil when none can take a packet. Allocation-free
// once the scratch space has grown to the number of paths.
func (p *path) resendPath(now time.Time) *path {
	set := p.bond.paths.Load()
	s := &p.resendScratch
	s.mu.Lock()
	defer s.mu.Unlock()
	s.states, s.idx = s.states[:0], s.idx[:0]
	for i, q := range set.paths {
		if q != p {
			s.states = append(s.states, set.states[i])
			s.idx = append(s.idx, i)
		}
	}
	if len(s.picks) < len(s.states) {
		s.picks = make([]int, len(set.paths))
	}
	if len(s.states) == 0 || p.bond.picker.Pick(s.states, now, s.picks) == 0 {
		return nil
	}
	return set.paths[s.idx[s.picks[0]]]
}
