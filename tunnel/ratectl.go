package tunnel

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/quicvarint"

	"github.com/bondd/bondd/internal/monoclock"
	"github.com/bondd/bondd/internal/timerheap"
	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/tunnel/ctrlmsg"
)

// Per-path rate control (docs/design.md, "Rate control"). bondd decides
// each path's rate itself; quic-go's congestion controller for the path's
// connection is bondd's (pathCC, cc.go), which sizes the window and paces
// from the same target, so quic-go's own loss-based window never binds
// below it:
//
//  1. The path's send routine stamps every datagram with the path's next sequence
//     number and its hand-off time (FlagPathSeq, StampPathSeq) as it hands
//     it to quic-go. Frames dropped from bondd's own queue never get a
//     number, so the receiver's gaps are the path's own loss.
//  2. The receiver keeps a policy.RateMeter per path (pathConn.routineReceive)
//     and, every rateFeedbackEvery (50 ms), sends the path's report back as a
//     PATH_RATE_FEEDBACK on one of the path's control streams
//     (startFeedback, on the node's timer heap).
//  3. The sender feeds each report to the path's policy.RateEstimator
//     (onFeedback) and publishes the target; the path's send routine pops
//     frames from its queue only when the path's policy.Pacer has tokens,
//     so the wait happens in bondd's priority queue, where deadlines and
//     priorities act, not in the link's queue.
//  4. The target, the receiver-seen loss and the queueing delay go to the
//     scheduler's view of the path (policy.Path.OnRateEstimate), and the
//     loss to the FEC loss estimator instead of QUIC's loss events.
//
// A path with no report for longer than max(4 sRTT, rateStaleMin) while it
// sends halves its target once per such period, down to
// policy.DefaultMinRate: a path whose feedback stopped must not keep a
// stale high rate.
//
// Rate control is active on a path when this end's PathOptions.RateControl
// is RateControlBondd and the peer negotiated the "rate" capability;
// otherwise (RateControlQUIC, or an older peer) the path keeps quic-go's
// pacing and the congestion-window view, and only reports what it receives
// if the peer asks.

// Values of PathOptions.RateControl.
const (
	// RateControlQUIC leaves each path's rate to quic-go's congestion
	// control, the behaviour before rate control (the zero value).
	RateControlQUIC = "quic"
	// RateControlBondd paces each path at the target of its
	// policy.RateEstimator, fed by the receiver's reports.
	RateControlBondd = "bondd"
)

// Timing of rate control.
const (
	// rateFeedbackEvery is the receiver's report interval (feedbackTick)
	// on every path, whatever its round trip (GCC: 50–100 ms). The
	// estimator acts once per report, and its constants assume 50 ms
	// (policy.RateEstimator). Reports once per sRTT (80–170 ms on the
	// Starlink trace) drained a 100–300-ms capacity dip only after it had
	// ended: the closed-loop trace models (policy/ratetrace_test.go)
	// delivered 0.695 of the Starlink path's capacity and 0.836 of the
	// cellular paths' that way, 0.775 and 0.965 at 50 ms; `bondd bench
	// capacity` (bond-udp, seeds 1–2, two runs each) delivered 0.596 of
	// the links' sum against 0.538.
	rateFeedbackEvery = 50 * time.Millisecond
	rateStaleMin      = 500 * time.Millisecond // no report for this long (or 4 sRTT) while sending: fall back
	rateQuietAfter    = time.Second            // empty reports continue this long after the last datagram
	lossProbeEvery    = 100 * time.Millisecond // a lossy path gets a copy of one packet this often
	pacerBurstTime    = 4 * time.Millisecond   // the bucket holds this much at the target rate, at least DefaultPacerBurst
)

