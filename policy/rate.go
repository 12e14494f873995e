package policy

import (
	"math"
	"time"
)

// Per-path rate control: bondd, not quic-go's loss-based window, decides
// how fast each path sends. The receiver reports what it saw of the path
// ([RateReport], built by [RateMeter]); the sender's [RateEstimator] turns
// each report into a target rate that the path's [Pacer] enforces.
//
// The model is BBR's (draft-ietf-ccwg-bbr; BBRv1, Cardwell et al., ACM
// Queue 14(5), 2016): a path is a pipe with a base delay and a bottleneck
// rate. The bottleneck rate, max_bw, is a windowed maximum (max(1 s, 10
// sRTT), Nichols' three-sample filter as in Linux's lib/minmax.c) of what
// the receiver got per report, lost datagrams of the path's own loss rate
// added back; a report during which the sender was application-limited
// counts only if it raises it (BBR §4.5.2.2). The target is a pacing gain
// × max_bw: 2 per round in Startup until max_bw stops growing by 25 % in
// three rounds, then ProbeBW's cycle 1.25, 0.75, 1 × 6, one phase per
// max(sRTT, 50 ms). The target is always computed from max_bw, never from
// the previous target, so a report that looks bad costs one report, not a
// ratchet: with the delay as the only signal, a base one-way delay that
// moves up (a cell, a route; S1's traces redraw it every second, by up to
// 26 ms) reads as a standing queue, and a rate cut on each report drove the
// target to a tenth of the link.
//
// The base delay is the windowed minimum of the one-way delay (BBR's
// min_rtt filter, 10 s; the clock offset between the hosts cancels out of
// every difference against it). While cruising (gain ≤ 1) a proportional
// term holds the queueing delay near QueueTarget (NADA, RFC 8698 §4.3),
// relative to max_bw and never below 0.85 × it. A queue above the drain
// bound (2 × QueueTarget, at least 30 ms) is drained at 0.85–1 × the
// received rate when the link is what limits: the smoothed received rate
// is below 0.85 × the smoothed sending rate (the difference fills a
// queue), or the queue is above 60 ms whatever the rates. A capacity drop
// then restarts max_bw from what the link carries now; a report of fewer
// than four datagrams is no rate, and there, as for a loss back-off, what
// the link carries is at least half of what it carried over the last
// 0.5 s.
//
// Random loss is not congestion: the path's own loss rate (its floor) is
// learnt from reports during which no queue stood and the received rate
// is scaled up by it. Loss above it while a queue stands (a drop-tail
// queue overflowing, however shallow), or loss rising while the queue is
// drained, sets the rate to 0.85 × the received rate (GCC's back-off,
// draft-ietf-rmcat-gcc-02 §5.5; BBRv2 responds to loss above 2 % alike)
// and restarts max_bw from it; probing stays gentle for 2 s after (unless a
// backlog waits and the queue is within QueueTarget), and it refills: after a reset in which the link carried less than half of
// max_bw (a dip, not a drift), once the queue has drained, the rate probes
// at 1.25 × max_bw every report (2 ×, Startup's gain, while below a
// quarter of its goal) back to 0.85 × the max_bw the reset forgot, for at
// most 3 s after the last report of the dip and until a queue shows
// (BBRv3's ProbeBW_REFILL and UP), so that a 100–300-ms capacity dip, or
// the seconds of loss and delay around a LEO reconfiguration, does not
// cost seconds more. A
// sender with a backlog whose last probe raised max_bw by 10 % within two
// rounds (the link delivered more when offered more, whatever the delay
// reads) climbs the same way, 1.25 × max_bw in every report until a probe
// stops paying or a queue shows. The
// target never rises above 1.5 × the received rate of the last seconds
// (GCC §5.5; 2 × in Startup), and an application-limited sender's target
// decays to 2 × what the receiver got. GCC's delay trend and adaptive
// threshold (§5.4) are still computed and reported (RateEstimate.Trend),
// but no longer act: a trend cannot tell a base step from a queue.
//
// A queue held at QueueTarget never empties, so the base filter would
// forget the true base: every 5 s of saturation the rate drops to 0.75 ×
// for at most 200 ms + sRTT to see the base again, and a base that moved
// up is taken from that probe (BBR's ProbeRTT).
//
// On a LEO path, reports that overlap a scheduled reconfiguration (see
// [LEOReconf]) are not learned from and the rate is held; after the window
// the base delay is re-measured by the same probe (LeoCC, Lai et al.,
// SIGCOMM 2025: freeze the model across the reconfiguration and
// re-baseline after it).

// Defaults of [RateConfig].
const (
	// DefaultQueueTarget is the queueing delay the estimator holds on a
	// saturated path: small enough for interactive traffic, large enough
	// that the link never idles between feedback reports.
	DefaultQueueTarget = 15 * time.Millisecond
	// DefaultInitialRate is the starting target, bytes/s (1 Mbit/s).
	DefaultInitialRate = 125_000
	// DefaultMinRate is the floor of the target, bytes/s (64 kbit/s).
	DefaultMinRate = 8_000
	// DefaultMaxRate is the ceiling of the target, bytes/s (10 Gbit/s).
	DefaultMaxRate = 1.25e9
)

