package tunnel

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/bondd/bondd/fec"
	"github.com/bondd/bondd/internal/monoclock"
	"github.com/bondd/bondd/policy"
)

// path is one uplink of a bond: its policy state, its send queue, and the
// QUIC connection currently serving it (pathconn.go). Connections come and
// go; the path and its counters outlive them.
type path struct {
	bond  *Bond
	name  string
	state *policy.Path
	queue *sendQueue
	loss  fec.LossIntervals // RFC 5348 §5.4 loss rate, fed by the connection's tracer (or the rate reports, ratectl.go)
	rc    *rateCtl          // per-path rate control (ratectl.go)
	pc    pathConn
	// connMu orders the connection coming up and going down with the
	// path's connected state (connUp, connDown).
	connMu sync.Mutex

	txPackets, txBytes, rxPackets, rxBytes atomic.Uint64
	rescued                                atomic.Uint64
	wire                                   wireMeter // bytes on the wire, from the connections' counters (wire.go)
	// pmtuHeld counts frames parked for a path MTU probe's answer
	// (rerouteOversize).
	pmtuHeld atomic.Uint64
	// resent counts datagrams lost on this path and queued again,
	// resendLate those lost too late to arrive before they expired
	// (resend.go).
	resent, resendLate atomic.Uint64
	resendScratch      resendScratch
	// Liveness (liveness.go): suspect is set while the path is SUSPECT;
	// txAtHeard is txPackets when the peer was last heard (txPresumed
	// where presumeLost last counted from it); probes,
	// suspectStarts and suspectEnds count for the status.
	suspect                            atomic.Bool
	gated                              atomic.Bool // SUSPECT while another path is ACTIVE: it holds frames back
	txAtHeard                          atomic.Uint64
	txPresumed                         atomic.Uint64 // txPackets up to which presumeLost counted
	outages                            atomic.Uint64 // presumeLost calls that found datagrams lost
	probes, suspectStarts, suspectEnds atomic.Uint64
	keepalives                         atomic.Uint64 // probes sent as keepalives (idle.go)
	migrations                         atomic.Uint64
	drops                              dropCounters // path-scope reasons (DropReason)
	lastErr                            atomic.Pointer[string]

	// pmtu is the path's datagram budget (pmtu.go); fit, under fitMu, is
	// the scratch for moving frames over it (rerouteOversize).
	pmtu  pathPMTU
	fitMu sync.Mutex
	fit   fitScratch
}

func newPath(b *Bond, name string, labels map[string]string) *path {
	p := &path{bond: b, name: name, state: policy.NewPath(name, labels, b.popts.QueuePackets)}
	p.state.QueueDelayLimit = b.popts.MaxQueueDelay
	p.state.SetLiveness(policy.Liveness{SuspectRTTs: b.popts.SuspectRTTs, SuspectMin: b.popts.SuspectMin})
	p.queue = newSendQueue(b.popts.QueuePackets, b.popts.MaxQueueDelay, p.state.SetQueueLen, &p.drops)
	p.rc = newRateCtl(p, b.popts.RateControl)
	p.pmtu.init(b.mtu+HeaderBudget, b.popts, time.Now())
	p.fit = newFitScratch()
	p.pc = pathConn{path: p, bell: make(chan struct{}, 1)}
	p.queue.kick = p.pc.kick // frames added while the send routine is stopped start it (idle.go)
	return p
}

func (p *path) setErr(err error) {
	s := ""
	if err != nil {
		s = err.Error()
	}
	p.lastErr.Store(&s)
}