// rateCtl is one path's rate-control state, on both roles: the receiver's
// meter and the sender's estimator and pacer.
type rateCtl struct {
	p  *path
	on bool // this end paces by rate (RateControlBondd)

	// peer is set when the peer negotiated the "rate" capability on one of
	// the path's connections: it then understands FlagPathSeq and sends
	// reports.
	peer  atomic.Bool
	txSeq atomic.Uint32 // the next per-path sequence number

	// Receiver.
	meterMu  sync.Mutex
	meter    policy.RateMeter
	seqLoss  policy.SeqLoss                    // the reports' Lost: reordering tolerated for one interval or policy.SeqLossWindow datagrams
	lastRxNs atomic.Int64                      // monoclock ns of the last metered datagram
	sentFb   atomic.Uint64                     // reports sent
	lastFb   atomic.Pointer[policy.RateReport] // the last report sent, for the status

	// The reports' timer and streams (startFeedback), guarded by fbMu.
	fbMu       sync.Mutex
	fbTimer    *timerheap.Timer // in the node's heap; nil until the first stream
	fbStreams  []*fbStream      // the first carries the reports
	fbWrite    *fbStream        // the stream a report is being written on, nil when none
	fbWritten  chan struct{}    // closed when that write ends
	unsentLost uint32           // lost datagrams of a report the stream had no room for

	// Sender.
	estMu     sync.Mutex
	est       *policy.RateEstimator
	lastSent  uint64    // paced at the previous Update, bytes
	outages   uint64    // path.outages at the previous Update
	staleAt   time.Time // the last report, or the last fallback step
	staleSent uint64    // paced bytes at staleAt
	estimate  atomic.Pointer[policy.RateEstimate]
	target    atomic.Uint64 // float64 bits, bytes/s: what the pacer releases
	reports   atomic.Uint64 // reports received
	fallbacks atomic.Uint64 // halvings for want of reports

	probeAt int64 // monoclock ns of the last loss probe; the TUN reader's (probeLossy)

	pacerMu   sync.Mutex
	pacer     policy.Pacer
	pacerRate uint64 // the target bits the pacer was last set to
	// pacerDepth is the bucket's depth the pacer was last set to, bytes:
	// pacerBurstTime at the target, or on an application-limited path
	// the connection's congestion window (pace).
	pacerDepth int
	released   atomic.Uint64
	heldBack   atomic.Uint64 // bytes that waited for tokens
}

func newRateCtl(p *path, mode string) *rateCtl {
	rc := &rateCtl{p: p, on: mode == RateControlBondd}
	rc.est = policy.NewRateEstimator(policy.RateConfig{LEO: p.state.LEOReconf()})
	rc.target.Store(math.Float64bits(rc.est.Target()))
	return rc
}

// active reports whether the path paces by rate now.
func (rc *rateCtl) active() bool { return rc.on && rc.peer.Load() }

// setPeer records that a connection of the path negotiated caps.
func (rc *rateCtl) setPeer(caps ctrlmsg.Caps, now time.Time) {
	if caps&ctrlmsg.CapRate == 0 || rc.peer.Swap(true) {
		return
	}
	rc.p.bond.pathSeq.Store(true)
	if rc.on {
		rc.estMu.Lock()
		rc.staleAt = now
		startup := rc.est.Estimate().Startup // a new estimator starts in it
		rc.estMu.Unlock()
		rc.p.state.SetRateControl(true)
		rc.setTarget(rc.targetRate(), startup)
		rc.p.state.OnRateEstimate(rc.targetRate(), 0, 0, now)
	}
}

func (rc *rateCtl) targetRate() float64 { return math.Float64frombits(rc.target.Load()) }

