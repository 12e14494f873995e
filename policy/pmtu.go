package policy

import (
	"fmt"
	"time"
)

// Datagram packetization layer path MTU discovery for one path, after
// RFC 8899 (DPLPMTUD). The packetization layer is bondd's datagram; the
// "PLPMTU" is the path's datagram budget: the largest QUIC DATAGRAM
// payload, in bytes, that the path is known to carry now. PMTU is the
// pure decision machine; the tunnel feeds it what QUIC loss detection
// (RFC 9002 §6) said about the datagrams of each size and sends the
// probes it asks for (tunnel/pmtu.go).
//
// States, RFC 8899 §5.2:
//
//   - SEARCH_COMPLETE: the budget is confirmed. A path starts here at Max,
//     the bond's largest datagram, because its QUIC handshake sent Initial
//     packets padded to the connection's initial packet size (RFC 9000
//     §14.1), which holds Max. Black-hole detection (§4.3) runs: when
//     BlackHoleLosses datagrams larger than Base are declared lost in a
//     row, with no datagram at least as large as the smallest of them
//     acknowledged meanwhile and no smaller packet declared lost with
//     them (PMTUSample.LostSmall), over at least two smoothed RTTs (10 ms
//     or more: a burst that overflowed a byte-limited queue is over by
//     then), while the peer acknowledges smaller packets,
//     the path is in a black hole for large datagrams: the budget falls to
//     Base at once (BASE). So does [PMTU.OnSuspect], for a hole that eats
//     every ack-eliciting packet (QUIC then declares nothing lost); until
//     a probe confirms a smaller size, [PMTU.Confirmed] still reports Max,
//     since an outage of every size looks the same. Below Max, every Raise
//     the machine probes Max
//     once (SEARCH, raising): when the probe is acknowledged the budget is
//     Max again (§5.2, PMTU_RAISE_TIMER; RFC 8899's 600 s default is for
//     Internet paths, bondd's probe costs one datagram per Raise).
//   - BASE: the budget is Base, the datagram payload of QUIC's smallest
//     packet (BASE_PLPMTU, RFC 9000 §14.3: 1200 bytes); it probes Base.
//     An acknowledged datagram of at least Base bytes confirms it: SEARCH.
//     MaxProbes probes lost: ERROR.
//   - SEARCH: Max first when no size was seen failing, then binary search
//     (§5.3.2 allows any search algorithm) between the confirmed budget
//     and the smallest size seen failing, in steps of PMTUStep bytes: each candidate is probed up to MaxProbes times
//     (MAX_PROBES, §5.1.2), PMTUProbeGap apart; an acknowledged probe
//     confirms it, MaxProbes lost ones (or no answer within the probe
//     timeout, max(3 × srtt, PMTUProbeTimeoutMin), PROBE_TIMER) reject it.
//     The search ends in SEARCH_COMPLETE.
//   - ERROR: not even Base arrives; the budget is the largest datagram
//     acknowledged meanwhile (possibly 0; Base while only suspected). Base
//     is probed every Raise, and every Raise/4 while the peer answers
//     (every PMTUProbeTimeoutMin while only suspected), so the path is back
//     soon after an outage.
//
// A probe is a padded datagram the receiver discards; any acknowledged
// datagram counts as evidence too (§4.1 allows data as probes). A probe's
// loss is not congestion (§4.4): the tunnel keeps it out of the path's
// loss figures.

// PMTUState is a state of the RFC 8899 §5.2 machine.
type PMTUState uint8

// PMTU states (RFC 8899 §5.2; DISABLED is PMTUConfig.Max <= Base).
const (
	PMTUSearchComplete PMTUState = iota
	PMTUBase
	PMTUSearch
	PMTUError
)

// String returns the RFC 8899 name: "SEARCH_COMPLETE", "BASE", "SEARCH"
// or "ERROR".
func (s PMTUState) String() string {
	switch s {
	case PMTUSearchComplete:
		return "SEARCH_COMPLETE"
	case PMTUBase:
		return "BASE"
	case PMTUSearch:
		return "SEARCH"
	case PMTUError:
		return "ERROR"
	}
	return fmt.Sprintf("PMTUState(%d)", uint8(s))
}

