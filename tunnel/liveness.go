package tunnel

import (
	"errors"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/bondd/bondd/internal/timerheap"
	"github.com/bondd/bondd/policy"
)

// Path liveness without waiting for QUIC's idle timeout. The tracer
// (tracer.go) tells the path's policy state of every ack-eliciting packet
// sent (policy.Path.OnAckEliciting) and of every packet received from the
// peer, ACK-only ones included (path.heard): the peer was heard, whatever
// the direction of the data. When the peer leaves a send unanswered for
// longer than max(SuspectRTTs × srtt, SuspectMin), the path is SUSPECT
// (policy/liveness.go) and, from that instant:
//
//   - the scheduler stops choosing it, even for a rule that prefers it,
//     while another path is ACTIVE (policy.Select: directives are advice);
//   - while another path is ACTIVE, it hands no more frames to quic-go
//     (path.gated, pathConn.mayHand), and the frames waiting in its
//     queue move to a live path (path.rescue); when no path is ACTIVE (all
//     silent: a stall of this host, or a total outage) it keeps sending,
//     since holding frames would only expire them;
//   - the datagrams it handed to quic-go since the peer was last heard are
//     counted as lost on it (DropSuspect);
//   - its connection probes it with a probeDatagram every ~srtt (at least
//     probeMin, at most probeMax): an ack-eliciting packet the peer answers
//     with an ACK, which restores the path at once (path.heard). A
//     receiver ignores a probe (isProbe, pathConn.routineReceive);
//   - after DeadAfter of silence the path's connection is closed
//     (codePeerSilent): the path turns UNAVAILABLE and the edge redials with
//     a short backoff (Edge.routineDial).
//
// A liveRun, a timer of the node's heap, checks this every livenessTick
// while the path's connection lives and the bond is awake; while the bond
// sleeps (idle.go), on the edge at each idle keepalive, on the
// concentrator not at all, and on either every livenessTick while a send
// waits for its answer. The edge sends the keepalives: a probeDatagram on
// a path the peer has been silent on for Keepalive (awake) or
// IdleKeepalive (asleep); the concentrator sends none. quic-go's own keepalive is off,
// and its idle timeout (IdleKeepalive + IdleTimeout) is only a backstop:
// while the bond is awake a connection whose peer was silent for
// IdleTimeout is closed here.

// Liveness timing.
const (
	livenessTick = 5 * time.Millisecond
	probeMin     = 10 * time.Millisecond
	probeMax     = 250 * time.Millisecond
	// livenessStall: a tick this late means the process stalled.
	livenessStall = 4 * livenessTick
)

// probeDatagram is a liveness probe: zeros, which no bondd header starts
// with (version 0), so a receiver ignores it (an older one counts it as
// bad_header). Its 48 bytes put the QUIC packet above the 42 bytes under
// which a restarted peer sends no stateless reset (quic-go
// protocol.MinStatelessResetSize), so probing a path whose peer restarted
// gets the path reset at once.
var probeDatagram [48]byte

// isProbe reports whether dg is a liveness probe.
func isProbe(dg []byte) bool { return len(dg) == 0 || dg[0] == 0 }

// codePeerSilent closes a connection whose peer was silent for DeadAfter.
const codePeerSilent = 0x104

// heard records that a packet of the peer arrived on p at now. Called by
// the tracer for every packet received; allocation-free.
func (p *path) heard(now time.Time) {
	p.state.OnReceive(now)
	p.txAtHeard.Store(p.txPackets.Load())
	if p.suspect.Load() && p.suspect.CompareAndSwap(true, false) {
		p.gated.Store(false)
		p.suspectEnds.Add(1)
		p.bond.log.Info("path restored: the peer answers", "path", p.name) // once per SUSPECT period
		p.pc.signal()                                                      // hand frames again
		p.queue.ringIfQueued()
	}
}

