package policy

import (
	"sync/atomic"
	"time"

	"github.com/bondd/bondd/internal/monoclock"
)

// Status is a path's health as the scheduler sees it.
type Status int32

const (
	// StatusUnavailable: no working connection on the path. Pickers never
	// choose it.
	StatusUnavailable Status = iota
	// StatusDegraded: connected, but the peer has been silent for longer than
	// the path's liveness bound, or the path has used BudgetDegradeFraction
	// of its byte budget (see [Path.Status]). Default choices use it only
	// when no path is ACTIVE; a rule that prefers it may still pick a path
	// DEGRADED by its budget alone (see [Select]).
	StatusDegraded
	// StatusActive: connected and hearing from the peer.
	StatusActive
)

// String returns "ACTIVE", "DEGRADED" or "UNAVAILABLE".
func (s Status) String() string {
	switch s {
	case StatusActive:
		return "ACTIVE"
	case StatusDegraded:
		return "DEGRADED"
	default:
		return "UNAVAILABLE"
	}
}

// MinSilence is the shortest peer silence after which a connected path is
// reported DEGRADED; the bound grows to 4 smoothed RTTs on slow paths, and
// to the idle keepalive plus MinSilence while the path is idle
// ([Path.SetIdle]). Keepalives (1 s by default, 15 s when idle) keep a
// quiet but healthy path ACTIVE.
const MinSilence = 1500 * time.Millisecond

// Path is the scheduler's view of one uplink. Name, Labels and QueueCap are
// set at construction and never change; everything else is updated
// concurrently through the On* methods and read lock-free. The zero value is
// not usable; use [NewPath].
type Path struct {
	// Name is the uplink's configured name, unique within a bond.
	Name string
	// Labels are the uplink's key=value labels (cost_class, link_type, …)
	// as given to NewPath. Read-only after NewPath; [Path.SetLabels] may
	// publish a replacement, so readers use [Path.Label] or
	// [Path.CurrentLabels].
	Labels map[string]string
	// QueueCap is the configured capacity of the path's send queue, in
	// packets; SetQueueCap may raise it for a fast path.
	QueueCap int
	// QueueDelayLimit is how long the path's send queue holds a packet
	// before it drops it; 0: no limit. Set before the path is used.
	QueueDelayLimit time.Duration

	connected atomic.Bool
	srtt      atomic.Int64 // ns
	minRTT    atomic.Int64 // ns
	cwnd      atomic.Int64 // bytes
	inflight  atomic.Int64 // bytes
	lost      atomic.Uint64
	sent      atomic.Uint64
	queueLen  atomic.Int64 // packets
	queueB    atomic.Int64 // bytes
	queueCap  atomic.Int64 // packets: the send queue's capacity now (QueueCap, or SetQueueCap's)
	lastRecv  atomic.Int64 // monoclock ns of the last packet received from the peer
	// Idle keepalive (SetIdle): idleBound (ns) is, while > 0, the
	// shortest silence that makes the path DEGRADED; silentFrom (monoclock ns)
	// is when the path last left idle: silence counts from there at the
	// earliest.
	idleBound, silentFrom atomic.Int64

	// Liveness (liveness.go): unanswered is the monoclock ns of the first
	// ack-eliciting packet sent since the peer was last heard, 0 when none;
	// suspectRTTs (×1000) and suspectMin (ns) bound the silence.
	unanswered              atomic.Int64
	suspectRTTs, suspectMin atomic.Int64

	leo    atomic.Pointer[LEOReconf] // nil: no reconfiguration marker
	budget budgetState               // byte counters and the optional budget

	// iframe is the pending I-frame tracker (iframe.go). Unlike the rest of
	// Path it is not safe for concurrent use: only the goroutine that
	// picks paths and queues packets (the bond's TUN reader) touches it.
	iframe iframeState

	// labels, when not nil, replaces Labels: a copy-on-write map published
	// by SetLabels and read lock-free (labels.go).
	labels atomic.Pointer[map[string]string]
	// peerDown is set while the peer reports the path UNAVAILABLE
	// (SetPeerUnavailable, labels.go).
	peerDown atomic.Bool
	// rate is the rate-controlled view (pathrate.go).
	rate pathRate
}

// NewPath returns a path in state UNAVAILABLE with the given name, labels and
// send-queue capacity (packets). labels is retained, not copied.
func NewPath(name string, labels map[string]string, queueCap int) *Path {
	p := &Path{Name: name, Labels: labels, QueueCap: queueCap}
	p.queueCap.Store(int64(queueCap))
	return p
}