// PMTU defaults and constants (see [PMTUConfig]).
const (
	// DefaultPMTUMaxProbes is MAX_PROBES (RFC 8899 §5.1.2).
	DefaultPMTUMaxProbes = 3
	// DefaultPMTUBlackHoleLosses is how many datagrams larger than Base
	// must be lost in a row, none as large acknowledged, for a black hole:
	// at 3 % random loss five in a row happen once in 4·10⁷ datagrams.
	DefaultPMTUBlackHoleLosses = 5
	// DefaultPMTURaise is how often a path below Max probes Max again.
	DefaultPMTURaise = 2 * time.Second
	// PMTUStep is the search granularity, bytes: inner MTUs are multiples
	// of 8.
	PMTUStep = 8
	// PMTUProbeGap spaces the probes of one candidate size.
	PMTUProbeGap = 10 * time.Millisecond
	// PMTUProbeTimeoutMin is the shortest wait for a probe's answer.
	PMTUProbeTimeoutMin = 100 * time.Millisecond
)

// PMTUConfig configures a [PMTU]. Base and Max are required; zero fields
// take the defaults.
type PMTUConfig struct {
	// Base is BASE_PLPMTU: the datagram payload, bytes, that every path
	// carries (QUIC's 1200-byte minimum packet less its overhead).
	Base int
	// Max is MAX_PLPMTU: the largest datagram the bond sends, bytes. With
	// Max <= Base the machine is disabled and the budget is always Max.
	Max int
	// MaxProbes is MAX_PROBES; 0: DefaultPMTUMaxProbes.
	MaxProbes int
	// BlackHoleLosses is the run of large datagrams lost that makes a
	// black hole; 0: DefaultPMTUBlackHoleLosses.
	BlackHoleLosses int
	// Raise is how often a budget below Max is probed at Max again;
	// 0: DefaultPMTURaise.
	Raise time.Duration
}

// PMTUSample is what QUIC loss detection said about a path's datagrams
// since the previous sample. Sizes are datagram payloads, bytes.
type PMTUSample struct {
	// Acked reports that some packet of the path was acknowledged, with or
	// without a datagram: the peer hears the path.
	Acked bool
	// DeliveredMax is the largest datagram acknowledged; 0: none.
	DeliveredMax int
	// Lost counts the datagrams larger than [PMTU.Watch] declared lost;
	// LostMin is the smallest of them.
	Lost, LostMin int
	// LostSmall counts the packets declared lost whose datagrams were not
	// larger than Watch's lower bound (or that carried none). Small and
	// large packets lost together are an outage or a queue overflowing (a
	// Starlink reconfiguration), not a size the path refuses: such a
	// sample's large losses do not count toward a black hole, and the run
	// starts again (RFC 8899 §4.3: a black hole is to be told from
	// congestion).
	LostSmall int
}

// PMTUCause says why a path's budget last changed.
type PMTUCause uint8

// Causes of a budget change.
const (
	PMTUCauseHandshake  PMTUCause = iota // a QUIC handshake confirmed Max
	PMTUCauseBlackHole                   // large datagrams lost while smaller ones arrive (RFC 8899 §4.3)
	PMTUCauseAcked                       // a probe (or datagram) of the size was acknowledged
	PMTUCauseProbesLost                  // MaxProbes probes of the size lost, or unanswered
	PMTUCauseSuspect                     // the peer stopped answering while large datagrams were in flight
)

// PMTUChange is the last change of a path's budget.
type PMTUChange struct {
	At       time.Time
	From, To int       // budget before and after, bytes
	State    PMTUState // state entered
	Cause    PMTUCause
	Size     int // the size the evidence is about, bytes
	Count    int // datagrams lost (black hole, probes lost)
}

// String describes c for the status, like "black hole: 5 datagrams of
// 1322+ bytes lost while smaller ones arrive; budget 1322 -> 1163".
func (c PMTUChange) String() string {
	if c.At.IsZero() {
		return ""
	}
	var why string
	switch c.Cause {
	case PMTUCauseHandshake:
		why = "QUIC handshake confirmed the bond's datagram size"
	case PMTUCauseBlackHole:
		why = fmt.Sprintf("black hole: %d datagrams of %d+ bytes lost while smaller ones arrive", c.Count, c.Size)
	case PMTUCauseAcked:
		why = fmt.Sprintf("%d-byte datagram acknowledged", c.Size)
	case PMTUCauseProbesLost:
		why = fmt.Sprintf("%d probes of %d bytes lost", c.Count, c.Size)
	case PMTUCauseSuspect:
		why = "the peer stopped answering while large datagrams were in flight: probing"
	}
	return fmt.Sprintf("%s; budget %d -> %d bytes", why, c.From, c.To)
}

