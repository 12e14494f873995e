package emu

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"
)

// drive sends n packets of size bytes every gap (virtual time) through a
// link built from cfg and returns the per-packet results.
type result struct {
	at, rel time.Duration
	drop    Drop
}

func drive(t testing.TB, cfg LinkConfig, seed uint64, n int, gap time.Duration, size int) []result {
	t.Helper()
	l, err := NewLink(cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]result, n)
	for i := range out {
		at := time.Duration(i) * gap
		rel, d := l.Send(at, size)
		out[i] = result{at, rel, d}
	}
	return out
}

func meanDelay(rs []result) (mean time.Duration, delivered int) {
	var sum time.Duration
	for _, r := range rs {
		if r.drop == Delivered {
			sum += r.rel - r.at
			delivered++
		}
	}
	if delivered == 0 {
		return 0, 0
	}
	return sum / time.Duration(delivered), delivered
}

func TestLinkPerfect(t *testing.T) {
	rs := drive(t, LinkConfig{}, 1, 1000, time.Millisecond, 1200)
	for _, r := range rs {
		if r.drop != Delivered || r.rel != r.at {
			t.Fatalf("perfect link: %+v", r)
		}
	}
}

func TestLinkDelay(t *testing.T) {
	const n = 100_000
	tests := []struct {
		name    string
		cfg     LinkConfig
		want    time.Duration // expected mean delay
		tol     time.Duration
		ordered bool
		lo, hi  time.Duration // bounds of every packet's delay
	}{
		{
			name: "constant", cfg: LinkConfig{Delay: 40 * time.Millisecond},
			want: 40 * time.Millisecond, tol: 0, ordered: true,
			lo: 40 * time.Millisecond, hi: 40 * time.Millisecond,
		},
		{
			// Uniform ±10 ms jitter: sd 5.77 ms, standard error of the mean
			// over 1e5 packets 0.018 ms; tolerance 0.1 ms ≈ 5 se.
			name: "jitter reorder", cfg: LinkConfig{Delay: 50 * time.Millisecond, Jitter: 10 * time.Millisecond, Reorder: true},
			want: 50 * time.Millisecond, tol: 100 * time.Microsecond, ordered: false,
			lo: 40 * time.Millisecond, hi: 60 * time.Millisecond,
		},
		{
			// Without reordering, release = max(own, previous): packets 1 ms
			// apart with ±10 ms jitter are held back, so the mean rises to
			// about the running maximum; it must stay within [50, 60] ms.
			name: "jitter in order", cfg: LinkConfig{Delay: 50 * time.Millisecond, Jitter: 10 * time.Millisecond},
			want: 55 * time.Millisecond, tol: 5 * time.Millisecond, ordered: true,
			lo: 40 * time.Millisecond, hi: 60 * time.Millisecond,
		},
		{
			// Samples 10/20/30/40 ms, one draw per second over 100 s: the
			// mean of 100 uniform draws has se 1.1 ms; tolerance 4 ms.
			name: "delay samples", cfg: LinkConfig{Delay: 5 * time.Millisecond, DelaySamples: []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 30 * time.Millisecond, 40 * time.Millisecond}, Reorder: true},
			want: 30 * time.Millisecond, tol: 4 * time.Millisecond, ordered: false,
			lo: 15 * time.Millisecond, hi: 45 * time.Millisecond,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs := drive(t, tc.cfg, 7, n, time.Millisecond, 1200)
			mean, got := meanDelay(rs)
			if got != n {
				t.Fatalf("delivered %d of %d", got, n)
			}
			if d := mean - tc.want; d > tc.tol || d < -tc.tol {
				t.Errorf("mean delay %v, want %v ± %v", mean, tc.want, tc.tol)
			}
			inOrder := true
			for i, r := range rs {
				d := r.rel - r.at
				if d < tc.lo || d > tc.hi {
					t.Fatalf("packet %d delay %v outside [%v, %v]", i, d, tc.lo, tc.hi)
				}
				if i > 0 && r.rel < rs[i-1].rel {
					inOrder = false
				}
			}
			if tc.ordered && !inOrder {
				t.Errorf("packets reordered without Reorder")
			}
			if !tc.ordered && inOrder {
				t.Errorf("no reordering seen with Reorder and jitter ≫ packet gap")
			}
		})
	}
}

