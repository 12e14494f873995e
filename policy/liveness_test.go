package policy

import (
	"testing"
	"time"

	"github.com/bondd/bondd/internal/testkit"
	"github.com/bondd/bondd/rules"
)

// TestLiveness walks one path through the liveness states with time as an
// argument: a send the peer does not answer within max(3·srtt, 100 ms)
// makes it SUSPECT (DEGRADED, reason suspect); hearing the peer restores it.
func TestLiveness(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type step struct {
		at     int    // ms after t0
		op     string // "send", "recv", "idle" (SetIdle 15 s), "wake" (SetIdle 0) or "" (only check)
		want   Status
		reason string
	}
	cases := []struct {
		name  string
		srtt  time.Duration
		live  Liveness
		steps []step
	}{
		{"idle path never turns suspect", 10 * time.Millisecond, Liveness{}, []step{
			{at: 0, op: "recv", want: StatusActive},
			{at: 1000, want: StatusActive},
		}},
		{"floor 100 ms on a short path", 10 * time.Millisecond, Liveness{}, []step{
			{at: 0, op: "send", want: StatusActive},
			{at: 100, want: StatusActive},
			{at: 101, want: StatusDegraded, reason: ReasonSuspect},
			{at: 150, op: "recv", want: StatusActive},
		}},
		{"3 srtt on a long path", 80 * time.Millisecond, Liveness{}, []step{
			{at: 0, op: "send"},
			{at: 239, want: StatusActive},
			{at: 241, want: StatusDegraded, reason: ReasonSuspect},
		}},
		{"the first unanswered send counts", 10 * time.Millisecond, Liveness{}, []step{
			{at: 0, op: "send"},
			{at: 60, op: "send"},
			{at: 101, want: StatusDegraded, reason: ReasonSuspect},
		}},
		{"an answer restarts the clock", 10 * time.Millisecond, Liveness{}, []step{
			{at: 0, op: "send"},
			{at: 90, op: "recv"},
			{at: 95, op: "send"},
			{at: 150, want: StatusActive},
			{at: 196, want: StatusDegraded, reason: ReasonSuspect},
		}},
		{"configured bounds", 10 * time.Millisecond, Liveness{SuspectRTTs: 10, SuspectMin: 50 * time.Millisecond}, []step{
			{at: 0, op: "send"},
			{at: 99, want: StatusActive},
			{at: 101, want: StatusDegraded, reason: ReasonSuspect},
		}},
		{"long silence is silent, not suspect", 10 * time.Millisecond, Liveness{}, []step{
			{at: 0, op: "send"},
			{at: 2000, want: StatusDegraded, reason: ReasonSilent},
		}},
		{"an idle path is silent only past its keepalive", 10 * time.Millisecond, Liveness{}, []step{
			{at: 0, op: "idle", want: StatusActive},
			{at: 2000, want: StatusActive},
			{at: 16400, want: StatusActive},
			{at: 16600, want: StatusDegraded, reason: ReasonSilent},
			{at: 16700, op: "recv", want: StatusActive},
		}},
		{"an idle path's keepalive unanswered is suspect", 10 * time.Millisecond, Liveness{}, []step{
			{at: 0, op: "idle"},
			{at: 15000, op: "send", want: StatusActive},
			{at: 15101, want: StatusDegraded, reason: ReasonSuspect},
		}},
		{"waking counts silence from the wake", 10 * time.Millisecond, Liveness{}, []step{
			{at: 0, op: "idle"},
			{at: 10000, op: "wake", want: StatusActive},
			{at: 11400, want: StatusActive},
			{at: 11600, want: StatusDegraded, reason: ReasonSilent},
		}},
		{"waking a path that was not idle changes nothing", 10 * time.Millisecond, Liveness{}, []step{
			{at: 1000, op: "wake", want: StatusActive},
			{at: 1600, want: StatusDegraded, reason: ReasonSilent},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := NewPath("a", nil, 8)
			p.SetLiveness(c.live)
			p.SetConnected(true, t0)
			p.OnMetrics(c.srtt, c.srtt, 100000, 0)
			for _, s := range c.steps {
				now := at(s.at)
				switch s.op {
				case "send":
					p.OnAckEliciting(now)
				case "recv":
					p.OnReceive(now)
				case "idle":
					p.SetIdle(15*time.Second, now)
				case "wake":
					p.SetIdle(0, now)
				}
				if s.want == 0 && s.op != "" {
					continue // a step that only acts
				}
				if got := p.Status(now); got != s.want {
					t.Fatalf("at %d ms: status %v, want %v", s.at, got, s.want)
				}
				if got := p.StatusReason(now); got != s.reason {
					t.Fatalf("at %d ms: reason %q, want %q", s.at, got, s.reason)
				}
				if st, why := p.StatusAndReason(now); st != s.want || why != s.reason {
					t.Fatalf("at %d ms: StatusAndReason %v %q, want %v %q", s.at, st, why, s.want, s.reason)
				}
			}
		})
	}
}

