package bench

import (
	"math"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/bondd/bondd/emu"
)

func TestIperf3Goodput(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want float64
		ok   bool
	}{
		{"summary", `{"start":{},"end":{"sum_sent":{"bits_per_second":2e7},"sum_received":{"bits_per_second":1.5e7}}}`, 15, true},
		{"iperf3 error", `{"start":{},"end":{},"error":"unable to connect to server"}`, 0, false},
		{"no receiver summary", `{"end":{"sum_sent":{"bits_per_second":1}}}`, 0, false},
		{"negative", `{"end":{"sum_received":{"bits_per_second":-1}}}`, 0, false},
		{"not JSON", "iperf3: error - something", 0, false},
		{"empty", "", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := iperf3Goodput([]byte(tc.in))
			if (err == nil) != tc.ok || got != tc.want {
				t.Errorf("iperf3Goodput = %v, %v; want %v, ok %v", got, err, tc.want, tc.ok)
			}
		})
	}
}

func FuzzIperf3Goodput(f *testing.F) {
	f.Add([]byte(`{"end":{"sum_received":{"bits_per_second":1.5e7}}}`))
	f.Add([]byte(`{"error":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if v, err := iperf3Goodput(b); err == nil && (v < 0 || math.IsNaN(v)) {
			t.Errorf("goodput %v without an error", v)
		}
	})
}

// TestWindowCapacity checks the per-path capacity of a bed against what
// the links' configuration says: a constant rate over any window, and the
// relay seeds (seed + i) for the outages.
func TestWindowCapacity(t *testing.T) {
	ms := time.Millisecond
	out := &emu.Outages{Period: 10 * time.Second, At: []time.Duration{time.Second}, Durations: []time.Duration{500 * ms}}
	sc := emu.Scenario{Paths: []emu.PathModel{
		{Name: "a", Up: emu.LinkConfig{Rate: 10 * emu.Mbps}},
		{Name: "b", Up: emu.LinkConfig{Rate: 4 * emu.Mbps, Outages: out}},
	}}
	got, err := windowCapacity(sc, 1, 0, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if want := []float64{10, 4 * 1.5 / 2}; math.Abs(got[0]-want[0]) > 1e-9 || math.Abs(got[1]-want[1]) > 1e-9 {
		t.Errorf("capacity %v, want %v", got, want)
	}
	sc.Paths = append(sc.Paths, emu.PathModel{Name: "c"}) // no bottleneck: unbounded
	if _, err := windowCapacity(sc, 1, 0, time.Second); err == nil {
		t.Error("no error for a link without capacity")
	}
}

func TestBaseOWD(t *testing.T) {
	ms := time.Millisecond
	l := emu.LinkConfig{Delay: 15 * ms, DelaySamples: []time.Duration{10 * ms, 30 * ms, 20 * ms},
		Series: &emu.Series{Interval: 100 * ms, OWD: []time.Duration{5 * ms, 7 * ms, 6 * ms}}}
	if got := baseOWD(l); got != 15+20+6 {
		t.Errorf("baseOWD = %v ms, want 41", got)
	}
	if got := baseOWD(emu.LinkConfig{}); got != 0 {
		t.Errorf("perfect link: %v ms", got)
	}
}

// TestCapacityScenario checks the paths: S1's three cellular paths and
// S2's Starlink path without wall-clock alignment (so the capacity of a
// window is known), and the configuration names of issue 15.
func TestCapacityScenario(t *testing.T) {
	sc, err := capacityScenario(Options{Traces: emu.DefaultTracesDir(), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range sc.Paths {
		names = append(names, p.Name)
		if p.Up.WallClock || p.Down.WallClock {
			t.Errorf("%s is wall-clock aligned", p.Name)
		}
	}
	if !slices.Equal(names, []string{"att", "tmobile", "verizon", s2Sat}) {
		t.Errorf("paths %v", names)
	}
	want := []string{"bond-udp", "bond-tcp", "single-att-tcp", "single-tmobile-tcp", "single-verizon-tcp", "single-starlink-tcp",
		"steady-udp", "steady-udp-90", "steady-tcp", "steady-single-fast-tcp", "steady-single-mid-tcp", "steady-single-slow-tcp"}
	if got := capConfigNames(); !slices.Equal(got, want) {
		t.Errorf("configurations %v, want %v", got, want)
	}
	var real []string
	for _, c := range capConfigs(sc) {
		real = append(real, c.name)
	}
	if !slices.Equal(real, want) {
		t.Errorf("configurations of the scenario %v, want %v", real, want)
	}
	// --link-scale scales every path's capacity over any window.
	quarter, err := capacityScenario(Options{Traces: emu.DefaultTracesDir(), Seed: 1, LinkScale: 0.25})
	if err != nil {
		t.Fatal(err)
	}
	full, err := windowCapacity(sc, 1, 3*time.Second, 13*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	scaled, err := windowCapacity(quarter, 1, 3*time.Second, 13*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i := range full {
		if full[i] <= 0 || math.Abs(scaled[i]-0.25*full[i]) > 0.01*full[i] {
			t.Errorf("%s: %.2f Mbit/s scaled by 0.25 gave %.2f", sc.Paths[i].Name, full[i], scaled[i])
		}
	}
}

// TestBenchCapacity is the smoke test of bench capacity: bond-udp for a
// few seconds in process and, as root with iperf3, the bond-tcp and
// single-att-tcp configurations in network namespaces.
func TestBenchCapacity(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: runs bonds for a few seconds each")
	}
	const d = 3 * time.Second
	rep, dir := runBenchTest(t, Options{Scenario: Capacity, Duration: d, Seed: 2, Configs: []string{capBondUDP}})
	checkPlots(t, dir, "capacity-owd-cdf")
	checkPathTrace(t, dir, "att", "tmobile", "verizon", "starlink")
	by := benchConfigs(t, rep, "capacity_mbps", "goodput_mbps", "owd_ms", "runs", "ci95")
	udp := by[capBondUDP]
	capMbps, good, offered := udp["capacity_mbps"].(float64), udp["goodput_mbps"].(float64), udp["offered_mbps"].(float64)
	// Offered load is Σ capacity of the planned window; the traffic starts
	// a few ms later at most, so the window's capacity is the same to
	// within the traces' variation over those ms.
	if math.Abs(offered-capMbps) > 0.1*capMbps {
		t.Errorf("offered %v Mbit/s, capacity of the window %v", offered, capMbps)
	}
	// The links cannot deliver more than their capacity over the window
	// plus the drain of their queues (≤ 240 ms cellular, 100 ms Starlink)
	// and bondd's send queue (200 ms); and the bond carries at least one
	// path's initial window per RTT (32 packets per ≤ 200 ms, 1.5 Mbit/s).
	drainMax := 0.5 * float64(time.Second)
	if good > capMbps*(float64(d)+drainMax)/float64(d) || good < 1.5 {
		t.Errorf("goodput %v Mbit/s with %v Mbit/s of capacity", good, capMbps)
	}
	owd := udp["owd_ms"].(map[string]any)
	if p50, p95, p99 := owd["p50"].(float64), owd["p95"].(float64), owd["p99"].(float64); !(p50 >= 5 && p50 <= p95 && p95 <= p99 && p99 < 1000) {
		t.Errorf("one-way delay %v: want p50 ≥ 5 ms (the smallest base delays), ordered, p99 under the queues' 500 ms sum with room", owd)
	}
	if n := udp["runs"].(float64); n != 1 {
		t.Errorf("runs %v", n)
	}
	if ts, _ := rep["targets"].([]any); len(ts) != 3 {
		t.Errorf("%d targets, want 3", len(ts))
	}

	if !isRoot() {
		t.Log("not root: the TCP configurations need network namespaces")
		return
	}
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Log("iperf3 not installed: TCP configurations not tested")
		return
	}
	o := Options{Scenario: Capacity, Duration: d, Seed: 2, Configs: []string{capBondTCP, "single-att-tcp"}}
	o.Out = t.TempDir()
	rep, _ = runBenchNetns(t, o)
	by = benchConfigs(t, rep, "capacity_mbps", "goodput_mbps")
	for n, c := range by {
		capMbps, good := c["capacity_mbps"].(float64), c["goodput_mbps"].(float64)
		if c["skipped"] != nil || good <= 0 || good > capMbps*(float64(d)+drainMax)/float64(d) {
			t.Errorf("%s: goodput %v Mbit/s over %v Mbit/s of capacity (%v)", n, good, capMbps, c["skipped"])
		}
	}
}

// TestFluidBound checks the ideal scheduler's share on links whose
// capacity is known in closed form.
func TestFluidBound(t *testing.T) {
	steady := emu.LinkConfig{Rate: 10 * emu.Mbps}
	onOff := emu.LinkConfig{Series: &emu.Series{Name: "on-off", Interval: time.Second, Rate: []emu.BitRate{20 * emu.Mbps, 0}}}
	path := func(l emu.LinkConfig) emu.PathModel { return emu.PathModel{Name: "p", Up: l, Down: l} }
	cases := []struct {
		name    string
		paths   []emu.PathModel
		offered float64 // Mbit/s
		want    float64
	}{
		{"steady link, offered = capacity", []emu.PathModel{path(steady)}, 10, 1},
		{"two steady links, offered = Σ", []emu.PathModel{path(steady), path(steady)}, 20, 1},
		{"steady link, offered half", []emu.PathModel{path(steady)}, 5, 0.5},
		// On for 1 s at 20, off for 1 s; offered 10 = the mean: each on
		// second serves its own 10 and the 200 ms of the off second the
		// queue kept, 12 of the 20 it could; the first, with nothing
		// kept, 10: (10 + 4 × 12) / 100.
		{"on-off link, offered = mean", []emu.PathModel{path(onOff)}, 10, 0.58},
		{"nothing offered", []emu.PathModel{path(steady)}, 0, 0},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			got, err := fluidBound(emu.Scenario{Paths: tt.paths}, 1, 0, 10*time.Second, tt.offered, 200*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got-tt.want) > 0.01 {
				t.Errorf("bound %.4f, want %.2f", got, tt.want)
			}
		})
	}
}
