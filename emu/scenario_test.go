package emu

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCellularScenarioBuiltin(t *testing.T) {
	sc, err := CellularScenario("", 1)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Name != "cellular" || sc.Source != "builtin" || len(sc.Paths) != 3 {
		t.Fatalf("scenario %q from %q with %d paths", sc.Name, sc.Source, len(sc.Paths))
	}
	fits := []*capacityFit{&builtinATT, &builtinTMobile, &builtinVerizon}
	for i, p := range sc.Paths {
		if p.Name != []string{"att", "tmobile", "verizon"}[i] || p.Labels["link_type"] != "cellular" || len(p.Files) != 0 {
			t.Errorf("path %d: %+v", i, p)
		}
		for _, c := range []LinkConfig{p.Up, p.Down} {
			if _, err := NewLink(c, p.Seed); err != nil {
				t.Fatalf("%s: %v", p.Name, err)
			}
			if c.Series == nil || c.Series.Interval != time.Second || len(c.DelaySamples) != 101 || c.QueueBytes != CellularQueueBytes {
				t.Errorf("%s: unexpected link config", p.Name)
			}
		}
		// Saturated for 20 minutes, a path delivers about the fitted mean
		// capacity. The capacity process has lag-1 correlation ≈ 0.8–0.9,
		// so 1200 s hold only ≈ 80–130 independent seconds; with the
		// traces' coefficient of variation ≈ 0.6–0.8 the relative standard
		// error is ≈ 7 %; tolerance 25 %.
		got := saturate(t, LinkConfig{Series: p.Up.Series, QueueDelay: time.Second}, builtinSeconds*time.Second, 500*time.Microsecond)
		if want := fits[i].meanMbps * 1e6; math.Abs(got-want) > 0.25*want {
			t.Errorf("%s: builtin delivers %.2f Mbit/s, fitted mean %.2f", p.Name, got/1e6, want/1e6)
		}
	}
	// Seeds: same seed, same model; another seed, another draw.
	again, _ := CellularScenario("", 1)
	other, _ := CellularScenario("", 2)
	if !slices.Equal(again.Paths[0].Up.Series.Rate, sc.Paths[0].Up.Series.Rate) {
		t.Error("same seed, different capacity series")
	}
	if slices.Equal(other.Paths[0].Up.Series.Rate, sc.Paths[0].Up.Series.Rate) {
		t.Error("different seeds, same capacity series")
	}
}

// TestCapacityFitSeries checks the generator against the fit it draws
// from: over 50 000 s, per-second quantiles, the mean, the idle share and
// the lag-1 correlation must come back.
func TestCapacityFitSeries(t *testing.T) {
	for _, c := range []struct {
		name string
		fit  *capacityFit
	}{{"att", &builtinATT}, {"tmobile", &builtinTMobile}, {"verizon", &builtinVerizon}, {"starlink-up", &builtinLagosUp}} {
		t.Run(c.name, func(t *testing.T) {
			s := c.fit.series(7, 50_000, c.name)
			mbps := make([]float64, len(s.Rate))
			for i, r := range s.Rate {
				mbps[i] = float64(r) / 1e6
			}
			got := fitCapacity(c.name, mbps)
			// Standard errors over 5·10^4 correlated seconds (≈ 3–5·10^3
			// effective): quantiles and mean within ≈ 2 %, tolerance 6 %;
			// lag-1 within 0.03; idle share within 0.5 % absolute. The
			// median of the generated series is the fitted median only
			// when no second is idle, hence comparing non-idle quantiles.
			for _, q := range []int{5, 10, 15} {
				if w := c.fit.quantMbps[q]; math.Abs(got.quantMbps[q]-w) > 0.06*w {
					t.Errorf("q%d: %.3f, fit %.3f", q*5, got.quantMbps[q], w)
				}
			}
			if w := c.fit.meanMbps; math.Abs(got.meanMbps-w) > 0.06*w {
				t.Errorf("mean %.3f, fit %.3f", got.meanMbps, w)
			}
			if w := c.fit.lag1; math.Abs(got.lag1-w) > 0.03 {
				t.Errorf("lag1 %.3f, fit %.3f", got.lag1, w)
			}
			if w := c.fit.idleShare; math.Abs(got.idleShare-w) > 0.005 {
				t.Errorf("idle share %.4f, fit %.4f", got.idleShare, w)
			}
		})
	}
}

