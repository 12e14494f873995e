package bench

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bondd/bondd/emu"
	"github.com/bondd/bondd/fec"
	"github.com/bondd/bondd/internal/demo"
	"github.com/bondd/bondd/tunnel"
)

func TestParetoFront(t *testing.T) {
	pt := func(name string, loss, rate float64) s1Result {
		return s1Result{Name: name, K: 20, LossRate: loss, CodingRate: rate}
	}
	tests := []struct {
		name string
		cs   []s1Result
		want []string
	}{
		{"one dominates", []s1Result{pt("a", 0.01, 0.9), pt("b", 0.02, 0.85)}, []string{"a"}},
		{"trade-off", []s1Result{pt("a", 0.01, 0.8), pt("b", 0.02, 0.9), pt("c", 0.03, 0.85)}, []string{"a", "b"}},
		{"ties kept", []s1Result{pt("a", 0.01, 0.9), pt("b", 0.01, 0.9)}, []string{"a", "b"}},
		{"no-fec is not a point", []s1Result{{Name: "no-fec", LossRate: 0.001, CodingRate: 1}, pt("a", 0.01, 0.9)}, []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := paretoFront(tt.cs); !slices.Equal(got, tt.want) {
				t.Fatalf("front %v, want %v", got, tt.want)
			}
		})
	}
}

// TestSweepConfigs checks the grid: every α × k once, after no-fec, each
// block budget long enough for k packets of the flow and never below the
// default.
func TestSweepConfigs(t *testing.T) {
	cs := s1SweepConfigs()
	if len(cs) != 1+len(sweepAlphas)*len(sweepKs) || cs[0].name != s1NoFEC {
		t.Fatalf("%d configurations, first %s", len(cs), cs[0].name)
	}
	interval := time.Duration(float64(demo.PacketBytes*8) / (s1RateMbps * 1e6) * float64(time.Second))
	for _, c := range cs[1:] {
		if c.fec.Mode != tunnel.FECAdaptive || c.fec.Budget < fec.DefaultBudget || c.fec.Budget < time.Duration(c.fec.K)*interval {
			t.Errorf("%s: %+v: budget does not fit k packets of the flow", c.name, c.fec)
		}
	}
	if n := sweepName(1.5, 20); n != "a1.5-k20" {
		t.Errorf("sweepName = %q", n)
	}
}

// TestS1MaskingBound checks the masking figures of a run: the counts and
// leads are the run's difference, and the p95 bound is the measured
// (0.95 + share)-quantile.
func TestS1MaskingBound(t *testing.T) {
	var before, after fec.LeadHistogram
	before.Count, before.SumNs, before.Buckets[0] = 1, 5e5, 1
	after = before
	after.Count += 5
	after.SumNs += 5 * 8e6
	after.Buckets[3] += 5 // (5, 10] ms
	run := benchRun{conc0: tunnel.BondStats{FEC: &tunnel.FECStats{MaskedLead: before}}, conc1: tunnel.BondStats{FEC: &tunnel.FECStats{MaskedLead: after}}}
	sorted := make([]float64, 100)
	for i := range sorted {
		sorted[i] = float64(i + 1)
	}
	m := s1MaskingOf(&run, sorted, 100)
	if m.Masked != 5 || m.Share != 0.05 || m.LeadMeanMs != 8 || m.LeadP50Ms <= 5 || m.LeadP50Ms > 10 {
		t.Errorf("masking %+v", m)
	}
	// 5 of 100 masked: at most the 1.0-quantile (100); the 5 have leads
	// of (5, 10] ms, and the last 1-ms lead is from before the run: at
	// most the 0.95-quantile (95) plus 10 ms.
	if m.P95UnmaskedMaxMs != 100 {
		t.Errorf("p95 bound %v, want 100", m.P95UnmaskedMaxMs)
	}
	tests := []struct {
		count, bucket int
		want          float64
	}{
		{2, 1, 97},   // two leads ≤ 2 ms: Q(0.97) = 97, Q(0.95) + 2 = 97
		{20, 1, 97},  // twenty: Q(1) = 100, but Q(0.95) + 2 = 97
		{20, 9, 100}, // twenty leads ≤ 1 s: Q(1) = 100
		{0, 0, 95},   // none masked: the measured p95
	}
	for _, tc := range tests {
		var h fec.LeadHistogram
		h.Count, h.Buckets[tc.bucket] = uint64(tc.count), uint64(tc.count)
		if b := p95UnmaskedMax(sorted, &h); b != tc.want {
			t.Errorf("%d masked in bucket %d: bound %v, want %v", tc.count, tc.bucket, b, tc.want)
		}
	}
	if z := s1MaskingOf(&benchRun{}, sorted, 100); z != (s1Masking{}) {
		t.Errorf("masking without FEC stats %+v", z)
	}
}

