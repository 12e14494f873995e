package fleet

import (
	"testing"
	"time"
)

func TestFailover(t *testing.T) {
	type step struct {
		at   time.Duration // since start
		ev   Event
		node int
		why  string // "" = no move
	}
	const s = time.Second
	tests := []struct {
		name  string
		nodes int
		steps []step
	}{
		{"home comes up", 3, []step{
			{0, Tick, 0, ""}, {1 * s, Up, 0, ""}, {100 * s, Tick, 0, ""},
		}},
		{"home never answers: move after 5 s, then again", 3, []step{
			{1 * s, Down, 0, ""}, {4 * s, Tick, 0, ""}, {5 * s, Tick, 1, "unreachable"},
			{9 * s, Down, 1, ""}, {10 * s, Tick, 2, "unreachable"}, {15 * s, Tick, 0, "unreachable"},
		}},
		{"short outage below the threshold: stay", 3, []step{
			{0, Up, 0, ""}, {10 * s, Down, 0, ""}, {14 * s, Tick, 0, ""}, {14500 * time.Millisecond, Up, 0, ""},
			{30 * s, Tick, 0, ""},
		}},
		{"repeated Down keeps the first time", 3, []step{
			{0, Up, 0, ""}, {10 * s, Down, 0, ""}, {12 * s, Down, 0, ""}, {15 * s, Down, 1, "unreachable"},
		}},
		{"refused: move at once", 3, []step{
			{0, Up, 0, ""}, {1 * s, Refused, 1, "refused"}, {2 * s, Refused, 2, "refused"}, {3 * s, Refused, 0, "refused"},
		}},
		{"back home after 60 s of healthy probes", 2, []step{
			{0, Refused, 1, "refused"}, {1 * s, Up, 1, ""},
			{10 * s, HomeUp, 1, ""}, {40 * s, HomeUp, 1, ""}, {69 * s, Tick, 1, ""}, {70 * s, Tick, 0, "home"},
		}},
		{"a failed probe restarts the hold-down", 2, []step{
			{0, Refused, 1, "refused"}, {1 * s, Up, 1, ""},
			{10 * s, HomeUp, 1, ""}, {50 * s, HomeDown, 1, ""}, {60 * s, HomeUp, 1, ""},
			{119 * s, Tick, 1, ""}, {120 * s, HomeUp, 0, "home"},
		}},
		{"home probes ignored while at home", 2, []step{
			{0, Up, 0, ""}, {1 * s, HomeUp, 0, ""}, {100 * s, Tick, 0, ""},
		}},
		{"moving on resets the home hold-down", 3, []step{
			{0, Refused, 1, "refused"}, {1 * s, Up, 1, ""}, {10 * s, HomeUp, 1, ""},
			{20 * s, Refused, 2, "refused"}, {75 * s, Up, 2, ""}, {80 * s, HomeUp, 2, ""}, {139 * s, Tick, 2, ""},
			{140 * s, Tick, 0, "home"},
		}},
		{"one node: unreachable never moves, refused stays", 1, []step{
			{0, Down, 0, ""}, {60 * s, Tick, 0, ""}, {61 * s, Refused, 0, ""},
		}},
		{"no nodes", 0, []step{{0, Up, -1, ""}, {10 * s, Refused, -1, ""}}},
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := []string{"home", "second", "third"}[:tt.nodes]
			f := NewFailover(FailoverConfig{Nodes: nodes}, t0)
			for i, st := range tt.steps {
				d := f.Step(t0.Add(st.at), st.ev)
				if d.Node != st.node || d.Reason != st.why || d.Moved != (st.why != "") {
					t.Fatalf("step %d (%v at %v): got %+v, want node %d reason %q", i, st.ev, st.at, d, st.node, st.why)
				}
				if f.Current() != d.Node {
					t.Fatalf("step %d: Current() = %d, decision %d", i, f.Current(), d.Node)
				}
			}
		})
	}
}

func TestFailoverCustomTimes(t *testing.T) {
	t0 := time.Unix(0, 0)
	f := NewFailover(FailoverConfig{Nodes: []string{"a", "b"}, UnreachableAfter: 2 * time.Second, HomeHoldDown: 3 * time.Second}, t0)
	if d := f.Step(t0.Add(2*time.Second), Tick); d.Node != 1 || d.Reason != "unreachable" {
		t.Fatalf("after 2 s unreachable: %+v", d)
	}
	f.Step(t0.Add(3*time.Second), HomeUp)
	if d := f.Step(t0.Add(6*time.Second), Up); d.Node != 0 || d.Reason != "home" {
		t.Fatalf("after 3 s of healthy home: %+v", d)
	}
}