// TestSelectAvoidsSuspect checks that a rule preferring a SUSPECT path
// falls back to the ACTIVE one: directives are advice.
func TestSelectAvoidsSuspect(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := NewPath("a", map[string]string{"link_type": "cell"}, 8)
	b := NewPath("b", map[string]string{"link_type": "sat"}, 8)
	for _, p := range []*Path{a, b} {
		p.SetConnected(true, t0)
		p.OnMetrics(10*time.Millisecond, 10*time.Millisecond, 100000, 0)
	}
	a.OnAckEliciting(t0)
	dir := rules.Directive{Fields: rules.FieldPreferences, NumPreferences: 1}
	dir.Preferences[0] = rules.Preference{Key: "link_type", Value: "cell"}
	paths, out, sc := []*Path{a, b}, make([]int, 2), &Scratch{}
	if n := Select(LowestRTT{}, &dir, Object{}, paths, t0.Add(50*time.Millisecond), out, sc); n != 1 || out[0] != 0 {
		t.Fatalf("before the bound: picks %v, want path a", out[:n])
	}
	if n := Select(LowestRTT{}, &dir, Object{}, paths, t0.Add(150*time.Millisecond), out, sc); n != 1 || out[0] != 1 {
		t.Fatalf("suspect: picks %v, want path b", out[:n])
	}
	a.OnReceive(t0.Add(160 * time.Millisecond))
	if n := Select(LowestRTT{}, &dir, Object{}, paths, t0.Add(170*time.Millisecond), out, sc); n != 1 || out[0] != 0 {
		t.Fatalf("restored: picks %v, want path a", out[:n])
	}
}

// TestLivenessWallStep: a step of the wall clock (NTP or GPS setting a
// vehicle's clock after boot) between two instants moves neither silence
// nor suspicion; only the monotonic time between them counts.
func TestLivenessWallStep(t *testing.T) {
	cases := []struct {
		name string
		step time.Duration
		ms   int // monotonic time after the last packet received, then sent
		want Status
	}{
		{"forward 56 years, 50 ms later: still heard", 56 * 365 * 24 * time.Hour, 50, StatusActive},
		{"forward 1 h, 50 ms later: still heard", time.Hour, 50, StatusActive},
		{"back 1 h, 50 ms later: still heard", -time.Hour, 50, StatusActive},
		{"back 1 h, 2 s later: silent", -time.Hour, 2000, StatusDegraded},
		{"back 56 years, 2 s later: silent", -56 * 365 * 24 * time.Hour, 2000, StatusDegraded},
	}
	for _, tc := range cases {
		t0 := time.Now()
		p := NewPath("a", nil, 64)
		p.SetConnected(true, t0)
		p.OnMetrics(10*time.Millisecond, 10*time.Millisecond, 0, 0)
		p.OnReceive(t0)
		p.OnAckEliciting(t0)
		now := testkit.StepWall(t, t0.Add(time.Duration(tc.ms)*time.Millisecond), tc.step)
		if got := p.Status(now); got != tc.want {
			t.Errorf("%s: status %v (silence %v), want %v", tc.name, got, p.Silence(now), tc.want)
		}
	}
}