// TestLinkDelaySamplesHold checks that one draw holds for a whole interval.
func TestLinkDelaySamplesHold(t *testing.T) {
	cfg := LinkConfig{DelaySamples: []time.Duration{1 * time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond}, DelaySampleInterval: 100 * time.Millisecond, Reorder: true}
	rs := drive(t, cfg, 3, 10_000, time.Millisecond, 100)
	seen := map[time.Duration]bool{}
	for i := 0; i < len(rs); i += 100 {
		d0 := rs[i].rel - rs[i].at
		seen[d0] = true
		for _, r := range rs[i : i+100] {
			if r.rel-r.at != d0 {
				t.Fatalf("delay changed within interval at %v", r.at)
			}
		}
	}
	if len(seen) != 3 {
		t.Errorf("saw %d distinct samples over 100 intervals, want 3", len(seen))
	}
}

func TestLinkBernoulliLoss(t *testing.T) {
	const n = 200_000
	for _, p := range []float64{0, 0.001, 0.01, 0.1, 0.5, 1} {
		rs := drive(t, LinkConfig{Loss: p}, 11, n, time.Millisecond, 1200)
		lost := 0
		for _, r := range rs {
			if r.drop == DropLoss {
				lost++
			} else if r.drop != Delivered {
				t.Fatalf("unexpected drop %v", r.drop)
			}
		}
		got := float64(lost) / n
		// 4 standard errors of a binomial proportion, at least 1e-9.
		tol := 4*math.Sqrt(p*(1-p)/n) + 1e-9
		if math.Abs(got-p) > tol {
			t.Errorf("loss %v: got %.5f, want ± %.5f", p, got, tol)
		}
	}
}

func TestLinkGilbertElliott(t *testing.T) {
	const n = 1_000_000
	tests := []struct {
		name string
		ge   GilbertElliott
	}{
		{"bursty", GilbertElliott{PGoodBad: 0.01, PBadGood: 0.3, LossGood: 0, LossBad: 0.5}},
		{"lossy good", GilbertElliott{PGoodBad: 0.005, PBadGood: 0.1, LossGood: 0.001, LossBad: 0.8}},
		{"pure gilbert", GilbertElliott{PGoodBad: 0.02, PBadGood: 0.25, LossGood: 0, LossBad: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs := drive(t, LinkConfig{GilbertElliott: &tc.ge}, 5, n, 100*time.Microsecond, 1200)
			lost, runs := 0, 0
			for i, r := range rs {
				if r.drop == DropLoss {
					lost++
					if i == 0 || rs[i-1].drop != DropLoss {
						runs++
					}
				}
			}
			got := float64(lost) / n
			want := tc.ge.StationaryLoss()
			// Losses come in bursts (≈ n·πG·p ≈ 10^4 bad episodes), so the
			// relative standard error is ≈ 1–2 %; tolerance 6 % relative.
			if math.Abs(got-want) > 0.06*want {
				t.Errorf("stationary loss %.5f, want %.5f ± 6%%", got, want)
			}
			if tc.ge.LossGood == 0 && tc.ge.LossBad == 1 {
				// Pure Gilbert: loss runs are the bad sojourns, geometric
				// with mean 1/r.
				mean := float64(lost) / float64(runs)
				if w := 1 / tc.ge.PBadGood; math.Abs(mean-w) > 0.05*w {
					t.Errorf("mean loss burst %.2f, want %.2f ± 5%%", mean, w)
				}
			}
		})
	}
}

func TestGilbertElliottStationary(t *testing.T) {
	tests := []struct {
		ge   GilbertElliott
		want float64
	}{
		{GilbertElliott{}, 0},
		{GilbertElliott{LossGood: 0.1}, 0.1},
		{GilbertElliott{PGoodBad: 0.1, PBadGood: 0.1, LossBad: 1}, 0.5},
		{GilbertElliott{PGoodBad: 0.01, PBadGood: 0.3, LossBad: 0.5}, 0.5 * 0.01 / 0.31},
	}
	for _, tc := range tests {
		if got := tc.ge.StationaryLoss(); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%+v: %v, want %v", tc.ge, got, tc.want)
		}
	}
}