// setTarget publishes the path's target rate t, bytes/s, to the pacers
// and sizes the path's send queue for it (sendQueue.resize). Sized for
// the larger of t and max_bw instead, the queues of bondd bench
// capacity's bond-udp held more than the paths could send in time: p95
// one-way delay 268–294 ms against 262–270, and no more delivered. In
// the estimator's Startup (startup), whose target doubles each round
// from 1 Mbit/s and says nothing yet of what the path carries, the queue
// takes its largest size: a flow that starts at its full rate waits
// there, up to max_queue_delay, while the rate is found.
func (rc *rateCtl) setTarget(t float64, startup bool) {
	rc.target.Store(math.Float64bits(t))
	rate := t
	if startup {
		rate = math.Inf(1)
	}
	rc.p.state.SetQueueCap(rc.p.queue.resize(rate, rc.p.bond.mtu+HeaderBudget))
}

// onDatagram meters one datagram received on the path at now. It does not
// allocate.
func (rc *rateCtl) onDatagram(dg []byte, now time.Time) {
	seq, ts, ok := peekPathSeq(dg)
	if !ok {
		return
	}
	rc.meterMu.Lock()
	rc.meter.OnDatagram(uint64(monoclock.Micros(now)), ts, seq, len(dg))
	rc.seqLoss.OnSeq(seq)
	rc.meterMu.Unlock()
	rc.lastRxNs.Store(monoclock.Nanos(now))
}

// peekPathSeq returns the per-path sequence number and send timestamp of a
// FlagPathSeq datagram, without checking the rest of its header.
func peekPathSeq(dg []byte) (seq uint32, ts uint64, ok bool) {
	if len(dg) < 2+PathSeqLen+1 || dg[1]&FlagPathSeq == 0 || dg[0]>>4 != Version {
		return 0, 0, false
	}
	seq = binary.BigEndian.Uint32(dg[PathSeqOffset:])
	off := 2 + PathSeqLen + 1<<(dg[2+PathSeqLen]>>6)
	if off >= len(dg) {
		return 0, 0, false
	}
	ts, _, err := quicvarint.Parse(dg[off:])
	return seq, ts, err == nil
}

// report takes the meter's report for the interval ending at now, or
// false when the path has been quiet for rateQuietAfter.
func (rc *rateCtl) report(now time.Time) (policy.RateReport, bool) {
	if monoclock.Nanos(now)-rc.lastRxNs.Load() > int64(rateQuietAfter) {
		return policy.RateReport{}, false
	}
	rc.meterMu.Lock()
	r := rc.meter.Report(uint64(monoclock.Micros(now)))
	// A path's datagrams can arrive reordered by more than the meter's
	// same-interval correction (resends, a redial); SeqLoss waits one
	// interval for late ones.
	r.Lost = rc.seqLoss.Take()
	rc.meterMu.Unlock()
	return r, true
}

// fbStream is a control stream of one of the path's connections that
// negotiated the rate capability: the receiver's reports go on the
// first of the path's (rateCtl.fbStreams), whose writes wmu serialises
// with the control plane's.
type fbStream struct {
	conn *quic.Conn
	str  *quic.Stream
	wmu  *sync.Mutex
}

// startFeedback adds a connection's control stream to the path's report
// streams and arms the reports' timer in the node's heap (idle.go): every
// rateFeedbackEvery the receiver's report goes on the path's first stream,
// and the sender's fallback (checkStale) is applied when reports stop
// coming. The returned stop removes the stream, once its connection's
// control stream has ended, and waits for a report being written on it.
// A bond whose timers have not started (no node heap) sends no reports.
func (rc *rateCtl) startFeedback(conn *quic.Conn, str *quic.Stream, wmu *sync.Mutex) (stop func()) {
	fs := &fbStream{conn: conn, str: str, wmu: wmu}
	rc.fbMu.Lock()
	if rc.fbTimer == nil {
		rc.fbTimer = rc.p.bond.newTimer(rc.feedbackTick)
	}
	t := rc.fbTimer
	if t != nil {
		rc.fbStreams = append(rc.fbStreams, fs)
		t.ResetEarlier(time.Now().Add(rateFeedbackEvery))
	}
	rc.fbMu.Unlock()
	if t == nil {
		return func() {}
	}
	return func() {
		rc.fbMu.Lock()
		rc.dropStream(fs)
		var wait chan struct{}
		if rc.fbWrite == fs {
			wait = rc.fbWritten
		}
		rc.fbMu.Unlock()
		if wait != nil {
			<-wait
		}
	}
}

