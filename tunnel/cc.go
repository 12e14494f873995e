package tunnel

import (
	"context"
	"math"
	"time"

	"github.com/quic-go/quic-go/congestion"

	"github.com/bondd/bondd/policy"
)

// pathCC is the congestion controller of one path connection, installed
// through the quic-go fork's hook (third_party/quic-go, package
// congestion; quic.Config.CongestionControl). quic-go calls it on the
// connection's own goroutine for every packet sent, acknowledged, lost or
// abandoned, and asks it whether and when the next packet may leave.
//
// Under bondd's rate control (rateCtl.active: RateControlBondd, and the
// peer negotiated the rate capability) the path's policy.RateEstimator
// decides, and quic-go's loss-based window no longer caps the path:
//
//   - The rate below is the larger of the target and the path's max_bw
//     (policy.RateEstimate.Capacity), as BBR sizes its window and pacing
//     from max_bw: bondd's own queue already holds the path to the
//     target, and on an application-limited path (a video path whose
//     target decays to twice what it sends) a keyframe that bondd's queue
//     releases at once must leave at the link's rate, not be held again
//     here. Sized from the target alone, the window held the demo's
//     bursts on paths whose targets had decayed to about 1 Mbit/s: 182
//     frames expired in bondd's queues (seed 3).
//   - The window is 2 × rate × min RTT (BBR's cwnd_gain of 2 over the
//     estimated BDP, draft-ietf-ccwg-bbr §5.6.4.2) plus rate × ccRoom:
//     the queue the estimator keeps on purpose (it drains above twice
//     policy.DefaultQueueTarget) and the peer's ACK delay (max_ack_delay,
//     RFC 9000 §18.2: 25 ms), which BBR covers with its extra_acked term
//     (§5.6.4.1); plus rate × the LEO reconfiguration hold on a path that
//     has one (acknowledgments stop for the hold, LeoCC, SIGCOMM 2025); at
//     least ccMinWindow packets. Without ccRoom the window bound below
//     the target: on the steady-links bench (30 Mbit/s, 41-ms min RTT, a
//     66-ms sRTT at the estimator's queue) the path sent 26.4 of its 30.4
//     Mbit/s target with bondd's queue full.
//   - Sending is paced at ccPacingGain × rate with a burst of
//     max(10 packets, pacerBurstTime at the rate): bondd's own queue
//     already releases frames at the target (rateCtl.pace), where
//     priorities and deadlines act; quic-go's pacer keeps QUIC's own
//     packets (ACKs, the headers) from bunching them on the wire.
//   - On an application-limited path (policy.RateEstimate.AppLimited: a
//     video path whose backlog is its keyframe, once a second) the window
//     is also at least quic-go's own, and a packet may leave when either
//     pacer lets it (quic-go's paces a window per round trip, not the
//     rate): the burst must leave at the link's speed for the
//     receiver to see it, since what was paced at a rate only measures
//     that rate. Held to max(target, max_bw), the Starlink path of S2
//     lost 256 of 500 video frames in 10 s (seed 3), against 10 under
//     quic-go's controller.
//   - A lost packet is not a congestion signal here: random loss is the
//     link's, and the estimator backs off when the receiver's reports show
//     the queue growing (one-way delay, draft-ietf-rmcat-gcc §5) or losses
//     that come with it (policy.RateEstimate.OwnLoss).
//
// Otherwise (RateControlQUIC, an older peer, or a concentrator connection
// before its hello named the path) it is quic-go's own NewReno (def),
// the baseline that the "quic" setting measures, through the same hook.
//
// Either way it hands the connection's recorder (tracer.go) every packet
// sent, acknowledged, lost or received, the DATAGRAM frames each carried
// (congestion.Observer) and the datagrams quic-go dropped, so that quic-go
// builds no qlog events for bondd; and it reports packets that quic-go's
// probe timeout abandoned (RFC 9002 §6.2: a packet of DATAGRAM frames is
// never retransmitted and no loss event names it) as lost, so the path's
// loss, its resends and its path MTU search see them (sentring.go).
type pathCC struct {
	rec *recorder
	def congestion.Controller
	rtt congestion.RTTStats

	maxSize int64 // the largest packet, bytes
	pacer   policy.Pacer
	rate    uint64 // the float64 bits of the rate the pacer was last set to, bytes/s
	window  int64  // the window at the last decision, bytes
	// inFlight is the connection's bytes in flight: as quic-go reported
	// with the last packet sent, less what was acknowledged, lost or
	// abandoned since.
	inFlight int64
	// appLimited is the path's policy.RateEstimate.AppLimited at the last
	// decision.
	appLimited bool
}