// Constants of the controller, with their sources.
const (
	gccBackoff        = 0.85                   // GCC §5.5: A = 0.85 × R on overuse
	gccKu             = 0.01                   // GCC §5.4 eq. 6, per ms
	gccKd             = 0.00018                // GCC §5.4 eq. 6, per ms
	gammaInit         = 12.5                   // ms, GCC §5.4
	gammaMin          = 6.0                    // ms
	gammaMax          = 600.0                  // ms
	gammaMaxStep      = 15.0                   // ms: WebRTC's kMaxAdaptOffsetMs, skip γ updates on spikes
	trendGainMs       = 240.0                  // ms: modified trend = slope × 60 deltas × gain 4 (WebRTC trendline)
	trendPoints       = 8                      // reports in the trendline window (~400 ms at 50 ms)
	maxRecvGain       = 1.5                    // GCC §5.5: A < 1.5 × R
	baseBucket        = 2500 * 1000            // µs: one slot of the base-delay min filter
	baseBuckets       = 4                      // 4 slots: a 7.5–10 s window (BBR min_rtt, 10 s)
	satEpsilonUs      = 2000                   // µs of queue that count as "never emptied"
	minTau            = 250 * 1000.0           // µs: horizon of the queue controller, at least 2 sRTT
	velocityStart     = 0.02                   // probe step near a recent overflow (GCC §5.5's additive increase)
	appLimitedGain    = 2.0                    // an application-limited target decays to 2 × the received rate
	maxRecvHalfLife   = 2e6                    // µs: a keyframe a second stays remembered
	lossWindow        = 1_000_000.0            // µs: averaging time of the loss rate
	floorDatagrams    = 5000.0                 // datagrams the random-loss floor averages over
	floorMinDatagrams = 200.0                  // datagrams before the floor is trusted
	floorQueueUs      = 1000                   // µs: mean queue below which a report teaches the floor
	overflowMemory    = 2 * time.Second        // how long an overflow keeps probing gentle
	lossFloorMax      = 0.75                   // recv is at most 4 × what arrived
	lossExcessMin     = 0.02                   // loss above the floor that is a queue overflowing
	lossExcessRel     = 0.25                   // ... or a quarter of the floor, if more (noise at high loss)
	overflowMinLost   = 2                      // ... and by more than one datagram of a report
	appLimitedUse     = 0.9                    // sent ≥ 0.9 × target × interval counts as pacing-limited
	staleReport       = 2_000_000              // µs: longer intervals are clamped
	queueHighMin      = 60 * 1000              // µs
	drainMin          = 0.85                   // the queue controller never asks for less than 0.85 × what arrives (GCC §5.5)
	deliverySmooth    = 0.25                   // EWMA weight of a report's delivery rate in the reported figure
	probeBaseInterval = 5 * time.Second        // BBR ProbeRTTInterval
	reportMin         = 50 * time.Millisecond  // the feedback interval the constants assume
	probeBaseMax      = 200 * time.Millisecond // BBR ProbeRTTDuration
	probeBaseGain     = 0.75                   // rate while re-measuring the base (BBRv3 ProbeRTT keeps 0.5 BDP in flight)
	rateSmooth        = 0.3                    // EWMA weight of a report in the sending and received rates
	linkLimitedRatio  = 0.85                   // received < 0.85 × sent: the link limits
	drainQueueMult    = 2                      // a queue above 2 × QueueTarget ...
	drainQueueMin     = 30 * 1000              // ... and 30 ms (µs) is drained
	bwWindowMin       = time.Second            // max_bw window, at least ...
	bwWindowRounds    = 10                     // ... 10 round trips (BBRv1's BtlBwFilterLen)
	startupGain       = 2.0                    // BBR Startup pacing gain (2/ln 2 ≈ 2.89 in BBR; 2 per report here)
	startupGrowth     = 1.25                   // BBR full-pipe test: max_bw grows by 25 % ...
	startupRounds     = 3                      // ... within 3 rounds
	refillShare       = 0.85                   // a reset's forgotten max_bw is refilled up to this share of it ...
	refillMemory      = 3 * time.Second        // ... for this long after the reset (BBRv3 keeps max_bw over 2 ProbeBW cycles)
	congestMemory     = 200 * time.Millisecond // at least this long after a congested report, loss is not the path's own
	refillDip         = 0.5                    // a reset refills only if the link carried less than this share of max_bw: a dip, not a drift
	backoffWindow     = 500 * time.Millisecond // GCC §5.5: the back-off's received rate is measured over 0.5–1 s ...
	backoffFloor      = 0.5                    // ... and one report's rate counts for at least this share of it
	climbPays         = 1.1                    // a probe paid if max_bw grew by 10 % within two rounds of it
	appWindow         = 2 * time.Second        // RateEstimate.AppLimited averages over this long ...
	appLimitedShare   = 0.5                    // ... and holds when this share of the reports was application-limited
	refillDeep        = 0.25                   // a refill below this share of its goal climbs at Startup's gain
	rateMinDatagrams  = 4                      // a report of fewer datagrams measures no rate for a drain
)

