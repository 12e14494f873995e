package policy

import (
	"math"
	"time"
)

// DefaultLossPenalty is the delivery time [DeliveryEstimate] charges for
// each expected loss of an unprotected packet: about a TCP minimum RTO
// (RFC 6298 §2.4 allows 1 s; Linux uses 200 ms), what an inner flow pays
// to repair it.
const DefaultLossPenalty = 250 * time.Millisecond

// OneWayDelay returns the propagation-plus-queue delay to use for a path
// in [DeliveryEstimate]: half the minimum RTT plus the queueing delay the
// receiver measured ([RateEstimate.QueueDelay]); half the smoothed RTT
// before the first minimum-RTT sample. The measured base one-way delay
// itself cannot be used: it includes the unknown offset between the
// hosts' clocks.
func OneWayDelay(minRTT, srtt, queue time.Duration) time.Duration {
	if minRTT <= 0 {
		return max(srtt, 0) / 2
	}
	return minRTT/2 + max(queue, 0)
}

// DeliveryEstimate returns the expected time for a packet queued now on a
// path to reach the peer: the queued bytes ahead of it drained at the
// path's target rate (bytes/s), plus the one-way delay, plus, for a path
// that loses a fraction loss (0–1) of its datagrams, lossPenalty for each
// expected loss before a copy arrives (the geometric number of attempts,
// loss/(1−loss)). A path losing 50 % is thus charged one lossPenalty more
// than a clean one and is not chosen for unprotected traffic while a
// cleaner path has less than lossPenalty of queue. A rate ≤ 0 counts the
// queue as free; loss ≥ 0.999 saturates at 1000 penalties. Allocation-free.
func DeliveryEstimate(queuedBytes int, rate float64, owd time.Duration, loss float64, lossPenalty time.Duration) time.Duration {
	d := float64(owd)
	if rate > 0 && queuedBytes > 0 {
		d += float64(queuedBytes) / rate * 1e9
	}
	if loss > 0 {
		loss = min(loss, 0.999)
		d += loss / (1 - loss) * float64(lossPenalty)
	}
	return time.Duration(min(d, float64(math.MaxInt64/2)))
}

// Lane sizing.
//
// quic-go's NewReno window cannot be replaced, so a path's lanes (parallel
// QUIC connections) are the actuator that keeps the windows from binding
// below the target rate: Σ lane windows ≥ target × sRTT × headroom, and ≥
// the largest burst of the last seconds, so a keyframe leaves at the pacing
// rate, sized ahead of the next one, not after it.
//
// On a loss-free path Reno's window grows without bound (10,000 packets in
// quic-go), so one lane is enough. On a link with random loss p it does
// not: each lane's average window is about 1.68/√p packets at quic-go's
// 0.7 back-off (Mathis et al., CCR 1997, with C = √(3(1+β)/(2(1−β))) for
// β = 0.7), so on a lossy link the windows do bind and more lanes do carry
// more: random loss is the one case where lanes are needed. What lanes
// cannot fix is a path whose delivery is capped elsewhere: the link's
// capacity, the rate target, the scheduler not sending there (a 50 % loss
// path). So the rule is empirical: after adding a lane, compare the
// delivery rate before and after; if it did not grow by LaneGainMin, the
// added lane did not help and the path keeps its previous count
// ([LaneTrial]) until the demand grows or LaneTrialHold passes.

// Lane-sizing constants.
const (
	// DefaultLaneHeadroom multiplies the bandwidth-delay product in
	// [LaneDemand]: Reno's window swings between 0.7 and 1 of its peak.
	DefaultLaneHeadroom = 1.5
	// LaneGainMin is the growth of the delivery rate that shows an added
	// lane helped (10 %).
	LaneGainMin = 0.10
	// LaneTrialSettle is how long after adding a lane its effect is judged.
	LaneTrialSettle = 2 * time.Second
	// LaneTrialHold is how long a lane that did not help is not retried.
	LaneTrialHold = 30 * time.Second
	// LaneDemandRegrow is the growth of the target (25 %) that retries a
	// lane earlier.
	LaneDemandRegrow = 1.25
)