// PMTU is the RFC 8899 state machine of one path's datagram budget. It is
// not safe for concurrent use; it does not allocate.
type PMTU struct {
	cfg     PMTUConfig
	state   PMTUState
	lo      int // the confirmed budget (PLPMTU), bytes
	hi      int // the smallest size seen failing, bytes; Max+1: none
	cand    int // the size being probed (BASE, SEARCH, ERROR)
	raising bool
	// suspected: BASE was entered on OnSuspect and nothing is confirmed
	// yet (Confirmed reports Max); fromSuspect: the search under way began
	// with OnSuspect (its first failure at Max is a black hole).
	suspected, fromSuspect bool
	// cause is the change that took the budget below Max (Reason).
	cause   PMTUChange
	sent    int // probes of cand sent
	failed  int // losses of cand
	probeAt time.Time
	candAt  time.Time // the first probe of cand
	srtt    time.Duration
	raiseAt time.Time
	ackAt   time.Time // the last sample with an acknowledgement
	// run is the black-hole detector: n datagrams larger than Base lost in
	// a row, the smallest min bytes, alive once some packet was acked.
	run struct {
		n, min int
		alive  bool
		since  time.Time // the run's first loss
	}
	// suspectRun is run.n when OnSuspect cleared it: losses that count
	// as the black hole's if the search confirms one.
	suspectRun                  int
	last                        PMTUChange
	changes, blackHoles, probes uint64
	holeLosses                  uint64
}

// NewPMTU returns the machine of a path in SEARCH_COMPLETE at cfg.Max
// (see PMTUCauseHandshake), at now.
func NewPMTU(cfg PMTUConfig, now time.Time) *PMTU {
	if cfg.MaxProbes <= 0 {
		cfg.MaxProbes = DefaultPMTUMaxProbes
	}
	if cfg.BlackHoleLosses <= 0 {
		cfg.BlackHoleLosses = DefaultPMTUBlackHoleLosses
	}
	if cfg.Raise <= 0 {
		cfg.Raise = DefaultPMTURaise
	}
	return &PMTU{cfg: cfg, lo: cfg.Max, hi: cfg.Max + 1, raiseAt: now.Add(cfg.Raise)}
}

// Enabled reports whether the machine runs (Max > Base).
func (m *PMTU) Enabled() bool { return m.cfg.Max > m.cfg.Base }

// Budget returns the path's datagram budget, bytes: the largest datagram
// the scheduler may put on the path now.
func (m *PMTU) Budget() int {
	switch {
	case !m.Enabled():
		return m.cfg.Max
	case m.state == PMTUBase, m.state == PMTUError && m.suspected:
		return m.cfg.Base
	}
	return m.lo
}

// Confirmed returns the budget, bytes, that evidence supports: Budget,
// except where nothing says the path carries less than Max — after
// [PMTU.OnSuspect] while nothing is confirmed (BASE, or ERROR with no
// answer at all: a plain outage looks the same), and in a SEARCH in which
// no size has failed yet (acknowledged datagrams raise the budget toward
// Max before Max is probed) — so Max. The bond's MTU follows it; the
// scheduler follows Budget.
func (m *PMTU) Confirmed() int {
	if m.suspected || m.state == PMTUSearch && m.hi > m.cfg.Max {
		return m.cfg.Max
	}
	return m.Budget()
}

// State returns the current state.
func (m *PMTU) State() PMTUState { return m.state }

