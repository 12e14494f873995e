package tunnel

import (
	"fmt"
	"math"
	"testing"
	"time"
)

func TestSendQueue(t *testing.T) {
	var depth int
	q := newSendQueue(3, 100*time.Millisecond, func(n, _ int) { depth = n }, nil)
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
	if d := q.drops.get(DropQueueFull); d != 2 {
		t.Fatalf("dropped %d when full, want 2 (oldest first)", d)
	}
	f, ok, more := q.pop(int64(10 * time.Millisecond))
	if !ok || !more || f.bytes()[0] != 2 {
		t.Fatalf("pop = %v %v %v, want frame 2 with more", ok, more, f.buf[0])
	}
	// Frame 3 was queued at 3 ms, frame 4 at 4 ms: at 103.5 ms frame 3 is expired.
	f, ok, more = q.pop(int64(103500 * time.Microsecond))
	if !ok || more || f.bytes()[0] != 4 {
		t.Fatalf("pop after expiry = %v %v, want frame 4, last", ok, more)
	}
	if d := q.drops.get(DropExpired); d != 1 {
		t.Fatalf("expired %d, want 1", d)
	}
	if _, ok, _ := q.pop(0); ok || depth != 0 {
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

// TestSendQueuePriority checks the order frames leave a queue in, and which
// frame a full queue drops, for frames of different priorities.
func TestSendQueuePriority(t *testing.T) {
	type in struct {
		id      byte
		prio    uint8
		expires int64 // ms, 0: none
	}
	cases := []struct {
		name     string
		capacity int
		push     []in
		popAt    int64  // ms
		want     []byte // ids in pop order
		drops    DropCounts
	}{
		{name: "higher band first, FIFO within a band", capacity: 8,
			push: []in{{1, 0, 0}, {2, 200, 0}, {3, 0, 0}, {4, 70, 0}, {5, 255, 0}},
			want: []byte{2, 5, 4, 1, 3}},
		{name: "same band keeps arrival order", capacity: 8,
			push: []in{{1, 10, 0}, {2, 60, 0}, {3, 0, 0}},
			want: []byte{1, 2, 3}},
		{name: "full: the oldest of the lowest band goes", capacity: 3,
			push: []in{{1, 255, 0}, {2, 0, 0}, {3, 0, 0}, {4, 128, 0}},
			want: []byte{1, 4, 3}, drops: DropCounts{DropQueueFull: 1}},
		{name: "full of higher priority: the newcomer goes", capacity: 2,
			push: []in{{1, 200, 0}, {2, 200, 0}, {3, 0, 0}},
			want: []byte{1, 2}, drops: DropCounts{DropQueueFull: 1}},
		{name: "own deadline counted apart from max age", capacity: 4,
			push:  []in{{1, 255, 5}, {2, 0, 0}, {3, 0, 50}},
			popAt: 20,
			want:  []byte{2, 3}, drops: DropCounts{DropDeadline: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := newSendQueue(c.capacity, time.Second, func(int, int) {}, nil)
			for _, p := range c.push {
				b := getBuf()
				b[0] = p.id
				q.push(frame{buf: b, end: 1, prio: p.prio, expires: p.expires * int64(time.Millisecond), ruled: p.expires != 0})
			}
			var got []byte
			for {
				f, ok, _ := q.pop(c.popAt * int64(time.Millisecond))
				if !ok {
					break
				}
				got = append(got, f.buf[0])
				putBuf(f.buf)
			}
			if string(got) != string(c.want) {
				t.Errorf("popped %v, want %v", got, c.want)
			}
			for _, r := range PathDropReasons {
				if got := q.drops.get(r); got != c.drops[r] {
					t.Errorf("%s drops %d, want %d", r, got, c.drops[r])
				}
			}
		})
	}
}

// TestSendQueuePopAged: popAged takes a band's head that may move and has
// waited half its time (max age 100 ms here, or its own deadline),
// highest band first, and nothing else.
func TestSendQueuePopAged(t *testing.T) {
	type in struct {
		id       byte
		prio     uint8
		enqueued int64 // ms
		expires  int64 // ms, 0: the queue's max age
		movable  bool
	}
	cases := []struct {
		name   string
		push   []in
		at     int64  // ms
		refuse bool   // accept takes nothing
		want   []byte // ids popAged returns, in order
	}{
		{name: "young frames stay", at: 49,
			push: []in{{1, 0, 0, 0, true}, {2, 0, 10, 0, true}}},
		{name: "half the max age: the head moves, the younger stays", at: 50,
			push: []in{{1, 0, 0, 0, true}, {2, 0, 10, 0, true}}, want: []byte{1}},
		{name: "own deadline: half of it", at: 20,
			push: []in{{1, 0, 0, 40, true}, {2, 0, 0, 0, true}}, want: []byte{1}},
		{name: "higher band first, then the lower band's head", at: 80,
			push: []in{{1, 0, 0, 0, true}, {2, 255, 5, 0, true}, {3, 0, 1, 0, true}}, want: []byte{2, 1, 3}},
		{name: "a head tied to its path holds its band", at: 90,
			push: []in{{1, 0, 0, 0, false}, {2, 0, 1, 0, true}, {3, 128, 2, 0, true}}, want: []byte{3}},
		{name: "nothing leaves that accept refuses", at: 90, refuse: true,
			push: []in{{1, 0, 0, 0, true}, {2, 255, 1, 0, true}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := newSendQueue(8, 100*time.Millisecond, func(int, int) {}, nil)
			for _, p := range c.push {
				b := getBuf()
				b[0] = p.id
				f := frame{buf: b, end: 1, prio: p.prio, enqueued: p.enqueued * int64(time.Millisecond), movable: p.movable}
				if p.expires != 0 {
					f.expires = p.expires * int64(time.Millisecond)
				}
				q.push(f)
			}
			var got []byte
			for {
				f, ok := q.popAged(c.at*int64(time.Millisecond), func(f *frame, deadline int64) bool {
					if want := q.deadline(f); deadline != want {
						t.Errorf("accept got deadline %d, want %d", deadline, want)
					}
					return !c.refuse
				})
				if !ok {
					break
				}
				got = append(got, f.buf[0])
				putBuf(f.buf)
			}
			if string(got) != string(c.want) {
				t.Errorf("popAged gave %v, want %v", got, c.want)
			}
			if q.n != len(c.push)-len(c.want) {
				t.Errorf("%d frames left, want %d", q.n, len(c.push)-len(c.want))
			}
		})
	}
}

func TestSendQueueAllocs(t *testing.T) {
	q := newSendQueue(64, time.Second, func(int, int) {}, nil)
	b := getBuf()
	q.push(frame{buf: b, end: 10, prio: 255}) // bands are allocated on first use
	q.pop(0)
	a := testing.AllocsPerRun(1000, func() {
		q.push(frame{buf: b, end: 10})
		q.push(frame{buf: b, end: 10, prio: 255})
		q.pop(0)
		q.pop(0)
	})
	if a != 0 {
		t.Fatalf("push+pop allocates %v", a)
	}
}

// TestSendQueueRequeue checks that a frame put back after a failed send
// leaves first again, and is dropped when the queue filled meanwhile.
func TestSendQueueRequeue(t *testing.T) {
	q := newSendQueue(2, time.Second, func(int, int) {}, nil)
	mk := func(id byte) frame {
		b := getBuf()
		b[0] = id
		return frame{buf: b, end: 1}
	}
	q.push(mk(1))
	q.push(mk(2))
	f, _, _ := q.pop(0)
	q.requeue(f)
	if f, _, _ := q.pop(0); f.buf[0] != 1 {
		t.Errorf("after requeue, popped frame %d first, want 1", f.buf[0])
	}
	q.push(mk(3)) // full again: 2, 3
	q.requeue(mk(4))
	if d := q.drops.get(DropQueueFull); d != 1 {
		t.Errorf("requeue into a full queue: %d full drops, want 1", d)
	}
}

// TestSendQueuePark checks that parked frames leave the bands until
// unpark, come back at the heads of their bands in the order they were
// popped, expire there as queued frames do, and are freed by drain.
func TestSendQueuePark(t *testing.T) {
	ms := int64(time.Millisecond)
	mk := func(id byte, prio uint8, at int64) frame {
		b := getBuf()
		b[0] = id
		return frame{buf: b, end: 1, prio: prio, enqueued: at}
	}
	ids := func(q *sendQueue, now int64) []byte {
		var out []byte
		for {
			f, ok, _ := q.pop(now)
			if !ok {
				return out
			}
			out = append(out, f.buf[0])
			putBuf(f.buf)
		}
	}
	cases := []struct {
		name     string
		park     int   // frames popped and parked, of 1 (prio 200), 2, 3, 4 (prio 0) in order
		unparkAt int64 // ms
		want     []byte
		expired  uint64
	}{
		{"none parked", 0, 10, []byte{1, 2, 3, 4}, 0},
		{"one parked, alone in its band", 1, 10, []byte{1, 2, 3, 4}, 0},
		// 2 goes back ahead of 3 and 4, still queued in its band.
		{"two parked, back at the heads of their bands", 2, 10, []byte{1, 2, 3, 4}, 0},
		{"three parked keep their order", 3, 10, []byte{1, 2, 3, 4}, 0},
		{"parked past their deadline are dropped", 2, 150, []byte{3, 4}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := newSendQueue(8, 100*time.Millisecond, func(int, int) {}, nil)
			q.push(mk(1, 200, 0))
			q.push(mk(2, 0, 0))
			q.push(mk(3, 0, 60*ms))
			q.push(mk(4, 0, 60*ms))
			for range c.park {
				f, _, _ := q.pop(0)
				q.park(f)
			}
			if got := q.parked.n; got != c.park {
				t.Fatalf("%d parked, want %d", got, c.park)
			}
			if exp := q.parkedExpired(c.unparkAt * ms); exp != (c.expired > 0) {
				t.Errorf("parkedExpired at %d ms = %v, want %v", c.unparkAt, exp, c.expired > 0)
			}
			if n := q.unpark(); n != c.park {
				t.Errorf("unpark returned %d, want %d", n, c.park)
			}
			if got := ids(q, c.unparkAt*ms); string(got) != string(c.want) {
				t.Errorf("popped %v, want %v", got, c.want)
			}
			if d := q.drops.get(DropExpired); d != c.expired {
				t.Errorf("%d expired, want %d", d, c.expired)
			}
		})
	}

	// A path's rescue takes its parked frames out to move them: a full
	// queue must not drop them, as unpark would.
	t.Run("takeParked from a full queue", func(t *testing.T) {
		q := newSendQueue(2, time.Second, func(int, int) {}, nil)
		q.push(mk(1, 0, 0))
		q.push(mk(2, 0, 0))
		for range 2 {
			f, _, _ := q.pop(0)
			q.park(f)
		}
		q.push(mk(3, 0, 0))
		q.push(mk(4, 0, 0))
		fs := q.takeParked()
		var got []byte
		for _, f := range fs {
			got = append(got, f.buf[0])
			putBuf(f.buf)
		}
		if string(got) != string([]byte{1, 2}) || q.parked.n != 0 || q.drops.get(DropQueueFull) != 0 {
			t.Errorf("took %v, %d left parked, %d queue_full; want [1 2], 0, 0", got, q.parked.n, q.drops.get(DropQueueFull))
		}
		if got := ids(q, 0); string(got) != string([]byte{3, 4}) {
			t.Errorf("queue then popped %v, want [3 4]", got)
		}
	})

	t.Run("drain frees parked frames", func(t *testing.T) {
		q := newSendQueue(4, time.Second, func(int, int) {}, nil)
		q.push(mk(1, 0, 0))
		f, _, _ := q.pop(0)
		q.park(f)
		q.drain()
		if q.parked.n != 0 || q.unpark() != 0 || q.drops.get(DropExpired) != 1 {
			t.Errorf("after drain: %d parked, %d expired; want 0 and 1", q.parked.n, q.drops.get(DropExpired))
		}
	})
	for _, c := range []struct {
		cap, park int
		want      []byte
	}{
		{2, 3, []byte{2, 3}},
		{3, 7, []byte{5, 6, 7}}, // the ring wraps twice
	} {
		t.Run(fmt.Sprintf("parking %d beyond capacity %d drops the oldest", c.park, c.cap), func(t *testing.T) {
			q := newSendQueue(c.cap, time.Second, func(int, int) {}, nil)
			for i := range byte(c.park) {
				q.park(mk(i+1, 0, 0))
			}
			q.unpark()
			drops := uint64(c.park - c.cap)
			if got := ids(q, 0); string(got) != string(c.want) || q.drops.get(DropQueueFull) != drops {
				t.Errorf("popped %v with %d full drops, want %v and %d", got, q.drops.get(DropQueueFull), c.want, drops)
			}
		})
	}
}

// TestSendQueueRate checks a queue sized by its path's rate (resize): the
// capacity it takes, that frames keep their order and their byte count
// while its rings grow (pushed, requeued or parked), that a capacity cut
// below the frames queued drops none of them until pushes come, and that
// an emptied queue lets its grown rings go.
func TestSendQueueRate(t *testing.T) {
	const capacity, maxAge = 4, 100 * time.Millisecond
	for _, c := range []struct {
		name     string
		capacity int
		rate     float64 // bytes/s
		size     int     // bytes
		want     int     // frames
	}{
		{"no rate", capacity, 0, 1000, capacity},
		{"slow: the configured capacity", capacity, 10_000, 1000, capacity},
		{"maxAge at the rate", capacity, 150_000, 1000, 15},
		{"at most queueGrowMax times", capacity, 1e9, 1000, capacity * queueGrowMax},
		{"a rate not found yet (Startup)", capacity, math.Inf(1), 1000, capacity * queueGrowMax},
		{"at most queueGrowCeil", 1024, math.Inf(1), 1000, queueGrowCeil},
		{"configured above queueGrowCeil: no growth", 2 * queueGrowCeil, math.Inf(1), 1000, 2 * queueGrowCeil},
		{"no size", capacity, 150_000, 0, capacity},
		{"negative rate", capacity, -1, 1000, capacity},
		{"NaN rate", capacity, math.NaN(), 1000, capacity},
	} {
		q := newSendQueue(c.capacity, maxAge, func(int, int) {}, nil)
		if got := q.resize(c.rate, c.size); got != c.want {
			t.Errorf("%s: capacity %d, want %d", c.name, got, c.want)
		}
	}

	mk := func(id byte, prio uint8) frame {
		b := getBuf()
		b[0] = id
		return frame{buf: b, end: 10, prio: prio}
	}
	var depth, bytes int
	q := newSendQueue(capacity, maxAge, func(n, b int) { depth, bytes = n, b }, nil)
	// Wrap the band's first ring before it grows: its head is not at 0.
	q.push(mk(100, 255))
	q.push(mk(101, 255))
	q.pop(0)
	q.pop(0)
	q.push(mk(1, 255))
	q.resize(1e9, 1000) // 64 frames
	for i := 2; i <= 16; i++ {
		if !q.push(mk(byte(i), 255)) {
			t.Fatalf("push %d into a grown queue refused", i)
		}
	}
	q.requeue(mk(0, 255)) // at the head of the full 16-frame ring: it grows again
	q.push(mk(200, 0))
	if d := q.drops.get(DropQueueFull); d != 0 {
		t.Fatalf("%d dropped below the grown capacity", d)
	}
	if depth != 18 || bytes != 180 {
		t.Fatalf("depth %d frames, %d bytes; want 18, 180", depth, bytes)
	}
	// Cut to the configured capacity with 18 queued: the next push drops
	// the oldest low frame, none of the high ones, and takes its place.
	q.resize(0, 1000)
	if !q.push(mk(17, 255)) {
		t.Fatal("push after the cut refused")
	}
	if d := q.drops.get(DropQueueFull); d != 1 {
		t.Fatalf("dropped %d at the cut, want 1", d)
	}
	for i := range 18 {
		f, ok, _ := q.pop(0)
		if !ok || f.bytes()[0] != byte(i) {
			t.Fatalf("pop %d: %v, want frame %d", i, ok, i)
		}
		putBuf(f.buf)
	}
	if _, ok, _ := q.pop(0); ok || depth != 0 || bytes != 0 {
		t.Fatalf("after the last frame: pop ok %v, depth %d, %d bytes; want an empty queue", ok, depth, bytes)
	}
	if n := len(q.bands[bandOf(255)].buf); n > capacity {
		t.Fatalf("the emptied queue keeps a ring of %d frames, want at most %d", n, capacity)
	}

	// Parked frames: as many as the grown capacity, in their order.
	q.resize(1e9, 1000)
	for i := range 20 {
		q.park(mk(byte(i), 0))
	}
	if d := q.drops.get(DropQueueFull); d != 1 {
		t.Fatalf("parking 20 below a capacity of 64 dropped %d", d-1)
	}
	fs := q.takeParked()
	if len(fs) != 20 {
		t.Fatalf("took %d parked frames back, want 20", len(fs))
	}
	for i, f := range fs {
		if f.bytes()[0] != byte(i) {
			t.Fatalf("parked frame %d is %d", i, f.bytes()[0])
		}
		putBuf(f.buf)
	}
	if n := len(q.parked.buf); n > capacity {
		t.Fatalf("the emptied parking keeps a ring of %d frames, want at most %d", n, capacity)
	}
}