// serve runs conn as the path's connection until the connection ends or
// ctx is done (then it lets the connection's datagrams leave and closes
// conn). It starts the connection's send routine (send.go), runs its
// receive routine (receive.go) itself rather than in a goroutine of its
// own, and returns after both have stopped. rec is the
// connection's tracer. A connection that ended before serve ran (its
// goroutine was overtaken by a newer connection's for the same path) is
// not served, so it cannot close the newer one as replaced.
func (p *path) serve(ctx context.Context, conn *quic.Conn, rec *recorder) {
	if conn.Context().Err() != nil {
		return
	}
	pc := &p.pc
	if old := pc.conn.Load(); old != nil {
		old.CloseWithError(codeReplaced, "path replaced by a new connection")
	}
	pc.serveMu.Lock()
	defer pc.serveMu.Unlock()

	if !p.connected() {
		p.queue.drain() // frames queued while the path was down are stale
	}
	pc.reset()
	p.wire.attach(conn)
	defer p.wire.detach(conn) // after the connection has closed: its last packets count
	p.suspect.Store(false)
	p.gated.Store(false)
	p.txAtHeard.Store(p.txPackets.Load())
	pc.rec.Store(rec)
	rec.attach(pc)
	if now := time.Now(); p.bond.asleep() {
		p.state.SetIdle(p.bond.popts.IdleKeepalive, now) // the bond sleeps: expect the idle keepalive (idle.go)
	}
	p.connUp(conn, time.Now())
	p.pmtuHandshake(time.Now()) // the handshake confirmed the bond's datagram size (pmtu.go)
	p.bond.updateMTU()
	p.setErr(nil)

	pc.startSend(conn)
	stopLiveness := pc.startLiveness(conn) // on the node's timer heap (liveness.go)
	shutdown := make(chan struct{})
	stopShutdown := context.AfterFunc(ctx, func() { // shutdown, even if it raced with this connection's dial
		defer close(shutdown)
		pc.drain(conn.Context().Done())
		conn.CloseWithError(codeShutdown, "shutting down")
	})
	pc.routineReceive(conn) // until the connection ends
	<-conn.Context().Done()
	if !stopShutdown() {
		<-shutdown
	}

	stopLiveness()
	last := p.connDown(conn)
	if last && ctx.Err() == nil && p.bond.ctl != nil {
		p.setErr(context.Cause(conn.Context())) // why the concentrator's path went down (the edge records its own: edge.go)
	}
	pc.publish()
	p.bond.updateMTU()
	pc.stopSend()
	if now := time.Now(); last && p.bond.otherActive(p, now) {
		rec.held.resendAll(p, now) // unacknowledged when the path went down (resend.go)
	}
	rec.held.close()
	pc.rec.CompareAndSwap(rec, nil)
	if last {
		p.rescue(nil)
	}
}

// rescue moves first (if not nil) and the frames still queued on p to other
// paths, once p's last connection has failed: they were accepted from the
// TUN and are not lost because one uplink died. Frames past their deadline,
// and frames no other path can take, are dropped and counted.
func (p *path) rescue(first *frame) {
	set := p.bond.paths.Load()
	picks := make([]int, len(set.paths))
	now := time.Now()
	move := func(f frame) {
		if p.bond.picker.Pick(set.states, now, picks) == 0 || set.paths[picks[0]] == p {
			putBuf(f.buf)
			p.bond.drops.add(DropNoPath)
			return
		}
		handOver(set.paths[picks[0]], f)
		p.rescued.Add(1)
	}
	if first != nil {
		move(*first)
	}
	for _, f := range p.queue.takeParked() { // parked for a probe's answer (pmtu.go); older than the queue's
		move(f)
	}
	for {
		f, ok, _ := p.queue.pop(monoclock.Nanos(now))
		if !ok {
			return
		}
		move(f)
	}
}

// handOver queues f, taken from another path, on to's queue; a frame moved
// once is no longer movable (path.moveAged). It reports whether to's
// queue took f (sendQueue.push).
func handOver(to *path, f frame) bool {
	f.movable = false
	return to.queue.push(f)
}

