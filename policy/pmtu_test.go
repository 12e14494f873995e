package policy

import (
	"math/rand/v2"
	"testing"
	"time"
)

// pmtuSim drives a PMTU against a simulated path that carries datagrams
// of at most limit bytes and loses any datagram with probability loss.
// Every tick (5 ms) the sender offers one data datagram of size data
// (clamped to the budget, as the scheduler does) and the probe the
// machine asks for; their fate is reported one RTT later, as QUIC loss
// detection would, filtered by Watch.
type pmtuSim struct {
	m       *PMTU
	now     time.Time
	limit   int
	loss    float64
	data    int
	rtt     time.Duration
	rng     *rand.Rand
	pending []pmtuOutcome
	probes  int
}

type pmtuOutcome struct {
	at        time.Time
	size      int
	delivered bool
}

const simTick = 5 * time.Millisecond

func newPMTUSim(cfg PMTUConfig, limit, data int) *pmtuSim {
	now := time.Unix(1_700_000_000, 0)
	return &pmtuSim{m: NewPMTU(cfg, now), now: now, limit: limit, data: data, rtt: 20 * time.Millisecond,
		rng: rand.New(rand.NewPCG(1, 2))}
}

func (s *pmtuSim) send(size int) {
	ok := size <= s.limit && s.rng.Float64() >= s.loss
	s.pending = append(s.pending, pmtuOutcome{at: s.now.Add(s.rtt), size: size, delivered: ok})
}

// step advances one tick.
func (s *pmtuSim) step() {
	s.now = s.now.Add(simTick)
	var smp PMTUSample
	above, upTo := s.m.Watch()
	// QUIC declares a packet lost only once a later one is acknowledged
	// (RFC 9002 §6.1): without a delivery due now, losses wait.
	acked := false
	for _, o := range s.pending {
		acked = acked || o.delivered && !o.at.After(s.now)
	}
	keep := s.pending[:0]
	for _, o := range s.pending {
		if o.at.After(s.now) || !o.delivered && !acked {
			keep = append(keep, o)
			continue
		}
		switch {
		case o.delivered:
			smp.Acked = true
			smp.DeliveredMax = max(smp.DeliveredMax, o.size)
		case o.size > above && o.size <= upTo:
			if smp.Lost == 0 || o.size < smp.LostMin {
				smp.LostMin = o.size
			}
			smp.Lost++
		case o.size <= above:
			smp.LostSmall++
		}
	}
	s.pending = keep
	if p := s.m.Tick(s.now, s.rtt, smp); p > 0 {
		s.probes++
		s.send(p)
	}
	if s.data > 0 {
		s.send(min(s.data, s.m.Budget()))
	}
	s.send(40) // a small packet (an ACK, a keepalive) now and then
}

// run advances d and returns the first time the budget met cond (zero:
// never), measured from the start of the run.
func (s *pmtuSim) run(d time.Duration, cond func(budget int) bool) time.Duration {
	start := s.now
	var met time.Duration
	for s.now.Sub(start) < d {
		s.step()
		if met == 0 && cond != nil && cond(s.m.Budget()) {
			met = s.now.Sub(start)
		}
	}
	return met
}

