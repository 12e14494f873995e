package policy

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/bondd/bondd/internal/monoclock"
)

// Rate-controlled paths.
//
// When bondd decides a path's rate (the tunnel's rate control: a
// [RateEstimator] per path fed by the receiver's [RateReport]s, and a
// [Pacer]), the scheduler's view of the path changes with it:
//
//   - [Path.HasWindow] is true while the path's pacer would release its
//     queue within RateRoomTime at the target rate, instead of comparing
//     queued and in-flight bytes with quic-go's congestion window;
//   - [Path.ExpectedDelivery] is [DeliveryEstimate]: queued bytes / target
//     rate + one-way delay + the receiver-seen loss weighted by
//     DefaultLossPenalty, instead of cwnd/sRTT;
//   - the pickers rank paths by that expected delivery rather than by the
//     smoothed RTT alone (pickLess), so a lossy path with the lowest RTT is
//     not chosen while a cleaner path has room;
//   - a path whose receiver-seen loss is at least LossDegraded is
//     DEGRADED with reason ReasonLoss until it falls below LossRecovered.
//
// A path without rate control (RateControl false, the "quic" setting)
// keeps the congestion-window view, but the receiver-seen loss acts there
// too ([Path.OnReceiverLoss]): QUIC's loss events understate a lossy
// link's loss (12–28 % reported for 50 % real, measured when a path ran
// several connections), and a path with the lowest RTT that loses half of
// what it is sent must not be the first choice of every low-rate packet.
// So in both views it makes the path DEGRADED (ReasonLoss) and is charged
// in its expected delivery.

// Constants of the rate-controlled view.
const (
	// RateRoomTime is how much queue, in time at the target rate, a
	// rate-controlled path may hold and still count as having room: about
	// one pacing burst.
	RateRoomTime = 10 * time.Millisecond
	// LossDegraded is the receiver-seen loss rate (0–1) at which a path
	// becomes DEGRADED with ReasonLoss, whatever its rate control; LossRecovered
	// the rate below which it is ACTIVE again (hysteresis).
	LossDegraded  = 0.10
	LossRecovered = 0.05
	// LossMemory is how long a loss figure is believed without a fresh
	// report: an older one counts as no loss.
	LossMemory = 10 * time.Second
)

// ReasonLoss is the [Path.StatusReason] of a path that is DEGRADED
// because the receiver sees it lose LossDegraded or more.
const ReasonLoss = "loss"

// pathRate is the rate-control state of a Path, set by SetRateControl and
// OnRateEstimate and read lock-free.
type pathRate struct {
	on        atomic.Bool
	target    atomic.Uint64 // float64 bits, bytes/s
	loss      atomic.Uint64 // float64 bits, 0–1
	queue     atomic.Int64  // ns
	at        atomic.Int64  // monoclock ns of the last estimate
	lossy     atomic.Bool   // in the LossDegraded state
	lossSince atomic.Int64  // monoclock ns when it became lossy
	// The pacer's bucket as last published (OnPacer): its tokens (float64
	// bits, bytes) at tokensAt (monoclock ns), and its depth (bytes).
	tokens   atomic.Uint64
	tokensAt atomic.Int64
	depth    atomic.Int64
}

// OnPacer publishes the path's pacer bucket at now: tokens (bytes; may be
// negative while an oversized frame is paid off) and its depth (bytes). It
// fills at the target rate (OnRateEstimate). Safe for concurrent use.
func (p *Path) OnPacer(tokens float64, depth int, now time.Time) {
	p.rate.tokensAt.Store(monoclock.Nanos(now)) // first: a reader that pairs it with the old tokens underestimates them
	p.rate.tokens.Store(math.Float64bits(tokens))
	if int64(depth) != p.rate.depth.Load() { // it changes seldom; this runs per packet
		p.rate.depth.Store(int64(depth))
	}
}

// SetRateControl switches the path between the rate-controlled view (true)
// and the congestion-window view (false; the default).
func (p *Path) SetRateControl(on bool) { p.rate.on.Store(on) }

// RateControlled reports whether the path is in the rate-controlled view.
func (p *Path) RateControlled() bool { return p.rate.on.Load() }

// OnRateEstimate publishes the path's rate estimate at now: the pacer's
// target (bytes/s), the receiver-seen datagram loss rate (0–1) and the
// queueing delay the receiver measured. Safe for concurrent use.
func (p *Path) OnRateEstimate(target, loss float64, queue time.Duration, now time.Time) {
	p.rate.target.Store(math.Float64bits(max(target, 0)))
	p.rate.queue.Store(int64(queue))
	p.OnReceiverLoss(loss, now)
}

