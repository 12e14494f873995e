package tunnel

import (
	"math"
	"sync"
	"time"

	"github.com/bondd/bondd/internal/monoclock"
)

// frame is one datagram waiting to be sent: buf[off:end] is the bondd header
// followed by the inner packet. The frame owns buf until it is sent or
// dropped, then returns it to the pool.
type frame struct {
	buf      *packetBuf
	off, end int
	enqueued int64 // monoclock ns
	expires  int64 // monoclock ns after which the frame is dropped (a rule's deadline_ms, a keyframe's longer wait, a retransmission's end); 0: enqueued + the queue's maxAge
	prio     uint8 // the directive's priority, 0–255; higher is sent first and dropped last
	// ruled is set when expires is a rule's deadline_ms (a keyframe's
	// included): a retransmission keeps it (resend.go).
	ruled bool
	// The video frame (object) the packet belongs to, when the classifier
	// found one: its frame_id, and whether it is a keyframe.
	obj           uint64
	hasObj, isKey bool
	// resent is set on a datagram queued again after it was lost
	// (resend.go): it is not retransmitted a second time.
	resent bool
	// held is set on a frame once parked for a path MTU probe's answer
	// (rerouteOversize), so that it counts once.
	held bool
	// movable is set on a frame that no rule ties to its path (no path
	// preferences, affinity, one path per video frame or duplicates):
	// once it has waited half its time in a queue that does not drain, it
	// may move to another path (path.moveAged). Any move to another path,
	// and a retransmission, clears it.
	movable bool
}

// lostObjects is how many recently dropped objects a send queue remembers
// to drop the rest of.
const lostObjects = 8

// seenObjects is how many recently counted objects a send queue remembers
// so as to count each object's drops once: more than a saturated queue
// drops from within lostObjectAge (a 50-fps stream's frames interleave
// with a keyframe's 200 packets).
const seenObjects = 128

// lostObjectAge is how long a send queue keeps dropping the rest of an
// object that lost a packet: past MaxObjectDeadline no packet of it is
// queued any more, and a frame_id seen again later (a wrapped RTP
// timestamp, a stream that repeats one) is another frame.
const lostObjectAge = int64(MaxObjectDeadline)

func (f *frame) bytes() []byte { return f.buf[f.off:f.end] }

// Priority bands of a send queue: a frame's priority 0–255 falls into band
// prio/64, so 0–63 (the default, 0, included) is the lowest band and
// 192–255 the highest.
const (
	queueBands = 4
	bandShift  = 6
)

// A send queue grows (resize) to at most queueGrowMax times its configured
// capacity and no more than queueGrowCeil frames (a configured capacity
// above that does not grow): 16 × 256 full-size datagrams (1,322 bytes
// at the default MTU) are 217 ms at 200 Mbit/s.
const (
	queueGrowMax  = 16
	queueGrowCeil = 16 * DefaultQueuePackets
)

func bandOf(prio uint8) int { return int(prio >> bandShift) }

// sendQueue is a path's bounded, priority-ordered queue in front of
// quic-go's SendDatagram. Frames leave highest band first, oldest first
// within a band (MoMQ §3: the directive's priority orders each path's send
// queue). Push never blocks: when the queue is full it drops the oldest
// frame of the lowest non-empty band at or below the new frame's, or the
// new frame itself when everything queued outranks it, and counts it
// (DropQueueFull, in the path's drop counters). Pop
// drops frames past their deadline (their own, from a rule's deadline_ms,
// or maxAge after they were queued) and counts them (DropDeadline,
// DropExpired). FEC parity is queued
// at priority 0, so under saturation redundancy is shed before data of a
// higher priority. Safe for concurrent use: the TUN reader, the FEC flush
// routine and a failing path's rescue push; the path's send routine pops.
type sendQueue struct {
	maxAge int64                    // ns
	cap    int                      // frames, all bands together: the configured bound (queue_packets)
	bell   chan struct{}            // doorbell, capacity 1: never blocks the pusher
	onLen  func(packets, bytes int) // reports the depth after each change
	drops  *dropCounters            // the path's; counts what the queue drops
	// kick, when set, is called after frames were added: it starts the
	// path's send routine if it exited while the bond slept
	// (pathConn.kick). One atomic load while the routine runs.
	kick func()

	mu       sync.Mutex // guards all following
	bands    [queueBands]bandFIFO
	lost     recentObjects // objects (non-key frames) that lost a packet here: the rest of them is dropped
	seen     recentObjects // objects (keyframes too) objDrops has counted, so that each counts once
	objDrops uint64        // objects that lost at least one packet here
	n        int           // frames queued, all bands
	bytes    int           // sum of the queued frames' lengths
	// limit is the queue's capacity now, frames: cap, or more on a path
	// whose rate lets it drain more within maxAge (resize), up to ceil.
	limit, ceil int
	// parked holds frames set aside by park, oldest first, outside the
	// bands (pop does not see them) until unpark: a ring allocated at the
	// queue's capacity on the first park, at most limit frames.
	// parkedDue is the earliest deadline among them, monoclock ns.
	parked    bandFIFO
	parkedDue int64
}