func TestPMTU(t *testing.T) {
	const base, maxSize = 1163, 1322
	cfg := PMTUConfig{Base: base, Max: maxSize}
	for _, c := range []struct {
		name      string
		loss      float64
		limit     int           // the path's limit after the onset
		wantLo    int           // budget bounds reached after the onset
		wantHi    int           //
		detectMax time.Duration // budget below the limit within this
		healMax   time.Duration // budget back to Max within this once healed
		wantState PMTUState
	}{
		{"healthy", 0, 1500, maxSize, maxSize, 0, 0, PMTUSearchComplete},
		{"healthy with 3% loss", 0.03, 1500, maxSize, maxSize, 0, 0, PMTUSearchComplete},
		{"black hole at 1250", 0, 1250, 1243, 1250, 200 * time.Millisecond, DefaultPMTURaise + 200*time.Millisecond, PMTUSearchComplete},
		{"black hole at 1250 with 2% loss", 0.02, 1250, 1227, 1250, 300 * time.Millisecond, 2*DefaultPMTURaise + 200*time.Millisecond, PMTUSearchComplete},
		{"black hole at Base", 0, base, base, base, 200 * time.Millisecond, DefaultPMTURaise + 200*time.Millisecond, PMTUSearchComplete},
		{"below Base", 0, 1000, 0, 1000, 200 * time.Millisecond, DefaultPMTURaise + 200*time.Millisecond, PMTUError},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newPMTUSim(cfg, 1500, maxSize)
			s.loss = c.loss
			s.run(time.Second, nil)
			if b := s.m.Budget(); b != maxSize || s.probes != 0 {
				t.Fatalf("before the onset: budget %d, %d probes; want %d, none", b, s.probes, maxSize)
			}
			s.limit = c.limit
			detect := s.run(5*time.Second, func(b int) bool { return b <= c.limit })
			changes, holes, probes := s.m.Counts()
			t.Logf("onset: budget %d (%s) after %s; %d changes, %d black holes, %d probes; last: %s",
				s.m.Budget(), s.m.State(), detect, changes, holes, probes, s.m.Last())
			if c.detectMax == 0 {
				if holes != 0 || s.m.Budget() != maxSize || probes != 0 {
					t.Fatalf("healthy path: %d black holes, budget %d, %d probes; want none, %d, none", holes, s.m.Budget(), probes, maxSize)
				}
				return
			}
			if detect == 0 || detect > c.detectMax {
				t.Errorf("budget under the %d-byte limit after %s, want within %s", c.limit, detect, c.detectMax)
			}
			if b := s.m.Budget(); b < c.wantLo || b > c.wantHi || s.m.State() != c.wantState {
				t.Errorf("settled at %d bytes (%s), want %d..%d (%s)", b, s.m.State(), c.wantLo, c.wantHi, c.wantState)
			}
			// Raise probes: about one per Raise, at most 3 per Raise.
			before := s.probes
			s.run(10*DefaultPMTURaise, nil)
			if n := s.probes - before; n < 8 || n > 45 {
				t.Errorf("%d probes in 10 raise periods while still limited, want 8..45", n)
			}
			if b := s.m.Budget(); b < c.wantLo || b > c.wantHi {
				t.Errorf("budget drifted to %d", b)
			}
			s.limit = 1500
			heal := s.run(4*DefaultPMTURaise, func(b int) bool { return b == maxSize })
			if heal == 0 || heal > c.healMax {
				t.Errorf("budget back at %d bytes after %s, want within %s", maxSize, heal, c.healMax)
			}
			if s.m.State() != PMTUSearchComplete {
				t.Errorf("healed state %s, want SEARCH_COMPLETE", s.m.State())
			}
		})
	}
}

// TestPMTUDisabled: with Max <= Base the budget is Max and nothing is
// probed.
func TestPMTUDisabled(t *testing.T) {
	s := newPMTUSim(PMTUConfig{Base: 1163, Max: 1162}, 1000, 1162)
	s.run(3*time.Second, nil)
	if b := s.m.Budget(); b != 1162 || s.probes != 0 || s.m.Enabled() {
		t.Fatalf("disabled: budget %d, %d probes, enabled %v", b, s.probes, s.m.Enabled())
	}
}

// TestPMTUHandshake: a new connection's handshake restores Max at once.
func TestPMTUHandshake(t *testing.T) {
	s := newPMTUSim(PMTUConfig{Base: 1163, Max: 1322}, 1200, 1322)
	s.run(time.Second, nil)
	if s.m.Budget() > 1200 {
		t.Fatalf("budget %d above the limit", s.m.Budget())
	}
	s.m.OnHandshake(s.now)
	if s.m.Budget() != 1322 || s.m.State() != PMTUSearchComplete || s.m.Last().Cause != PMTUCauseHandshake {
		t.Fatalf("after a handshake: %d (%s), %s", s.m.Budget(), s.m.State(), s.m.Last())
	}
}

// TestPMTUNoFalseBlackHole: heavy random loss of every size, no black
// hole, over a long run (five in a row happen, but a large datagram
// always arrives in between).
func TestPMTUNoFalseBlackHole(t *testing.T) {
	s := newPMTUSim(PMTUConfig{Base: 1163, Max: 1322}, 1500, 1322)
	s.loss = 0.05
	s.run(60*time.Second, nil)
	if _, holes, _ := s.m.Counts(); holes > 1 {
		t.Fatalf("%d black holes on a path with 5%% random loss in 60 s", holes)
	}
}

func TestPMTUStateString(t *testing.T) {
	for st, want := range map[PMTUState]string{PMTUBase: "BASE", PMTUSearch: "SEARCH",
		PMTUSearchComplete: "SEARCH_COMPLETE", PMTUError: "ERROR", 9: "PMTUState(9)"} {
		if got := st.String(); got != want {
			t.Errorf("%d: %q, want %q", st, got, want)
		}
	}
}