func TestLinkRate(t *testing.T) {
	tests := []struct {
		name    string
		rate    BitRate
		offered float64 // × rate
		size    int
	}{
		{"saturated 20M", 20 * Mbps, 2, 1228},
		{"saturated 1M small", 1 * Mbps, 1.5, 200},
		{"underloaded 10M", 10 * Mbps, 0.5, 1500},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const dur = 20 * time.Second
			gap := time.Duration(float64(tc.size*8) / (tc.offered * float64(tc.rate)) * float64(time.Second))
			n := int(dur / gap)
			rs := drive(t, LinkConfig{Rate: tc.rate, QueueDelay: 100 * time.Millisecond}, 1, n, gap, tc.size)
			var bytes int
			var last time.Duration
			drops := 0
			for _, r := range rs {
				switch r.drop {
				case Delivered:
					bytes += tc.size
					last = max(last, r.rel)
				case DropQueue:
					drops++
				default:
					t.Fatalf("drop %v", r.drop)
				}
			}
			got := float64(bytes*8) / last.Seconds()
			want := math.Min(float64(tc.rate), tc.offered*float64(tc.rate))
			// Exact fluid model; 0.5 % covers the queue tail at the end.
			if math.Abs(got-want) > 0.005*want {
				t.Errorf("delivered %.4g bit/s, want %.4g ± 0.5%%", got, want)
			}
			if tc.offered < 1 {
				if drops != 0 {
					t.Errorf("%d queue drops below capacity", drops)
				}
				if d := rs[10].rel - rs[10].at; d != tc.rate.txTime(tc.size) {
					t.Errorf("delay %v below capacity, want the serialization time %v", d, tc.rate.txTime(tc.size))
				}
			} else if drops == 0 {
				t.Errorf("no queue drops at %.1f× capacity", tc.offered)
			}
		})
	}
}

func TestLinkQueueLimits(t *testing.T) {
	const size = 1000
	tests := []struct {
		name  string
		cfg   LinkConfig
		burst int
		want  int // admitted of a burst at t=0
	}{
		{"bytes", LinkConfig{Rate: 8 * Mbps, QueueBytes: 10_500}, 50, 10},
		{"delay", LinkConfig{Rate: 8 * Mbps, QueueDelay: 10 * time.Millisecond}, 50, 10}, // 1 ms per packet
		{"default", LinkConfig{Rate: 8 * Mbps}, 500, DefaultQueueBytes / size},
		{"both, bytes tighter", LinkConfig{Rate: 8 * Mbps, QueueBytes: 5000, QueueDelay: 10 * time.Millisecond}, 50, 5},
		{"mahimahi bytes", LinkConfig{Mahimahi: &MahimahiTrace{Opportunities: []uint32{1}}, QueueBytes: 3000}, 50, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := NewLink(tc.cfg, 1)
			if err != nil {
				t.Fatal(err)
			}
			got := 0
			for i := 0; i < tc.burst; i++ {
				if _, d := l.Send(0, size); d == Delivered {
					got++
				} else if d != DropQueue {
					t.Fatalf("drop %v", d)
				}
			}
			if got != tc.want {
				t.Errorf("admitted %d of a burst of %d, want %d", got, tc.burst, tc.want)
			}
			// Once the queue has drained, packets are admitted again.
			if _, d := l.Send(10*time.Second, size); d != Delivered {
				t.Errorf("after draining: %v", d)
			}
		})
	}
}

func TestLinkValidate(t *testing.T) {
	mm := &MahimahiTrace{Opportunities: []uint32{1}}
	tests := []struct {
		name string
		cfg  LinkConfig
	}{
		{"negative delay", LinkConfig{Delay: -1}},
		{"negative jitter", LinkConfig{Jitter: -1}},
		{"loss > 1", LinkConfig{Loss: 1.5}},
		{"loss NaN", LinkConfig{Loss: math.NaN()}},
		{"negative rate", LinkConfig{Rate: -1}},
		{"two capacities", LinkConfig{Rate: Mbps, Mahimahi: mm}},
		{"series and mahimahi", LinkConfig{Mahimahi: mm, Series: &Series{Interval: time.Second, Rate: []BitRate{1}}}},
		{"empty mahimahi", LinkConfig{Mahimahi: &MahimahiTrace{}}},
		{"zero-length mahimahi", LinkConfig{Mahimahi: &MahimahiTrace{Opportunities: []uint32{0, 0}}}},
		{"series zero interval", LinkConfig{Series: &Series{Rate: []BitRate{1}}}},
		{"series zero capacity", LinkConfig{Series: &Series{Interval: time.Second, Rate: []BitRate{0, 0}}}},
		{"series ragged", LinkConfig{Series: &Series{Interval: time.Second, Rate: []BitRate{1, 2}, Loss: []float64{0}}}},
		{"ge prob", LinkConfig{GilbertElliott: &GilbertElliott{PGoodBad: 2}}},
		{"negative queue", LinkConfig{QueueBytes: -1}},
		{"negative sample", LinkConfig{DelaySamples: []time.Duration{-1}}},
		{"outage at ≥ period", LinkConfig{Outages: &Outages{Period: time.Second, At: []time.Duration{time.Second}}}},
		{"outage min > median", LinkConfig{Outages: &Outages{Min: time.Second, Median: time.Millisecond}}},
		{"negative offset", LinkConfig{TraceOffset: -1}},
	}
	for _, tc := range tests {
		_, err := NewLink(tc.cfg, 1)
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: err %v, want ErrInvalidConfig", tc.name, err)
		}
	}
	if _, err := NewLink(LinkConfig{Rate: Mbps, Series: &Series{Interval: time.Second, OWD: []time.Duration{1}}}, 1); err != nil {
		t.Errorf("rate with a delay-only series: %v", err)
	}
}