// recentObjects remembers the last objects (frame IDs) added to it, up to
// its size, each for lostObjectAge. Its arrays are allocated by the first
// add (a queue that never loses a frame, as an idle bond's, holds none);
// allocation-free after that.
type recentObjects struct {
	ids  []uint64
	at   []int64 // when each was added, monoclock ns
	n    int     // entries in use
	pos  int     // where the next one goes, overwriting the oldest once full
	size int     // capacity, allocated on the first add
}

func newRecentObjects(size int) recentObjects {
	return recentObjects{size: size}
}

// has reports whether obj was added less than lostObjectAge before now
// (monoclock ns). It looks newest first: an object's packets come together.
func (r *recentObjects) has(obj uint64, now int64) bool {
	for k := 1; k <= r.n; k++ {
		i := (r.pos - k + len(r.ids)) % len(r.ids)
		if r.ids[i] == obj && now-r.at[i] < lostObjectAge {
			return true
		}
	}
	return false
}

// add remembers obj from now (monoclock ns).
func (r *recentObjects) add(obj uint64, now int64) {
	if r.ids == nil {
		r.ids, r.at = make([]uint64, r.size), make([]int64, r.size)
	}
	r.ids[r.pos], r.at[r.pos] = obj, now
	r.pos = (r.pos + 1) % len(r.ids)
	r.n = min(r.n+1, len(r.ids))
}

// bandFIFO is one priority band's frames, oldest first: a circular buffer
// of the queue's capacity. (The queue's doorbell is rung with ring.)
type bandFIFO struct {
	buf     []frame
	head, n int
}

// grow moves the ring's frames, oldest first, into a new buffer of n
// frames (n > r.n).
func (r *bandFIFO) grow(n int) {
	buf := make([]frame, n)
	for i := range r.n {
		buf[i] = r.buf[(r.head+i)%len(r.buf)]
	}
	r.buf, r.head = buf, 0
}

func (r *bandFIFO) pushBack(f frame) {
	r.buf[(r.head+r.n)%len(r.buf)] = f
	r.n++
}

func (r *bandFIFO) pushFront(f frame) {
	r.head = (r.head - 1 + len(r.buf)) % len(r.buf)
	r.buf[r.head] = f
	r.n++
}

// head0 returns the oldest frame; r must not be empty.
func (r *bandFIFO) head0() *frame { return &r.buf[r.head] }

// popBack removes and returns the newest frame; r must not be empty.
func (r *bandFIFO) popBack() frame {
	r.n--
	i := (r.head + r.n) % len(r.buf)
	f := r.buf[i]
	r.buf[i] = frame{}
	return f
}

func (r *bandFIFO) popFront() frame {
	f := r.buf[r.head]
	r.buf[r.head] = frame{}
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	return f
}

// newSendQueue returns a queue of capacity frames whose frames expire
// maxAge after they were pushed. onLen is told the depth after each change;
// drops counts what the queue drops (nil: counters of its own).
func newSendQueue(capacity int, maxAge time.Duration, onLen func(packets, bytes int), drops *dropCounters) *sendQueue {
	if drops == nil {
		drops = new(dropCounters)
	}
	q := &sendQueue{maxAge: int64(maxAge), cap: capacity, limit: capacity,
		ceil: max(capacity, min(capacity*queueGrowMax, queueGrowCeil)), bell: make(chan struct{}, 1), onLen: onLen, drops: drops,
		lost: newRecentObjects(lostObjects), seen: newRecentObjects(seenObjects)}
	return q // each band's ring is allocated on its first push
}