// dropStream removes fs from the report streams; rc.fbMu is held.
func (rc *rateCtl) dropStream(fs *fbStream) {
	if i := slices.Index(rc.fbStreams, fs); i >= 0 {
		rc.fbStreams = slices.Delete(rc.fbStreams, i, i+1) // clears the tail: a closed connection is not kept
	}
}

// feedbackTick is the reports' timer (the node's heap goroutine, at now):
// it applies the sender's fallback, takes the receiver's report and hands
// it to writeFeedback on a goroutine of its own, since a control write
// may wait for the stream (writeControl). While a report is being
// written the tick is skipped, and the next report covers both
// intervals. While the bond sleeps (idle.go) and there is nothing to
// report the timer is not re-armed: ring re-arms it when the bond wakes.
func (rc *rateCtl) feedbackTick(now, _ time.Time) {
	rc.fbMu.Lock()
	defer rc.fbMu.Unlock()
	if len(rc.fbStreams) == 0 {
		return // re-armed by the next startFeedback
	}
	next := now.Add(rateFeedbackEvery)
	if rc.fbWrite != nil {
		rc.fbTimer.Reset(next)
		return
	}
	rc.checkStale(now)
	r, ok := rc.report(now)
	if !ok {
		if !rc.p.bond.asleep() {
			rc.fbTimer.Reset(next)
		}
		return
	}
	rc.fbTimer.Reset(next)
	r.Lost = min(r.Lost+rc.unsentLost, ctrlmsg.MaxRateDatagrams)
	rc.unsentLost = 0
	fs, done := rc.fbStreams[0], make(chan struct{})
	rc.fbWrite, rc.fbWritten = fs, done
	go rc.writeFeedback(fs, &r, done)
}

// writeFeedback writes report r on fs and closes done. A report the stream
// had no room for (errControlBusy) is dropped, and the next one carries
// its losses; a stream that failed otherwise (its connection is closing)
// is no longer used, and the path's next stream, if any, takes over.
func (rc *rateCtl) writeFeedback(fs *fbStream, r *policy.RateReport, done chan struct{}) {
	err := writeControl(fs.conn, fs.str, fs.wmu, feedbackOf(rc.p.name, r))
	rc.fbMu.Lock()
	switch {
	case err == nil:
		rc.p.bond.ctlCtr.sent.Add(1)
		rc.sentFb.Add(1)
		rc.lastFb.Store(r)
	case errors.Is(err, errControlBusy):
		rc.unsentLost = r.Lost
	default:
		rc.dropStream(fs)
	}
	rc.fbWrite, rc.fbWritten = nil, nil
	rc.fbMu.Unlock()
	if err != nil {
		logControlWrite(rc.p.bond.log, rc.p.name, err) // before done: a stop that waits for it may end the logger's life
	}
	close(done)
}

// ring re-arms the path's reports when the bond wakes at now; it never
// waits for a report being written. Reports stopped while the bond slept
// because nothing was sent: the fallback (checkStale) counts its silence
// from now.
func (rc *rateCtl) ring(now time.Time) {
	rc.estMu.Lock()
	rc.staleAt, rc.staleSent = now, rc.released.Load()
	rc.estMu.Unlock()
	rc.fbMu.Lock()
	if rc.fbTimer != nil && len(rc.fbStreams) > 0 {
		rc.fbTimer.ResetEarlier(now.Add(rateFeedbackEvery))
	}
	rc.fbMu.Unlock()
}

