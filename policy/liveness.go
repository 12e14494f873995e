package policy

import (
	"time"

	"github.com/bondd/bondd/internal/monoclock"
)

// Liveness: a path turns SUSPECT when bondd has been sending on it and the
// peer has been silent for longer than the suspect bound, max(SuspectRTTs ×
// smoothed RTT, SuspectMin). Every ack-eliciting QUIC packet (RFC 9000
// §13.2.1: a DATAGRAM frame, a PING, stream data) makes the peer answer
// within about one RTT plus its max_ack_delay (25 ms), so that much silence
// after a send means the path lost packets in at least one direction
// (RFC 9002 §6.2 bases its probe timeout on the same reasoning: srtt +
// 4·rttvar + max_ack_delay). A SUSPECT path reports DEGRADED (reason
// ReasonSuspect): default choices and the rules stop choosing it at once
// when another path is ACTIVE (directives are advice, see [Select]); it is
// ACTIVE again as soon as the peer is heard. An idle path (nothing sent
// since the peer was last heard) never turns SUSPECT: its keepalives are
// sends too, so a dead idle path turns SUSPECT one bound after a keepalive.

// Liveness defaults (see [Liveness]).
const (
	DefaultSuspectRTTs = 3
	DefaultSuspectMin  = 100 * time.Millisecond
)

// Liveness configures when a path turns SUSPECT. The zero value takes the
// defaults.
type Liveness struct {
	// SuspectRTTs is the silence, in smoothed RTTs, after a send that makes
	// the path SUSPECT; 0: DefaultSuspectRTTs.
	SuspectRTTs float64
	// SuspectMin is the shortest such silence; 0: DefaultSuspectMin.
	SuspectMin time.Duration
}

// SetLiveness sets the path's liveness bounds (the zero value: the
// defaults). Safe for concurrent use.
func (p *Path) SetLiveness(l Liveness) {
	if l.SuspectRTTs <= 0 {
		l.SuspectRTTs = DefaultSuspectRTTs
	}
	if l.SuspectMin <= 0 {
		l.SuspectMin = DefaultSuspectMin
	}
	p.suspectRTTs.Store(int64(l.SuspectRTTs * 1000))
	p.suspectMin.Store(int64(l.SuspectMin))
}

// SuspectAfter returns the silence after a send that makes the path
// SUSPECT now: max(SuspectRTTs × smoothed RTT, SuspectMin).
func (p *Path) SuspectAfter() time.Duration {
	rtts, floor := p.suspectRTTs.Load(), p.suspectMin.Load()
	if rtts == 0 {
		rtts, floor = DefaultSuspectRTTs*1000, int64(DefaultSuspectMin)
	}
	return time.Duration(max(p.srtt.Load()*rtts/1000, floor))
}

// OnAckEliciting records that an ack-eliciting QUIC packet left on the
// path at now: the peer owes an answer. Only the first send after the
// peer was last heard is kept. Allocation-free; safe for concurrent use.
func (p *Path) OnAckEliciting(now time.Time) {
	if p.unanswered.Load() == 0 {
		p.unanswered.CompareAndSwap(0, monoclock.Nanos(now))
	}
}

// Suspect reports whether, at now, the peer has been silent for longer
// than SuspectAfter since the first send it has not answered, and for how
// long it has been silent since that send (0 when nothing is unanswered).
func (p *Path) Suspect(now time.Time) (suspect bool, silent time.Duration) {
	since := p.unanswered.Load()
	if since == 0 {
		return false, 0
	}
	silent = time.Duration(monoclock.Nanos(now) - since)
	return silent > p.SuspectAfter(), silent
}