// moveAged moves frames that have waited half their time in p's queue
// (sendQueue.popAged) to the path that delivers them soonest, when a path
// whose rate fell (a cellular link that slows to a trickle, its window
// full, its ACKs still coming so that it never turns SUSPECT) would
// otherwise keep them until they expire. A frame moves only to an ACTIVE
// path with room in its queue whose expected delivery of a packet queued
// now (policy.Path.ExpectedDelivery) is before the frame's deadline and
// sooner than p delivers it from the head of its queue, its own bytes
// paced at p's rate (policy.Path.HeadDelivery): on two paths that share a
// load, both queues deep, nothing moves. Only frames no rule ties to p move
// (frame.movable), each once, none off a path in a LEO reconfiguration
// hold (it sends again when the hold ends), at most moveAgedMax a call,
// and only under the default scheduler (Bond.movesAged): the baseline
// schedulers and the rate-spreading placement keep their own choice of
// paths. The moves count as rescued (a frame the destination's queue
// turned away, full meanwhile, as queue_full there). Called from the
// path's liveness check while the bond is awake. Allocation-free.
func (p *path) moveAged(now time.Time) {
	if !p.bond.movesAged || p.state.QueueLen() == 0 || p.state.LEOHold(now) > 0 {
		return
	}
	set := p.bond.paths.Load()
	if len(set.paths) < 2 {
		return
	}
	ns := monoclock.Nanos(now)
	var to *path
	accept := func(f *frame, deadline int64) bool {
		to = nil
		best := min(p.state.HeadDelivery(now, f.end-f.off), time.Duration(deadline-ns))
		for i, q := range set.paths {
			st := set.states[i]
			if q == p || q.gated.Load() || st.Status(now) != policy.StatusActive ||
				!st.HasRoom() || f.end-f.off > int(q.pmtu.budget.Load()) {
				continue
			}
			if d := st.ExpectedDelivery(); d < best {
				to, best = q, d
			}
		}
		return to != nil
	}
	for range moveAgedMax {
		f, ok := p.queue.popAged(ns, accept)
		if !ok {
			return
		}
		if handOver(to, f) {
			p.rescued.Add(1)
		}
	}
}

// moveAgedMax bounds the frames one call of moveAged moves: 16 every
// livenessTick is 3,200 packets a second, more than a slowed path queues.
const moveAgedMax = 16

func (p *path) stats(now time.Time) PathStats {
	s := PathStats{
		Name:             p.name,
		Labels:           p.state.CurrentLabels(),
		Status:           p.state.Status(now).String(),
		SmoothedRTT:      p.state.SmoothedRTT(),
		MinRTT:           p.state.MinRTT(),
		CongestionWindow: p.state.CongestionWindow(),
		BytesInFlight:    p.state.BytesInFlight(),
		PacketsSent:      p.state.PacketsSent(),
		PacketsLost:      p.state.PacketsLost(),
		QueueLen:         p.state.QueueLen(),
		TxPackets:        p.txPackets.Load(),
		TxBytes:          p.txBytes.Load(),
		RxPackets:        p.rxPackets.Load(),
		RxBytes:          p.rxBytes.Load(),
		Drops:            p.drops.snapshot(PathDropReasons),
		Rescued:          p.rescued.Load(),
		PMTUHeld:         p.pmtuHeld.Load(),
		Resent:           p.resent.Load(),
		ResendLate:       p.resendLate.Load(),
		ObjectsDropped:   p.queue.objectsDropped(),
		Rate:             p.rc.stats(),
	}
	if srtt := s.SmoothedRTT; srtt > 0 {
		s.CapacityBps = uint64(float64(s.CongestionWindow) * 8 / srtt.Seconds())
	}
	p.livenessStats(&s)
	p.pmtuStats(&s)
	if e := p.lastErr.Load(); e != nil {
		s.LastError = *e
	}
	if c := p.pc.conn.Load(); c != nil {
		cs := c.ConnectionStats()
		s.Conn = &ConnStats{LatestRTT: cs.LatestRTT, MeanDeviation: cs.MeanDeviation, BytesSent: cs.BytesSent,
			PacketsSent: cs.PacketsSent, BytesLost: cs.BytesLost, PacketsLost: cs.PacketsLost, BytesReceived: cs.BytesReceived}
	}
	return s
}