// liveRun is the liveness check of one connection of a path: a timer of
// the node's heap (idle.go) calling check, and the state it keeps between
// calls, which only check touches.
type liveRun struct {
	pc        *pathConn
	conn      *quic.Conn
	done      <-chan struct{}
	t         *timerheap.Timer
	peer      string    // the peer address last seen (checkPeer)
	peerAt    time.Time // when checkPeer last ran
	lastProbe time.Time
}

// startLiveness starts watching the liveness of the path while conn is
// its connection (see the top of this file): it marks the path SUSPECT,
// probes it, sends the edge's keepalives and closes conn after DeadAfter
// of silence, or, while the bond is awake, after IdleTimeout without a
// word from the peer. The watch runs on the node's timer heap; stop ends
// it. Without a heap (a bond driven by hand in a test) nothing runs.
func (pc *pathConn) startLiveness(conn *quic.Conn) (stop func()) {
	p := pc.path
	peer := conn.RemoteAddr().String()
	lr := &liveRun{pc: pc, conn: conn, done: conn.Context().Done(), peer: peer}
	lr.t = p.bond.newTimer(lr.check)
	if lr.t == nil {
		return func() {}
	}
	pc.live.Store(lr.t)
	lr.t.Reset(time.Now().Add(livenessTick))
	return func() {
		pc.live.CompareAndSwap(lr.t, nil)
		lr.t.Stop()
	}
}

// check judges the path's liveness at now (the timer was due at due) and
// re-arms the timer: every livenessTick while the bond is awake or the
// path has a send unanswered, else at the next idle keepalive.
func (lr *liveRun) check(now, due time.Time) {
	pc, conn := lr.pc, lr.conn
	p := pc.path
	select {
	case <-lr.done:
		return
	default:
	}
	asleep := p.bond.asleep()
	if asleep || now.Sub(lr.peerAt) >= migrationEvery {
		p.checkPeer(conn, &lr.peer)
		lr.peerAt = now
	}
	// A late call means this process did not run for a while: the
	// peer's answers may be waiting in the socket, unread. Judge at the
	// next tick, once quic-go has read them.
	if now.Sub(due) > livenessStall {
		lr.t.Reset(now.Add(livenessTick))
		return
	}
	if !asleep {
		p.pmtuTick(conn, now) // path MTU (pmtu.go)
		p.moveAged(now)       // frames a slowed path holds too long (path.go)
	}
	sus, silent := p.state.Suspect(now)
	if !sus {
		if !lr.quiet(now, asleep) {
			return // closed
		}
		if at, ok := lr.next(now, asleep); ok {
			lr.t.Reset(at)
		}
		return
	}
	if p.suspect.CompareAndSwap(false, true) {
		p.onSuspect(now, silent)
	}
	p.regate(now)
	if silent > p.bond.popts.DeadAfter {
		p.bond.log.Warn("path dead: the peer is silent", "path", p.name, "silent", silent.Round(time.Millisecond))
		go conn.CloseWithError(codePeerSilent, "peer silent") // waits for quic-go's run loop: not on the heap
		return
	}
	every := min(max(p.state.SmoothedRTT(), probeMin), probeMax)
	if now.Sub(lr.lastProbe) >= every {
		lr.lastProbe = now
		if pc.probe() {
			p.probes.Add(1)
		}
	}
	lr.t.Reset(now.Add(livenessTick))
}

// quiet handles a path that is not SUSPECT at now: the probe after the
// bond woke, the edge's keepalive, and, while the bond is awake, the close
// of a connection whose peer has been silent for IdleTimeout. It reports
// false when it closed the connection.
func (lr *liveRun) quiet(now time.Time, asleep bool) bool {
	pc := lr.pc
	p := pc.path
	o := &p.bond.popts
	silence := p.state.Silence(now)
	if !asleep && silence > o.IdleTimeout {
		p.bond.log.Warn("path dead: the peer sent nothing", "path", p.name, "silent", silence.Round(time.Millisecond))
		go lr.conn.CloseWithError(codePeerSilent, "peer silent")
		return false
	}
	keepalive := o.Keepalive
	if asleep {
		keepalive = o.IdleKeepalive
	}
	woke := pc.wakeProbe.Swap(false)
	if _, unanswered := p.state.Suspect(now); unanswered > 0 {
		return true // a send waits for its answer: no keepalive needed
	}
	if woke || p.bond.sendsKeepalives && p.state.Silence(now) >= keepalive {
		if pc.probe() && !woke {
			p.keepalives.Add(1)
		}
	}
	return true
}

