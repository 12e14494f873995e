package policy

import (
	"math"
	"time"
)

// Lanes: an uplink may carry several QUIC connections, lanes, that
// together are one Path (tunnel/lanes.go has why: quic-go's loss-based
// congestion control reads random radio loss as congestion, and one
// connection's window stays far below what a lossy link carries). The
// LaneController below is the pure decision of how many lanes a path wants,
// from samples of its state; it keeps no clock of its own (each sample
// carries its time) and knows no QUIC. The tunnel package adds and removes
// the connections it asks for.

// LaneController decides, for an uplink with lanes: auto, when to add and
// remove lanes. It is fed a sample of the path every LaneSampleEvery.
//
// It adds lanes when, over the last decision epoch (LaneEpoch, at least 8
// smoothed RTTs), the path was never in an outage, the smoothed RTT stayed
// within LaneInflation of the path's base RTT in more than half of the
// samples (no standing queue at a bottleneck: a standing queue inflates
// most samples, a burst's own queue only those it passes through), and
// either
//
//   - the path was window-limited in at least half of the samples (frames
//     waiting in its queue, or bytes in flight within two packets of the
//     window) and QUIC declared packets lost: loss without queueing delay,
//     which a loss-based controller misreads as congestion; or
//   - it dropped queued frames (a burst, such as a video keyframe, that
//     waited too long for the window) and QUIC declared packets lost in
//     that epoch or within LaneLossMemory before it. A window cut by loss
//     regrows slowly: quic-go v0.65 runs NewReno (RFC 9002 §7.3.3), one
//     packet per round trip back from 0.7 × W (45 round trips from 150
//     packets), and only while the window binds, so longer on a path that
//     is application-limited between bursts. Meanwhile every burst waits
//     for the cut window;
//   - or, ahead of the next burst: QUIC declared a loss in the last two
//     epochs, after the last change of lanes, and the window left is below
//     1.25 × what the steady demand and the largest burst of the last
//     LaneBurstMemory need, bursts making up at least half of that and
//     half of the largest having waited in the path's queue at once (a
//     keyframe on the path it is sent on, not load the scheduler spreads
//     over paths with room).
//
// It adds as many lanes as the demand asks for with LaneHeadroom to spare —
// n·1.25·demand/capacity, where demand is the rate pushed onto the path and
// capacity its summed cwnd/srtt — and, when queued frames were dropped or
// ahead of a burst, as many as the largest burst of the last
// LaneBurstMemory asks for: n·1.25·(demand·srtt + burst)/cwnd, the burst
// being the most bytes pushed onto the path between two samples beyond
// the steady demand's share (a keyframe). At most
// LaneGrowth times as many per epoch: the new lanes' windows are still in
// slow start when the next epoch measures them. The headroom keeps the
// queue empty through the window's sawtooth. It does not add while the RTT is
// inflated: that loss is a full bottleneck, and more lanes would only take
// capacity from other flows there. With no loss at all it never adds: a
// window that no loss has cut grows by itself.
//
// The base RTT is QUIC's minimum RTT (RFC 9002 §5.2). On a path with a LEO
// reconfiguration schedule (LaneSample.LEO) it is at least the least
// smoothed RTT since the last reconfiguration window: a LEO path's
// propagation delay changes when the satellite serving it does (the
// Starlink trace's one-way delay moves between 20 and 40 ms from one
// 15-s slot to the next), and a path whose new satellite is farther would
// otherwise read as one with a standing queue for the rest of its life.
//
// Lanes must pay off. A capacity limit — a bottleneck whose queue is too
// short to inflate the RTT past the guard above — holds the lanes' rate
// flat: within LaneGain of the rate before the addition. Of the
// LaneJudgeEpochs epochs after an addition, the first whose rate grew by at
// least LaneGain or met 95 % of the demand ends the judgement and the lanes
// stay; if none did and most of them were flat, the link's capacity, not
// the windows, limits the path: the added lanes are removed again, and no
// lane is added for LaneRetry, twice as long after each further addition
// that did not pay off, at most LaneIdle (a link's capacity moves: the
// Starlink trace's from one second to the next spans 45–183 Mbit/s, and a
// judgement made in a dip must not hold the path at one lane for long).
// An epoch whose rate fell below the rate before
// by more than LaneGain is no evidence either way: a loss event that cuts
// every lane's window at once (random loss, the end of slow start) does
// that, and with most epochs falling the lanes stay. No lane is added or
// removed while an addition is being judged.
//
// It removes a lane when the path has not been window-limited for
// LaneIdle and the rate handed to the path would fill less than half of
// what one lane fewer can carry. Each change waits one epoch after the
// previous one (hysteresis); the number stays within 1..max.
type LaneController struct {
	max int // upper bound, ≥ 1
	n   int // lanes wanted now

	epochStart, lastChange, lastLimited time.Time
	samples, limited                    int
	queued                              int           // of the epoch's samples, those whose smoothed RTT was inflated
	outage, primed                      bool          // outage: a sample of the epoch was not Active
	lostAt, txAt, offeredAt, dropsAt    uint64        // counters at the epoch start
	idleTxAt                            uint64        // tx bytes when the idle stretch began
	lostSeen                            uint64        // Lost of the previous sample
	lastLoss                            time.Time     // the last sample whose Lost grew; zero: none yet
	slotMin                             time.Duration // LEO: least SRTT since the last reconfiguration window; 0: none yet
	offeredSeen                         uint64        // OfferedBytes of the previous sample
	burst                               uint64        // the epoch's most bytes pushed onto the path between two samples
	waited                              int           // the epoch's most bytes queued in one sample
	excess                              winMax        // the largest burst above the steady demand, bytes, over LaneBurstMemory
	waitedPeak                          winMax        // the most bytes queued in one sample, over LaneBurstMemory

	added      int       // lanes added at the last addition while it is judged, else 0
	judged     int       // epochs judged since that addition
	flat       int       // of them, epochs whose rate stayed within LaneGain of usedAtAdd
	usedAtAdd  float64   // bit/s the lanes took in the epoch before that addition
	noAddUntil time.Time // additions that did not pay off hold further ones until then
	unpaid     int       // additions in a row that did not pay off
}