// OnReceiverLoss publishes the path's receiver-seen datagram loss rate
// (0–1; NaN counts as 0) at now, from the peer's rate reports, for a path
// with or without rate control: at LossDegraded or more the path is
// DEGRADED (ReasonLoss) until it falls below LossRecovered, and
// ExpectedDelivery charges it DefaultLossPenalty weighted by the loss.
// Safe for concurrent use.
func (p *Path) OnReceiverLoss(loss float64, now time.Time) {
	if math.IsNaN(loss) {
		loss = 0
	}
	if monoclock.Nanos(now)-p.rate.at.Load() > int64(LossMemory) {
		p.rate.lossy.Store(false) // the last figure expired: it counts as no loss (ReceiverLoss)
	}
	p.rate.loss.Store(math.Float64bits(min(max(loss, 0), 1)))
	p.rate.at.Store(monoclock.Nanos(now))
	switch {
	case !p.rate.lossy.Load() && loss >= LossDegraded:
		p.rate.lossSince.Store(monoclock.Nanos(now))
		p.rate.lossy.Store(true)
	case p.rate.lossy.Load() && loss < LossRecovered:
		p.rate.lossy.Store(false)
	}
}

// TargetRate returns the last published target rate, bytes/s; 0 before
// the first estimate.
func (p *Path) TargetRate() float64 { return math.Float64frombits(p.rate.target.Load()) }

// ReceiverLoss returns the receiver-seen loss rate (0–1) as of now: 0 when
// the last estimate is older than LossMemory.
func (p *Path) ReceiverLoss(now time.Time) float64 {
	if monoclock.Nanos(now)-p.rate.at.Load() > int64(LossMemory) {
		return 0
	}
	return math.Float64frombits(p.rate.loss.Load())
}

// LossDegradedAt reports whether the path is DEGRADED for its
// receiver-seen loss at now (ReasonLoss; OnReceiverLoss).
func (p *Path) LossDegradedAt(now time.Time) bool {
	return p.rate.lossy.Load() && monoclock.Nanos(now)-p.rate.at.Load() <= int64(LossMemory)
}

// rateHasWindow is HasWindow for a rate-controlled path.
func (p *Path) rateHasWindow() bool {
	t := p.TargetRate()
	return t <= 0 || float64(p.queueB.Load()) < t*RateRoomTime.Seconds()+1500
}

// Overdue reports whether a packet queued at now on the rate-controlled
// path would wait past its QueueDelayLimit: the bytes already queued,
// less what the pacer's bucket lets go at once (OnPacer), take longer than
// that to leave at the target rate. Such a path drops what a rule sends
// it, so [Select] does not let a preference or an affinity insist on it:
// through a 2.5-s outage of S2's Starlink path (the target at 0.1 Mbit/s,
// 256 frames queued) R4's preference for the free path kept the video
// there, and about 1200 frames expired. A keyframe that the bucket of an
// application-limited path lets go at once is not overdue.
func (p *Path) Overdue(now time.Time) bool {
	t := p.TargetRate()
	if !p.rate.on.Load() || p.QueueDelayLimit <= 0 || t <= 0 {
		return false
	}
	tokens := math.Float64frombits(p.rate.tokens.Load())
	if at := p.rate.tokensAt.Load(); at > 0 {
		tokens = min(tokens+float64(max(monoclock.Nanos(now)-at, 0))/1e9*t, float64(p.rate.depth.Load()))
	}
	return float64(p.queueB.Load())-max(tokens, 0) > t*p.QueueDelayLimit.Seconds()
}

// rateExpectedDelivery is deliveryAt for a rate-controlled path.
func (p *Path) rateExpectedDelivery(now time.Time, queued int64) time.Duration {
	owd := OneWayDelay(p.MinRTT(), p.SmoothedRTT(), time.Duration(p.rate.queue.Load())) + p.LEOHold(now)
	return DeliveryEstimate(int(queued), p.TargetRate(), owd, p.ReceiverLoss(now), DefaultLossPenalty)
}

// pickLess orders two paths for the pickers: by expected delivery when
// both are rate-controlled and have an RTT sample, else by the one-way
// delay a packet sent now can expect (sendDelay; rttLess puts a path
// without a sample last).
func pickLess(a, b *Path, now time.Time) bool {
	if bothRated(a, b) {
		return a.expectedDeliveryAt(now) < b.expectedDeliveryAt(now)
	}
	return rttLess(a.sendDelay(now), b.sendDelay(now))
}

// baselineLess is pickLess for the baseline schedulers (MinRTT, BLEST),
// which their papers define on the smoothed RTT: by expected delivery when
// both paths are rate-controlled, else by smoothed RTT.
func baselineLess(a, b *Path, now time.Time) bool {
	if bothRated(a, b) {
		return a.expectedDeliveryAt(now) < b.expectedDeliveryAt(now)
	}
	return rttLess(a.SmoothedRTT(), b.SmoothedRTT())
}

// bothRated reports whether a and b are both rate-controlled and have an
// RTT sample: the pickers then compare their expected deliveries.
func bothRated(a, b *Path) bool {
	return a.RateControlled() && b.RateControlled() && a.SmoothedRTT() > 0 && b.SmoothedRTT() > 0
}
