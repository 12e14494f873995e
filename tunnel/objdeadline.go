package tunnel

import "time"

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