// Watch returns the sizes, bytes, whose losses matter to the machine
// now: [PMTUSample].Lost counts the datagrams lost with above < size <=
// upTo. In SEARCH_COMPLETE those are the data datagrams larger than Base
// that the budget allows (black-hole detection); while probing, the
// probes (size >= the candidate).
func (m *PMTU) Watch() (above, upTo int) {
	switch {
	case m.state == PMTUSearchComplete && !m.raising:
		return m.cfg.Base, m.lo
	case m.state == PMTUBase || m.state == PMTUSearch:
		// Sizes known to fail (data still in flight) tell nothing new.
		return m.cand - 1, min(m.hi, m.cfg.Max+1) - 1
	}
	return m.cand - 1, 1 << 16
}

// Reason says why the budget is what it is, for the status: the last
// change, preceded, while the budget is below Max, by the change that
// took it there (a black hole). Empty before any change.
func (m *PMTU) Reason() string {
	last := m.last.String()
	if m.Budget() >= m.cfg.Max || m.cause.At.IsZero() || m.cause == m.last {
		return last
	}
	return m.cause.String() + "; then " + last
}

// Last returns the last budget change.
func (m *PMTU) Last() PMTUChange { return m.last }

// Counts returns the number of budget changes, black holes detected and
// probes asked for.
func (m *PMTU) Counts() (changes, blackHoles, probes uint64) {
	return m.changes, m.blackHoles, m.probes
}

// HoleLosses returns how many datagrams (not probes) the machine saw lost
// to black holes before it detected them: the run of losses that made
// each black hole (RFC 8899 §4.3), and, for a black hole found by the
// search that followed [PMTU.OnSuspect], the run up to the suspicion.
// Datagrams lost after a detection are larger than the budget; the caller
// counts those one by one.
func (m *PMTU) HoleLosses() uint64 { return m.holeLosses }

// OnHandshake records a new QUIC connection on the path at now: its
// handshake confirmed Max (see [NewPMTU]).
func (m *PMTU) OnHandshake(now time.Time) {
	if m.state != PMTUSearchComplete || m.lo != m.cfg.Max {
		m.complete(now, m.cfg.Max, PMTUCauseHandshake, m.cfg.Max, 0)
	}
	m.raising = false
	m.run.n, m.run.min, m.run.alive = 0, 0, false
}

// OnSuspect records at now that the peer stopped answering (liveness
// SUSPECT) while datagrams larger than Base were among the unanswered
// sends. A black hole that eats every ack-eliciting packet the path sends
// leaves QUIC nothing to declare lost (RFC 9002 §6.1 needs a later packet
// acknowledged), so this is RFC 8899 §4.3's other black-hole indication:
// from SEARCH_COMPLETE above Base, the machine enters BASE and probes,
// which an outage of every size turns into a short detour (Confirmed).
func (m *PMTU) OnSuspect(now time.Time) {
	if !m.Enabled() || m.state != PMTUSearchComplete || m.raising || m.lo <= m.cfg.Base {
		return
	}
	m.hi = m.cfg.Max + 1
	m.suspectRun = m.run.n
	m.run.n, m.run.min, m.run.alive = 0, 0, false
	m.cand, m.sent, m.failed, m.probeAt = m.cfg.Base, 0, 0, time.Time{}
	m.change(now, m.cfg.Base, PMTUBase, PMTUCauseSuspect, 0, 0)
	m.suspected, m.fromSuspect = true, true
}

// Tick feeds the machine the sample s taken at now, with the path's
// smoothed RTT srtt, and returns the size, bytes, of a probe to send now
// (0: none). Call it every few milliseconds while the path is connected.
func (m *PMTU) Tick(now time.Time, srtt time.Duration, s PMTUSample) (probe int) {
	if !m.Enabled() {
		return 0
	}
	m.srtt = srtt
	m.observe(now, s)
	timeout := max(3*srtt, PMTUProbeTimeoutMin)
	switch m.state {
	case PMTUSearchComplete:
		if m.lo >= m.cfg.Max || now.Before(m.raiseAt) {
			return 0
		}
		if !m.raising { // PMTU_RAISE_TIMER: one probe of Max
			m.raising, m.cand, m.sent, m.failed = true, m.cfg.Max, 0, 0
		}
		if m.sent == 0 {
			return m.probe(now)
		}
		if m.failed > 0 || now.Sub(m.probeAt) >= timeout {
			m.raising = false
			m.raiseAt = now.Add(m.cfg.Raise)
		}
		return 0
	case PMTUError:
		// Base again every Raise, or every Raise/4 while the peer answers
		// (an outage, not a small MTU, may have put the path here).
		again := m.cfg.Raise / 4
		if m.suspected {
			again = PMTUProbeTimeoutMin
		}
		if m.sent > 0 && now.Sub(m.probeAt) < m.cfg.Raise && !(s.Acked && now.Sub(m.probeAt) >= again) {
			return 0
		}
		m.sent, m.failed = 0, 0
		return m.probe(now)
	}
	// BASE and SEARCH: MaxProbes probes of cand, PMTUProbeGap apart.
	if m.failed >= m.cfg.MaxProbes || m.sent >= m.cfg.MaxProbes && now.Sub(m.probeAt) >= timeout {
		m.reject(now)
		if m.state == PMTUSearchComplete || m.state == PMTUError && m.sent > 0 {
			return 0
		}
	}
	if m.sent < m.cfg.MaxProbes && now.Sub(m.probeAt) >= PMTUProbeGap {
		return m.probe(now)
	}
	return 0
}

