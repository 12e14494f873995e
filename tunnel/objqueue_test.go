package tunnel

import (
	"testing"
	"time"

	"github.com/bondd/bondd/policy"
)

// TestSendQueueObjects checks the object-aware drops of a path's send
// queue: the rest of a non-key frame that lost a packet is dropped, a
// keyframe's is not, and a full queue drops a non-key frame rather than a
// keyframe packet at the head.
func TestSendQueueObjects(t *testing.T) {
	const ms = int64(time.Millisecond)
	type pkt struct {
		id     byte
		obj    uint64
		key    bool
		at     int64 // enqueued, ms
		expire int64 // ms; 0: the queue's 100 ms
	}
	cases := []struct {
		name  string
		cap   int
		push  []pkt
		popAt int64 // ms
		want  []byte
		drops map[DropReason]uint64
		objs  uint64 // objects that lost a packet (objectsDropped)
	}{
		{"late P-frame dropped whole", 8, []pkt{{1, 7, false, 0, 5}, {2, 7, false, 0, 0}, {3, 8, false, 0, 0}, {4, 7, false, 0, 0}}, 10,
			[]byte{3}, map[DropReason]uint64{DropDeadline: 1, DropObjectLost: 2}, 1},
		{"late keyframe packet: the rest goes", 8, []pkt{{1, 7, true, 0, 5}, {2, 7, true, 0, 0}, {3, 8, false, 0, 0}}, 10,
			[]byte{2, 3}, map[DropReason]uint64{DropDeadline: 1}, 1},
		{"full: the new P-frame packet, not the keyframe", 2, []pkt{{1, 7, true, 0, 0}, {2, 7, true, 0, 0}, {3, 8, false, 0, 0}, {4, 8, false, 0, 0}}, 1,
			[]byte{1, 2}, map[DropReason]uint64{DropQueueFull: 2}, 1},
		{"full: a P-frame at the head goes, and its rest", 3, []pkt{{1, 8, false, 0, 0}, {2, 7, true, 0, 0}, {3, 8, false, 0, 0}, {4, 7, true, 0, 0}}, 1,
			[]byte{2, 4}, map[DropReason]uint64{DropQueueFull: 1, DropObjectLost: 1}, 1},
		{"no object: plain oldest-first", 2, []pkt{{1, 0, false, 0, 0}, {2, 0, false, 0, 0}, {3, 0, false, 0, 0}}, 1,
			[]byte{2, 3}, map[DropReason]uint64{DropQueueFull: 1}, 0},
		{"two frames each lose packets: counted once each", 8, []pkt{{1, 7, false, 0, 5}, {2, 7, false, 0, 5}, {3, 8, false, 0, 5}, {4, 8, false, 0, 0}, {5, 9, false, 0, 0}}, 10,
			[]byte{5}, map[DropReason]uint64{DropDeadline: 3, DropObjectLost: 1}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := newSendQueue(c.cap, 100*time.Millisecond, func(int, int) {}, nil)
			for _, p := range c.push {
				b := getBuf()
				b[0] = p.id
				f := frame{buf: b, end: 1, enqueued: p.at * ms, obj: p.obj, hasObj: p.obj != 0, isKey: p.key}
				if p.expire != 0 {
					f.expires, f.ruled = p.expire*ms, true
				}
				q.push(f)
			}
			var got []byte
			for {
				f, ok, _ := q.pop(c.popAt * ms)
				if !ok {
					break
				}
				got = append(got, f.buf[0])
				putBuf(f.buf)
			}
			if string(got) != string(c.want) {
				t.Errorf("sent %v, want %v", got, c.want)
			}
			for _, r := range PathDropReasons {
				if g := q.drops.get(r); g != c.drops[r] {
					t.Errorf("%s drops %d, want %d", r, g, c.drops[r])
				}
			}
			if g := q.objectsDropped(); g != c.objs {
				t.Errorf("objects that lost a packet: %d, want %d", g, c.objs)
			}
		})
	}
}

func TestObjTracker(t *testing.T) {
	var o objTracker
	steps := []struct {
		id   uint64
		n    int
		want int
	}{{1, 100, 100}, {2, 50, 50}, {1, 100, 200}, {2, 10, 60}}
	for _, s := range steps {
		if got := o.add(s.id, s.n); got != s.want {
			t.Fatalf("add(%d, %d) = %d, want %d", s.id, s.n, got, s.want)
		}
	}
	for i := range uint64(objTrackerSize) { // eight new frames push frame 1 out
		o.add(100+i, 1)
	}
	if got := o.add(1, 5); got != 5 {
		t.Fatalf("an evicted frame counts afresh: %d, want 5", got)
	}
	if a := testing.AllocsPerRun(100, func() { o.add(3, 1) }); a != 0 {
		t.Fatalf("add allocates %v", a)
	}
}

func TestPathRate(t *testing.T) {
	p := &policy.Path{}
	if r := pathRateBps(p); r != 0 {
		t.Fatalf("no RTT sample: rate %v, want 0", r)
	}
	p.OnMetrics(100*time.Millisecond, 100*time.Millisecond, 125000, 0)
	if r := pathRateBps(p); r != 10e6 {
		t.Fatalf("rate %v, want 10 Mbit/s (125 kB per 100 ms)", r)
	}
}

// TestSendQueueLostObjectLapses checks that a frame_id dropped long ago
// (past lostObjectAge) does not condemn a later frame with the same id.
func TestSendQueueLostObjectLapses(t *testing.T) {
	q := newSendQueue(4, 100*time.Millisecond, func(int, int) {}, nil)
	mk := func(at, expires time.Duration) frame {
		return frame{buf: getBuf(), end: 1, enqueued: int64(at), expires: int64(expires), ruled: expires != 0, obj: 7, hasObj: true}
	}
	q.push(mk(0, 5*time.Millisecond))
	if _, ok, _ := q.pop(int64(10 * time.Millisecond)); ok {
		t.Fatal("a frame past its deadline was sent")
	}
	for _, c := range []struct {
		at   time.Duration
		sent bool
	}{{20 * time.Millisecond, false}, {10*time.Millisecond + MaxObjectDeadline, true}} {
		q.push(mk(c.at, 0))
		f, ok, _ := q.pop(int64(c.at))
		if ok != c.sent {
			t.Fatalf("frame of the lost object at %v: sent %v, want %v", c.at, ok, c.sent)
		}
		if ok {
			putBuf(f.buf)
		}
	}
}