func feedbackOf(name string, r *policy.RateReport) *ctrlmsg.RateFeedback {
	return &ctrlmsg.RateFeedback{Type: ctrlmsg.TypeRateFeedback, Path: name, StartUs: r.Start, EndUs: r.End,
		Bytes: r.Bytes, Datagrams: r.Datagrams, Lost: r.Lost, HighestSeq: r.HighestSeq,
		OWDMinUs: r.OWDMin, OWDMeanUs: r.OWDMean}
}

// onFeedback applies a report from the peer about this path, received at
// now: the estimator learns from it, the target is published to the pacer
// and the scheduler, and the receiver-seen loss feeds FEC.
func (rc *rateCtl) onFeedback(m *ctrlmsg.RateFeedback, now time.Time) {
	r := policy.RateReport{Start: m.StartUs, End: m.EndUs, Bytes: m.Bytes, Datagrams: m.Datagrams,
		Lost: m.Lost, HighestSeq: m.HighestSeq, OWDMin: m.OWDMinUs, OWDMean: m.OWDMeanUs}
	rc.reports.Add(1)
	rc.estMu.Lock()
	sent := rc.released.Load()
	rc.est.SetLEO(rc.p.state.LEOReconf()) // the concentrator learns it from the hello, after the path was made
	outages := rc.p.outages.Load()
	rc.est.Update(now, &r, policy.SendStats{SentBytes: int64(sent - rc.lastSent),
		BacklogBytes: int64(rc.p.state.QueueBytes()), SRTT: rc.p.state.SmoothedRTT(), Outage: outages != rc.outages})
	rc.outages = outages
	rc.lastSent = sent
	rc.staleAt, rc.staleSent = now, sent
	est := rc.est.Estimate()
	rc.estMu.Unlock()
	rc.estimate.Store(&est)
	if !rc.active() {
		// quic-go keeps the rate, but the path's own loss, which QUIC's
		// loss events understate, still makes it DEGRADED and is charged
		// in its expected delivery (policy.Path.OnReceiverLoss).
		rc.p.state.OnReceiverLoss(est.OwnLoss, now)
		return
	}
	rc.setTarget(est.Target, est.Startup)
	// The scheduler and the status see the path's own loss: a capacity
	// dip's overflow, which the target answers, would otherwise make a
	// satellite path DEGRADED for a second and a half after every dip.
	rc.p.state.OnRateEstimate(est.Target, est.OwnLoss, est.QueueDelay, now)
	rc.feedFECLoss(&r, now)
}

// feedFECLoss gives FEC's loss-interval estimator (RFC 5348 §5.4) the
// receiver-seen losses of a report in place of QUIC's loss events: each
// lost datagram is an event, spread evenly over the report's datagrams.
func (rc *rateCtl) feedFECLoss(r *policy.RateReport, now time.Time) {
	total := int(r.Datagrams) + int(r.Lost)
	if r.Lost == 0 {
		rc.p.loss.OnSent(total)
		return
	}
	lost := min(int(r.Lost), 1000)
	per := total / lost
	for i := range lost {
		rc.p.loss.OnSent(per)
		rc.p.loss.OnLoss(now.Add(time.Duration(i)), 0)
	}
	rc.p.loss.OnSent(total - per*lost)
}

// checkStale halves the target when no report arrived for max(4 sRTT,
// rateStaleMin) while the path sent: the fallback for lost feedback.
func (rc *rateCtl) checkStale(now time.Time) {
	if !rc.active() {
		return
	}
	rc.estMu.Lock()
	defer rc.estMu.Unlock()
	limit := max(4*rc.p.state.SmoothedRTT(), rateStaleMin)
	sent := rc.released.Load()
	if now.Sub(rc.staleAt) < limit {
		return
	}
	if sent == rc.staleSent { // nothing sent: nothing to learn from, nothing stale
		rc.staleAt = now
		return
	}
	t := max(rc.targetRate()/2, policy.DefaultMinRate)
	rc.setTarget(t, false) // reports stopped: no room beyond what the halved rate sends
	rc.staleAt, rc.staleSent = now, sent
	rc.fallbacks.Add(1)
	loss := 0.0
	if e := rc.estimate.Load(); e != nil {
		loss = e.OwnLoss
	}
	rc.p.state.OnRateEstimate(t, loss, 0, now)
}

