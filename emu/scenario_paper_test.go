package emu

import (
	"slices"
	"testing"
	"time"
)

func TestRebaseDelays(t *testing.T) {
	ms := time.Millisecond
	var in []time.Duration
	for i := range 101 { // 40..140 ms: p5 = 45, p95 = 135
		in = append(in, time.Duration(40+i)*ms)
	}
	tests := []struct {
		name   string
		in     []time.Duration
		lo, hi time.Duration
		check  func(t *testing.T, out []time.Duration)
	}{
		{"empty", nil, 20 * ms, 40 * ms, func(t *testing.T, out []time.Duration) {
			if out != nil {
				t.Errorf("out = %v, want nil", out)
			}
		}},
		{"constant", []time.Duration{90 * ms, 90 * ms}, 20 * ms, 40 * ms, func(t *testing.T, out []time.Duration) {
			if out[0] != 20*ms || out[1] != 20*ms {
				t.Errorf("out = %v, want 20 ms each", out)
			}
		}},
		{"ramp", in, 20 * ms, 40 * ms, func(t *testing.T, out []time.Duration) {
			if out[5] != 20*ms || out[95] != 40*ms {
				t.Errorf("p5, p95 = %v, %v; want 20 ms, 40 ms", out[5], out[95])
			}
			if !slices.IsSorted(out) {
				t.Error("order not kept")
			}
			if out[0] < 0 || out[0] >= 20*ms {
				t.Errorf("minimum %v, want in [0, 20 ms)", out[0])
			}
		}},
		{"step pattern kept", []time.Duration{80 * ms, 80 * ms, 90 * ms, 80 * ms}, 20 * ms, 40 * ms, func(t *testing.T, out []time.Duration) {
			if !(out[2] > out[1] && out[3] == out[0]) {
				t.Errorf("out = %v: the step at index 2 is lost", out)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			orig := slices.Clone(tc.in)
			tc.check(t, RebaseDelays(tc.in, tc.lo, tc.hi))
			if !slices.Equal(orig, tc.in) {
				t.Error("input modified")
			}
		})
	}
}

func TestLEOPaperScenario(t *testing.T) {
	dirs := []string{""} // the built-in models
	if d := DefaultTracesDir(); d != "" {
		dirs = append(dirs, d)
	}
	for _, dir := range dirs {
		sc, err := LEOPaperScenario(dir, 7)
		if err != nil {
			t.Fatal(err)
		}
		if len(sc.Paths) != 2 || sc.Paths[0].Name != "starlink" || sc.Paths[1].Name != "metered" {
			t.Fatalf("paths %+v", sc.Paths)
		}
		sat, met := sc.Paths[0], sc.Paths[1]
		if sat.Down.Outages == nil || !sat.Down.WallClock {
			t.Error("starlink lost its outage model or wall-clock alignment")
		}
		var owd []time.Duration
		if s := sat.Down.Series; s != nil && s.OWD != nil {
			owd = s.OWD
		} else {
			owd = sat.Down.DelaySamples
		}
		if len(owd) == 0 {
			t.Fatal("starlink has no delay")
		}
		var sum time.Duration
		for _, d := range owd {
			sum += d
		}
		if mean := sum / time.Duration(len(owd)); mean < PaperSatOWDLow || mean > PaperSatOWDHigh {
			t.Errorf("source %q: starlink mean one-way delay %v, want in [%v, %v]", sc.Source, mean, PaperSatOWDLow, PaperSatOWDHigh)
		}
		if met.Up.Delay != PaperMeteredDelay || met.Up.QueueBytes != CellularQueueBytes || (met.Up.Mahimahi == nil && met.Up.Series == nil) {
			t.Errorf("metered path %+v: want a trace, 15 ms and a drop-tail queue", met.Up)
		}
		if dir != "" && met.Up.Mahimahi == nil {
			t.Errorf("with traces in %s the metered path replays no Mahimahi trace", dir)
		}
		for _, l := range []LinkConfig{sat.Up, sat.Down, met.Up, met.Down} {
			if err := l.Validate(); err != nil {
				t.Error(err)
			}
		}
	}
}