func TestPMTUAllocs(t *testing.T) {
	m := NewPMTU(PMTUConfig{Base: 1163, Max: 1322}, time.Unix(0, 0))
	now := time.Unix(1, 0)
	n := testing.AllocsPerRun(1000, func() {
		now = now.Add(simTick)
		m.Tick(now, 20*time.Millisecond, PMTUSample{Acked: true, DeliveredMax: 1200, Lost: 1, LostMin: 1322})
	})
	if n != 0 {
		t.Fatalf("Tick allocates %.1f times", n)
	}
}

// TestPMTUSuspect: OnSuspect (the peer went silent with large datagrams
// unanswered) drops the budget to Base at once without lowering what is
// Confirmed; after a plain outage the budget is Max again within a few
// probe rounds, after a black hole it settles under the limit.
func TestPMTUSuspect(t *testing.T) {
	for _, c := range []struct {
		name   string
		limit  int // during the fault; 0: nothing passes
		healed bool
		want   int // budget bound after the fault (outage) or during it
	}{
		{"outage", 0, true, 1322},
		{"black hole", 1250, false, 1250},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newPMTUSim(PMTUConfig{Base: 1163, Max: 1322}, 1500, 1322)
			s.run(time.Second, nil)
			s.limit = c.limit
			if c.limit == 0 {
				s.run(100*time.Millisecond, nil) // liveness: SUSPECT after a silence
			}
			s.m.OnSuspect(s.now)
			if s.m.Budget() != 1163 || s.m.State() != PMTUBase || s.m.Confirmed() != 1322 {
				t.Fatalf("after OnSuspect: budget %d (%s), confirmed %d; want 1163 (BASE), 1322", s.m.Budget(), s.m.State(), s.m.Confirmed())
			}
			s.run(500*time.Millisecond, nil)
			if c.healed {
				if s.m.Confirmed() != 1322 || s.m.Budget() != 1163 {
					t.Fatalf("during the outage: budget %d, confirmed %d", s.m.Budget(), s.m.Confirmed())
				}
				s.limit = 1500
				back := s.run(3*time.Second, func(b int) bool { return b == 1322 })
				t.Logf("budget back at 1322 %s after the outage; last: %s", back, s.m.Last())
				if back == 0 || back > time.Second {
					t.Fatalf("budget back at 1322 after %s, want within 1 s", back)
				}
				return
			}
			if b := s.m.Budget(); b > c.want || b < 1163 || s.m.Confirmed() != b {
				t.Fatalf("black hole: budget %d, confirmed %d; want %d..%d", b, s.m.Confirmed(), 1163, c.want)
			}
		})
	}
}

// TestPMTUHoleLosses: the datagrams lost before a detection count as the
// black hole's (HoleLosses): the run that made it, or the run up to an
// OnSuspect that the search then confirms; nothing when the suspicion was
// an outage (Max is acknowledged again).
func TestPMTUHoleLosses(t *testing.T) {
	const base, maxSize, srtt = 1163, 1322, 10 * time.Millisecond
	for _, c := range []struct {
		name    string
		lostRun int  // data datagrams of maxSize lost first, smaller ones acknowledged
		suspect bool // then OnSuspect, Base acknowledged, Max probed
		maxOK   bool // the Max probe is acknowledged (an outage, now over)
		want    uint64
	}{
		{"a run of five", 5, false, false, 5},
		{"a run of eight", 8, false, false, 8},
		{"suspicion confirmed", 2, true, false, 2},
		{"suspicion, then Max passes", 2, true, true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			now := time.Unix(1_700_000_000, 0)
			m := NewPMTU(PMTUConfig{Base: base, Max: maxSize}, now)
			tick := func(s PMTUSample) int {
				now = now.Add(5 * time.Millisecond)
				return m.Tick(now, srtt, s)
			}
			tick(PMTUSample{Acked: true, DeliveredMax: 300})
			// The run, over the black hole's hold (PMTU.holdRun).
			tick(PMTUSample{Acked: true, Lost: c.lostRun - 1, LostMin: maxSize})
			now = now.Add(2 * srtt) // the run's hold
			tick(PMTUSample{Acked: true, Lost: 1, LostMin: maxSize})
			if !c.suspect {
				if m.State() != PMTUBase || m.HoleLosses() != c.want {
					t.Fatalf("state %s, hole losses %d; want BASE, %d", m.State(), m.HoleLosses(), c.want)
				}
				return
			}
			m.OnSuspect(now)
			tick(PMTUSample{})
			if p := tick(PMTUSample{Acked: true, DeliveredMax: base}); p != maxSize {
				t.Fatalf("after Base was acknowledged: probe %d (%s), want %d", p, m.State(), maxSize)
			}
			for i := range 40 { // Max's three probes' fate, an RTT later; then small packets only
				switch {
				case i < 2 || i >= 5:
					tick(PMTUSample{Acked: true, DeliveredMax: 300})
				case c.maxOK:
					tick(PMTUSample{Acked: true, DeliveredMax: maxSize})
				default:
					tick(PMTUSample{Acked: true, Lost: 1, LostMin: maxSize})
				}
			}
			if m.HoleLosses() != c.want {
				t.Fatalf("hole losses %d (%s, budget %d), want %d", m.HoleLosses(), m.State(), m.Budget(), c.want)
			}
		})
	}
}

