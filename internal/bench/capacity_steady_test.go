package bench

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bondd/bondd/emu"
)

// TestSteadyScenario checks the steady links against issue 36 (30, 15
// and 5 Mbit/s; 20, 40 and 60 ms one way; 0, 1 and 3 % random loss, both
// directions alike), their capacity over a window, --link-scale, and the
// steady configurations built on them.
func TestSteadyScenario(t *testing.T) {
	sc, err := steadyScenario(Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	want := []struct {
		name  string
		rate  emu.BitRate
		delay time.Duration
		loss  float64
	}{{"fast", 30 * emu.Mbps, 20 * ms, 0}, {"mid", 15 * emu.Mbps, 40 * ms, 0.01}, {"slow", 5 * emu.Mbps, 60 * ms, 0.03}}
	if len(sc.Paths) != len(want) {
		t.Fatalf("%d paths, want %d", len(sc.Paths), len(want))
	}
	for i, w := range want {
		p := sc.Paths[i]
		if p.Name != w.name {
			t.Errorf("path %d is %q, want %q", i, p.Name, w.name)
		}
		for dir, l := range map[string]emu.LinkConfig{"up": p.Up, "down": p.Down} {
			if l.Rate != w.rate || l.Delay != w.delay || l.Loss != w.loss || l.QueueDelay != steadyQueueDelay {
				t.Errorf("%s %s: rate %v, delay %v, loss %v, queue %v; want %v, %v, %v, %v", p.Name, dir, l.Rate, l.Delay, l.Loss, l.QueueDelay,
					w.rate, w.delay, w.loss, steadyQueueDelay)
			}
			if l.Mahimahi != nil || l.Series != nil || l.Outages != nil || l.GilbertElliott != nil || l.DelaySamples != nil || l.Jitter != 0 || l.WallClock {
				t.Errorf("%s %s is not a constant link: %+v", p.Name, dir, l)
			}
			if err := l.Validate(); err != nil {
				t.Errorf("%s %s: %v", p.Name, dir, err)
			}
		}
		if got := baseOWD(p.Up); got != float64(w.delay)/1e6 {
			t.Errorf("%s: base one-way delay %v ms, want %v", p.Name, got, w.delay)
		}
	}
	// Any window carries the rate, whatever the seed; Σ is 50 Mbit/s.
	for _, seed := range []uint64{1, 7} {
		caps, err := windowCapacity(sc, seed, 3*time.Second, 23*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(caps, []float64{30, 15, 5}) {
			t.Errorf("seed %d: capacity %v Mbit/s, want [30 15 5]", seed, caps)
		}
	}
	half, err := steadyScenario(Options{Seed: 1, LinkScale: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if caps, err := windowCapacity(half, 1, 0, time.Second); err != nil || !slices.Equal(caps, []float64{15, 7.5, 2.5}) {
		t.Errorf("--link-scale 0.5: capacity %v Mbit/s (%v), want [15 7.5 2.5]", caps, err)
	}
	if _, err := steadyScenario(Options{LinkScale: -1}); err == nil {
		t.Error("no error for a negative --link-scale")
	}

	cs := steadyCapConfigs()
	var names []string
	for _, c := range cs {
		names = append(names, c.name)
		if !c.steady || !isSteady(c.name) {
			t.Errorf("%s is not marked steady", c.name)
		}
		if c.single >= 0 && c.name != "steady-single-"+sc.Paths[c.single].Name+"-tcp" {
			t.Errorf("%s runs on path %d (%s)", c.name, c.single, sc.Paths[c.single].Name)
		}
	}
	if want := []string{"steady-udp", "steady-udp-90", "steady-tcp", "steady-single-fast-tcp", "steady-single-mid-tcp", "steady-single-slow-tcp"}; !slices.Equal(names, want) {
		t.Errorf("configurations %v, want %v", names, want)
	}
	by := map[string]capConfig{}
	for _, c := range cs {
		by[c.name] = c
	}
	if c := by[capSteadyUDP]; c.tcp || c.single != -1 || (c.offer != 0 && c.offer != 1) {
		t.Errorf("steady-udp: %+v, want UDP over the bond at Σ", c)
	}
	if c := by[capSteadyUDP90]; c.tcp || c.single != -1 || c.offer != 0.9 {
		t.Errorf("steady-udp-90: %+v, want UDP over the bond at 0.9 × Σ", c)
	}
	if c := by[capSteadyTCP]; !c.tcp || c.single != -1 {
		t.Errorf("steady-tcp: %+v, want TCP over the bond", c)
	}
	for _, n := range []string{"bond-udp", "single-att-tcp"} {
		if isSteady(n) {
			t.Errorf("%s counted as steady", n)
		}
	}
}

// TestCapTraces checks what results.json says the run replayed: the
// traces only when a traces' configuration runs.
func TestCapTraces(t *testing.T) {
	sc := emu.Scenario{Source: "builtin", Paths: []emu.PathModel{{Name: "att"}}}
	for _, tc := range []struct {
		configs []string
		want    []string
	}{
		{nil, []string{"builtin", steadySource}},
		{[]string{"bond-udp"}, []string{"builtin"}},
		{[]string{"steady-udp", "steady-tcp"}, []string{steadySource}},
		{[]string{"single-att-tcp", "steady-udp"}, []string{"builtin", steadySource}},
	} {
		if got := capTraces(Options{Configs: tc.configs}, sc); !slices.Equal(got, tc.want) {
			t.Errorf("configs %v: traces %v, want %v", tc.configs, got, tc.want)
		}
	}
}

// TestSteadyTargets checks the steady targets' verdicts at and around
// their bounds, for skipped and missing configurations, and that each
// verdict is copied onto its configuration.
func TestSteadyTargets(t *testing.T) {
	udp := func(name string, delivered, loss float64) capResult {
		return capResult{Name: name, CapacityMbps: 50, Delivered: delivered, LossRate: loss, OWDms: &owdStats{}}
	}
	tcp := func(delivered float64) capResult {
		return capResult{Name: capSteadyTCP, CapacityMbps: 50, Delivered: delivered}
	}
	type verdict struct{ known, met bool }
	cases := []struct {
		name string
		cs   []capResult
		want []verdict // steady-udp, steady-udp-90, steady-tcp
		got  []float64 // of the known ones, in the same order
	}{
		{"all met at the bounds", []capResult{udp(capSteadyUDP, 0.95, 0.05), udp(capSteadyUDP90, 0.9, 0.001), tcp(0.70)},
			[]verdict{{true, true}, {true, true}, {true, true}}, []float64{0.95, 0.1, 0.70}},
		{"all missed just past the bounds", []capResult{udp(capSteadyUDP, 0.9499, 0), udp(capSteadyUDP90, 0.9, 0.00101), tcp(0.6999)},
			[]verdict{{true, false}, {true, false}, {true, false}}, []float64{0.9499, 0.101, 0.6999}},
		{"udp-90 loses nothing", []capResult{udp(capSteadyUDP90, 0.9, 0)},
			[]verdict{{false, false}, {true, true}, {false, false}}, []float64{0}},
		{"tcp skipped", []capResult{udp(capSteadyUDP, 0.96, 0), {Name: capSteadyTCP, Skipped: "iperf3 is not installed"}},
			[]verdict{{true, true}, {false, false}, {false, false}}, []float64{0.96}},
		{"nothing ran", nil, []verdict{{false, false}, {false, false}, {false, false}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := steadyTargets(tc.cs)
			if len(ts) != 3 {
				t.Fatalf("%d targets, want 3", len(ts))
			}
			var got []float64
			for i, tg := range ts {
				if tg.Known != tc.want[i].known || tg.Met != tc.want[i].met {
					t.Errorf("%s: known %v met %v, want %v %v", tg.Name, tg.Known, tg.Met, tc.want[i].known, tc.want[i].met)
				}
				if tg.Known {
					got = append(got, tg.Got)
				}
			}
			if len(got) != len(tc.got) {
				t.Fatalf("got %v, want %v", got, tc.got)
			}
			for i := range got {
				if math.Abs(got[i]-tc.got[i]) > 1e-9 {
					t.Errorf("got %v, want %v", got, tc.got)
				}
			}
			for _, c := range tc.cs {
				known := c.Skipped == ""
				if (c.Target != nil) != known {
					t.Errorf("%s: target %v", c.Name, c.Target)
				}
				if c.Target != nil && !slices.ContainsFunc(ts, func(tg target) bool { return tg == *c.Target }) {
					t.Errorf("%s: its target %+v is not among the report's", c.Name, *c.Target)
				}
			}
		})
	}
	if ts := steadyTargets([]capResult{udp(capSteadyUDP, 0.96, 0)}); ts[0].Want != "≥ 0.95" || ts[1].Want != "≤ 0.1" || ts[2].Want != "≥ 0.7" {
		t.Errorf("wants %q, %q, %q", ts[0].Want, ts[1].Want, ts[2].Want)
	}
}

// TestCapAllTargets checks which targets a capacity run reports: the
// traces' three unless only steady configurations ran, the steady three
// when any did.
func TestCapAllTargets(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  int
	}{
		{[]string{capBondUDP}, 3},
		{[]string{capSteadyUDP}, 3},
		{[]string{capBondTCP, capSteadyTCP}, 6},
		{nil, 3},
	} {
		var cs []capResult
		for _, n := range tc.names {
			cs = append(cs, capResult{Name: n, Skipped: "not run here"})
		}
		ts := capAllTargets(cs)
		steady := 0
		for _, tg := range ts {
			if strings.HasPrefix(tg.Name, steadyPrefix) {
				steady++
			}
		}
		if len(ts) != tc.want || (slices.ContainsFunc(tc.names, isSteady) != (steady == 3)) {
			t.Errorf("configs %v: targets %d (%d steady), want %d", tc.names, len(ts), steady, tc.want)
		}
	}
}

// TestSteadyMarkdown checks results.md of a steady-only run: the steady
// table with each configuration's target and pass/fail, no traces' table,
// and the targets table.
func TestSteadyMarkdown(t *testing.T) {
	paths := []capPath{{Name: "fast", CapacityMbps: 30, Share: 0.6}, {Name: "mid", CapacityMbps: 15, Share: 0.3}, {Name: "slow", CapacityMbps: 5, Share: 0.1}}
	rep := capReport{CPUs: 2, Configs: []capResult{
		{Name: capSteadyUDP, CapacityMbps: 50, OfferedMbps: 50, GoodputMbps: 46, Delivered: 0.92, LossRate: 0.08, OWDms: &owdStats{P50: 40, P95: 90}, PathsMbps: paths},
		{Name: capSteadyUDP90, CapacityMbps: 50, OfferedMbps: 45, GoodputMbps: 45, Delivered: 0.9, LossRate: 0.0004, OWDms: &owdStats{P50: 30, P95: 70}, PathsMbps: paths},
		{Name: capSteadyTCP, Skipped: "iperf3 is not installed"},
	}}
	rep.Targets = capAllTargets(rep.Configs)
	md := capMarkdown(&rep)
	for _, want := range []string{
		"Steady links: fast 30 Mbit/s, 20 ms one way, 0 % random loss; mid 15 Mbit/s, 40 ms one way, 1 % random loss; slow 5 Mbit/s, 60 ms one way, 3 % random loss.",
		"| steady-udp | 1 | 50.00 | 50.00 | 46.00 | 0.920 | 8.000 | 40.0 | 90.0 | 0.00 | fast 0.60, mid 0.30, slow 0.10 | steady-udp delivered / Σ capacity ≥ 0.95 | fail (0.92) |",
		"| steady-udp-90 | 1 | 50.00 | 45.00 | 45.00 | 0.900 | 0.040 | 30.0 | 70.0 |",
		"| steady-udp-90 end-to-end loss, % ≤ 0.1 | pass (0.04) |",
		"| steady-tcp | — | — | — | — | — | — | — | — | — | skipped: iperf3 is not installed | — | — |",
		"| steady-tcp delivered / Σ capacity | ≥ 0.7 | — | not run |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("results.md lacks %q:\n%s", want, md)
		}
	}
	for _, not := range []string{"fluid bound", "bond-udp"} {
		if strings.Contains(md, not) {
			t.Errorf("a steady-only results.md mentions %q:\n%s", not, md)
		}
	}
}

// TestBenchSteady is the smoke test of the steady case: steady-udp-90
// for a few seconds in process, with its target in results.json.
func TestBenchSteady(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: runs a bond for a few seconds")
	}
	const d = 3 * time.Second
	rep, _ := runBenchTest(t, Options{Scenario: Capacity, Duration: d, Seed: 1, Configs: []string{capSteadyUDP90}})
	if tr, _ := rep["traces"].([]any); len(tr) != 1 || tr[0] != steadySource {
		t.Errorf("traces %v, want [%q]", rep["traces"], steadySource)
	}
	c := benchConfigs(t, rep, "capacity_mbps", "goodput_mbps", "offered_mbps", "owd_ms", "target")[capSteadyUDP90]
	capMbps, good, offered := c["capacity_mbps"].(float64), c["goodput_mbps"].(float64), c["offered_mbps"].(float64)
	if math.Abs(capMbps-50) > 1e-6 || math.Abs(offered-45) > 1e-6 {
		t.Errorf("capacity %v Mbit/s, offered %v; want 50 and 45", capMbps, offered)
	}
	if good <= 1 || good > offered*1.01 {
		t.Errorf("goodput %v Mbit/s of %v offered", good, offered)
	}
	// p50 at least the fast link's 20 ms, p95 below the slow link's 60 ms
	// plus its 100-ms queue, bondd's 200-ms send queue and room.
	owd := c["owd_ms"].(map[string]any)
	if p50, p95 := owd["p50"].(float64), owd["p95"].(float64); !(p50 >= 20 && p50 <= p95 && p95 < 600) {
		t.Errorf("one-way delay %v", owd)
	}
	tg, _ := c["target"].(map[string]any)
	if tg["name"] != "steady-udp-90 end-to-end loss, %" || tg["known"] != true {
		t.Errorf("target %v", tg)
	}
	if ts, _ := rep["targets"].([]any); len(ts) != 3 {
		t.Errorf("%d targets, want the 3 steady ones", len(ts))
	}
}