func TestLinkDeterministic(t *testing.T) {
	cfg := LinkConfig{
		Delay: 20 * time.Millisecond, Jitter: 5 * time.Millisecond, Loss: 0.05,
		GilbertElliott: &GilbertElliott{PGoodBad: 0.01, PBadGood: 0.2, LossBad: 0.5},
		Rate:           5 * Mbps, Outages: &Outages{},
		DelaySamples: []time.Duration{time.Millisecond, 9 * time.Millisecond},
	}
	a := drive(t, cfg, 42, 50_000, 2*time.Millisecond, 1200)
	b := drive(t, cfg, 42, 50_000, 2*time.Millisecond, 1200)
	c := drive(t, cfg, 43, 50_000, 2*time.Millisecond, 1200)
	if !slices.Equal(a, b) {
		t.Error("same seed, different results")
	}
	if slices.Equal(a, c) {
		t.Error("different seeds, same results")
	}
	// Adding jitter must not change which packets the loss processes drop.
	cfg2 := cfg
	cfg2.Jitter = 0
	d := drive(t, cfg2, 42, 50_000, 2*time.Millisecond, 1200)
	for i := range a {
		if (a[i].drop == DropLoss) != (d[i].drop == DropLoss) {
			t.Fatalf("packet %d: loss pattern depends on jitter", i)
		}
	}
}

func TestLinkSendAllocs(t *testing.T) {
	cfg := LinkConfig{
		Delay: 20 * time.Millisecond, Jitter: 5 * time.Millisecond, Loss: 0.01,
		GilbertElliott: &GilbertElliott{PGoodBad: 0.01, PBadGood: 0.2, LossBad: 0.5},
		Rate:           20 * Mbps, Outages: &Outages{},
	}
	l, err := NewLink(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	var at time.Duration
	for i := 0; i < 10_000; i++ { // grow the queue bookkeeping
		at += 400 * time.Microsecond
		l.Send(at, 1228)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		at += 400 * time.Microsecond
		l.Send(at, 1228)
	})
	if allocs != 0 {
		t.Errorf("Send allocates %v times per packet", allocs)
	}
}

func TestLinkArrivalsNeverGoBack(t *testing.T) {
	l, _ := NewLink(LinkConfig{Delay: time.Millisecond}, 1)
	r1, _ := l.Send(10*time.Millisecond, 100)
	r2, _ := l.Send(5*time.Millisecond, 100) // treated as 10 ms
	if r1 != 11*time.Millisecond || r2 != r1 {
		t.Errorf("releases %v, %v", r1, r2)
	}
}

func BenchmarkLinkSend(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  LinkConfig
	}{
		{"delay", LinkConfig{Delay: 20 * time.Millisecond}},
		{"rate+ge+jitter", LinkConfig{Delay: 20 * time.Millisecond, Jitter: time.Millisecond, Rate: 20 * Mbps,
			GilbertElliott: &GilbertElliott{PGoodBad: 0.01, PBadGood: 0.3, LossBad: 0.5}}},
		{"mahimahi", LinkConfig{Mahimahi: synthTrace(10_000), Delay: 20 * time.Millisecond}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l, err := NewLink(bc.cfg, 1)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			var at time.Duration
			for b.Loop() {
				at += 500 * time.Microsecond
				l.Send(at, 1228)
			}
		})
	}
}