// TestPMTUMixedLoss: losses of every size at once (an outage) are no
// evidence about size, and a run of large losses shorter than the hold (a
// burst that overflowed a byte-limited queue) is no black hole.
func TestPMTUMixedLoss(t *testing.T) {
	const base, maxSize, srtt = 1163, 1322, 10 * time.Millisecond
	cases := []struct {
		name      string
		samples   []PMTUSample
		wantState PMTUState
	}{
		{"large only, over 25 ms: a black hole", []PMTUSample{
			{Acked: true, Lost: 25, LostMin: maxSize},
			{Acked: true, Lost: 5, LostMin: maxSize}}, PMTUBase},
		{"large only, at once: a burst, not yet a black hole", []PMTUSample{{Acked: true, Lost: 30, LostMin: maxSize}}, PMTUSearchComplete},
		{"a burst, then a large datagram arrives", []PMTUSample{
			{Acked: true, Lost: 30, LostMin: maxSize},
			{Acked: true, DeliveredMax: maxSize}}, PMTUSearchComplete},
		{"large and small together: an outage", []PMTUSample{
			{Acked: true, Lost: 30, LostMin: maxSize, LostSmall: 2},
			{Acked: true, Lost: 30, LostMin: maxSize, LostSmall: 1}}, PMTUSearchComplete},
		{"an outage, then large only: the run starts again", []PMTUSample{
			{Acked: true, Lost: 4, LostMin: maxSize, LostSmall: 1},
			{Acked: true, Lost: 4, LostMin: maxSize}}, PMTUSearchComplete},
		{"an outage, then five large over 25 ms", []PMTUSample{
			{Acked: true, Lost: 4, LostMin: maxSize, LostSmall: 1},
			{Acked: true, Lost: 3, LostMin: maxSize},
			{Acked: true, Lost: 2, LostMin: maxSize}}, PMTUBase},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Unix(1_700_000_000, 0)
			m := NewPMTU(PMTUConfig{Base: base, Max: maxSize}, now)
			for _, s := range tt.samples {
				now = now.Add(25 * time.Millisecond) // > the run's hold, max(2 sRTT, 10 ms)
				m.Tick(now, srtt, s)
			}
			if m.State() != tt.wantState {
				t.Errorf("state %s, want %s (%s)", m.State(), tt.wantState, m.Reason())
			}
		})
	}
}

// TestPMTUConfirmedDuringSearch: after a suspicion, datagrams acknowledged
// on the way up do not lower the confirmed budget (the bond's MTU) until
// a size has failed.
func TestPMTUConfirmedDuringSearch(t *testing.T) {
	const base, maxSize, srtt = 1163, 1322, 10 * time.Millisecond
	now := time.Unix(1_700_000_000, 0)
	m := NewPMTU(PMTUConfig{Base: base, Max: maxSize}, now)
	tick := func(s PMTUSample) int {
		now = now.Add(5 * time.Millisecond)
		return m.Tick(now, srtt, s)
	}
	m.OnSuspect(now)
	tick(PMTUSample{Acked: true, DeliveredMax: base}) // Base confirmed: SEARCH
	tick(PMTUSample{Acked: true, DeliveredMax: 1226})
	if m.State() != PMTUSearch || m.Budget() != 1226 || m.Confirmed() != maxSize {
		t.Fatalf("state %s, budget %d, confirmed %d; want SEARCH, 1226, %d", m.State(), m.Budget(), m.Confirmed(), maxSize)
	}
	for range 60 { // Max's probes are lost, smaller datagrams arrive
		tick(PMTUSample{Acked: true, DeliveredMax: 1000, Lost: 1, LostMin: maxSize})
	}
	if m.Budget() >= maxSize || m.Confirmed() != m.Budget() {
		t.Fatalf("after Max failed: state %s, budget %d, confirmed %d", m.State(), m.Budget(), m.Confirmed())
	}
}