// push queues f in its priority band. When the queue is full it first
// drops one frame: the oldest of the lowest non-empty band at or below f's,
// or f itself if every queued frame outranks it; queued is false then.
func (q *sendQueue) push(f frame) (queued bool) {
	band := bandOf(f.prio)
	q.mu.Lock()
	if q.n >= q.limit {
		victim := -1
		for b := 0; b <= band; b++ {
			if q.bands[b].n > 0 {
				victim = b
				break
			}
		}
		q.drops.add(DropQueueFull)
		// Keyframes are dropped last: a non-key frame goes instead of the
		// keyframe packet at the head of the victim band.
		if victim >= 0 && !f.isKey && q.bands[victim].head0().isKey {
			victim = -1
		}
		if victim < 0 {
			q.lostLocked(&f, f.enqueued)
			q.mu.Unlock()
			putBuf(f.buf)
			return false
		}
		old := q.bands[victim].popFront()
		q.n--
		q.bytes -= old.end - old.off
		q.lostLocked(&old, f.enqueued)
		putBuf(old.buf)
	}
	q.makeRoom(&q.bands[band])
	q.bands[band].pushBack(f)
	q.n++
	q.bytes += f.end - f.off
	n, b := q.n, q.bytes
	q.mu.Unlock()
	q.onLen(n, b)
	q.added()
	return true
}

// makeRoom makes ring r (a band's, or the parked frames') able to take
// one more frame: allocated at the queue's configured capacity on its
// first frame, and doubled (up to ceil) when a queue grown above that
// capacity (resize) fills it. q.mu is held.
func (q *sendQueue) makeRoom(r *bandFIFO) {
	switch {
	case r.buf == nil:
		r.buf = make([]frame, q.cap) // once per ring, until shrinkLocked
	case r.n == len(r.buf):
		r.grow(max(r.n+1, min(2*len(r.buf), q.ceil))) // a ring never holds more than ceil: limit ≤ ceil
	}
}

// shrinkLocked lets go of the rings grown above the configured capacity
// once the queue is empty, parked frames included: the next frame
// allocates one of that capacity again. A path's burst does not keep a
// concentrator's memory for the bond's life. q.mu is held.
func (q *sendQueue) shrinkLocked() {
	if q.n != 0 || q.parked.n != 0 {
		return
	}
	for b := range q.bands {
		if len(q.bands[b].buf) > q.cap {
			q.bands[b] = bandFIFO{}
		}
	}
	if len(q.parked.buf) > q.cap {
		q.parked = bandFIFO{}
	}
}

// resize sizes the queue for a path sending at rate bytes/s with
// datagrams of up to size bytes: room for maxAge at that rate, no less
// than the configured capacity and no more than ceil (+Inf: ceil). A
// bound in packets alone is a tighter delay bound on a fast path than
// max_queue_delay: 256 full-size datagrams are 90 ms at 30 Mbit/s, 27
// ms at 100, and a fast path whose rate dipped for a moment dropped
// datagrams from a full queue that would have left in time
// (steady-udp-90 of bondd bench capacity: 142–891 a run). It returns
// the new capacity, frames. A capacity below the frames queued drops
// none of them: a push then takes the place of one, and the queue comes
// back within it as frames leave.
func (q *sendQueue) resize(rate float64, size int) int {
	lim := q.cap
	if q.maxAge > 0 && size > 0 && rate > 0 { // NaN too is not above 0
		lim = int(min(float64(q.ceil), max(float64(q.cap), rate*float64(q.maxAge)/1e9/float64(size))))
	}
	q.mu.Lock()
	q.limit = lim
	q.mu.Unlock()
	return lim
}

// requeue puts f at the head of its band: a frame popped from this queue and not sent, or a datagram lost
// and sent again (resend.go), both older than what waits behind them. When
// the queue is full, f is dropped and counted as queue_full.
func (q *sendQueue) requeue(f frame) {
	q.mu.Lock()
	if q.n >= q.limit {
		q.drops.add(DropQueueFull)
		q.countObjLocked(&f, monoclock.Now())
		q.mu.Unlock()
		putBuf(f.buf)
		return
	}
	band := bandOf(f.prio)
	q.makeRoom(&q.bands[band]) // a retransmission from another path may be the band's first
	q.bands[band].pushFront(f)
	q.n++
	q.bytes += f.end - f.off
	n, b := q.n, q.bytes
	q.mu.Unlock()
	q.onLen(n, b)
	q.added()
}