// LaneSample is what LaneController reads from a path.
// Counters are totals since the path was created; the controller takes
// their differences over an epoch.
type LaneSample struct {
	Now            time.Time // when the sample was taken: the controller's only clock
	Active         bool      // the path is ACTIVE, or DEGRADED only as SUSPECT: not in an outage
	QueueBytes     int       // bytes waiting in the path's send queue
	Cwnd, Inflight int       // congestion window and bytes in flight, bytes, summed over the lanes
	SRTT, MinRTT   time.Duration
	Lost           uint64 // QUIC packets declared lost (RFC 9002), total
	TxBytes        uint64 // bytes handed to the lanes, total
	OfferedBytes   uint64 // bytes pushed onto the path's queue, total
	QueueDrops     uint64 // frames dropped from the path's queue (full, expired, deadline), total
	// LEO reports that the path has a LEO reconfiguration schedule
	// (Path.SetLEOReconf); Reconf that Now is inside one of its windows.
	LEO, Reconf bool
}

// Lanes returns the number of lanes the controller wants now, 1..max.
func (c *LaneController) Lanes() int { return c.n }

// LaneWireBytes is a full QUIC packet on the wire, in bytes, for window
// arithmetic: a lane is window-limited when its bytes in flight are within
// two of them of its congestion window.
const LaneWireBytes = 1400

// LaneHeadroom is the capacity LaneController aims for over the demand, and
// LaneGrowth the most it multiplies the lanes by in one epoch.
const (
	LaneHeadroom = 1.25
	LaneGrowth   = 4
	LaneGain     = 1.10 // the rate after an addition over the rate before it
	// LaneRetry is how long no lane is added after an addition that did
	// not pay off, doubled for each further one in a row, at most
	// LaneIdle.
	LaneRetry = 5 * time.Second
	// LaneJudgeEpochs is how many epochs after an addition may show its
	// gain before the added lanes are removed again.
	LaneJudgeEpochs = 3
)

// LaneInflation is how far the smoothed RTT may sit above the minimum RTT
// before LaneController reads it as a standing queue at a bottleneck: half the
// minimum RTT (jitter on short paths), at least 10 ms and at most 25 ms, so
// that on a long path (a 180-ms satellite hop) a queue of a few tens of
// milliseconds still counts as congestion.
func LaneInflation(minRTT time.Duration) time.Duration {
	return min(max(minRTT/2, 10*time.Millisecond), 25*time.Millisecond)
}

// Lane control timing: LaneSampleEvery is the period at which the caller
// feeds samples, LaneEpoch the shortest decision epoch, LaneIdle how long
// a path must not be window-limited before a lane is removed.
const (
	LaneSampleEvery = 100 * time.Millisecond
	LaneEpoch       = 500 * time.Millisecond
	LaneIdle        = 30 * time.Second
	// LaneLossMemory is how long after QUIC declared a loss dropped
	// queued frames still count as the work of a window that loss cut.
	LaneLossMemory = 30 * time.Second
	// LaneBurstMemory is how long the largest burst is remembered: a
	// few keyframe intervals.
	LaneBurstMemory = 10 * time.Second
)

