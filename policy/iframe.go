package policy

import (
	"time"

	"github.com/bondd/bondd/internal/monoclock"
)

// The pending I-frame budget (MoMQ §4.1, rule R1 and eq. 1). An I-frame
// larger than the congestion window drains over k = ⌈S_I / cwnd⌉ rounds,
// and the last round has room the I-frame does not fill:
//
//	B = ⌈S_I / cwnd⌉ · cwnd − S_I bytes.
//
// P-frame packets sent into that slack cost the I-frame nothing, since it
// needs k rounds either way. While an I-frame is in flight on a path the
// tracker raises the pending_iframe annotation, so that a rule (R1) can
// give P-frames priority over the I-frame's queued packets, and it admits
// P-frame bytes into the slack until B is spent. MoMQ: "a zero budget
// admits nothing, so the mechanism cannot make things worse". bondd does
// the same: once a path's slack is spent the annotation is absent for
// P-frame packets, R1 no longer matches, and they wait behind the I-frame
// on their path (they are not moved to another path: R3 keeps a frame's
// packets together and R4 keeps bulk traffic on the free path).
//
// Approximations, since bondd sees datagrams queued rather than QUIC's
// per-round accounting:
//
//   - cwnd is the path's congestion window as quic-go reports it, not
//     MoMQ's conservative LeoCC estimate (bandwidth × min RTT); an
//     overestimate admits a little more than the true slack;
//   - S_I is the bytes of the I-frame queued on the path so far, so B
//     follows the frame as its packets arrive (they arrive within a few
//     milliseconds, before the next frame's P-frames);
//   - "in flight" means: since the I-frame's last packet was queued, less
//     than the time to drain the bytes queued ahead of it (queued bytes ×
//     sRTT / cwnd) plus k smoothed RTTs has passed; nothing is learnt from
//     acknowledgements;
//   - one I-frame per path is tracked: a new frame id starts over.
//
// The tracker's state lives in Path but, unlike the rest of Path, it is
// owned by the one goroutine that picks paths and queues packets.

// iframeState is one path's pending I-frame.
type iframeState struct {
	id    uint64 // frame id of the tracked I-frame
	size  int64  // S_I: its bytes queued on the path, bytes
	used  int64  // P-frame bytes admitted into its slack
	until int64  // monoclock ns: in flight until then
}

// iframeInitialRTT stands in for the smoothed RTT before the first sample:
// RFC 9002 §6.2.2's kInitialRtt.
const iframeInitialRTT = 333 * time.Millisecond

// OnIFramePacket records that n bytes of the I-frame (keyframe) with frame
// id id were queued on the path at now: S_I grows, or a new I-frame starts
// when id differs from the tracked one or the tracked one is no longer in
// flight. Not safe for concurrent use (see the package's tracker notes);
// allocation-free.
func (p *Path) OnIFramePacket(id uint64, n int, now time.Time) {
	f := &p.iframe
	t := monoclock.Nanos(now)
	if f.until <= t || f.id != id {
		*f = iframeState{id: id}
	}
	f.size += int64(n)
	srtt := int64(p.SmoothedRTT())
	if srtt <= 0 {
		srtt = int64(iframeInitialRTT)
	}
	cwnd := int64(p.CongestionWindow())
	rounds, drain := int64(1), int64(0)
	if cwnd > 0 {
		rounds = (f.size + cwnd - 1) / cwnd
		drain = int64(float64(p.QueueBytes()) * float64(srtt) / float64(cwnd))
	}
	f.until = t + drain + rounds*srtt
}

// IFramePending reports whether an I-frame is in flight on the path at now
// (see OnIFramePacket for what "in flight" approximates).
func (p *Path) IFramePending(now time.Time) bool { return p.iframe.until > monoclock.Nanos(now) }

// IFrameSlack returns the pending I-frame's slack budget B of MoMQ eq. 1 in
// bytes, ⌈S_I / cwnd⌉ · cwnd − S_I with the path's current congestion
// window (0 when cwnd is unknown), and the P-frame bytes admitted into it
// so far. Both are 0 when no I-frame is pending.
func (p *Path) IFrameSlack(now time.Time) (budget, used int64) {
	if !p.IFramePending(now) {
		return 0, 0
	}
	return slack(p.iframe.size, int64(p.CongestionWindow())), p.iframe.used
}

// slack is MoMQ eq. 1: B = ⌈s / cwnd⌉ · cwnd − s, or 0 without a window.
func slack(s, cwnd int64) int64 {
	if cwnd <= 0 || s <= 0 {
		return 0
	}
	return (s+cwnd-1)/cwnd*cwnd - s
}

// hasSlack reports whether an I-frame is pending on the path and its slack
// has room for n more bytes.
func (p *Path) hasSlack(n int, now time.Time) bool {
	b, used := p.IFrameSlack(now)
	return used+int64(n) <= b && b > 0
}

// AdmitPFrame admits n bytes of a P-frame packet queued on the path at now
// into the pending I-frame's slack and reports whether it did: true while
// an I-frame is pending and the admitted bytes stay within B; false (and
// nothing is counted) otherwise. Not safe for concurrent use.
func (p *Path) AdmitPFrame(n int, now time.Time) bool {
	if !p.hasSlack(n, now) {
		return false
	}
	p.iframe.used += int64(n)
	return true
}

// PendingIFrame returns the pending_iframe annotation for a packet of n
// bytes about to be scheduled at now: true when some connected path has an
// I-frame in flight whose slack still has room for the packet. Like
// leo_state (see LEOState) it is bond-wide, because rules are evaluated
// before a path is chosen; the caller then charges a P-frame packet to the
// path it goes on with AdmitPFrame. Not safe for concurrent use with
// OnIFramePacket or AdmitPFrame.
func PendingIFrame(paths []*Path, now time.Time, n int) bool {
	for _, p := range paths {
		if p.hasSlack(n, now) && p.LinkStatus(now) != StatusUnavailable {
			return true
		}
	}
	return false
}