// queued returns the frames queued and parked.
func (q *sendQueue) queued() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n + q.parked.n
}

// halfFull reports whether more than half of the queue's capacity now
// (limit) is taken, parked frames included.
func (q *sendQueue) halfFull() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n+q.parked.n > q.limit/2
}

// ringIfQueued rings the doorbell when frames are waiting.
func (q *sendQueue) ringIfQueued() {
	q.mu.Lock()
	n := q.n
	q.mu.Unlock()
	if n > 0 {
		q.ring()
	}
}

// added rings the doorbell after frames were added, and kicks the path's
// send routine.
func (q *sendQueue) added() {
	q.ring()
	if q.kick != nil {
		q.kick()
	}
}

// ring rings the doorbell without blocking.
func (q *sendQueue) ring() {
	select {
	case q.bell <- struct{}{}:
	default:
	}
}

// pop removes and returns the next frame to send at now (monoclock ns): the
// oldest of the highest non-empty band that is not past its deadline,
// dropping expired ones on the way. ok is false if the queue is empty.
// more reports whether frames remain after it.
func (q *sendQueue) pop(now int64) (f frame, ok, more bool) {
	q.mu.Lock()
	for b := queueBands - 1; b >= 0 && !ok; b-- {
		r := &q.bands[b]
		for r.n > 0 {
			f = r.popFront()
			q.n--
			q.bytes -= f.end - f.off
			if reason, dead := q.expired(&f, now); dead {
				q.lostLocked(&f, now)
				putBuf(f.buf)
				q.drops.add(reason)
				continue
			}
			if q.partLostLocked(&f, now) { // the rest of a frame already partly lost
				putBuf(f.buf)
				q.drops.add(DropObjectLost)
				continue
			}
			ok = true
			break
		}
	}
	q.shrinkLocked()
	n, by := q.n, q.bytes
	q.mu.Unlock()
	q.onLen(n, by)
	return f, ok, n > 0
}

// lostLocked records f, being dropped at now (monoclock ns), against its
// object: counts the object (countObjLocked) and remembers it, so that
// the rest of it is dropped too: a frame missing a packet is not
// decodable, and its other packets only delay the frames behind it.
// Keyframes are not remembered: a keyframe's packets are the last dropped
// (a lost keyframe costs its GOP, MoMQ finding F5), and the receiver's FEC
// may still rebuild the missing one.
func (q *sendQueue) lostLocked(f *frame, now int64) {
	q.countObjLocked(f, now)
	if !f.hasObj || f.isKey || q.lost.has(f.obj, now) {
		return
	}
	q.lost.add(f.obj, now)
}

// countObjLocked counts f, being dropped, against its object (video
// frame): objDrops counts the objects that lost at least one packet in
// this queue, each once while it is among the last seenObjects counted
// within lostObjectAge of now (monoclock ns). A frame without an object is not
// counted.
func (q *sendQueue) countObjLocked(f *frame, now int64) {
	if !f.hasObj || q.seen.has(f.obj, now) {
		return
	}
	q.seen.add(f.obj, now)
	q.objDrops++
}

// objectsDropped returns how many objects (video frames) lost at least
// one packet in this queue (countObjLocked).
func (q *sendQueue) objectsDropped() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.objDrops
}

// partLostLocked reports whether f belongs to a non-key object that lost a
// packet in this queue less than lostObjectAge before now (monoclock ns).
func (q *sendQueue) partLostLocked(f *frame, now int64) bool {
	return f.hasObj && !f.isKey && q.lost.has(f.obj, now)
}

// popAged removes and returns the first frame at the head of a band,
// highest band first, that may move (frame.movable), has waited at least
// half of its time (from enqueued to its deadline) at now, monoclock ns, and
// that accept, called under the queue's lock with the frame and its
// deadline, takes. ok is false when no band's head is such a frame.
// Nothing leaves the queue unless accept took it.
func (q *sendQueue) popAged(now int64, accept func(f *frame, deadline int64) bool) (f frame, ok bool) {
	q.mu.Lock()
	for b := queueBands - 1; b >= 0; b-- {
		r := &q.bands[b]
		if r.n == 0 {
			continue
		}
		h := r.head0()
		if !h.movable {
			continue
		}
		d := q.deadline(h)
		if d == math.MaxInt64 || 2*(now-h.enqueued) < d-h.enqueued || !accept(h, d) {
			continue
		}
		f, ok = r.popFront(), true
		q.n--
		q.bytes -= f.end - f.off
		q.shrinkLocked()
		break
	}
	n, by := q.n, q.bytes
	q.mu.Unlock()
	if ok {
		q.onLen(n, by)
	}
	return f, ok
}