// NewLaneController returns a controller of one path that starts with one
// lane and never asks for more than max (≥ 1) lanes. now starts the first
// epoch and the idle stretch.
func NewLaneController(max int, now time.Time) *LaneController {
	return &LaneController{max: max, n: 1, epochStart: now, lastChange: now, lastLimited: now}
}

// LaneDecision is a change LaneController asks for, with the figures behind
// it for the log.
type LaneDecision struct {
	Delta       int     // lanes added (> 0) or removed (< 0); 0: no change
	Reason      string  // why, for the log; empty when Delta is 0
	Limited     float64 // share of window-limited samples in the epoch, 0..1
	LossRate    float64 // QUIC packets lost per packet handed over, approximate
	UsedBps     float64 // rate handed to the lanes, bit/s
	DemandBps   float64 // rate pushed onto the path, bit/s
	CapacityBps float64 // cwnd/srtt, bit/s
}

// Sample records s, taken at s.Now (one every LaneSampleEvery, times not
// decreasing), and returns the change wanted, if any; Lanes gives the
// number after it. The caller adds or removes the connections. Not safe
// for concurrent use; it does not allocate.
func (c *LaneController) Sample(s LaneSample) LaneDecision {
	if !c.primed { // the first epoch starts at the first sample
		c.lostAt, c.txAt, c.offeredAt, c.dropsAt, c.idleTxAt = s.Lost, s.TxBytes, s.OfferedBytes, s.QueueDrops, s.TxBytes
		c.lostSeen, c.offeredSeen, c.epochStart, c.primed = s.Lost, s.OfferedBytes, s.Now, true
		return LaneDecision{}
	}
	c.samples++
	if s.QueueBytes > 0 || (s.Cwnd > 0 && s.Inflight+2*LaneWireBytes >= s.Cwnd) {
		c.limited++
		c.lastLimited = s.Now
		c.idleTxAt = s.TxBytes
	}
	if s.OfferedBytes >= c.offeredSeen {
		c.burst = max(c.burst, s.OfferedBytes-c.offeredSeen)
	}
	c.waited = max(c.waited, s.QueueBytes)
	c.offeredSeen = s.OfferedBytes
	if s.Lost > c.lostSeen {
		c.lastLoss = s.Now
	}
	c.lostSeen = s.Lost
	if base := c.baseRTT(s); base > 0 && s.SRTT-base > LaneInflation(base) {
		c.queued++
	}
	if !s.Active {
		c.outage = true // an outage is not random loss either
	}
	epoch := max(LaneEpoch, 8*s.SRTT)
	if s.Now.Sub(c.epochStart) < epoch {
		return LaneDecision{}
	}
	d := LaneDecision{Limited: float64(c.limited) / float64(c.samples)}
	if s.SRTT > 0 {
		d.CapacityBps = float64(s.Cwnd) * 8 / s.SRTT.Seconds()
	}
	elapsed := s.Now.Sub(c.epochStart).Seconds()
	lost, tx, offered := s.Lost-c.lostAt, s.TxBytes-c.txAt, s.OfferedBytes-c.offeredAt
	if tx > 0 {
		d.LossRate = float64(lost) * LaneWireBytes / float64(tx)
	}
	d.UsedBps, d.DemandBps = float64(tx)*8/elapsed, float64(offered)*8/elapsed
	ready := s.Now.Sub(c.lastChange) >= epoch
	dropped := s.QueueDrops > c.dropsAt
	// A standing queue inflates most of the epoch's samples; a burst's own
	// queue (a keyframe's) only the one or two it passes through.
	inflated := c.outage || 2*c.queued >= c.samples
	if s.SRTT > 0 { // the burst above the steady demand's share of a sample interval
		c.excess.update(s.Now, LaneBurstMemory, max(float64(c.burst)-d.DemandBps/8*LaneSampleEvery.Seconds(), 0))
	}
	c.waitedPeak.update(s.Now, LaneBurstMemory, float64(c.waited))
	// need is the window, bytes, that carries the steady demand and the
	// largest recent burst within one smoothed RTT.
	need := d.DemandBps/8*s.SRTT.Seconds() + c.excess.get()
	var want int
	var why string
	if ready && c.n < c.max && !s.Now.Before(c.noAddUntil) && tx > 0 && !inflated {
		// tx > 0: a path that carried nothing in the epoch (stalled, its
		// queue expiring) has no window to widen.
		want, why = c.addition(d, s, lost, dropped, need, epoch)
	}
	judging := false
	if c.added > 0 {
		c.judged++
		if d.UsedBps >= c.usedAtAdd/LaneGain {
			c.flat++
		}
		switch {
		case d.UsedBps >= LaneGain*c.usedAtAdd || d.UsedBps >= 0.95*d.DemandBps:
			c.added, c.unpaid = 0, 0 // paid off
		case c.judged < LaneJudgeEpochs:
			judging = true
		case 2*c.flat > c.judged:
			d.Delta, d.Reason = -min(c.added, c.n-1), "no gain from the last lanes: the link's capacity, not the windows, limits the path"
			c.noAddUntil = s.Now.Add(min(LaneRetry<<min(c.unpaid, 8), LaneIdle))
			c.added = 0
			c.unpaid++
		default:
			c.added = 0 // the rate fell for reasons of its own: the lanes stay
		}
	}
	switch {
	case d.Delta != 0 || judging:
	case why != "":
		d.Delta, d.Reason = min(want, LaneGrowth*c.n, c.max)-c.n, why
		c.added, c.usedAtAdd, c.judged, c.flat = d.Delta, d.UsedBps, 0, 0
	case ready && c.n > 1 && s.Now.Sub(c.lastLimited) >= LaneIdle && d.CapacityBps > 0:
		idleBps := float64(s.TxBytes-c.idleTxAt) * 8 / s.Now.Sub(c.lastLimited).Seconds()
		if idleBps < 0.5*d.CapacityBps*float64(c.n-1)/float64(c.n) {
			d.Delta, d.Reason, d.UsedBps = -1, "under-used", idleBps
			c.lastLimited, c.idleTxAt = s.Now, s.TxBytes // the next removal waits another LaneIdle
		}
	}
	if d.Delta != 0 {
		c.n += d.Delta
		c.lastChange = s.Now
	}
	c.epochStart, c.samples, c.limited, c.queued, c.outage, c.burst, c.waited = s.Now, 0, 0, 0, false, 0, 0
	c.lostAt, c.txAt, c.offeredAt, c.dropsAt = s.Lost, s.TxBytes, s.OfferedBytes, s.QueueDrops
	return d
}

