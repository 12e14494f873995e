package tunnel

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
)

// Lanes. quic-go sends DATAGRAMs under its own loss-based congestion
// control (Cubic, RFC 9438), which cannot be switched off: on an uplink
// that loses packets for reasons other than congestion (radio, handovers,
// satellite reconfigurations) one connection's window stays far below what
// the link carries (docs/performance.md, "Lossy uplinks"). An uplink may
// therefore carry several QUIC connections, lanes, each on its own UDP
// socket bound to that uplink. Together they are one path: one set of
// labels, one status, one send queue, one loss estimate for FEC. Every
// lane pops frames from the path's shared queue as its own window allows,
// so the lanes share the load in proportion to their windows without a
// scheduler of their own.

// MaxLanes bounds the QUIC connections of one uplink.
const MaxLanes = 8

// LanesAuto as UplinkOptions.Lanes lets the edge choose the number of lanes
// of the uplink between 1 and MaxLanes (see laneControl).
const LanesAuto = 0

// Limits on the datagrams a lane hands to quic-go ahead of its packets.
// quic-go's own DATAGRAM send queue blocks SendDatagram at 32 and is
// invisible to the scheduler, so a lane keeps at most laneMaxUnsent
// datagrams in it, and beyond laneMinUnsent only as many as its congestion
// window has room for: when a lane is window-limited, waiting frames stay
// in the path's queue, where other lanes and paths can take them and
// where priorities and deadlines apply.
const (
	laneMinUnsent = 2
	laneMaxUnsent = 24
	laneWireBytes = 1400 // a full QUIC packet on the wire, bytes, for window arithmetic
)

// lane is one QUIC connection of a path: its congestion controller's view
// (fed by the connection's tracer) and the datagrams handed to quic-go and
// not yet packed into a packet.
type lane struct {
	path *path
	idx  int

	conn atomic.Pointer[quic.Conn]
	rec  atomic.Pointer[recorder] // the current connection's tracer

	// serveMu serialises the lane's connections: a new one waits until the
	// previous one's routines have stopped.
	serveMu sync.Mutex

	srtt, minRTT   atomic.Int64  // ns; RFC 9002 §5
	cwnd, inflight atomic.Int64  // bytes
	unsent         atomic.Int64  // datagrams inside quic-go's send queue
	draining       atomic.Bool   // the lane is being removed: it takes no more frames
	txPackets      atomic.Uint64 // datagrams handed to quic-go, over all the lane's connections
	bell           chan struct{} // rung when a packet leaves or the window changes; capacity 1
}

// onMetrics records the lane's congestion controller state and refreshes
// the path's aggregate.
func (l *lane) onMetrics(srtt, minRTT time.Duration, cwnd, inflight int) {
	l.srtt.Store(int64(srtt))
	l.minRTT.Store(int64(minRTT))
	l.cwnd.Store(int64(cwnd))
	l.inflight.Store(int64(inflight))
	l.path.aggregate()
	l.signal()
}

// onDatagramsSent records n datagrams that left quic-go's send queue (in a
// packet, or dropped as too large).
func (l *lane) onDatagramsSent(n int) {
	l.unsent.Add(int64(-n))
	l.signal()
}

func (l *lane) signal() {
	select {
	case l.bell <- struct{}{}:
	default:
	}
}

// mayHand reports whether the lane may hand quic-go one more datagram now.
func (l *lane) mayHand() bool {
	u := l.unsent.Load()
	switch {
	case u < laneMinUnsent:
		return true
	case u >= laneMaxUnsent:
		return false
	}
	cwnd := l.cwnd.Load()
	return cwnd == 0 || l.inflight.Load()+(u+1)*laneWireBytes <= cwnd
}

// reset clears the lane's per-connection state, before a new connection.
func (l *lane) reset() {
	l.srtt.Store(0)
	l.minRTT.Store(0)
	l.cwnd.Store(0)
	l.inflight.Store(0)
	l.unsent.Store(0)
	l.draining.Store(false)
}

// aggregate sums the live lanes' congestion state into the path's policy
// view: the windows and bytes in flight add up, the minimum RTT is the
// lanes' minimum, and the smoothed RTT is the one at which the summed
// window yields the lanes' summed rate (Σ cwnd / Σ (cwnd/srtt)), so that
// cwnd/srtt, the capacity the scheduler sees, is the path's.
func (p *path) aggregate() {
	var cwnd, inflight, minRTT int64
	var rate float64 // bytes per ns
	for i := range p.lanes {
		l := &p.lanes[i]
		if l.conn.Load() == nil {
			continue
		}
		c, s, m := l.cwnd.Load(), l.srtt.Load(), l.minRTT.Load()
		inflight += l.inflight.Load()
		if s > 0 { // a lane without an RTT sample has no rate yet
			cwnd += c
			rate += float64(c) / float64(s)
		}
		if m > 0 && (minRTT == 0 || m < minRTT) {
			minRTT = m
		}
	}
	var srtt int64
	if rate > 0 {
		srtt = int64(float64(cwnd) / rate)
	}
	p.state.OnMetrics(time.Duration(srtt), time.Duration(minRTT), int(cwnd), int(inflight))
}

