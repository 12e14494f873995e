package policy

import (
	"math"
	"time"

	"github.com/bondd/bondd/internal/monoclock"
)

// DefaultPacerBurst is the token bucket depth a [Pacer] uses when SetRate
// is given none: 10 full-size datagrams (RFC 9002 §7.7 suggests bursts of
// at most the initial window, 10 packets, before pacing).
const DefaultPacerBurst = 10 * 1252

// Pacer is a path's token bucket (RFC 2697's committed burst, as in the
// pacing of RFC 9002 §7.7): tokens, in bytes, accrue at the target rate up
// to a bounded depth, and a frame of n bytes may go when the bucket holds n
// (or, for a frame larger than the depth, when it is full). Time is an
// argument; nothing allocates. Not safe for concurrent use: the path's
// sender loop owns it.
//
// A sender loop:
//
//	for frame := range queue {
//		if d := p.Delay(now, n); d > 0 { wait d; now = clock() }
//		p.Consume(now, n); send(frame)
//	}
type Pacer struct {
	rate    float64 // bytes/s
	depth   float64 // bytes
	tokens  float64 // bytes, may go negative after an oversized frame
	last    int64   // monoclock ns of the last refill
	waiting bool    // the last Delay asked the frame to wait

	sent    uint64
	delayed uint64
}

// SetRate sets the fill rate (bytes/s; ≤ 0 stops the pacer from ever
// releasing) and the bucket depth (bytes; ≤ 0: DefaultPacerBurst). Tokens
// above the new depth are dropped. A new pacer starts with a full bucket
// at its first use.
func (p *Pacer) SetRate(now time.Time, rate float64, burst int) {
	if p.last != 0 {
		p.refill(now)
	}
	if burst <= 0 {
		burst = DefaultPacerBurst
	}
	if math.IsNaN(rate) || rate < 0 {
		rate = 0
	}
	p.rate, p.depth = rate, float64(burst)
	p.tokens = min(p.tokens, p.depth)
}

// Rate returns the fill rate, bytes/s.
func (p *Pacer) Rate() float64 { return p.rate }

func (p *Pacer) refill(now time.Time) {
	t := monoclock.Nanos(now)
	if p.last == 0 {
		p.last, p.tokens = t, p.depth
		return
	}
	if dt := t - p.last; dt > 0 {
		p.tokens = min(p.depth, p.tokens+p.rate*float64(dt)/1e9)
		p.last = t
	}
}

// Delay returns how long a frame of n bytes must wait from now before it
// may go: 0 when it may go now. It remembers that the frame waited, for
// the held-back counters of the next Consume. With a zero rate it returns
// a full second (the caller re-asks).
func (p *Pacer) Delay(now time.Time, n int) time.Duration {
	p.refill(now)
	need := min(float64(n), p.depth)
	if p.tokens >= need {
		return 0
	}
	p.waiting = true
	if p.rate <= 0 {
		return time.Second
	}
	d := time.Duration(math.Ceil((need - p.tokens) / p.rate * 1e9))
	return max(d, time.Nanosecond)
}

// Consume takes n bytes from the bucket for a frame sent at now. A frame
// that waited (Delay returned more than 0 since the previous Consume)
// counts in DelayedBytes.
func (p *Pacer) Consume(now time.Time, n int) {
	p.refill(now)
	p.tokens -= float64(n)
	p.sent += uint64(max(n, 0))
	if p.waiting {
		p.delayed += uint64(max(n, 0))
		p.waiting = false
	}
}

// SentBytes returns the bytes released so far.
func (p *Pacer) SentBytes() uint64 { return p.sent }

// DelayedBytes returns the bytes held back by pacing so far: the sizes of
// the frames that had to wait for tokens.
func (p *Pacer) DelayedBytes() uint64 { return p.delayed }

// Tokens returns the bucket's content at now, bytes (negative while an
// oversized frame is being paid off).
func (p *Pacer) Tokens(now time.Time) float64 {
	p.refill(now)
	return p.tokens
}