var _ congestion.Observer = (*pathCC)(nil) // quic-go finds it by a type assertion

// Controller constants.
const (
	ccCwndGain   = 2                                                 // window over the estimated BDP
	ccRoom       = 2*policy.DefaultQueueTarget + 25*time.Millisecond // the estimator's queue and the peer's ACK delay
	ccPacingGain = 1.1                                               // quic-go's pacer over the rate: room for QUIC's own bytes
	ccMinWindow  = 4                                                 // packets: BBR's BBRMinPipeCwnd (draft-ietf-ccwg-bbr §5.6.4.2)
	ccInitialRTT = 100 * time.Millisecond
	// ccLEORoom is the extra time at the rate a path with a LEO schedule
	// keeps in flight: the hold (policy's default, 100 ms) and its lead.
	ccLEORoom = 110 * time.Millisecond
)

// ccFactory returns the quic.Config.CongestionControl of a path
// connection whose recorder is rec, or, on the concentrator (rec nil), the
// recorder the connection's context carries.
func ccFactory(rec *recorder) congestion.Factory {
	return func(ctx context.Context, def congestion.Controller, rtt congestion.RTTStats) congestion.Controller {
		r := rec
		if r == nil {
			r, _ = ctx.Value(recorderKey{}).(*recorder)
		}
		if r == nil {
			return def
		}
		return &pathCC{rec: r, def: def, rtt: rtt, maxSize: 1252}
	}
}

// rc returns the path's rate control when it decides this connection's
// rate, else nil.
func (c *pathCC) rc() *rateCtl {
	pc := c.rec.pc.Load()
	if pc == nil || !pc.path.rc.active() {
		return nil
	}
	return pc.path.rc
}

// update sets the window and the pacer from the path's target at now
// (zero: read the clock only if the pacer's rate changes).
func (c *pathCC) update(rc *rateCtl, now time.Time) {
	rate := math.Float64frombits(rc.target.Load())
	c.appLimited = false
	if e := rc.estimate.Load(); e != nil {
		rate = max(rate, e.Capacity) // max_bw: see the window and pacing above
		c.appLimited = e.AppLimited
	}
	minRTT := c.rtt.MinRTT()
	if minRTT <= 0 {
		minRTT = ccInitialRTT
	}
	w := rate * (ccCwndGain*minRTT + ccRoom).Seconds()
	if rc.p.state.LEOReconf() != nil {
		w += rate * ccLEORoom.Seconds()
	}
	c.window = max(int64(w), ccMinWindow*c.maxSize)
	if t := math.Float64bits(rate); t != c.rate {
		if now.IsZero() {
			now = time.Now()
		}
		c.rate = t
		c.pacer.SetRate(now, ccPacingGain*rate, max(int(10*c.maxSize), int(ccPacingGain*rate*pacerBurstTime.Seconds())))
	}
}

// quic-go's own controller hears every event whichever decides, so that
// its window and pacer are current when an application-limited path hands
// the decisions to it (the rate section above).

// OnPacketSent charges an ack-eliciting packet of n bytes to the pacer. A
// packet of ACK frames only is neither congestion controlled nor counted
// in flight (RFC 9002 §7) and is not charged: the receiving end of a bulk
// path sends thousands a second, which would use up a pacer at its own
// reverse target (1 Mbit/s when nothing is sent that way) and hold back
// its control stream, whose rate reports the sender's target depends on.
func (c *pathCC) OnPacketSent(t time.Time, inFlight, pn, n int64, eliciting bool) {
	c.def.OnPacketSent(t, inFlight, pn, n, eliciting)
	c.inFlight = inFlight
	c.rec.sent(pn, eliciting)
	if rc := c.rc(); rc != nil && eliciting {
		c.update(rc, t)
		c.pacer.Consume(t, int(n))
	}
	if eliciting {
		c.metrics()
	}
}

func (c *pathCC) OnPacketAcked(pn, n, prior int64, t time.Time) {
	c.rec.acked(pn)
	c.def.OnPacketAcked(pn, n, prior, t)
	c.inFlight = max(min(c.inFlight, prior)-n, 0)
	c.metrics()
}