// baseRTT returns the RTT against which s's smoothed RTT counts as
// inflated: the minimum RTT, and on a LEO path at least the least smoothed
// RTT since the last reconfiguration window (the type's comment has why).
// It updates that least value from s.
func (c *LaneController) baseRTT(s LaneSample) time.Duration {
	if !s.LEO {
		return s.MinRTT
	}
	switch {
	case s.Reconf:
		c.slotMin = 0 // the satellite, and the propagation delay, may change here
		return s.MinRTT
	case s.SRTT > 0 && (c.slotMin == 0 || s.SRTT < c.slotMin):
		c.slotMin = s.SRTT
	}
	return max(s.MinRTT, c.slotMin)
}

// addition returns the lanes the epoch's figures ask for (before the
// LaneGrowth and max caps) and why, or an empty reason when they ask for
// none; the type's comment gives the rules. lost is the epoch's QUIC
// losses, dropped whether it dropped queued frames, need the window,
// bytes, that the steady demand and the largest recent burst ask for.
func (c *LaneController) addition(d LaneDecision, s LaneSample, lost uint64, dropped bool, need float64, epoch time.Duration) (want int, why string) {
	forBurst := 0 // lanes whose windows carry need with headroom
	if s.Cwnd > 0 {
		forBurst = int(math.Ceil(float64(c.n) * LaneHeadroom * need / float64(s.Cwnd)))
	}
	switch {
	case d.Limited >= 0.5 && lost > 0:
		why = "window-limited with loss and no RTT inflation"
	case dropped && lost > 0:
		why = "queued frames dropped, with loss and no RTT inflation"
	case dropped && c.lossWithin(s.Now, LaneLossMemory):
		why = "queued frames dropped since a loss cut the window, no RTT inflation"
	case c.lossWithin(s.Now, 2*epoch) && c.lastLoss.After(c.lastChange) &&
		2*c.excess.get() >= need && 2*c.waitedPeak.get() >= c.excess.get() && s.Cwnd > 0 && LaneHeadroom*need > float64(s.Cwnd):
		// Ahead of the next burst: a loss has just cut the window (since
		// the last change of lanes) below what the recent bursts need;
		// bursts, not a steady rate, make up most of that need, and they
		// queued on this path (half of one waited in its queue at once)
		// rather than being spread by the scheduler over paths with room.
		return max(c.n+1, forBurst), "a loss cut the window below what the last bursts need"
	default:
		return 0, ""
	}
	want = c.n + 1
	if d.CapacityBps > 0 {
		want = max(want, int(math.Ceil(float64(c.n)*LaneHeadroom*d.DemandBps/d.CapacityBps)))
	}
	if dropped {
		want = max(want, forBurst)
	}
	return want, why
}

// lossWithin reports whether QUIC declared a loss within d before now.
func (c *LaneController) lossWithin(now time.Time, d time.Duration) bool {
	return !c.lastLoss.IsZero() && now.Sub(c.lastLoss) <= d
}