// next returns when to check again after a quiet check at now, and false
// when nothing needs checking until the bond wakes: on an asleep
// concentrator with nothing sent unanswered (it sends no keepalives; the
// edge's prove the path, and quic-go's idle timeout closes a connection
// whose edge vanished).
func (lr *liveRun) next(now time.Time, asleep bool) (time.Time, bool) {
	p := lr.pc.path
	if !asleep {
		return now.Add(livenessTick), true
	}
	if _, unanswered := p.state.Suspect(now); unanswered > 0 {
		// Judge a send of the idle path (a keepalive, a control
		// message) when it could turn SUSPECT.
		return now.Add(max(p.state.SuspectAfter()-unanswered, 0) + livenessTick), true
	}
	if !p.bond.sendsKeepalives {
		return time.Time{}, false
	}
	due := now.Add(max(p.bond.popts.IdleKeepalive-p.state.Silence(now), livenessTick))
	return ceilTo(due, keepaliveGrid), true
}

// keepaliveGrid aligns an asleep edge's keepalives to the wall clock: they
// leave on its multiples, so that the keepalives of a node's edges (of
// every uplink of an edge, and of edges whose clocks agree) reach the
// concentrator in batches, which costs it one wake-up per batch instead
// of one per keepalive (docs/performance.md, "How much one node holds").
const keepaliveGrid = 100 * time.Millisecond

// ceilTo rounds t up to a multiple of d since the Unix epoch.
func ceilTo(t time.Time, d time.Duration) time.Time {
	if r := t.UnixNano() % int64(d); r != 0 {
		return t.Add(d - time.Duration(r))
	}
	return t
}

// probe hands the connection a liveness probe (probeDatagram), unless
// quic-go's send queue is full, and reports whether it did: the peer's ACK
// of it proves the path.
func (pc *pathConn) probe() bool {
	conn := pc.conn.Load()
	if conn == nil || pc.unsent.Load() >= maxUnsent {
		return false
	}
	pc.unsent.Add(1)
	if conn.SendDatagram(probeDatagram[:]) != nil {
		pc.unsent.Add(-1)
		return false
	}
	return true
}

// migrationEvery is how often a path of an awake bond checks its peer's
// address (an asleep one checks at each of its checks).
const migrationEvery = 100 * time.Millisecond

// checkPeer counts a change of conn's peer address since *last (a QUIC
// migration or a NAT rebinding) and logs it.
func (p *path) checkPeer(conn *quic.Conn, last *string) {
	now := conn.RemoteAddr().String()
	if now == *last {
		return
	}
	p.migrations.Add(1)
	p.bond.log.Info("path peer address changed", "path", p.name, "from", *last, "to", now)
	*last = now
	if p.bond.peerMoved != nil {
		p.bond.peerMoved(udpAddrPort(conn.RemoteAddr()), conn.Context())
	}
}

// livenessStats fills the liveness fields of s.
func (p *path) livenessStats(s *PathStats) {
	if c := p.pc.conn.Load(); c != nil {
		s.PeerAddr = c.RemoteAddr().String() // an asleep path checks it only at waking
	}
	s.Migrations = p.migrations.Load()
	s.SuspectEvents = p.suspectStarts.Load()
	s.Probes = p.probes.Load()
	s.Keepalives = p.keepalives.Load()
}