func (m *PMTU) probe(now time.Time) int {
	if m.sent == 0 {
		m.candAt = now
	}
	m.sent++
	m.probes++
	m.probeAt = now
	return m.cand
}

// observe applies s: deliveries first (they confirm sizes and clear the
// black-hole run), then losses.
func (m *PMTU) observe(now time.Time, s PMTUSample) {
	if d := min(s.DeliveredMax, m.cfg.Max); d > 0 {
		if m.run.n > 0 && d >= m.run.min {
			m.run.n, m.run.min = 0, 0 // a datagram as large arrived: no black hole
		}
		if d >= m.hi {
			m.hi = m.cfg.Max + 1
		}
		switch m.state {
		case PMTUSearchComplete:
			if m.raising && d >= m.cand {
				m.complete(now, d, PMTUCauseAcked, d, 0)
			}
		case PMTUBase, PMTUError:
			if d >= m.cfg.Base {
				if m.state == PMTUError {
					m.hi = m.cfg.Max + 1 // the path changed: what failed before may not now
				}
				m.search(now, PMTUCauseAcked, d)
			} else if m.state == PMTUError && d > m.lo && !m.suspected {
				m.change(now, d, PMTUError, PMTUCauseAcked, d, 0)
			}
		case PMTUSearch:
			if d >= m.cand {
				m.search(now, PMTUCauseAcked, d)
			} else if d > m.lo {
				m.change(now, d, PMTUSearch, PMTUCauseAcked, d, 0)
			}
		}
	}
	if s.Acked {
		m.run.alive = true
	}
	if s.Lost <= 0 {
		return
	}
	if m.state == PMTUSearchComplete && !m.raising {
		if s.LostSmall > 0 {
			// Every size was lost: no evidence about size. The run
			// starts again.
			m.run.n, m.run.min = 0, 0
			return
		}
		if m.run.n == 0 {
			m.run.since = now
		}
		if m.run.n == 0 || s.LostMin < m.run.min {
			m.run.min = s.LostMin
		}
		m.run.n += s.Lost
		if m.run.n >= m.cfg.BlackHoleLosses && m.run.alive && now.Sub(m.run.since) >= m.holdRun() {
			m.blackHole(now)
		}
		return
	}
	// A loss declared before a probe of cand could have been (an RTT after
	// the first) is of a packet sent earlier: after an outage QUIC
	// declares everything sent meanwhile lost at the first ACK.
	if m.sent > 0 && now.Sub(m.candAt) >= m.srtt {
		m.failed += s.Lost
	}
}

// holdRun is how long a run of large losses must last before it is a
// black hole: two smoothed RTTs, at least PMTUHoldMin. A black hole goes
// on losing what the path sends it; a drop-tail queue that a burst
// overflowed (a byte-limited queue refuses large packets first and still
// takes small ones) has drained by then, and a datagram as large arrives
// and ends the run.
func (m *PMTU) holdRun() time.Duration {
	return max(2*m.srtt, PMTUHoldMin)
}

// PMTUHoldMin is the shortest run of large losses that is a black hole:
// on a sub-millisecond path the traffic leaves a hole within a few tens of
// milliseconds, and the losses must be explained by then.
const PMTUHoldMin = 10 * time.Millisecond

