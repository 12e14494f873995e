package emu

import (
	"math"
	"slices"
	"testing"
	"time"
)

// TestOutageTiming sends a packet every millisecond for ten virtual
// minutes and checks that the outage drops form the scheduled windows:
// start at seconds 12, 27, 42, 57 of each minute (± the 1-ms sampling),
// durations within 22–172 ms, and nothing dropped elsewhere.
func TestOutageTiming(t *testing.T) {
	const step = time.Millisecond
	l, err := NewLink(LinkConfig{Outages: &Outages{}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	var runs []Window
	in := false
	for at := time.Duration(0); at < 10*time.Minute; at += step {
		_, d := l.Send(at, 1200)
		switch {
		case d == DropOutage && !in:
			runs = append(runs, Window{Start: at})
			in = true
		case d == DropOutage:
		case d == Delivered && in:
			runs[len(runs)-1].Duration = at - runs[len(runs)-1].Start
			in = false
		case d != Delivered:
			t.Fatalf("drop %v", d)
		}
	}
	if len(runs) != 40 {
		t.Fatalf("%d outage windows in 10 min, want 40", len(runs))
	}
	sched := l.OutageWindows(0, 10*time.Minute)
	if len(sched) != 40 {
		t.Fatalf("OutageWindows: %d windows, want 40", len(sched))
	}
	for i, r := range runs {
		wantStart := time.Duration(i/4)*time.Minute + DefaultOutageAt[i%4]
		if r.Start != wantStart || sched[i].Start != wantStart {
			t.Errorf("window %d starts at %v (schedule %v), want %v", i, r.Start, sched[i].Start, wantStart)
		}
		// Sampled every ms: the observed run is the scheduled duration
		// rounded up to whole ms.
		if d := r.Duration - sched[i].Duration; d < 0 || d >= step {
			t.Errorf("window %d lasts %v, schedule says %v", i, r.Duration, sched[i].Duration)
		}
		if r.Duration < DefaultOutageMin || r.Duration > DefaultOutageMax+step {
			t.Errorf("window %d lasts %v, outside 22–172 ms", i, r.Duration)
		}
	}
}

// TestOutageDistribution checks the duration distribution over many
// windows: median 58 ms, range 22–172 ms, and a tail on both sides.
func TestOutageDistribution(t *testing.T) {
	o := Outages{}.withDefaults()
	const n = 20_000
	ds := make([]time.Duration, n)
	for i := range ds {
		ds[i] = o.duration(99, int64(i/4), i%4)
	}
	slices.Sort(ds)
	// The sample median of 2·10^4 log-normal draws has a relative se of
	// ≈ 1.25·σ/√n = 0.4 %; tolerance 2 ms (3.4 %).
	if med := ds[n/2]; math.Abs(float64(med-58*time.Millisecond)) > float64(2*time.Millisecond) {
		t.Errorf("median %v, want 58 ms ± 2 ms", med)
	}
	if ds[0] < 22*time.Millisecond || ds[n-1] > 172*time.Millisecond {
		t.Errorf("range %v–%v, want within 22–172 ms", ds[0], ds[n-1])
	}
	// With σ = 0.45 about 1.5 % of draws fall below 22 ms and 0.8 % above
	// 172 ms before clamping: both ends must be reached, and rarely.
	atMin, atMax := 0, 0
	for _, d := range ds {
		if d == 22*time.Millisecond {
			atMin++
		}
		if d == 172*time.Millisecond {
			atMax++
		}
	}
	if atMin == 0 || atMax == 0 || atMin > n/20 || atMax > n/20 {
		t.Errorf("clamped draws: %d at 22 ms, %d at 172 ms (of %d)", atMin, atMax, n)
	}
}

func TestOutageConfigured(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name string
		o    Outages
		want []Window // first windows in [0, 3 s)
	}{
		{"durations from a trace", Outages{Period: time.Second, At: []time.Duration{100 * ms}, Durations: []time.Duration{10 * ms, 30 * ms}},
			[]Window{{100 * ms, 10 * ms}, {1100 * ms, 30 * ms}, {2100 * ms, 10 * ms}}},
		{"phase", Outages{Period: time.Second, At: []time.Duration{100 * ms}, Phase: 300 * ms, Durations: []time.Duration{10 * ms}},
			[]Window{{800 * ms, 10 * ms}, {1800 * ms, 10 * ms}, {2800 * ms, 10 * ms}}},
		{"fixed median", Outages{Period: time.Second, At: []time.Duration{500 * ms}, Median: 40 * ms, Sigma: -1},
			[]Window{{500 * ms, 40 * ms}, {1500 * ms, 40 * ms}, {2500 * ms, 40 * ms}}},
		{"spills over the cycle end", Outages{Period: time.Second, At: []time.Duration{980 * ms}, Durations: []time.Duration{50 * ms}},
			[]Window{{980 * ms, 50 * ms}, {1980 * ms, 50 * ms}, {2980 * ms, 50 * ms}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := NewLink(LinkConfig{Outages: &tc.o}, 1)
			if err != nil {
				t.Fatal(err)
			}
			got := l.OutageWindows(0, 3*time.Second)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("windows %v, want %v", got, tc.want)
			}
			for _, w := range got {
				for _, c := range []struct {
					at  time.Duration
					out bool
				}{{w.Start - 1, false}, {w.Start, true}, {w.Start + w.Duration - 1, true}, {w.Start + w.Duration, false}} {
					if c.at >= 0 && l.Outage(c.at) != c.out {
						t.Errorf("Outage(%v) = %v, want %v", c.at, !c.out, c.out)
					}
				}
			}
		})
	}
}

func TestLinkConfigShifted(t *testing.T) {
	cfg := LinkConfig{TraceOffset: time.Second, Outages: &Outages{Phase: 59 * time.Second}}
	s := cfg.shifted(2 * time.Second)
	if s.TraceOffset != 3*time.Second || s.Outages.Phase != time.Second {
		t.Errorf("shifted: offset %v, phase %v", s.TraceOffset, s.Outages.Phase)
	}
	if cfg.Outages.Phase != 59*time.Second {
		t.Error("shifted modified the original Outages")
	}
}