// probeBWGains is BBRv1's ProbeBW pacing gain cycle (Cardwell et al., "BBR:
// Congestion-Based Congestion Control", ACM Queue 14(5), 2016).
var probeBWGains = [...]float64{1.25, 0.75, 1, 1, 1, 1, 1, 1}

// RateConfig configures a [RateEstimator]. The zero value is valid.
type RateConfig struct {
	// InitialRate is the first target, bytes/s. Zero: DefaultInitialRate.
	InitialRate float64
	// MinRate and MaxRate bound the target, bytes/s. Zero: DefaultMinRate,
	// DefaultMaxRate.
	MinRate, MaxRate float64
	// QueueTarget is the queueing delay held on a saturated path. Zero:
	// DefaultQueueTarget.
	QueueTarget time.Duration
	// LEO, when not nil, is the path's reconfiguration schedule: reports
	// that overlap one of its windows are not learned from. Read-only.
	LEO *LEOReconf
}

// SendStats is what the sender tells the estimator with each report about
// its own side of the path since the previous Update.
type SendStats struct {
	// SentBytes is the bytes the pacer released on the path since the
	// previous Update.
	SentBytes int64
	// BacklogBytes is the bytes waiting in the path's queue behind the
	// pacer now: more than zero means the sender has more to send.
	BacklogBytes int64
	// SRTT is the path's smoothed RTT (RFC 9002 §5.3), 0 if unknown.
	SRTT time.Duration
	// Outage is set when datagrams were presumed lost since the previous
	// Update because the path turned SUSPECT or its last connection ended
	// without a word from the peer (the edge's side): the gaps
	// the receiver finds when packets arrive again are the outage's, and
	// for max(congestMemory, 2 sRTT) the reports do not count toward the
	// path's own loss (RateEstimate.OwnLoss).
	Outage bool
}

// RateEstimate is the estimator's output for one path.
type RateEstimate struct {
	// Target is the rate the path's pacer should send at, bytes/s.
	Target float64
	// Delivery is the smoothed rate the receiver got, bytes/s.
	Delivery float64
	// Capacity is the bottleneck rate, BBR's max_bw (a windowed maximum of
	// the delivery rate), bytes/s; 0 before the first report.
	Capacity float64
	// Loss is the receiver-seen datagram loss rate over about 1 s, 0–1.
	Loss float64
	// OwnLoss is Loss without the reports that showed a queue above
	// QueueTarget overflowing (loss above the path's random-loss floor) or
	// draining, nor those of the next max(200 ms, 2 sRTT), 0–1: the loss a
	// packet sent at the target can expect. A capacity dip's burst is in
	// Loss, not in OwnLoss.
	OwnLoss float64
	// QueueDelay is the mean one-way delay of the last report above the
	// base delay.
	QueueDelay time.Duration
	// Trend is GCC's modified trend m(i) and Threshold its adaptive
	// threshold γ(i), both in ms (draft-ietf-rmcat-gcc-02 §5.4).
	Trend, Threshold float64
	// Frozen reports that the last report fell in a LEO reconfiguration
	// window and was not learned from.
	Frozen bool
	// AppLimited reports that the sender was application-limited (no
	// backlog, and sending below 0.9 × the target) in at least half of the
	// reports of about the last appWindow: a video path that has a backlog
	// only at its keyframes.
	AppLimited bool
	// Startup reports that the estimator is in BBR's Startup
	// (draft-ietf-ccwg-bbr §4.3.1): the path's capacity is not measured
	// yet, and the target doubles each round from its initial rate.
	Startup bool
	// Overuses counts the reports that triggered a back-off; FrozenReports
	// the reports skipped in LEO windows.
	Overuses, FrozenReports uint64
}

