package tunnel

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/bondd/bondd/internal/timerheap"
)

// The path's connection. A path carries one QUIC connection at a time, on
// the edge through its own UDP socket bound to the uplink; a redial
// replaces it. bondd's own congestion controller sets the connection's
// rate (cc.go, ratectl.go), so one connection carries what the link does.
// (Until it did, an uplink could carry several connections, lanes, to get
// around quic-go's loss-based window; docs/performance.md, "One lossy
// link", has the measurement that retired them.)

// Limits on the datagrams the path hands to quic-go ahead of its packets.
// quic-go's own DATAGRAM send queue is invisible to the scheduler, so the
// path keeps at most maxUnsent datagrams in it, and beyond minUnsent only
// as many as its congestion window has room for: when the connection is
// window-limited, waiting frames stay in the path's queue, where other
// paths can take them and where priorities and deadlines apply.
const (
	minUnsent = 2
	maxUnsent = 24
	wireBytes = 1400 // a full QUIC packet on the wire, for window arithmetic
)

// pathConn is the path's QUIC connection slot: the connection serving the
// path now (nil while it is down), its congestion controller's view (fed
// by the connection's controller, cc.go) and the datagrams handed to quic-go and not
// yet packed into a packet. It outlives the connections it serves.
type pathConn struct {
	path *path

	conn atomic.Pointer[quic.Conn]
	rec  atomic.Pointer[recorder] // the current connection's recorder (tracer.go)

	// serveMu serialises the path's connections: a new one waits until
	// the previous one's routines have stopped.
	serveMu sync.Mutex

	srtt, minRTT   atomic.Int64  // ns; RFC 9002 §5
	cwnd, inflight atomic.Int64  // bytes
	unsent         atomic.Int64  // datagrams inside quic-go's send queue
	probeSize      atomic.Int64  // bytes: a path MTU probe handed to quic-go, not yet seen sent (pmtu.go)
	draining       atomic.Bool   // the connection is shutting down: it takes no more frames
	bell           chan struct{} // rung when a packet leaves or the window changes; capacity 1
	fresh          staleFilter   // the receive routine's one-way-delay baseline (stale.go)
	// live is the current connection's liveness timer (liveness.go);
	// wakeProbe asks its next check for a probe: the bond woke (idle.go).
	live      atomic.Pointer[timerheap.Timer]
	wakeProbe atomic.Bool

	// The send routine (routineSend) of the connection serving the path.
	// It exits while the bond sleeps with nothing queued (idleExit); the
	// bond's wake (resumeSend) and frames added to the queue (kick) start
	// it again: an asleep bond keeps no send routine (idle.go). sendMu
	// guards sendConn and the changes of sendOn.
	sendMu   sync.Mutex
	sendConn *quic.Conn  // the connection served; nil once serve stopped sending
	sendOn   atomic.Bool // a send routine runs for sendConn
	sendWG   sync.WaitGroup
}

// startSend starts the send routine for conn and makes conn the one later
// wakes and kicks restart it for (serve, before its receive routine).
func (pc *pathConn) startSend(conn *quic.Conn) {
	pc.sendMu.Lock()
	defer pc.sendMu.Unlock()
	pc.sendConn = conn
	pc.runSendLocked()
}

// resumeSend starts the send routine again if it exited while the bond
// slept (Bond.wake); a no-op while it runs, when no connection is served,
// or when the connection is shutting down or has ended (serve then
// rescues what is queued).
func (pc *pathConn) resumeSend() {
	pc.sendMu.Lock()
	defer pc.sendMu.Unlock()
	pc.runSendLocked()
}

// kick starts the send routine if it exited while the bond slept: frames
// were added to the queue (sendQueue.added) by something other than a
// packet that woke the bond (a rescue, a resend, a reroute). An atomic
// load while the routine runs. A frame added as the routine checks its
// queue in idleExit is seen by one of the two: idleExit clears sendOn
// before it reads the queue, and the queue counts the frame before kick
// reads sendOn.
func (pc *pathConn) kick() {
	if !pc.sendOn.Load() {
		pc.resumeSend()
	}
}

func (pc *pathConn) runSendLocked() {
	if pc.sendOn.Load() || pc.sendConn == nil || pc.draining.Load() || pc.sendConn.Context().Err() != nil {
		return
	}
	pc.sendOn.Store(true)
	conn := pc.sendConn
	pc.sendWG.Go(func() { pc.routineSend(conn) })
}

// stopSend keeps wakes and kicks from starting the send routine again and
// waits until it has returned (serve, once the connection ended).
func (pc *pathConn) stopSend() {
	pc.sendMu.Lock()
	pc.sendConn = nil
	pc.sendMu.Unlock()
	pc.sendWG.Wait()
}