// SetConnected records whether the path has a working connection. Connecting
// also counts as hearing from the peer.
func (p *Path) SetConnected(up bool, now time.Time) {
	if up {
		p.lastRecv.Store(monoclock.Nanos(now))
	}
	p.unanswered.Store(0)
	p.connected.Store(up)
}

// OnMetrics records the congestion controller's state (RFC 9002 §5: smoothed
// and minimum RTT; cwnd and bytes in flight in bytes).
func (p *Path) OnMetrics(srtt, minRTT time.Duration, cwnd, inflight int) {
	p.srtt.Store(int64(srtt))
	p.minRTT.Store(int64(minRTT))
	p.cwnd.Store(int64(cwnd))
	p.inflight.Store(int64(inflight))
}

// OnLoss records n packets declared lost by QUIC loss detection (RFC 9002 §6).
func (p *Path) OnLoss(n int) { p.lost.Add(uint64(n)) }

// OnSent records one QUIC packet sent on the path.
func (p *Path) OnSent() { p.sent.Add(1) }

// PacketsSent returns the number of QUIC packets sent on the path.
func (p *Path) PacketsSent() uint64 { return p.sent.Load() }

// OnReceive records that a packet arrived from the peer at now: the peer
// has answered what was sent before (liveness.go).
func (p *Path) OnReceive(now time.Time) {
	p.lastRecv.Store(monoclock.Nanos(now))
	if p.unanswered.Load() != 0 {
		p.unanswered.Store(0)
	}
}

// SetQueueLen records the send queue's current depth in packets and bytes.
func (p *Path) SetQueueLen(packets, bytes int) {
	p.queueLen.Store(int64(packets))
	p.queueB.Store(int64(bytes))
}

// SmoothedRTT returns the smoothed RTT, or 0 before the first sample.
func (p *Path) SmoothedRTT() time.Duration { return time.Duration(p.srtt.Load()) }

// MinRTT returns the minimum RTT, or 0 before the first sample.
func (p *Path) MinRTT() time.Duration { return time.Duration(p.minRTT.Load()) }

// CongestionWindow returns the congestion window in bytes.
func (p *Path) CongestionWindow() int { return int(p.cwnd.Load()) }

// BytesInFlight returns the bytes sent and not yet acknowledged or lost.
func (p *Path) BytesInFlight() int { return int(p.inflight.Load()) }

// PacketsLost returns the number of packets QUIC declared lost on this path.
func (p *Path) PacketsLost() uint64 { return p.lost.Load() }

// QueueLen returns the send queue depth in packets.
func (p *Path) QueueLen() int { return int(p.queueLen.Load()) }

// QueueBytes returns the send queue depth in bytes.
func (p *Path) QueueBytes() int { return int(p.queueB.Load()) }

// HasRoom reports whether the send queue can take a packet without dropping.
func (p *Path) HasRoom() bool { return p.queueLen.Load() < p.queueCap.Load() }

// SetQueueCap records the send queue's capacity now, packets: QueueCap, or
// more while the path's rate drains more within its delay limit.
func (p *Path) SetQueueCap(packets int) { p.queueCap.Store(int64(packets)) }

// HasWindow reports whether the path would send one more packet at once:
// its queued bytes plus its bytes in flight are below its congestion window
// (RFC 9002 §7). Before the first metrics update it reports true. A
// rate-controlled path has room while its queue drains within RateRoomTime
// at the target rate (pathrate.go).
func (p *Path) HasWindow() bool {
	if p.rate.on.Load() {
		return p.rateHasWindow()
	}
	cwnd := p.cwnd.Load()
	return cwnd == 0 || p.queueB.Load()+p.inflight.Load() < cwnd
}

// sendDelay estimates the one-way delay of a packet sent on the path now
// from the sender's own state (RFC 9002 §5): half the minimum RTT
// (propagation) plus the queueing delay (queueDelay) and the rest of a
// LEO reconfiguration hold the path is in at now (LEOHold); 0 before the
// first sample. The pickers rank paths without rate control by it rather than
// by the smoothed RTT: the earliest-arrival choice of ECF (Lim et al.,
// "ECF: An MPTCP Path Scheduler to Manage Heterogeneous Paths", CoNEXT
// 2017), so a fast path whose bottleneck holds a standing queue longer
// than the one-way gap to a slower path stops being the first choice.
func (p *Path) sendDelay(now time.Time) time.Duration {
	srtt := p.SmoothedRTT()
	if srtt <= 0 {
		return 0
	}
	return OneWayDelay(p.MinRTT(), srtt, p.queueDelay()) + p.LEOHold(now)
}