// RateEstimator is one path's rate controller (see the model above). Not
// safe for concurrent use: one goroutine, the one that receives the path's
// feedback, calls Update; publish Estimate().Target to the sender. Use
// [NewRateEstimator]. Update does not allocate.
type RateEstimator struct {
	cfg        RateConfig
	target     float64
	delivery   float64
	capacity   float64
	maxRecv    float64 // max of the received rate, halved every maxRecvHalfLife
	loss       float64 // EWMA over lossWindow
	floorLost  float64 // datagrams lost and in all, decayed, in reports without a queue
	floorTotal float64
	ownLoss    float64   // loss EWMA over lossWindow without congested reports (RateEstimate.OwnLoss)
	ownAt      time.Time // when ownLoss last learnt; a figure older than LossMemory is forgotten
	congestAt  time.Time // the last report that showed a queue above QueueTarget overflowing or draining
	outageAt   time.Time // the last report after an outage (SendStats.Outage)
	overflowAt time.Time // the last report that showed a shallow queue overflowing
	queue      float64   // µs
	qmin       float64   // µs, the last report's least queueing delay

	base       [baseBuckets]int64 // min OWD per slot, µs
	baseSlot   uint64             // receiver µs / baseBucket of the newest slot
	haveBase   bool
	rebaseline bool // the next report re-measures the base (after a LEO window)
	trendX     [trendPoints]float64
	trendY     [trendPoints]float64
	trendN     int
	trendHead  int
	trend      float64 // ms
	gamma      float64 // ms

	sendS, recvS float64     // bytes/s: smoothed sending and received rates
	sent         sendHistory // sendS and the sending rate of the last reports
	recvLong     float64     // bytes/s: the received rate over about backoffWindow (an EWMA), a floor of a loss back-off's base
	bw           winMax      // BBR.max_bw, bytes/s
	phaseAt      time.Time
	phaseIdx     int
	startup      bool      // BBR Startup: the rate doubles each round
	fullBw       float64   // max_bw when it last grew by startupGrowth
	fullBwN      int       // rounds since
	limitedAt    time.Time // the last report during which the sender was not application-limited
	refillTo     float64   // bytes/s: refillShare × the max_bw the last reset forgot
	refillUntil  time.Time // refilling ends then
	refillProbed bool      // the refill has probed since that reset
	// The delivery-keyed climb: max_bw at the last two round boundaries,
	// whether the target probed above it in the last two rounds, and
	// whether the last boundary found the probing paid.
	roundBw     [2]float64
	roundProbed [2]bool
	paying      bool
	appShare    float64 // EWMA over appWindow of the reports that were application-limited (1) or not (0)

	lastUpdate time.Time
	lastEmpty  time.Time // the last report whose queue emptied
	probing    bool      // draining to re-measure the base (ProbeRTT)
	probeStart time.Time
	probeMin   int64   // µs, least one-way delay seen while probing
	probeRate  float64 // bytes/s: the rate when the probe started
	rebasing   bool    // the probe follows a LEO window: it always replaces the base
	frozen     bool
	overuses   uint64
	frozenN    uint64
}

// NewRateEstimator returns an estimator at cfg's initial rate. Missing or
// out-of-range fields take their defaults.
func NewRateEstimator(cfg RateConfig) *RateEstimator {
	if cfg.MinRate <= 0 {
		cfg.MinRate = DefaultMinRate
	}
	if cfg.MaxRate <= 0 {
		cfg.MaxRate = DefaultMaxRate
	}
	cfg.MaxRate = max(cfg.MaxRate, cfg.MinRate)
	if cfg.InitialRate <= 0 {
		cfg.InitialRate = DefaultInitialRate
	}
	if cfg.QueueTarget <= 0 {
		cfg.QueueTarget = DefaultQueueTarget
	}
	e := &RateEstimator{cfg: cfg, gamma: gammaInit, startup: true}
	e.target = min(max(cfg.InitialRate, cfg.MinRate), cfg.MaxRate)
	return e
}

// Target returns the current target rate, bytes/s.
func (e *RateEstimator) Target() float64 { return e.target }

// Estimate returns the estimator's current output.
func (e *RateEstimator) Estimate() RateEstimate {
	return RateEstimate{
		Target: e.target, Delivery: e.delivery, Capacity: e.capacity, Loss: e.loss, OwnLoss: e.ownLoss,
		QueueDelay: time.Duration(e.queue) * time.Microsecond,
		Trend:      e.trend, Threshold: e.gamma, Frozen: e.frozen, AppLimited: e.appShare >= appLimitedShare,
		Startup: e.startup, Overuses: e.overuses, FrozenReports: e.frozenN,
	}
}

// SetLEO sets the path's reconfiguration schedule (RateConfig.LEO), for
// a schedule learned after the estimator was made (the concentrator
// learns its paths' from the edge's hello); nil: none.
func (e *RateEstimator) SetLEO(l *LEOReconf) { e.cfg.LEO = l }