// idleExit reports whether the send routine may exit now because the bond
// sleeps and nothing is queued or parked; it then counts as stopped, and
// the bond's next wake, or the next frame queued, starts it again. The
// lock orders this against resumeSend: a wake that cleared the bond's
// sleep before this check keeps the routine, one after it finds the
// routine stopped and starts it.
func (pc *pathConn) idleExit() bool {
	pc.sendMu.Lock()
	defer pc.sendMu.Unlock()
	pc.sendOn.Store(false) // before reading the queue: see kick
	if !pc.path.bond.asleep() || pc.path.queue.queued() > 0 {
		pc.sendOn.Store(true)
		return false
	}
	return true
}

// sendExited marks the send routine stopped when it returns for any other
// reason than idleExit (the connection ended or failed).
func (pc *pathConn) sendExited() {
	pc.sendMu.Lock()
	pc.sendOn.Store(false)
	pc.sendMu.Unlock()
}

// onMetrics records the connection's congestion controller state and
// publishes it as the path's.
func (pc *pathConn) onMetrics(srtt, minRTT time.Duration, cwnd, inflight int) {
	pc.srtt.Store(int64(srtt))
	pc.minRTT.Store(int64(minRTT))
	pc.cwnd.Store(int64(cwnd))
	pc.inflight.Store(int64(inflight))
	pc.publish()
	pc.signal()
}

// publish hands the connection's congestion state to the path's policy
// view: zeros while no connection serves the path, and no window before
// the connection's first RTT sample (it has no rate yet).
func (pc *pathConn) publish() {
	if pc.conn.Load() == nil {
		pc.path.state.OnMetrics(0, 0, 0, 0)
		return
	}
	srtt, cwnd := pc.srtt.Load(), pc.cwnd.Load()
	if srtt <= 0 {
		cwnd = 0
	}
	pc.path.state.OnMetrics(time.Duration(srtt), time.Duration(pc.minRTT.Load()), int(cwnd), int(pc.inflight.Load()))
}

// onDatagramsSent records n datagrams that left quic-go's send queue (in a
// packet, or dropped as too large).
func (pc *pathConn) onDatagramsSent(n int) {
	pc.unsent.Add(int64(-n))
	pc.signal()
}

func (pc *pathConn) signal() {
	select {
	case pc.bell <- struct{}{}:
	default:
	}
}

// mayHand reports whether the path may hand quic-go one more datagram now.
//
// It reports false while the path is SUSPECT and another path is ACTIVE
// (path.gated, liveness.go): what it would hand would go into a hole.
// Beyond minUnsent it also keeps what waits inside quic-go below what the
// connection's rate (cwnd per srtt) sends within the queue-delay limit
// (PathOptions.MaxQueueDelay), so that quic-go never holds a datagram
// longer than bondd's own queue would.
func (pc *pathConn) mayHand() bool {
	if pc.path.gated.Load() {
		return false
	}
	u := pc.unsent.Load()
	switch {
	case u < minUnsent:
		return true
	case u >= maxUnsent:
		return false
	}
	cwnd := pc.cwnd.Load()
	if cwnd == 0 {
		return true
	}
	if srtt := pc.srtt.Load(); srtt > 0 && float64((u+1)*wireBytes)*float64(srtt) > float64(cwnd)*float64(pc.path.bond.popts.MaxQueueDelay) {
		return false
	}
	return pc.inflight.Load()+(u+1)*wireBytes <= cwnd
}

// reset clears the per-connection state, before a new connection.
func (pc *pathConn) reset() {
	pc.srtt.Store(0)
	pc.minRTT.Store(0)
	pc.cwnd.Store(0)
	pc.inflight.Store(0)
	pc.unsent.Store(0)
	pc.draining.Store(false)
	pc.fresh = staleFilter{}
}

// connUp publishes conn as the path's connection and marks the path
// connected.
func (p *path) connUp(conn *quic.Conn, now time.Time) {
	p.connMu.Lock()
	defer p.connMu.Unlock()
	p.pc.conn.Store(conn)
	p.state.SetConnected(true, now)
}

// connDown clears conn as the path's connection (if it still is) and, when
// no connection serves the path then, marks the path down and reports
// true: the caller then rescues the path's queued frames. The lock makes
// the check and the status change atomic with connUp.
func (p *path) connDown(conn *quic.Conn) (down bool) {
	p.connMu.Lock()
	defer p.connMu.Unlock()
	p.pc.conn.CompareAndSwap(conn, nil)
	if p.connected() {
		return false
	}
	p.state.SetConnected(false, time.Time{})
	return true
}

// connected reports whether a connection serves the path.
func (p *path) connected() bool { return p.pc.conn.Load() != nil }

// drain stops the connection from taking frames and waits, up to
// drainMax, until the datagrams it handed quic-go have left in packets, so
// that a shutdown loses nothing it accepted.
func (pc *pathConn) drain(done <-chan struct{}) {
	pc.draining.Store(true)
	deadline := time.NewTimer(drainMax)
	defer deadline.Stop()
	for pc.unsent.Load() > 0 {
		select {
		case <-pc.bell:
		case <-deadline.C:
			return
		case <-done:
			return
		}
	}
}

// drainMax bounds how long a connection being shut down waits for quic-go
// to send what it holds.
const drainMax = 250 * time.Millisecond
