package tunnel

import (
	"sync"
	"time"
)

// frame is one datagram waiting to be sent: buf[off:end] is the bondd header
// followed by the inner packet. The frame owns buf until it is sent or
// dropped, then returns it to the pool.
type frame struct {
	buf      *packetBuf
	off, end int
	enqueued int64 // unix ns
	expires  int64 // unix ns after which the frame is dropped; 0: enqueued + the queue's maxAge
}

func (f *frame) bytes() []byte { return f.buf[f.off:f.end] }

// expired reports whether the frame is past its deadline at now (unix ns):
// its own, or maxAge (ns, 0: none) after it was queued.
func (f *frame) expired(now, maxAge int64) bool {
	if f.expires != 0 {
		return now > f.expires
	}
	return maxAge > 0 && now-f.enqueued > maxAge
}

// sendQueue is a path's bounded FIFO in front of quic-go's SendDatagram
// (which blocks once 32 datagrams are queued inside quic-go). Push never
// blocks: when the queue is full it drops the oldest frame and counts it.
// Pop blocks until a frame is available or done is closed. Frames past their
// deadline (their own, from a rule's deadline_ms, or maxAge) when popped are
// dropped and counted. Safe for concurrent use by one
// pusher per bond and one popper.
type sendQueue struct {
	maxAge int64                    // ns
	bell   chan struct{}            // doorbell, capacity 1: never blocks the pusher
	onLen  func(packets, bytes int) // reports the depth after each change

	mu      sync.Mutex // guards all following
	ring    []frame
	head, n int
	bytes   int // sum of the queued frames' lengths
	dropped struct{ full, expired uint64 }
}

func newSendQueue(capacity int, maxAge time.Duration, onLen func(packets, bytes int)) *sendQueue {
	return &sendQueue{
		maxAge: int64(maxAge),
		bell:   make(chan struct{}, 1),
		onLen:  onLen,
		ring:   make([]frame, capacity),
	}
}

// push appends f, dropping the oldest frame when full.
func (q *sendQueue) push(f frame) {
	q.mu.Lock()
	if q.n == len(q.ring) {
		old := &q.ring[q.head]
		q.bytes -= old.end - old.off
		putBuf(old.buf)
		*old = frame{}
		q.head = (q.head + 1) % len(q.ring)
		q.n--
		q.dropped.full++
	}
	q.ring[(q.head+q.n)%len(q.ring)] = f
	q.n++
	q.bytes += f.end - f.off
	n, b := q.n, q.bytes
	q.mu.Unlock()
	q.onLen(n, b)
	select {
	case q.bell <- struct{}{}:
	default:
	}
}

// pop removes and returns the oldest frame that is not older than maxAge at
// now, dropping expired ones. ok is false if the queue is empty.
func (q *sendQueue) pop(now int64) (f frame, ok bool) {
	q.mu.Lock()
	for q.n > 0 {
		f = q.ring[q.head]
		q.ring[q.head] = frame{}
		q.head = (q.head + 1) % len(q.ring)
		q.n--
		q.bytes -= f.end - f.off
		if f.expired(now, q.maxAge) {
			putBuf(f.buf)
			q.dropped.expired++
			continue
		}
		ok = true
		break
	}
	n, b := q.n, q.bytes
	q.mu.Unlock()
	q.onLen(n, b)
	return f, ok
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

// drain drops every queued frame, counting them as expired.
func (q *sendQueue) drain() {
	q.mu.Lock()
	for q.n > 0 {
		putBuf(q.ring[q.head].buf)
		q.ring[q.head] = frame{}
		q.head = (q.head + 1) % len(q.ring)
		q.n--
		q.dropped.expired++
	}
	q.bytes = 0
	q.mu.Unlock()
	q.onLen(0, 0)
}

// drops returns the frames dropped because the queue was full and because
// they expired.
func (q *sendQueue) drops() (full, expired uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dropped.full, q.dropped.expired
}