// Update feeds one receiver report, received at now, with the sender's
// side of the same time; the target changes at most once per call. A
// report whose interval ends before it starts is ignored.
func (e *RateEstimator) Update(now time.Time, r *RateReport, s SendStats) {
	if r.End < r.Start {
		return
	}
	if s.Outage {
		e.outageAt = now
	}
	length := float64(min(r.End-r.Start, staleReport)) // µs
	elapsed := length
	if !e.lastUpdate.IsZero() {
		if d := float64(now.Sub(e.lastUpdate).Microseconds()); d > 0 {
			elapsed = min(d, staleReport)
		}
	}
	e.lastUpdate = now
	if e.inLEOWindow(now, time.Duration(length)*time.Microsecond, s.SRTT) {
		// LeoCC: hold the model and the rate across the reconfiguration;
		// re-measure the base after it.
		e.frozen, e.rebaseline = true, true
		e.frozenN++
		return
	}
	e.frozen = false
	if length <= 0 {
		return
	}
	good := float64(r.Bytes) * 1e6 / length // bytes/s received
	e.delivery += deliverySmooth * (good - e.delivery)
	lossNow := 0.0
	lossBefore := e.loss
	if tot := float64(r.Datagrams) + float64(r.Lost); tot > 0 {
		// An interval in which nothing was sent or arrived says nothing
		// about loss: only intervals with datagrams move the average.
		lossNow = float64(r.Lost) / tot
		e.loss += min(1, length/lossWindow) * (lossNow - e.loss)
	}

	if r.Datagrams == 0 {
		// Nothing arrived: no delay information. Hold the rate; the loss
		// is the path's own unless a congested report came just before.
		if r.Lost > 0 {
			e.learnOwnLoss(now, lossNow, length, s.SRTT)
		}
		return
	}
	if e.rebaseline {
		// After a LEO reconfiguration the base may have moved and the
		// outage has left a queue: drain at probeBaseGain × the rate for
		// a round trip and take the least delay seen then as the new base
		// (LeoCC's re-baselining, done the ProbeRTT way).
		e.rebaseline = false
		e.trendN, e.trendHead = 0, 0
		if e.haveBase {
			e.probing, e.rebasing, e.probeStart, e.probeMin, e.probeRate = true, true, now, r.OWDMin, min(e.target, max(e.capacity, e.cfg.MinRate))
		}
	}
	e.updateBase(r)
	base := e.baseMin()
	e.queue = max(0, float64(r.OWDMean-base))
	e.qmin = max(0, float64(r.OWDMin-base))
	e.updateTrend(float64(r.End)/1000, e.queue/1000, elapsed/1000)

	qt := float64(e.cfg.QueueTarget.Microseconds())
	saturated := e.qmin > satEpsilonUs && r.Datagrams >= 2

	// The path's own (random) loss rate is learnt from the reports during
	// which no queue stood (a drop-tail queue that never filled did not
	// drop), over about the last floorDatagrams datagrams; until one
	// comes, all loss is taken as the path's own. Loss above it while a
	// queue stands is the queue overflowing, however shallow. (A policer,
	// which drops without queueing, is not told apart.)
	queued := e.queue > floorQueueUs
	if !saturated && !queued {
		e.floorLost += float64(r.Lost)
		e.floorTotal += float64(r.Lost) + float64(r.Datagrams)
		if e.floorTotal > floorDatagrams {
			e.floorLost *= floorDatagrams / e.floorTotal
			e.floorTotal = floorDatagrams
		}
	}
	floor := e.loss
	if e.floorTotal >= floorMinDatagrams {
		floor = e.floorLost / e.floorTotal
	}
	floor = min(floor, lossFloorMax)
	// recv is the rate the path carried: what arrived, scaled up by the
	// path's own loss, which took its share after or before the
	// bottleneck. Loss above that floor is not added back: it is what the
	// path could not carry.
	recv := good / (1 - floor)
	e.maxRecv = max(recv, e.maxRecv*math.Pow(0.5, elapsed/maxRecvHalfLife))
	// Overflow: this report's loss is above the floor by more than
	// chance (three binomial standard deviations for its datagram count),
	// and by more than one datagram: in a 50-ms report of 20 datagrams
	// (4 Mbit/s) one random loss at a 0.4 % floor is 5 %, past the
	// bound, and a video path was cut to 0.7 × its rate every few
	// reports (TestRateTraceDemoLoad, built-in model, seed 2).
	n := float64(r.Datagrams) + float64(r.Lost)
	overflow := queued && e.floorTotal >= floorMinDatagrams && r.Lost >= overflowMinLost &&
		lossNow > floor+max(lossExcessMin, lossExcessRel*floor, 3*math.Sqrt(floor*(1-floor)/n))
	limited := s.BacklogBytes > 0 || float64(s.SentBytes) >= appLimitedUse*e.target*elapsed/1e6
	app := 1.0
	if limited {
		app = 0
	}
	e.appShare += min(1, elapsed/float64(appWindow.Microseconds())) * (app - e.appShare)
	tau := max(minTau, 2*float64(s.SRTT.Microseconds()))
	sendRate := float64(s.SentBytes) * 1e6 / elapsed
	e.sendS += rateSmooth * (sendRate - e.sendS)
	e.recvS += rateSmooth * (recv - e.recvS)
	sentThen, rawThen := e.sent.at(now.Add(-s.SRTT), e.sendS, sendRate)
	e.sent.push(now, e.sendS, sendRate, s.SRTT/8)
	if e.recvLong == 0 {
		e.recvLong = recv
	}
	e.recvLong += min(1, elapsed/float64(backoffWindow.Microseconds())) * (recv - e.recvLong)
	// The link, not the sender, sets what arrives: it carried clearly
	// less than was sent to it (the difference is filling a queue). A
	// one-way delay that rose with no such deficit is the path's base
	// delay moving (a route, a cell), not a queue of ours. What arrives
	// now left a round trip ago: set against the rate sent since, a
	// Startup that doubles per round trip reads as a link that carries
	// half of it, and in Startup the report's own rates are compared, as
	// the smoothed ones lag a doubling rate by rounds. Nor does a high
	// queue without that deficit end Startup, which cannot have built a
	// standing one: on S2's Starlink path (seed 3, a 250–350-ms RTT
	// stretch whose one-way delay moves by 50–90 ms a second) both held
	// a 5.8-Mbit/s video at 2–4 Mbit/s on a link of 30–70.
	linkLimited := e.recvS < linkLimitedRatio*min(e.sendS, sentThen)
	if e.startup {
		linkLimited = recv < linkLimitedRatio*rawThen
	}
	drainAt := max(drainQueueMult*qt, drainQueueMin)
	drain := e.queue > drainAt && (linkLimited || e.queue > queueHighMin && !e.startup)
	lossCongestion := overflow || lossNow > 2*lossBefore+0.01 && drain
	if (overflow || drain) && e.queue > qt {
		e.congestAt = now
	}
	e.learnOwnLoss(now, lossNow, length, s.SRTT)

	// BBR's bottleneck bandwidth (draft-ietf-ccwg-bbr §4.5.2.1, BBR.max_bw):
	// a windowed maximum of the delivery-rate samples; a sample taken
	// while the sender was application-limited counts only if it raises
	// the maximum (§4.5.2.2).
	window := max(bwWindowMin, time.Duration(bwWindowRounds)*s.SRTT)
	if limited {
		e.limitedAt = now
	}
	if limited || recv > e.bw.get() {
		e.bw.update(now, window, recv)
	}
	bw := e.bw.get()
	e.capacity = bw

	// BBR's ProbeRTT (draft-ietf-ccwg-bbr §4.3.4): a queue that never
	// empties hides the base delay, and the drain bound would follow it
	// up. Every probeBaseInterval of saturation, send at probeBaseGain ×
	// the rate until the queue empties (or probeBaseMax + sRTT passes) so
	// the base is measured again.
	if !saturated {
		e.lastEmpty = now
		e.probing = e.rebasing
	} else if !e.probing && now.Sub(e.lastEmpty) > probeBaseInterval {
		e.probing, e.probeStart, e.probeMin, e.probeRate = true, now, r.OWDMin, min(e.target, max(e.bw.get(), recv))
	}
	if e.probing {
		e.probeMin = min(e.probeMin, r.OWDMin)
		if now.Sub(e.probeStart) > probeBaseMax+s.SRTT {
			// A lower rate for a round trip and the queue did not
			// empty: the base has moved up (a route change). Take the
			// least delay of the probe as the new base (BBR updates
			// min_rtt from the ProbeRTT samples).
			e.probing, e.rebasing, e.lastEmpty = false, false, now
			e.base = [baseBuckets]int64{e.probeMin, e.probeMin, e.probeMin, e.probeMin}
		}
	}

	// The pacing gain cycle of BBR's ProbeBW (BBRv1, Cardwell et al.,
	// ACM Queue 2016): one phase per max(sRTT, report interval), probing
	// at 1.25 × max_bw, draining what the probe queued at 0.75 ×, then
	// cruising at max_bw.
	phase := max(s.SRTT, reportMin)
	if now.Sub(e.phaseAt) >= phase {
		e.phaseAt = now
		e.phaseIdx = (e.phaseIdx + 1) % len(probeBWGains)
		// The delivery-keyed climb: probing in either of the last two
		// rounds (its effect arrives a round trip later) raised max_bw by
		// climbPays over them.
		e.paying = (e.roundProbed[0] || e.roundProbed[1]) && e.roundBw[1] > 0 && bw >= climbPays*e.roundBw[1]
		e.roundBw[1], e.roundBw[0] = e.roundBw[0], bw
		e.roundProbed[1], e.roundProbed[0] = e.roundProbed[0], false
		if e.startup {
			// BBR Startup (§4.3.1.1): leave when max_bw has not grown by
			// 25 % in 3 rounds.
			if bw >= startupGrowth*e.fullBw {
				e.fullBw, e.fullBwN = bw, 0
			} else if limited && !e.probing { // a base probe's lower rate is no plateau
				e.fullBwN++
			}
			if e.fullBwN >= startupRounds {
				e.startup = false
			}
		}
	}
	gain := probeBWGains[e.phaseIdx]
	if e.startup {
		gain = startupGain
	}
	// Two ways of probing at 1.25 × max_bw in every report, not one phase
	// in eight, while no queue above QueueTarget and no loss shows (BBRv3
	// leaves ProbeBW_UP when one does, draft-ietf-ccwg-bbr §4.3.3.5):
	//
	//   - Refill (BBRv3's ProbeBW_REFILL and UP, §4.3.3.4–5: a loss or a
	//     drain lowers the short-term bounds, but max_bw is kept over two
	//     probing cycles and the next probe goes back to it): after a
	//     reset in a dip (forget), until max_bw is back at refillShare of
	//     what the reset forgot or refillMemory passes. A queue above
	//     QueueTarget after it has probed, or a further reset, ends it: the
	//     capacity is not there. A capacity dip of 100–300 ms (the Starlink
	//     trace's, every few seconds) then costs about a second, not the
	//     several that BBRv1's cycle takes to grow 1.25 × per eight phases
	//     from the dip's rate.
	//   - Climb: the last probe (ProbeBW's 1.25 phase, the refill or the
	//     climb itself) raised max_bw by climbPays within two rounds while
	//     the sender had a backlog: the link carried more when offered
	//     more, so probe again, until a probe stops paying or a queue
	//     above QueueTarget or a loss shows. The one-way delay cannot tell
	//     a queue from a base that moved: the Starlink trace's moves by up
	//     to 20 ms, and after S2's 2.5-s outage it came back 4–6 ms higher
	//     and read as a queue that never empties. The climb before this
	//     one, keyed on the report's least delay being at the base, then
	//     never ran, and max_bw grew by 1.25 × per eight rounds; on the
	//     model's mahimahi-like traces it built 130-ms mean queues where
	//     the queue did empty now and then. What the link delivers tells:
	//     a link at its capacity does not deliver more. This is BBR's
	//     Startup test (max_bw grows by 25 % per round while the pipe is
	//     not full, §4.3.1.1) at ProbeBW_UP's gain. A refill that got its
	//     rate back goes on as a climb. A link whose windows (quic-go's)
	//     bind below the target climbs as well: the windows grow only
	//     while they are full.
	//
	// Neither is held to the gentle probing after an overflow.
	up := !e.startup && e.queue <= qt && !overflow && !lossCongestion && !drain
	refilling := up && limited && now.Before(e.refillUntil)
	switch {
	case refilling && bw >= e.refillTo:
		// The capacity came back, and the refill's probes paid: go on
		// probing while they pay (the delivery-keyed climb below).
		e.endRefill()
		refilling, e.paying = false, true
	case refilling:
		e.refillProbed = true
	case e.refillProbed && e.queue > qt:
		e.endRefill() // the probe found a queue: the capacity is not there
	}
	climbing := up && e.paying && s.BacklogBytes > 0
	probingUp := refilling || climbing
	if probingUp {
		gain = probeBWGains[0]
		if refilling && bw < refillDeep*e.refillTo {
			// Far below what the reset forgot: Startup's gain, so a
			// path that fell to a tenth of its rate is back in a few
			// rounds, not in ten of ProbeBW_UP's.
			gain = startupGain
		}
	}
	if gain > 1 {
		e.roundProbed[0] = true
	}
	if gain <= 1 {
		// Cruising: hold the queue near QueueTarget with NADA's
		// proportional term (RFC 8698 §4.3), relative to max_bw, never
		// below drainMin of it: a base delay that moved up costs at most
		// that, and does not compound from one report to the next.
		gain *= min(1, max(drainMin, 1-(e.queue-qt)/tau))
	}
	a := max(gain*bw, e.cfg.MinRate)
	if bw == 0 {
		a = e.target
	}
	switch {
	case e.probing:
		a = min(a, probeBaseGain*e.probeRate)
	case (overflow || lossCongestion) && now.Sub(e.overflowAt) >= max(s.SRTT, reportMin):
		// A drop-tail queue overflowing (loss above the path's own floor
		// while a queue stands): BBRv2's loss response (draft-ietf-ccwg-bbr
		// §4.5.10, β = 0.7 of inflight_hi) in the form of GCC's rate
		// back-off (draft-ietf-rmcat-gcc-02 §5.5: 0.85 × the received
		// rate), and max_bw forgets the rates the link no longer carries.
		// GCC measures that rate over 0.5–1 s: the report's rate counts
		// for at least half of the rate of the last backoffWindow. And at
		// most once per round trip (RFC 9002 §7.3.2's recovery period:
		// the gaps found in the reports after it are the same overflow's).
		// A report of two datagrams from inside a 100-ms outage, the
		// back-off taken from it alone and repeated on the late gaps
		// after it, held S2's Starlink path at 0.1 Mbit/s for 2.5 s on a
		// link of 14–95 Mbit/s.
		from := max(recv, backoffFloor*e.recvLong)
		a = min(a, gccBackoff*from)
		e.forget(now, bw, recv)
		e.bw.reset(now, from)
		e.overflowAt = now
		e.overuses++
		e.startup = false
	case drain:
		// A queue above the drain bound: send below what arrives, by
		// enough to drain it above QueueTarget within tau (NADA's
		// proportional term, RFC 8698 §4.3), and if the link is what
		// limits, max_bw restarts from what it carries now (the capacity
		// fell: the old maximum would refill the queue). A report of one
		// or two datagrams from a dip is no rate: taken alone it held
		// S2's Starlink path at 0.1-0.3 Mbit/s (seed 3).
		from := recv
		if r.Datagrams < rateMinDatagrams {
			from = max(recv, backoffFloor*e.recvLong)
		}
		f := min(1, max(drainMin, 1-(e.queue-qt)/tau))
		a = min(a, from*f)
		if linkLimited {
			e.forget(now, bw, recv)
			e.bw.reset(now, from)
		}
		e.overuses++
		e.startup = false
	case !limited:
		// Application-limited: do not grow. For one max_bw window after
		// the last report that measured the link, keep max_bw (a spare
		// path of a bond takes load back at once, BBR paces an
		// application-limited flow at max_bw too); after it, come down
		// to twice what the receiver got lately (no less than the
		// initial rate), so a rate learnt while draining a backlog does
		// not outlive it.
		keep := max(appLimitedGain*e.maxRecv, e.cfg.InitialRate)
		if now.Sub(e.limitedAt) <= window {
			keep = max(keep, bw)
		}
		a = min(a, max(e.target, e.cfg.MinRate), keep)
	}
	if now.Sub(e.overflowAt) < overflowMemory && gain > 1 && !probingUp && (overflow || lossCongestion || e.queue > drainAt || s.BacklogBytes == 0) {
		// Near a shallow queue that overflowed lately, probe gently
		// (GCC's additive increase near the last overuse, §5.5), unless
		// a backlog waits, nothing overflows now and the queue is below
		// the drain bound: ProbeBW's probe then goes in full, and the
		// climb can follow it if it pays. On a cellular trace whose base
		// delay is redrawn every second, reports 2 s apart read as
		// overflows, and a target held to 2 % probes sat at 2–3 Mbit/s
		// under 4 Mbit/s of offered load on a 22-Mbit/s link
		// (TestRateTraceDemoLoad, built-in model, seed 2); with the
		// queue held to QueueTarget there, a base redrawn a few ms up
		// (16–19 ms of queue) held it so for the 2 s after a drain.
		a = min(a, bw*(1+velocityStart))
	}
	// GCC §5.5: never raise the rate far above what the receiver got
	// lately (Startup doubles it per round, ProbeBW by 1.25).
	if a > e.target {
		g := maxRecvGain
		if e.startup {
			g = startupGain
		}
		a = min(a, max(e.target, g*e.maxRecv))
	}
	e.target = min(max(a, e.cfg.MinRate), e.cfg.MaxRate)
}