// pace returns how long the path's send routine must wait before the
// path's pacer releases the next frame: 0 when it may go now (or rate
// control is off).
//
// The bucket holds pacerBurstTime at the target. On an application-limited
// path (policy.RateEstimate.AppLimited: a video path whose only backlog is
// its keyframe, once a second) it holds the connection's congestion
// window: the target there measured only what the video asked for, since what arrived
// was paced at it, so a 230-KB keyframe paced at a target of 6–9 Mbit/s
// took 200–300 ms to leave on S2's 80-Mbit/s Starlink path and its frames
// expired in the queue. The burst now leaves as quic-go's window allows
// (as without rate control), the receiver sees the link's rate, and the
// bucket refills at the target.
func (rc *rateCtl) pace(now time.Time) time.Duration {
	if !rc.active() {
		return 0
	}
	rc.pacerMu.Lock()
	defer rc.pacerMu.Unlock()
	t := rc.target.Load()
	rate := math.Float64frombits(t)
	depth := max(policy.DefaultPacerBurst, int(rate*pacerBurstTime.Seconds()))
	if e := rc.estimate.Load(); e != nil && e.AppLimited {
		depth = max(depth, rc.p.state.CongestionWindow())
	}
	if t != rc.pacerRate || depth != rc.pacerDepth {
		rc.pacer.SetRate(now, rate, depth)
		rc.pacerRate, rc.pacerDepth = t, depth
		rc.p.state.OnPacer(rc.pacer.Tokens(now), depth, now)
	}
	return rc.pacer.Delay(now, 1)
}

// release accounts n bytes handed to quic-go at now and stamps the frame
// d with the path's next sequence number.
func (rc *rateCtl) release(d []byte, now time.Time) {
	n := len(d)
	if rc.peer.Load() {
		StampPathSeq(d, rc.txSeq.Add(1)-1, uint64(monoclock.Micros(now)))
	}
	rc.released.Add(uint64(n))
	if !rc.active() {
		return
	}
	rc.pacerMu.Lock()
	before := rc.pacer.DelayedBytes()
	rc.pacer.Consume(now, n)
	held := rc.pacer.DelayedBytes() - before
	rc.p.state.OnPacer(rc.pacer.Tokens(now), rc.pacerDepth, now) // for policy.Path.Overdue
	rc.pacerMu.Unlock()
	if held > 0 {
		rc.heldBack.Add(held)
	}
}

// flagPathSeq adds FlagPathSeq to h, a header for payload bytes, when the
// peer negotiated it and the datagram still fits the bond's datagram
// budget with it (HeaderBudget; with a flow tag of up to MaxFlowTagLen in
// front of the payload) and the header and the tag of tag bytes fit the
// buffer's Headroom.
func (b *Bond) flagPathSeq(h *Header, tag, payload int) {
	if !b.pathSeq.Load() {
		return
	}
	h.Flags |= FlagPathSeq
	if n := HeaderLen(h); n+MaxFlowTagLen+payload > b.mtu+HeaderBudget || n+tag > Headroom {
		h.Flags &^= FlagPathSeq
	}
}

// onRateFeedback hands a PATH_RATE_FEEDBACK to the path it is about;
// one about a path this bond does not have is ignored.
func (b *Bond) onRateFeedback(m *ctrlmsg.RateFeedback, now time.Time) {
	for _, p := range b.paths.Load().paths {
		if p.name == m.Path {
			p.rc.onFeedback(m, now)
			return
		}
	}
}