// LaneDemand returns the bytes the path's lanes must be able to have in
// flight together: max(target × sRTT × headroom, burst), with target in
// bytes/s, burst the largest burst (bytes) of the last few seconds and
// headroom ≤ 1 replaced by DefaultLaneHeadroom.
func LaneDemand(target float64, srtt time.Duration, headroom float64, burst int) int {
	if headroom <= 1 {
		headroom = DefaultLaneHeadroom
	}
	bdp := max(target, 0) * srtt.Seconds() * headroom
	return max(int(min(bdp, math.MaxInt32)), burst, 0)
}

// RenoWindow predicts one lane's average congestion window, bytes, on a
// link with random loss p (0–1): 1.68/√p packets of mss bytes (Mathis et
// al. 1997 with quic-go's 0.7 back-off), at most maxPackets (quic-go's
// 10,000); p ≤ 0 gives maxPackets. Use it before a lane's window has been
// observed.
func RenoWindow(p float64, mss, maxPackets int) int {
	if p <= 0 {
		return maxPackets * mss
	}
	w := min(1.68/math.Sqrt(min(p, 1)), float64(maxPackets))
	return int(max(w, 2) * float64(mss))
}

// LanesFor returns how many lanes carry demand bytes when each holds
// laneWindow bytes: ⌈demand / laneWindow⌉, between 1 and maxLanes. cap > 0
// (from [LaneTrial.Cap]) lowers maxLanes. laneWindow ≤ 0 (unknown) gives 1.
func LanesFor(demand, laneWindow, maxLanes, cap int) int {
	if cap > 0 {
		maxLanes = min(maxLanes, cap)
	}
	maxLanes = max(maxLanes, 1)
	if laneWindow <= 0 || demand <= laneWindow {
		return 1
	}
	n := (demand + laneWindow - 1) / laneWindow
	return min(n, maxLanes)
}

// LaneTrial remembers whether the last added lane raised the path's
// delivery rate (see the lane-sizing rule above). Feed it every report
// with Observe; pass Cap to [LanesFor]. The zero value is ready; not safe
// for concurrent use; allocation-free.
type LaneTrial struct {
	lanes    int
	delivery float64 // smoothed delivery at the current lane count
	trying   bool
	from     int
	before   float64
	at       time.Time

	cap       int
	capUntil  time.Time
	capTarget float64
}

// Observe records the path's lane count, delivery rate and target
// (bytes/s) at now. When the count has grown it starts a trial; after
// LaneTrialSettle, a delivery rate below (1+LaneGainMin) × the one before
// caps the path at the previous count for LaneTrialHold, or until the
// target grows by LaneDemandRegrow.
func (t *LaneTrial) Observe(now time.Time, lanes int, delivery, target float64) {
	if t.cap > 0 && (now.After(t.capUntil) || target > LaneDemandRegrow*t.capTarget) {
		t.cap = 0
	}
	switch {
	case t.lanes == 0:
	case lanes > t.lanes:
		t.trying, t.from, t.before, t.at = true, t.lanes, t.delivery, now
		t.delivery = delivery
	case lanes < t.lanes:
		t.trying = false
		t.delivery = delivery
	}
	if t.lanes == 0 {
		t.delivery = delivery
	}
	t.lanes = lanes
	t.delivery += 0.25 * (delivery - t.delivery)
	if t.trying && now.Sub(t.at) >= LaneTrialSettle {
		t.trying = false
		if t.delivery < (1+LaneGainMin)*t.before {
			t.cap, t.capUntil, t.capTarget = t.from, now.Add(LaneTrialHold), target
		}
	}
}

// Cap returns the lane count the path is held at because more did not
// help, or 0 for none.
func (t *LaneTrial) Cap() int { return t.cap }