// learnOwnLoss feeds a report's loss rate lossNow (over length µs) into
// the path's own loss (RateEstimate.OwnLoss), unless the report came
// within max(congestMemory, 2 sRTT) of one that showed the path's queue
// overflowing or draining above QueueTarget, or of the first after an
// outage (SendStats.Outage): a drop-tail queue's overflow, and the gaps
// found only when packets arrive again after it or after an outage, are
// the target's or the liveness check's to answer, not the path's own.
// After more than LossMemory without learning (an idle path) it starts
// again from no loss, as Path.ReceiverLoss already reads it.
// The queue must be a real one: random loss
// that starts on a path whose floor was learnt clean reads as overflow at
// first, over a queue of a millisecond or less.
func (e *RateEstimator) learnOwnLoss(now time.Time, lossNow, length float64, srtt time.Duration) {
	for _, at := range [...]time.Time{e.congestAt, e.outageAt} {
		if !at.IsZero() && now.Sub(at) <= max(congestMemory, 2*srtt) {
			return
		}
	}
	if !e.ownAt.IsZero() && now.Sub(e.ownAt) > LossMemory { // an idle path: what it lost then is not news
		e.ownLoss = 0
	}
	e.ownAt = now
	e.ownLoss += min(1, length/lossWindow) * (lossNow - e.ownLoss)
}