// RateStats is a path's rate control as the status shows it.
type RateStats struct {
	// Mode is RateControlBondd or RateControlQUIC, this end's setting;
	// Active reports that the path paces by rate (bondd, and the peer
	// negotiated the "rate" capability).
	Mode   string `json:"mode"`
	Active bool   `json:"active"`
	// TargetBps is the pacer's rate, DeliveryBps the smoothed rate the
	// peer received, CapacityBps the last bottleneck sample, bit/s.
	TargetBps   uint64 `json:"target_bps"`
	DeliveryBps uint64 `json:"delivery_bps"`
	CapacityBps uint64 `json:"capacity_bps"`
	// QueueDelay is the peer-measured queueing delay of the path.
	QueueDelay time.Duration `json:"queue_delay_ns"`
	// Loss is the receiver-seen datagram loss rate over about a second,
	// 0–1 (gaps in the per-path sequence); OwnLoss the same without the
	// reports that showed a queue overflowing (policy.RateEstimate.OwnLoss),
	// which makes the path DEGRADED with reason loss at 0.10.
	Loss    float64 `json:"loss"`
	OwnLoss float64 `json:"own_loss"`
	// HeldBackBytes is the bytes that waited for the pacer; ReleasedBytes
	// all bytes the path handed to QUIC.
	HeldBackBytes uint64 `json:"held_back_bytes"`
	ReleasedBytes uint64 `json:"released_bytes"`
	// Reports counts the peer's reports received; Fallbacks the target
	// halvings for want of them; Overuses the estimator's back-offs.
	Reports   uint64 `json:"reports"`
	Fallbacks uint64 `json:"fallbacks"`
	Overuses  uint64 `json:"overuses"`
	// FeedbackSent counts the reports this end sent about what it
	// received on the path.
	FeedbackSent uint64 `json:"feedback_sent"`
}

// stats returns the path's rate statistics, nil when the peer never
// negotiated the capability.
func (rc *rateCtl) stats() *RateStats {
	if !rc.peer.Load() {
		return nil
	}
	mode := RateControlQUIC
	if rc.on {
		mode = RateControlBondd
	}
	s := &RateStats{Mode: mode, Active: rc.active(), HeldBackBytes: rc.heldBack.Load(), ReleasedBytes: rc.released.Load(),
		Reports: rc.reports.Load(), Fallbacks: rc.fallbacks.Load(), FeedbackSent: rc.sentFb.Load()}
	if e := rc.estimate.Load(); e != nil {
		s.DeliveryBps, s.CapacityBps = uint64(e.Delivery*8), uint64(e.Capacity*8)
		s.QueueDelay, s.Loss, s.OwnLoss, s.Overuses = e.QueueDelay, e.Loss, e.OwnLoss, e.Overuses
	}
	if rc.active() {
		s.TargetBps = uint64(rc.targetRate() * 8)
	} else if e := rc.estimate.Load(); e != nil {
		s.TargetBps = uint64(e.Target * 8)
	}
	return s
}

// probeLossy adds to the k picks of a packet (out of set, at now) a copy
// for each path that the scheduler avoids for its loss,
// at most one every lossProbeEvery per path: the copies cost nothing in
// loss (the receiver keeps the first of each sequence number) and keep
// the path's loss figure fresh, so it turns ACTIVE again when its loss
// ends. A path whose datagram budget is below size (bytes) gets none. It
// returns the new number of picks. Called only from the TUN
// reader; allocation-free.
func (b *Bond) probeLossy(set *pathSet, picks []int, k, size int, now time.Time) int {
	ns := monoclock.Nanos(now)
	for i, p := range set.paths {
		if k >= len(picks) || ns-p.rc.probeAt < int64(lossProbeEvery) || int(p.pmtu.budget.Load()) < size ||
			p.state.ReceiverLoss(now) < policy.LossRecovered || p.state.LinkStatus(now) == policy.StatusUnavailable {
			continue
		}
		picked := false
		for _, j := range picks[:k] {
			picked = picked || j == i
		}
		if !picked {
			picks[k] = i
			k++
			p.rc.probeAt = ns
		}
	}
	return k
}
