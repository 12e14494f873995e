package tunnel

import (
	"time"

	"github.com/bondd/bondd/policy"
)

// Deadlines sized to the object.
// A video frame is sent as a burst of packets; a keyframe is hundreds of
// them. A fixed queue deadline drops the tail of a large frame that was
// merely long to serialize, and a lost keyframe costs its whole GOP, so a
// late keyframe is worth more than a lost one (MoMQ, finding F5). The
// deadline of a frame's packets therefore grows with the frame: long
// enough to send all of it at the path's rate, plus a margin.

// Object deadline defaults.
const (
	// DefaultObjectMargin is added to a frame's serialization time.
	DefaultObjectMargin = 50 * time.Millisecond
	// MaxObjectDeadline caps an object's deadline: past it a frame is too
	// late for any live receiver.
	MaxObjectDeadline = 2 * time.Second
)

// objectDeadline returns the send-queue deadline of a packet of a frame of
// frameBytes bytes (the whole frame, or as much of it as the sender has
// seen so far) going out on a path that sends rateBps bits per second:
// frameBytes·8/rateBps + margin, at least base (the rule's deadline_ms or
// the class default, 0 if none) and at most MaxObjectDeadline. With no
// rate estimate (rateBps ≤ 0) or no frame size it returns base. It is pure
// and does not allocate.
func objectDeadline(frameBytes int, rateBps float64, base, margin time.Duration) time.Duration {
	if frameBytes <= 0 || rateBps <= 0 {
		return base
	}
	ser := float64(frameBytes) * 8 / rateBps * float64(time.Second)
	if ser >= float64(MaxObjectDeadline) {
		return max(base, MaxObjectDeadline)
	}
	return max(base, min(time.Duration(ser)+margin, MaxObjectDeadline))
}

// objTrackerSize is how many frames (interleaved streams) objTracker
// follows at once.
const objTrackerSize = 8

// objTracker counts the bytes the sender has seen so far of each of the
// last objTrackerSize frames, by frame_id. Owned by the TUN reader; it
// never allocates.
type objTracker struct {
	ids   [objTrackerSize]uint64
	bytes [objTrackerSize]int
	used  [objTrackerSize]bool
	next  int // the entry a new frame takes
}

// add counts n more bytes of frame id and returns its bytes so far.
func (t *objTracker) add(id uint64, n int) int {
	for i := range t.ids {
		if t.used[i] && t.ids[i] == id {
			t.bytes[i] += n
			return t.bytes[i]
		}
	}
	i := t.next
	t.next = (t.next + 1) % objTrackerSize
	t.ids[i], t.bytes[i], t.used[i] = id, n, true
	return n
}

// pathRateBps is the send rate, bit/s, that sizes an object's deadline on
// path p: its congestion window per smoothed RTT, 0 before the first RTT
// sample. Hook: once policy.Path carries a per-path target rate (the rate
// controller's), use it here instead.
func pathRateBps(p *policy.Path) float64 {
	srtt := p.SmoothedRTT()
	if srtt <= 0 {
		return 0
	}
	return float64(p.CongestionWindow()) * 8 / srtt.Seconds()
}
