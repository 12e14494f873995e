package tunnel

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/bondd/bondd/policy"
)

// Lanes. quic-go sends DATAGRAMs under its own loss-based congestion
// control (NewReno, RFC 9002 §7.3, in quic-go v0.65), which cannot be
// switched off: on an uplink that loses packets for reasons other than
// congestion (radio, handovers, satellite reconfigurations) one
// connection's window stays far below what the link carries
// (docs/performance.md, "Lossy uplinks"). An uplink may
// therefore carry several QUIC connections, lanes, each on its own UDP
// socket bound to that uplink. Together they are one path: one set of
// labels, one status, one send queue, one loss estimate for FEC. Every
// lane pops frames from the path's shared queue as its own window allows,
// so the lanes share the load in proportion to their windows without a
// scheduler of their own.

// MaxLanes bounds the QUIC connections of one uplink.
const MaxLanes = 8

// LanesAuto as UplinkOptions.Lanes lets the edge choose the number of lanes
// of the uplink between 1 and MaxLanes (policy.LaneController decides,
// Edge.routineUplink adds and removes the connections).
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
	laneWireBytes = policy.LaneWireBytes // a full QUIC packet on the wire, for window arithmetic
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
	probeSize      atomic.Int64  // bytes: a path MTU probe handed to quic-go, not yet seen sent (pmtu.go)
	draining       atomic.Bool   // the lane is being removed: it takes no more frames
	txPackets      atomic.Uint64 // datagrams handed to quic-go, over all the lane's connections
	bell           chan struct{} // rung when a packet leaves or the window changes; capacity 1
	fresh          staleFilter   // the receive routine's one-way-delay baseline (stale.go)
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
//
// It reports false while the path is SUSPECT and another path is ACTIVE
// (path.gated, liveness.go): what it would hand would go into a hole. Beyond laneMinUnsent it also keeps what waits
// inside quic-go below what the lane's rate (cwnd per srtt) sends within
// the queue-delay limit (PathOptions.MaxQueueDelay), so that quic-go never
// holds a datagram longer than bondd's own queue would.
func (l *lane) mayHand() bool {
	if l.path.gated.Load() {
		return false
	}
	u := l.unsent.Load()
	switch {
	case u < laneMinUnsent:
		return true
	case u >= laneMaxUnsent:
		return false
	}
	cwnd := l.cwnd.Load()
	if cwnd == 0 {
		return true
	}
	if srtt := l.srtt.Load(); srtt > 0 && float64((u+1)*laneWireBytes)*float64(srtt) > float64(cwnd)*float64(l.path.bond.popts.MaxQueueDelay) {
		return false
	}
	return l.inflight.Load()+(u+1)*laneWireBytes <= cwnd
}

// reset clears the lane's per-connection state, before a new connection.
func (l *lane) reset() {
	l.srtt.Store(0)
	l.minRTT.Store(0)
	l.cwnd.Store(0)
	l.inflight.Store(0)
	l.unsent.Store(0)
	l.draining.Store(false)
	l.fresh = staleFilter{}
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

// slowStartLanes returns how many of the path's live lanes have a
// congestion window still in slow start.
func (p *path) slowStartLanes() int {
	n := 0
	for i := range p.lanes {
		l := &p.lanes[i]
		if l.conn.Load() == nil {
			continue
		}
		if r := l.rec.Load(); r == nil || !r.avoiding.Load() {
			n++
		}
	}
	return n
}

// otherLanesLive reports whether a lane of the path other than l has a
// connection: l's coming up or going down is then a lane's, not the
// path's, and logs at debug level.
func (p *path) otherLanesLive(l *lane) bool {
	for i := range p.lanes {
		if o := &p.lanes[i]; o != l && o.conn.Load() != nil {
			return true
		}
	}
	return false
}

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