// onSuspect acts on p turning SUSPECT at now: counts what it handed quic-go
// since the peer was last heard as lost. regate then moves what p holds
// to a live path, if there is one.
func (p *path) onSuspect(now time.Time, silent time.Duration) {
	p.suspectStarts.Add(1)
	p.pmtuSuspect(now) // large datagrams unanswered: a path MTU black hole? (pmtu.go)
	lost := p.presumeLost()
	p.bond.log.Info("path suspect: the peer does not answer", "path", p.name, "silent", silent.Round(time.Millisecond),
		"bound", p.state.SuspectAfter().Round(time.Millisecond), "presumed_lost", lost)
}

// regate decides, at now, whether p, SUSPECT, holds its frames back: only
// while another path is ACTIVE to take them. When every path is silent (a
// stall of this host, or of everything), holding them would only expire
// them, so it sends on. When another path becomes ACTIVE — at once, or
// later, after every path went silent and another came back first — p's
// queued and parked frames move to the live paths, and the data datagrams
// its connection sent and keeps unacknowledged are sent again there (resend.go),
// rather than wait out their deadlines on a path that may stay dead.
func (p *path) regate(now time.Time) {
	g := p.bond.otherActive(p, now)
	switch old := p.gated.Swap(g); {
	case old && !g:
		p.pc.signal()
		p.queue.ringIfQueued()
	case !old && g:
		resent := 0
		if rec := p.pc.rec.Load(); rec != nil {
			resent = rec.held.resendAll(p, now)
		}
		before := p.rescued.Load()
		p.rescue(nil)
		p.bond.log.Info("path suspect: its frames move to the live paths", "path", p.name,
			"moved", p.rescued.Load()-before, "resent", resent)
	}
}

// presumeLost counts as DropSuspect, and returns, the datagrams p handed
// quic-go since the peer was last heard that no earlier call counted: when
// the path turns SUSPECT, and when its last connection ends without a
// word from the peer since (a restarted concentrator's stateless reset,
// silence): quic-go drops what was in flight then without reporting it.
// An over-estimate when the path only stalled.
func (p *path) presumeLost() uint64 {
	tx := p.txPackets.Load()
	from := max(p.txAtHeard.Load(), p.txPresumed.Swap(tx))
	if tx <= from {
		return 0
	}
	p.drops.addN(DropSuspect, tx-from)
	p.outages.Add(1) // the receiver's next reports find these gaps (ratectl.go)
	return tx - from
}

// otherActive reports whether a path of b other than p is ACTIVE at now.
func (b *Bond) otherActive(p *path, now time.Time) bool {
	for _, q := range b.paths.Load().paths {
		if q != p && q.state.Status(now) == policy.StatusActive {
			return true
		}
	}
	return false
}

// fastRedial reports whether a connection that ended with cause calls for
// a fast redial: the peer restarted (stateless reset, RFC 9000 §10.3), shut
// down, or fell silent; it is likely back within a second.
func fastRedial(cause error) bool {
	var sr *quic.StatelessResetError
	var ae *quic.ApplicationError
	var ie *quic.IdleTimeoutError
	switch {
	case errors.As(cause, &sr), errors.As(cause, &ie):
		return true
	case errors.As(cause, &ae):
		return ae.ErrorCode == codeShutdown || ae.ErrorCode == codePeerSilent
	}
	return false
}

// Fast redial: the first backoff after fastRedial, and how long its first
// dial waits for the concentrator's first packet before it dials afresh
// (Edge.dial: a concentrator that answers keeps the whole
// DefaultHandshakeTimeout); both double on each failure, up to RedialMax
// and DefaultHandshakeTimeout.
const (
	fastRedialMin     = 20 * time.Millisecond
	fastAttemptMin    = 1 * time.Second
	fastAttemptPerRTT = 4 // the wait is at least this many RTTs
)

// errSilentNode is the cause of a dial cut short because the concentrator
// sent nothing within the attempt (Edge.dial).
var errSilentNode = errors.New("no answer from the concentrator")