// laneUp publishes conn as lane l's connection and marks the path connected.
func (p *path) laneUp(l *lane, conn *quic.Conn, now time.Time) {
	p.lanesMu.Lock()
	defer p.lanesMu.Unlock()
	l.conn.Store(conn)
	p.state.SetConnected(true, now)
}

// laneDown clears conn as lane l's connection (if it still is) and, when no
// lane of the path is left, marks the path down and reports true: the
// caller then rescues the path's queued frames. The lock makes the check
// and the status change atomic with laneUp, so a lane coming up while
// another goes down never leaves a live path marked down.
func (p *path) laneDown(l *lane, conn *quic.Conn) (last bool) {
	p.lanesMu.Lock()
	defer p.lanesMu.Unlock()
	l.conn.CompareAndSwap(conn, nil)
	if p.liveLanes() > 0 {
		return false
	}
	p.state.SetConnected(false, time.Time{})
	return true
}

// drain stops lane l from taking frames and waits, up to laneDrainMax,
// until the datagrams it handed quic-go have left in packets, so that
// removing a lane loses nothing it accepted.
func (l *lane) drain(done <-chan struct{}) {
	l.draining.Store(true)
	deadline := time.NewTimer(laneDrainMax)
	defer deadline.Stop()
	for l.unsent.Load() > 0 {
		select {
		case <-l.bell:
		case <-deadline.C:
			return
		case <-done:
			return
		}
	}
}

// laneDrainMax bounds how long a lane being removed waits for quic-go to
// send what it holds.
const laneDrainMax = 250 * time.Millisecond

// liveLanes returns the number of lanes with a connection.
func (p *path) liveLanes() int {
	n := 0
	for i := range p.lanes {
		if p.lanes[i].conn.Load() != nil {
			n++
		}
	}
	return n
}

// laneControl decides, for an uplink with lanes: auto, when to add and
// remove lanes. It is fed a sample of the path every laneSampleEvery.
//
// It adds lanes when, over the last decision epoch (laneEpoch, at least 8
// smoothed RTTs), the path was window-limited in at least half of the
// samples (frames waiting in its queue, or bytes in flight within two
// packets of the window) or dropped queued frames (a burst, such as a video
// keyframe, that waited too long), QUIC declared packets lost, and the smoothed RTT
// stayed within laneInflation(minRTT) of the minimum RTT: loss without
// queueing delay, which a loss-based controller misreads as congestion. It
// adds as many lanes as the demand asks for with laneHeadroom to spare —
// n·1.25·demand/capacity, where demand is the rate pushed onto the path and
// capacity its summed cwnd/srtt — but at most laneGrowth times as many
// per epoch: the new lanes' windows are still in slow start when the next
// epoch measures them. The headroom keeps the queue empty through Cubic's
// sawtooth. It does not add while the RTT is inflated: that loss is a full
// bottleneck, and more lanes would only take capacity from other flows
// there.
//
// Lanes must pay off: in the epoch after an addition, unless the rate the
// lanes took grew by at least laneGain or met 95 % of the demand, the path
// is limited by its capacity rather than by its windows — a bottleneck
// whose queue is too short to inflate the RTT past the guard above — and
// the added lanes are removed again, and no lane is added for laneIdle.
//
// It removes a lane when the path has not been window-limited for
// laneIdle and the rate handed to the path would fill less than half of
// what one lane fewer can carry. Each change waits one epoch after the
// previous one (hysteresis); the number stays within 1..max.
type laneControl struct {
	max int // upper bound, ≤ MaxLanes
	n   int // lanes wanted now

	epochStart, lastChange, lastLimited time.Time
	samples, limited                    int
	inflated, primed                    bool
	lostAt, txAt, offeredAt, dropsAt    uint64 // counters at the epoch start
	idleTxAt                            uint64 // tx bytes when the idle stretch began

	added      int       // lanes added at the last decision, 0 if it added none
	usedAtAdd  float64   // bit/s the lanes took in the epoch before that addition
	noAddUntil time.Time // additions that did not pay off hold further ones until then
}

// laneSample is what laneControl reads from a path.
type laneSample struct {
	now            time.Time
	active         bool // the path is ACTIVE
	queueBytes     int
	cwnd, inflight int // bytes, summed over the lanes
	srtt, minRTT   time.Duration
	lost           uint64 // QUIC packets declared lost, total
	txBytes        uint64 // bytes handed to the lanes, total
	offeredBytes   uint64 // bytes pushed onto the path's queue, total
	queueDrops     uint64 // frames dropped from the path's queue (full, expired, deadline), total
}

// laneHeadroom is the capacity laneControl aims for over the demand, and
// laneGrowth the most it multiplies the lanes by in one epoch.
const (
	laneHeadroom = 1.25
	laneGrowth   = 4
	laneGain     = 1.10 // the rate after an addition over the rate before it
)