// queueDelay estimates the queueing delay a packet sent on the path now
// meets, from the sender's state: smoothed_rtt − min_rtt, but at most the
// time the bytes ahead (queued and in flight) take at cwnd per smoothed
// RTT, so that an idle path has none, whatever its last samples said
// (they also carry the peer's ACK delay for lone packets: 10 ms and more
// above the minimum RTT on an idle emulated path).
func (p *Path) queueDelay() time.Duration {
	srtt := p.SmoothedRTT()
	queue := srtt - p.MinRTT()
	if cwnd := p.cwnd.Load(); cwnd > 0 {
		ahead := p.queueB.Load() + p.inflight.Load()
		queue = min(queue, time.Duration(float64(srtt)*float64(ahead)/float64(cwnd)))
	}
	return max(queue, 0)
}

// QueueFullMin is the least standing queue that makes a path full for the
// default scheduler (Path.Saturated): 10 ms.
const QueueFullMin = 10 * time.Millisecond

// Saturated reports whether the path's bottleneck holds a standing queue
// (queueDelay) of at least max(QueueFullMin, min_rtt/2): more sent on it
// now only waits in that queue, and a path with room should take it.
// LowestRTT and RateSpread treat a saturated path as one without window
// room. It matters when the inner flow paces itself below the congestion
// window quic-go grew in slow start (TCP BBR does: its bandwidth probes
// would go into the fast path's queue, it would see no more bandwidth and
// never spill onto the other paths). Always false for a rate-controlled
// path, whose pacer keeps the queue (pathrate.go).
func (p *Path) Saturated() bool {
	if p.rate.on.Load() || p.SmoothedRTT() <= 0 {
		return false
	}
	return p.queueDelay() >= max(QueueFullMin, p.MinRTT()/2)
}

// ExpectedDelivery estimates how long a packet queued now takes to reach the
// peer: the bytes ahead of it (queued plus in flight) drained at the path's
// rate, cwnd per smoothed RTT, plus half the smoothed RTT (the one-way
// propagation), and the receiver-seen loss weighted by DefaultLossPenalty
// (DeliveryEstimate; OnReceiverLoss), plus the rest of a LEO
// reconfiguration hold the path is in (LEOHold: it sends nothing until
// then). Paths without an RTT sample yet
// count as 0 RTT. A rate-controlled path drains its queue at its target
// rate instead (pathrate.go).
func (p *Path) ExpectedDelivery() time.Duration { return p.expectedDeliveryAt(time.Now()) }

// HeadDelivery is ExpectedDelivery for a packet of size bytes at the head
// of the path's send queue: only its own bytes wait to leave (at the
// target rate of a rate-controlled path, within the window otherwise),
// not the bytes queued behind it; now is the caller's clock.
func (p *Path) HeadDelivery(now time.Time, size int) time.Duration {
	return p.deliveryAt(now, int64(size))
}

func (p *Path) expectedDeliveryAt(now time.Time) time.Duration {
	return p.deliveryAt(now, p.queueB.Load())
}

// deliveryAt is ExpectedDelivery at now with queued bytes waiting in the
// send queue ahead of the packet's arrival.
func (p *Path) deliveryAt(now time.Time, queued int64) time.Duration {
	if p.rate.on.Load() {
		return p.rateExpectedDelivery(now, queued)
	}
	srtt := p.srtt.Load()
	cwnd := p.cwnd.Load()
	ahead := p.inflight.Load() + queued
	owd := time.Duration(srtt/2) + p.LEOHold(now)
	if cwnd > 0 {
		owd += time.Duration(float64(srtt) * float64(ahead) / float64(cwnd))
	}
	return DeliveryEstimate(0, 0, owd, p.ReceiverLoss(now), DefaultLossPenalty)
}

// Status derives the path status at now that default path choices use:
// UNAVAILABLE without a connection or while the peer reports the path
// UNAVAILABLE ([Path.SetPeerUnavailable]), DEGRADED when the peer has been
// silent for longer than max(MinSilence, 4·smoothed RTT), when the path is
// SUSPECT (liveness.go: the peer has not answered a send within
// [Path.SuspectAfter]), when the path's own receiver-seen loss reaches
// LossDegraded ([Path.LossDegradedAt]), or when the path has used
// BudgetDegradeFraction of its byte budget in the current period (see
// [Path.SetBudget]), ACTIVE otherwise.
func (p *Path) Status(now time.Time) Status {
	st := p.LinkStatus(now)
	if st == StatusActive && p.BudgetExhausted(now) {
		return StatusDegraded
	}
	return st
}