func TestCellularScenarioTraces(t *testing.T) {
	dir := tracesDirOrSkip(t)
	sc, err := CellularScenario(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ATT-LTE-driving.down", "TMobile-LTE-driving.down", "Verizon-LTE-short.down", "all-carriers-rtt.csv"} {
		if !strings.Contains(sc.Source, f) {
			t.Errorf("Source %q does not name %s", sc.Source, f)
		}
	}
	wantOWD := map[string]*rttFit{"att": &builtinRTTSprint, "tmobile": &builtinRTTTMobile, "verizon": &builtinRTTVerizon}
	other, _ := CellularScenario(dir, 2)
	for i, p := range sc.Paths {
		if p.Up.Mahimahi == nil || p.Up.Mahimahi != p.Down.Mahimahi || len(p.Files) != 2 {
			t.Fatalf("%s: not replaying one Mahimahi trace both ways", p.Name)
		}
		if p.Up.TraceOffset < 0 || p.Up.TraceOffset >= p.Up.Mahimahi.Period() || p.Up.TraceOffset != p.Down.TraceOffset {
			t.Errorf("%s: offsets %v/%v, period %v", p.Name, p.Up.TraceOffset, p.Down.TraceOffset, p.Up.Mahimahi.Period())
		}
		if other.Paths[i].Up.TraceOffset == p.Up.TraceOffset {
			t.Errorf("%s: seeds 1 and 2 start at the same offset", p.Name)
		}
		// Base OWD: half the paired carrier's US-East RTTs.
		var sum time.Duration
		for _, d := range p.Up.DelaySamples {
			sum += d
		}
		mean := (sum / time.Duration(len(p.Up.DelaySamples))).Seconds() * 1000
		if w := wantOWD[p.Name].meanMs / 2; len(p.Up.DelaySamples) != 120 || math.Abs(mean-w) > 0.01 {
			t.Errorf("%s: %d OWD samples, mean %.3f ms, want 120, %.3f", p.Name, len(p.Up.DelaySamples), mean, w)
		}
		if p.Up.Loss != builtinLossFloor.up || p.Down.Loss != builtinLossFloor.down {
			t.Errorf("%s: loss %v/%v", p.Name, p.Up.Loss, p.Down.Loss)
		}
	}
}

func TestLEOScenario(t *testing.T) {
	dirs := []string{""}
	if d := DefaultTracesDir(); d != "" {
		dirs = append(dirs, d)
	}
	for _, dir := range dirs {
		name := "builtin"
		if dir != "" {
			name = "traces"
		}
		t.Run(name, func(t *testing.T) {
			sc, err := LEOScenario(dir, 3)
			if err != nil {
				t.Fatal(err)
			}
			if len(sc.Paths) != 2 || sc.Paths[0].Name != "starlink" || sc.Paths[1].Name != "metered" {
				t.Fatalf("paths %+v", sc.Paths)
			}
			sat, met := sc.Paths[0], sc.Paths[1]
			if (dir == "") != (sc.Source == "builtin") {
				t.Errorf("Source %q for dir %q", sc.Source, dir)
			}
			if sat.Up.Outages == nil || !sat.Up.WallClock || sat.Up.Series == nil || sat.Up.Series.Rate == nil {
				t.Fatal("starlink path lacks outages, wall-clock alignment or capacity")
			}
			if dir != "" {
				s := sat.Up.Series
				if s.Period()%time.Minute != 0 || sat.Up.TraceOffset%time.Minute != 0 || s.OWD == nil || s.Loss == nil {
					t.Errorf("trace loop %v, offset %v: not whole minutes", s.Period(), sat.Up.TraceOffset)
				}
			}
			if met.Labels["cost_class"] != "metered" || met.Up.Delay != MeteredDelay || met.Up.Rate != MeteredRate {
				t.Errorf("metered path %+v", met)
			}
			// In model time (no relay, so no wall-clock shift) the Starlink
			// link drops everything from second 12 for 22–172 ms.
			l, err := NewLink(sat.Up, sat.Seed)
			if err != nil {
				t.Fatal(err)
			}
			if !l.Outage(12*time.Second+time.Millisecond) || l.Outage(12*time.Second+173*time.Millisecond) || l.Outage(11*time.Second) {
				t.Error("outage not at second 12")
			}
			if _, err := NewLink(met.Up, met.Seed); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestScenarioMissingDir: a folder that does not exist means built-in
// models, not an error.
func TestScenarioMissingDir(t *testing.T) {
	for _, f := range []func(string, uint64) (Scenario, error){CellularScenario, LEOScenario} {
		sc, err := f(t.TempDir()+"/nonexistent", 1)
		if err != nil || sc.Source != "builtin" {
			t.Errorf("source %q, err %v", sc.Source, err)
		}
	}
}