// forget records, at a reset of max_bw at now, the rate bw it forgets, for
// the refill; recv is what the link carried in the report. A reset with no
// refill under way starts one, to refillShare × bw for refillMemory, if
// the link carried less than refillDip × bw: a dip (the Starlink trace
// falls from 70 to 2–25 Mbit/s for 100–300 ms), not a capacity that
// drifts down (a cellular trace's), which a refill would only overshoot.
// A reset before the refill has probed is the same dip (it spans several
// reports) and keeps the higher rate; a reset after it has probed ends it.
// A reset also ends the delivery-keyed climb: a probe that paid before it
// does not outlive it.
func (e *RateEstimator) forget(now time.Time, bw, recv float64) {
	e.paying = false
	switch {
	case now.Before(e.refillUntil) && e.refillProbed:
		e.endRefill()
	case now.Before(e.refillUntil):
		e.refillTo = max(e.refillTo, refillShare*bw)
		if recv < refillDip*bw {
			// A further dip before the refill could probe (the dip goes
			// on: a LEO reconfiguration's seconds of loss and delay):
			// keep the memory until it can.
			e.refillUntil = now.Add(refillMemory)
		}
	case recv < refillDip*bw:
		e.refillTo, e.refillUntil, e.refillProbed = refillShare*bw, now.Add(refillMemory), false
	}
}

// endRefill ends the refill under way.
func (e *RateEstimator) endRefill() {
	e.refillTo, e.refillUntil, e.refillProbed = 0, time.Time{}, false
}
