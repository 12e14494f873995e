package tunnel

import (
	"testing"
	"time"
)

func TestSendQueue(t *testing.T) {
	var depth int
	q := newSendQueue(3, 100*time.Millisecond, func(n, _ int) { depth = n })
	mk := func(id byte, at int64) frame {
		b := getBuf()
		b[0] = id
		return frame{buf: b, off: 0, end: 1, enqueued: at}
	}
	for i := range 5 {
		q.push(mk(byte(i), int64(i)*int64(time.Millisecond)))
	}
	if depth != 3 {
		t.Fatalf("depth %d, want 3", depth)
	}
	if full, _ := q.drops(); full != 2 {
		t.Fatalf("dropped %d when full, want 2 (oldest first)", full)
	}
	f, ok := q.pop(int64(10 * time.Millisecond))
	if !ok || f.bytes()[0] != 2 {
		t.Fatalf("pop = %v %v, want frame 2", ok, f.buf[0])
	}
	// Frame 3 was queued at 3 ms, frame 4 at 4 ms: at 103.5 ms frame 3 is expired.
	f, ok = q.pop(int64(103500 * time.Microsecond))
	if !ok || f.bytes()[0] != 4 {
		t.Fatalf("pop after expiry = %v, want frame 4", ok)
	}
	if _, exp := q.drops(); exp != 1 {
		t.Fatalf("expired %d, want 1", exp)
	}
	if _, ok := q.pop(0); ok || depth != 0 {
		t.Fatalf("pop on empty: ok=%v depth=%d", ok, depth)
	}
	// The doorbell never blocks and rings once for many pushes.
	done := make(chan struct{})
	if !q.wait(done) {
		t.Fatal("wait after pushes should return true")
	}
	close(done)
	if q.wait(done) {
		t.Fatal("wait after close should return false")
	}
}

func TestSendQueueAllocs(t *testing.T) {
	q := newSendQueue(64, time.Second, func(int, int) {})
	b := getBuf()
	a := testing.AllocsPerRun(1000, func() {
		q.push(frame{buf: b, end: 10})
		q.pop(0)
	})
	if a != 0 {
		t.Fatalf("push+pop allocates %v", a)
	}
}