// OnPacketLost hears of a packet loss detection declared lost; n 0 is an
// ACK frame's ECN congestion report (no packet).
func (c *pathCC) OnPacketLost(pn, n, prior int64) {
	if n > 0 {
		c.rec.lost(pn, time.Now())
		c.inFlight = max(min(c.inFlight, prior)-n, 0)
	}
	c.def.OnPacketLost(pn, n, prior)
	if n > 0 {
		c.metrics()
	}
}

func (c *pathCC) OnPacketAbandoned(pn, n int64) {
	c.rec.abandoned(pn, time.Now())
	c.inFlight = max(c.inFlight-n, 0)
	c.def.OnPacketAbandoned(pn, n)
	c.metrics()
}

// metrics hands the connection's RTT, window and bytes in flight to its
// path (pathConn.onMetrics), after each ack-eliciting packet sent and each
// packet acknowledged, lost or abandoned. Before the connection's first
// RTT sample (min RTT 0) the RTT is 0, which holds the window back
// (pathConn.publish); after a migration (a NAT rebinding) it is quic-go's
// initial 100 ms until the first sample on the new path.
func (c *pathCC) metrics() {
	pc := c.rec.pc.Load()
	if pc == nil {
		return
	}
	srtt, minRTT := c.rtt.SmoothedRTT(), c.rtt.MinRTT()
	if minRTT <= 0 {
		srtt = 0
	}
	pc.onMetrics(srtt, minRTT, int(c.CongestionWindow()), int(c.inFlight))
}

// The congestion.Observer side: what quic-go reports of the connection's
// packets besides congestion control, for its recorder (tracer.go).

func (c *pathCC) OnDatagramSent(pn, n int64)               { c.rec.datagramSent(pn, int(n)) }
func (c *pathCC) OnDatagramDropped(received bool, n int64) { c.rec.datagramDropped(received, int(n)) }
func (c *pathCC) OnPacketReceived()                        { c.rec.received(time.Now()) }

func (c *pathCC) OnSpuriousLoss(pn int64) { c.def.OnSpuriousLoss(pn) }
func (c *pathCC) OnRetransmissionTimeout(retransmitted bool) {
	c.def.OnRetransmissionTimeout(retransmitted)
}
func (c *pathCC) MaybeExitSlowStart() { c.def.MaybeExitSlowStart() }

// CanSend reports whether inFlight bytes leave room for another packet.
// With nothing in flight either window has room, and the answer needs
// none of the path's state: quic-go asks before every packet, an idle
// connection's ACKs included, and in the CPU profile of a node holding
// 10,000 idle bonds CanSend took 6 % of the samples, most of them loads
// of the path's rate-control state that was no longer in the cache.
func (c *pathCC) CanSend(inFlight int64) bool {
	if inFlight == 0 {
		return true
	}
	if rc := c.rc(); rc != nil {
		c.update(rc, time.Time{})
		return inFlight < c.windowNow()
	}
	return c.def.CanSend(inFlight)
}

// windowNow is the window under bondd's rate control: on an
// application-limited path also quic-go's, whichever is larger.
func (c *pathCC) windowNow() int64 {
	if c.appLimited {
		return max(c.window, c.def.CongestionWindow())
	}
	return c.window
}

func (c *pathCC) HasPacingBudget(now time.Time) bool {
	if rc := c.rc(); rc != nil {
		c.update(rc, now)
		ours := c.pacer.Delay(now, int(c.maxSize)) == 0
		return ours || (c.appLimited && c.def.HasPacingBudget(now))
	}
	return c.def.HasPacingBudget(now)
}

func (c *pathCC) TimeUntilSend(inFlight int64) time.Time {
	if rc := c.rc(); rc != nil {
		now := time.Now()
		c.update(rc, now)
		d := c.pacer.Delay(now, int(c.maxSize))
		if d == 0 {
			return time.Time{}
		}
		if c.appLimited {
			if t := c.def.TimeUntilSend(inFlight); t.Before(now.Add(d)) {
				return t // the earlier of the two pacers (zero: now)
			}
		}
		return now.Add(d)
	}
	return c.def.TimeUntilSend(inFlight)
}

func (c *pathCC) SetMaxDatagramSize(n int64) {
	c.maxSize = n
	c.def.SetMaxDatagramSize(n)
}

func (c *pathCC) CongestionWindow() int64 {
	if c.rc() != nil && c.window > 0 {
		return c.windowNow()
	}
	return c.def.CongestionWindow()
}

func (c *pathCC) InSlowStart() bool { return c.rc() == nil && c.def.InSlowStart() }
func (c *pathCC) InRecovery() bool  { return c.rc() == nil && c.def.InRecovery() }