// expired reports whether f is past its deadline at now (monoclock ns), and
// which drop reason applies.
func (q *sendQueue) expired(f *frame, now int64) (reason DropReason, dead bool) {
	reason = DropExpired
	if f.ruled {
		reason = DropDeadline
	}
	return reason, now > q.deadline(f)
}

// deadline returns when f expires (expired), monoclock ns; math.MaxInt64:
// never.
func (q *sendQueue) deadline(f *frame) int64 {
	switch {
	case f.expires != 0:
		return f.expires
	case q.maxAge > 0:
		return f.enqueued + q.maxAge
	}
	return math.MaxInt64
}

// park sets f, popped from this queue, aside until unpark: a frame the
// path cannot carry now but may carry again soon (the path's datagram
// budget cut on a mere suspicion, pmtu.go). Parked frames do not hold up
// the frames behind them. At most the queue's capacity is parked: beyond
// it the oldest parked frame is dropped (DropQueueFull).
func (q *sendQueue) park(f frame) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.parked.n >= q.limit {
		old := q.parked.popFront()
		q.drops.add(DropQueueFull)
		q.lostLocked(&old, monoclock.Now()) // f.enqueued is when f was first queued, not now
		putBuf(old.buf)
	}
	q.makeRoom(&q.parked)
	q.parked.pushBack(f)
	if d := q.deadline(&f); q.parked.n == 1 || d < q.parkedDue {
		q.parkedDue = d
	}
}

// takeParked removes the parked frames and returns them, oldest first
// (nil when none), for a caller that moves them to another path.
func (q *sendQueue) takeParked() []frame {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.parked.n == 0 {
		return nil
	}
	fs := make([]frame, 0, q.parked.n)
	for q.parked.n > 0 {
		fs = append(fs, q.parked.popFront())
	}
	q.shrinkLocked()
	return fs
}

// parkedExpired reports whether a parked frame's deadline is past at now
// (monoclock ns): unpark then lets pop drop it.
func (q *sendQueue) parkedExpired(now int64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.parked.n > 0 && now > q.parkedDue
}

// unpark puts the parked frames back at the heads of their bands, in the
// order they were popped, and returns how many. Pop then sends them,
// drops those past their deadline, or hands them back for parking. When
// the queue is full the rest are dropped (DropQueueFull).
func (q *sendQueue) unpark() int {
	q.mu.Lock()
	k := q.parked.n
	if k == 0 {
		q.mu.Unlock()
		return 0
	}
	now := monoclock.Now()
	for q.parked.n > 0 { // newest first: the oldest ends at the head
		f := q.parked.popBack()
		if q.n >= q.limit {
			q.drops.add(DropQueueFull)
			q.lostLocked(&f, now)
			putBuf(f.buf)
			continue
		}
		band := bandOf(f.prio)
		q.makeRoom(&q.bands[band]) // parked without having been queued here, the band may have no ring yet
		q.bands[band].pushFront(f)
		q.n++
		q.bytes += f.end - f.off
	}
	n, b := q.n, q.bytes
	q.mu.Unlock()
	q.onLen(n, b)
	q.added()
	return k
}

// wait blocks until a push rings the doorbell or done is closed; it reports
// false when done is closed.
func (q *sendQueue) wait(done <-chan struct{}) bool {
	select {
	case <-q.bell:
		return true
	case <-done:
		return false
	}
}

// drain drops every queued and parked frame, counting them as expired.
func (q *sendQueue) drain() {
	q.mu.Lock()
	now := monoclock.Now()
	for q.parked.n > 0 {
		f := q.parked.popFront()
		q.countObjLocked(&f, now)
		putBuf(f.buf)
		q.drops.add(DropExpired)
	}
	for b := range q.bands {
		for q.bands[b].n > 0 {
			f := q.bands[b].popFront()
			q.countObjLocked(&f, now)
			putBuf(f.buf)
			q.drops.add(DropExpired)
		}
	}
	q.n, q.bytes = 0, 0
	q.shrinkLocked()
	q.mu.Unlock()
	q.onLen(0, 0)
}