// TestVaryScenario checks that s1-vary adds bursts to path 0 and outages to
// path 1, both ways, and leaves path 2 as in S1.
func TestVaryScenario(t *testing.T) {
	sc, err := varyScenario("", 1)
	if err != nil {
		t.Fatal(err)
	}
	base, _ := emu.CellularScenario("", 1)
	if len(sc.Paths) != 3 {
		t.Fatalf("%d paths", len(sc.Paths))
	}
	p0, p1, p2 := sc.Paths[0], sc.Paths[1], sc.Paths[2]
	if p0.Up.GilbertElliott == nil || p0.Down.GilbertElliott == nil || p0.Up.Outages != nil {
		t.Error("path 0: want burst loss both ways and no outage")
	}
	if p1.Up.Outages == nil || p1.Down.Outages == nil || p1.Up.GilbertElliott != nil {
		t.Error("path 1: want outages both ways and no burst loss")
	}
	if p2.Up.Outages != nil || p2.Up.GilbertElliott != nil || p2.Up.Loss != base.Paths[2].Up.Loss {
		t.Error("path 2 changed")
	}
	if l := varyBursts.StationaryLoss(); l < 0.015 || l > 0.035 {
		t.Errorf("burst loss %v, documented as about 2.4 %%", l)
	}
	for _, p := range sc.Paths {
		if _, err := emu.NewLink(p.Up, 1); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
	}
}

// TestBenchS1Sweep runs two points of the sweep (no-fec and one grid
// point) and checks results.json and the Pareto plot.
func TestBenchS1Sweep(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: runs two bonds for a few seconds each")
	}
	o := Options{Scenario: S1, Sweep: true, Duration: 2 * time.Second, Seed: 3, Configs: []string{s1NoFEC, "a2-k10"}}
	rep, dir := runBenchTest(t, o)
	by := benchConfigs(t, rep, "loss_rate", "coding_rate", "masking")
	if a, k := by["a2-k10"]["alpha"], by["a2-k10"]["k"]; a != 2.0 || k != 10.0 {
		t.Errorf("grid point α %v k %v", a, k)
	}
	if f := rep["pareto"].([]any); len(f) != 1 || f[0] != "a2-k10" {
		t.Errorf("pareto %v", f)
	}
	ps := readPlots(t, dir)
	if len(ps.Lines) != 1 || ps.Lines[0].Name != "s1-sweep-pareto" || len(ps.Lines[0].Series) < 2 {
		t.Errorf("plots %+v", ps.Lines)
	}
	if o.Sweep = false; !slices.Contains(s1ConfigNames(), s1AdaptiveBoth) {
		t.Error("placement configuration not listed")
	}
}

// TestBenchS1Vary runs s1-vary briefly: three configurations, fixed-fec
// matched to adaptive-fec's coding rate, one target.
func TestBenchS1Vary(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: runs three bonds for a few seconds each")
	}
	rep, dir := runBenchTest(t, Options{Scenario: S1Vary, Duration: 2500 * time.Millisecond, Seed: 3})
	checkPlots(t, dir, "s1-vary-owd-cdf")
	by := benchConfigs(t, rep, "loss_rate", "coding_rate")
	if len(by) != 3 || by[s1Fixed] == nil {
		t.Fatalf("configurations %v", by)
	}
	if a, f := by[s1Adaptive]["coding_rate"].(float64), by[s1Fixed]["coding_rate"].(float64); f < a-0.05 || f > a+0.05 {
		t.Errorf("fixed-fec coding rate %v not matched to adaptive-fec's %v", f, a)
	}
	if ts := rep["targets"].([]any); len(ts) != 1 {
		t.Errorf("targets %v", ts)
	}
}

// TestAllSteps checks bench all's steps: unique folders, known scenarios,
// and an index that names each step's command and commit.
func TestAllSteps(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range allSteps() {
		if seen[s.dir] {
			t.Errorf("folder %s twice", s.dir)
		}
		seen[s.dir] = true
		if (s.duration <= 0 && s.scenario != Faults) || s.runs < 1 || s.section == "" {
			t.Errorf("%s: %+v", s.dir, s)
		}
		o := Options{Scenario: s.scenario, Sweep: s.sweep, Duration: s.duration, Runs: s.runs}
		if !strings.HasPrefix(o.commandLine(), "bondd bench "+s.scenario) {
			t.Errorf("%s: command %q", s.dir, o.commandLine())
		}
	}
	err := Run(context.Background(), Options{Scenario: All, Configs: []string{"nonesuch"}, Out: t.TempDir()}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "s1-vary") {
		t.Errorf("unknown step: %v", err)
	}
	dir := t.TempDir()
	if err := writeAllIndex(dir, []allEntry{{Dir: "s1", Section: "S1", Command: "bondd bench s1 --out x/s1", Commit: "abc1234", Seconds: 90},
		{Dir: "video", Section: "Video", Command: "bondd bench video", Error: "needs root | ffmpeg"}}); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "all.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| s1 | S1 | `bondd bench s1 --out x/s1` | abc1234 | 1.5 | ok |", "failed: needs root / ffmpeg"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("all.md lacks %q:\n%s", want, md)
		}
	}
}
