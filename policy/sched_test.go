package policy

import (
	"slices"
	"testing"
	"time"
)

// pathSpec describes one test path: status, sRTT, cwnd, bytes in flight and
// queued bytes.
type pathSpec struct {
	st             Status
	srtt           time.Duration
	cwnd, inflight int
	queued         int
}

func makePaths(now time.Time, specs ...pathSpec) []*Path {
	var out []*Path
	for i, s := range specs {
		p := NewPath(string(rune('a'+i)), nil, 64)
		switch s.st {
		case StatusActive:
			p.SetConnected(true, now)
		case StatusDegraded:
			p.SetConnected(true, now.Add(-time.Minute))
		}
		p.OnMetrics(s.srtt, s.srtt, s.cwnd, s.inflight)
		p.SetQueueLen(s.queued/1250, s.queued)
		out = append(out, p)
	}
	return out
}

func TestSchedulers(t *testing.T) {
	now := time.Unix(1000, 0)
	ms := time.Millisecond
	fastFree := pathSpec{StatusActive, 20 * ms, 20000, 0, 0}
	fastFull := pathSpec{StatusActive, 20 * ms, 20000, 20000, 0}
	fastFullDeep := pathSpec{StatusActive, 20 * ms, 20000, 20000, 100000}
	slowFree := pathSpec{StatusActive, 200 * ms, 20000, 0, 0}
	down := pathSpec{StatusUnavailable, 0, 0, 0, 0}
	tests := []struct {
		name  string
		sched Picker
		paths []pathSpec
		want  []int
	}{
		{"minrtt fast", MinRTT{}, []pathSpec{slowFree, fastFree}, []int{1}},
		{"minrtt waits for fast", MinRTT{}, []pathSpec{slowFree, fastFull}, []int{0}},
		{"minrtt all full: fastest", MinRTT{}, []pathSpec{{StatusActive, 200 * ms, 1, 1, 0}, fastFull}, []int{1}},
		{"blest fast has window", BLEST{}, []pathSpec{slowFree, fastFree}, []int{1}},
		// Fast path full but its backlog drains in well under the slow path's RTT: wait for it.
		{"blest waits", BLEST{}, []pathSpec{fastFull, slowFree}, []int{0}},
		// Fast path backlog larger than what it can send during one slow RTT: use the slow path.
		{"blest spills", BLEST{}, []pathSpec{fastFullDeep, {StatusActive, 30 * ms, 20000, 0, 0}}, []int{1}},
		{"redundant all active", Redundant{}, []pathSpec{fastFree, down, slowFree}, []int{0, 2}},
		{"redundant degraded only", Redundant{}, []pathSpec{down, {StatusDegraded, 0, 0, 0, 0}}, []int{1}},
		{"none usable", Redundant{}, []pathSpec{down, down}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			paths := makePaths(now, tt.paths...)
			out := make([]int, len(paths))
			n := tt.sched.Pick(paths, now, out)
			if got := out[:n]; !slices.Equal(got, tt.want) {
				t.Fatalf("picked %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRoundRobin(t *testing.T) {
	now := time.Unix(1000, 0)
	a := pathSpec{StatusActive, time.Millisecond, 10000, 0, 0}
	paths := makePaths(now, a, pathSpec{}, a, a)
	rr := &RoundRobin{}
	out := make([]int, len(paths))
	var got []int
	for range 6 {
		if rr.Pick(paths, now, out) != 1 {
			t.Fatal("no pick")
		}
		got = append(got, out[0])
	}
	if want := []int{0, 2, 2, 3, 0, 2}; !slices.Equal(got, want) {
		t.Fatalf("sequence %v, want %v (path 1 is down)", got, want)
	}
}

func TestNewPicker(t *testing.T) {
	for _, name := range append([]string{""}, Schedulers...) {
		if _, err := NewPicker(name); err != nil {
			t.Errorf("%q: %v", name, err)
		}
	}
	if _, err := NewPicker("fastest"); err == nil {
		t.Error("unknown scheduler accepted")
	}
	// The default and the old name "rules" are the lowest-RTT picker.
	for _, name := range []string{"", SchedulerDefault, SchedulerRulesAlias, SchedulerLowestRTT} {
		if p, _ := NewPicker(name); p != (LowestRTT{}) {
			t.Errorf("NewPicker(%q) = %T, want LowestRTT", name, p)
		}
	}
}

func TestSchedulerAllocs(t *testing.T) {
	now := time.Now()
	paths := makePaths(now, pathSpec{StatusActive, time.Millisecond, 10000, 0, 0}, pathSpec{StatusActive, 2 * time.Millisecond, 10000, 0, 0})
	out := make([]int, 2)
	for _, name := range Schedulers {
		p, _ := NewPicker(name)
		if a := testing.AllocsPerRun(100, func() { p.Pick(paths, now, out) }); a != 0 {
			t.Errorf("%s allocates %v times per pick", name, a)
		}
	}
}