// laneInflation is how far the smoothed RTT may sit above the minimum RTT
// before laneControl reads it as a standing queue at a bottleneck: half the
// minimum RTT (jitter on short paths), at least 10 ms and at most 25 ms, so
// that on a long path (a 180-ms satellite hop) a queue of a few tens of
// milliseconds still counts as congestion.
func laneInflation(minRTT time.Duration) time.Duration {
	return min(max(minRTT/2, 10*time.Millisecond), 25*time.Millisecond)
}

// Lane control timing.
const (
	laneSampleEvery = 100 * time.Millisecond
	laneEpoch       = 500 * time.Millisecond
	laneIdle        = 30 * time.Second
)

func newLaneControl(max int, now time.Time) *laneControl {
	return &laneControl{max: max, n: 1, epochStart: now, lastChange: now, lastLimited: now}
}

// laneDecision is a change laneControl asks for, with the figures behind
// it for the log.
type laneDecision struct {
	delta     int // lanes added (> 0) or removed (< 0)
	reason    string
	limited   float64 // share of window-limited samples in the epoch
	lossRate  float64 // QUIC packets lost per packet handed over, approximate
	usedBps   float64 // rate handed to the lanes, bit/s
	demandBps float64 // rate pushed onto the path, bit/s
	capBps    float64 // cwnd/srtt, bit/s
}

// sample records s and returns the change wanted, if any.
func (c *laneControl) sample(s laneSample) laneDecision {
	if !c.primed { // the first epoch starts at the first sample
		c.lostAt, c.txAt, c.offeredAt, c.dropsAt, c.idleTxAt = s.lost, s.txBytes, s.offeredBytes, s.queueDrops, s.txBytes
		c.epochStart, c.primed = s.now, true
		return laneDecision{}
	}
	c.samples++
	if s.queueBytes > 0 || (s.cwnd > 0 && s.inflight+2*laneWireBytes >= s.cwnd) {
		c.limited++
		c.lastLimited = s.now
		c.idleTxAt = s.txBytes
	}
	if s.minRTT > 0 && s.srtt-s.minRTT > laneInflation(s.minRTT) {
		c.inflated = true
	}
	if !s.active {
		c.inflated = true // an outage is not random loss either
	}
	epoch := max(laneEpoch, 8*s.srtt)
	if s.now.Sub(c.epochStart) < epoch {
		return laneDecision{}
	}
	d := laneDecision{limited: float64(c.limited) / float64(c.samples)}
	if s.srtt > 0 {
		d.capBps = float64(s.cwnd) * 8 / s.srtt.Seconds()
	}
	elapsed := s.now.Sub(c.epochStart).Seconds()
	lost, tx, offered := s.lost-c.lostAt, s.txBytes-c.txAt, s.offeredBytes-c.offeredAt
	if tx > 0 {
		d.lossRate = float64(lost) * laneWireBytes / float64(tx)
	}
	d.usedBps, d.demandBps = float64(tx)*8/elapsed, float64(offered)*8/elapsed
	ready := s.now.Sub(c.lastChange) >= epoch
	added := c.added
	c.added = 0
	switch {
	case added > 0 && d.usedBps < laneGain*c.usedAtAdd && d.usedBps < 0.95*d.demandBps:
		d.delta, d.reason = -min(added, c.n-1), "no gain from the last lanes: the link's capacity, not the windows, limits the path"
		c.noAddUntil = s.now.Add(laneIdle)
	case ready && c.n < c.max && !s.now.Before(c.noAddUntil) &&
		(d.limited >= 0.5 || s.queueDrops > c.dropsAt) && lost > 0 && !c.inflated:
		want := c.n + 1
		if d.capBps > 0 {
			want = max(want, int(math.Ceil(float64(c.n)*laneHeadroom*d.demandBps/d.capBps)))
		}
		d.delta = min(want, laneGrowth*c.n, c.max) - c.n
		d.reason = "window-limited with loss and no RTT inflation"
		c.added, c.usedAtAdd = d.delta, d.usedBps
	case ready && c.n > 1 && s.now.Sub(c.lastLimited) >= laneIdle && d.capBps > 0:
		idleBps := float64(s.txBytes-c.idleTxAt) * 8 / s.now.Sub(c.lastLimited).Seconds()
		if idleBps < 0.5*d.capBps*float64(c.n-1)/float64(c.n) {
			d.delta, d.reason, d.usedBps = -1, "under-used", idleBps
			c.lastLimited, c.idleTxAt = s.now, s.txBytes // the next removal waits another laneIdle
		}
	}
	if d.delta != 0 {
		c.n += d.delta
		c.lastChange = s.now
	}
	c.epochStart, c.samples, c.limited, c.inflated = s.now, 0, 0, false
	c.lostAt, c.txAt, c.offeredAt, c.dropsAt = s.lost, s.txBytes, s.offeredBytes, s.queueDrops
	return d
}