// blackHole enters BASE on a black hole (RFC 8899 §4.3, §5.2).
func (m *PMTU) blackHole(now time.Time) {
	m.blackHoles++
	m.hi = max(m.run.min, m.cfg.Base+1)
	n, size := m.run.n, m.run.min
	m.holeLosses += uint64(n)
	m.run.n, m.run.min, m.run.alive = 0, 0, false
	m.cand, m.sent, m.failed, m.probeAt = m.cfg.Base, 0, 0, time.Time{}
	m.change(now, m.cfg.Base, PMTUBase, PMTUCauseBlackHole, size, n)
	m.cause, m.fromSuspect = m.last, false
}

// search sets the next candidate after lo was confirmed (or, with lo
// unchanged, after a rejection), or completes the search. d is the
// acknowledged size that led here (0: a rejection).
func (m *PMTU) search(now time.Time, cause PMTUCause, d int) {
	lo := max(m.lo, d)
	hi := min(m.hi, m.cfg.Max+1)
	if lo >= m.cfg.Max || hi-lo <= PMTUStep {
		m.complete(now, min(lo, m.cfg.Max), cause, d, 0)
		return
	}
	// The midpoint on the PMTUStep grid above Base, or Max when it is the
	// last step.
	mid := m.cfg.Base + ((lo+hi)/2-m.cfg.Base)/PMTUStep*PMTUStep
	if mid <= lo {
		mid = lo + PMTUStep
	}
	if hi > m.cfg.Max { // no size seen failing: try Max first
		mid = m.cfg.Max
	}
	if lo != m.Budget() || m.state != PMTUSearch {
		m.change(now, lo, PMTUSearch, cause, d, 0)
	}
	m.lo, m.cand, m.sent, m.failed, m.probeAt = lo, mid, 0, 0, time.Time{}
}

// reject gives up on cand: MaxProbes lost, or unanswered.
func (m *PMTU) reject(now time.Time) {
	n := max(m.failed, m.sent)
	switch m.state {
	case PMTUBase:
		sus := m.suspected // no answer at all yet: still only suspected
		m.lo, m.sent, m.failed, m.probeAt = 0, 0, 0, now
		m.change(now, 0, PMTUError, PMTUCauseProbesLost, m.cand, n)
		m.sent = 1 // the next Base probe after Raise
		m.suspected = sus
	case PMTUSearch:
		if m.fromSuspect && m.cand == m.cfg.Max { // Max lost, smaller ones arrive: a black hole after all
			m.blackHoles++
			m.holeLosses += uint64(m.suspectRun)
			m.suspectRun, m.fromSuspect = 0, false
			m.cause = PMTUChange{At: now, From: m.cfg.Max, To: m.lo, State: PMTUSearch, Cause: PMTUCauseBlackHole, Size: m.cand, Count: n}
		}
		m.hi = m.cand
		hi := min(m.hi, m.cfg.Max+1)
		if hi-m.lo <= PMTUStep {
			m.complete(now, m.lo, PMTUCauseProbesLost, m.cand, n)
			return
		}
		m.search(now, PMTUCauseProbesLost, 0)
	}
}

// complete enters SEARCH_COMPLETE with budget b.
func (m *PMTU) complete(now time.Time, b int, cause PMTUCause, size, n int) {
	from := m.Budget()
	m.lo, m.raising, m.fromSuspect, m.suspectRun = b, false, false, 0
	m.raiseAt = now.Add(m.cfg.Raise)
	if from != b || m.state != PMTUSearchComplete {
		m.changeFrom(now, from, b, PMTUSearchComplete, cause, size, n)
	}
}

func (m *PMTU) change(now time.Time, to int, st PMTUState, cause PMTUCause, size, n int) {
	m.changeFrom(now, m.Budget(), to, st, cause, size, n)
	m.lo = to
}

func (m *PMTU) changeFrom(now time.Time, from, to int, st PMTUState, cause PMTUCause, size, n int) {
	m.state, m.suspected = st, false
	if from != to {
		m.changes++
		m.last = PMTUChange{At: now, From: from, To: to, State: st, Cause: cause, Size: size, Count: n}
	}
}