// LinkStatus is Status without the byte budget: the health of the
// connection alone. [Select] uses it for paths a rule asks for (prefer,
// affinity), since a rule that insists on a metered path may still use it
// when its budget runs short.
func (p *Path) LinkStatus(now time.Time) Status {
	switch {
	case !p.up():
		return StatusUnavailable
	case p.unheard(now) || p.LossDegradedAt(now):
		return StatusDegraded
	}
	return StatusActive
}

// up reports whether the path has a working connection that the peer has
// not declared down.
func (p *Path) up() bool { return p.connected.Load() && !p.peerDown.Load() }

// unheard reports whether the peer has been silent too long (silent) or
// has not answered what was sent (Suspect): either makes the path
// DEGRADED, whatever its loss.
func (p *Path) unheard(now time.Time) bool {
	if p.silent(now) {
		return true
	}
	suspect, _ := p.Suspect(now)
	return suspect
}

// silent reports whether the peer has been silent at now for longer than
// max(MinSilence, 4·smoothed RTT) (or, while the path is idle, its idle
// bound), which makes the path DEGRADED.
func (p *Path) silent(now time.Time) bool {
	return p.Silence(now) > max(MinSilence, 4*p.SmoothedRTT(), time.Duration(p.idleBound.Load()))
}

// Silence returns how long the peer has been silent at now: since the last
// packet received from it, or since the path last left idle (SetIdle) if
// that is later.
func (p *Path) Silence(now time.Time) time.Duration {
	return time.Duration(monoclock.Nanos(now) - max(p.lastRecv.Load(), p.silentFrom.Load()))
}

// SetIdle records, at now, that the peers of an idle path keep it alive
// with a keepalive every keepalive (> 0): silence up to keepalive +
// MinSilence is then expected, not a sign of trouble. keepalive 0 ends the
// idle time: silence counts from now again, at the normal bound, so that
// a path is not judged by the quiet it was allowed while idle. The
// liveness of what is sent ([Path.Suspect]) is unaffected. Safe for
// concurrent use.
func (p *Path) SetIdle(keepalive time.Duration, now time.Time) {
	if keepalive > 0 {
		p.idleBound.Store(int64(keepalive + MinSilence))
		return
	}
	if p.idleBound.Swap(0) != 0 {
		p.silentFrom.Store(monoclock.Nanos(now))
	}
}

// Reasons [Path.StatusReason] returns.
const (
	ReasonDown   = "down"   // UNAVAILABLE: no working connection
	ReasonSilent = "silent" // DEGRADED: the peer has been silent too long
	// ReasonSuspect: DEGRADED, SUSPECT: the peer has not answered what was
	// sent for longer than SuspectAfter (liveness.go).
	ReasonSuspect = "suspect"
	ReasonBudget  = "budget" // DEGRADED: BudgetDegradeFraction of the byte budget used
)

// StatusReason says why Status(now) is not ACTIVE: ReasonDown, ReasonSilent,
// ReasonSuspect, ReasonLoss or ReasonBudget; "" when it is ACTIVE. For status reports.
func (p *Path) StatusReason(now time.Time) string {
	_, why := p.StatusAndReason(now)
	return why
}

// StatusAndReason returns Status(now) and StatusReason(now) from one read
// of the path's state, so that a report never pairs a status with the
// reason of another moment (a path turning SUSPECT between two calls read
// as DEGRADED for being "silent"). Safe for concurrent use.
func (p *Path) StatusAndReason(now time.Time) (Status, string) {
	if !p.up() {
		return StatusUnavailable, ReasonDown
	}
	silent := p.silent(now)
	suspect, _ := p.Suspect(now)
	lossy := p.LossDegradedAt(now)
	switch {
	case suspect && !silent:
		return StatusDegraded, ReasonSuspect
	case lossy:
		return StatusDegraded, ReasonLoss
	case silent || suspect:
		return StatusDegraded, ReasonSilent
	case p.BudgetExhausted(now):
		return StatusDegraded, ReasonBudget
	}
	return StatusActive, ""
}
