package policy

import (
	"testing"
	"time"
)

func TestOneWayDelay(t *testing.T) {
	for _, c := range []struct {
		minRTT, srtt, queue, want time.Duration
	}{
		{0, 0, 0, 0},
		{0, 80 * time.Millisecond, 5 * time.Millisecond, 40 * time.Millisecond},
		{60 * time.Millisecond, 80 * time.Millisecond, 5 * time.Millisecond, 35 * time.Millisecond},
		{60 * time.Millisecond, 80 * time.Millisecond, -time.Millisecond, 30 * time.Millisecond},
	} {
		if got := OneWayDelay(c.minRTT, c.srtt, c.queue); got != c.want {
			t.Errorf("OneWayDelay(%v, %v, %v) = %v, want %v", c.minRTT, c.srtt, c.queue, got, c.want)
		}
	}
}

// TestDeliveryEstimateBadPath is the "one bad path": three paths
// of 10–35 ms one-way, the fastest losing 50 %. Unprotected packets go to
// a clean path while it has less than DefaultLossPenalty of queue, and
// spill to the lossy one only beyond.
func TestDeliveryEstimateBadPath(t *testing.T) {
	type path struct {
		queued int
		rate   float64
		owd    time.Duration
		loss   float64
	}
	best := func(ps []path) int {
		b, bt := -1, time.Duration(0)
		for i, p := range ps {
			if d := DeliveryEstimate(p.queued, p.rate, p.owd, p.loss, DefaultLossPenalty); b < 0 || d < bt {
				b, bt = i, d
			}
		}
		return b
	}
	const rate = 500_000 // bytes/s
	cases := []struct {
		name string
		ps   []path
		want int
	}{
		{"idle: the clean 20 ms path, not the lossy 10 ms one",
			[]path{{0, rate, 10 * time.Millisecond, 0.5}, {0, rate, 20 * time.Millisecond, 0}, {0, rate, 35 * time.Millisecond, 0}}, 1},
		{"the clean paths queue 100 ms: still clean",
			[]path{{0, rate, 10 * time.Millisecond, 0.5}, {50_000, rate, 20 * time.Millisecond, 0}, {50_000, rate, 35 * time.Millisecond, 0}}, 1},
		{"the clean paths queue 400 ms: the lossy one",
			[]path{{0, rate, 10 * time.Millisecond, 0.5}, {200_000, rate, 20 * time.Millisecond, 0}, {200_000, rate, 35 * time.Millisecond, 0}}, 0},
		{"1 % loss on the fast path: it keeps its lead",
			[]path{{0, rate, 10 * time.Millisecond, 0.01}, {0, rate, 20 * time.Millisecond, 0}}, 0},
		{"queue at rate: 100 kB at 1 MB/s beats 100 kB at 0.2 MB/s",
			[]path{{100_000, 200_000, 10 * time.Millisecond, 0}, {100_000, 1e6, 20 * time.Millisecond, 0}}, 1},
	}
	for _, c := range cases {
		if got := best(c.ps); got != c.want {
			t.Errorf("%s: chose path %d, want %d", c.name, got, c.want)
		}
	}
	if d := DeliveryEstimate(1<<30, 1e-9, time.Hour, 1, time.Hour); d <= 0 {
		t.Errorf("extreme input: %v, want a large positive duration", d)
	}
}

func TestLaneSizing(t *testing.T) {
	const mss = 1250
	cases := []struct {
		name    string
		target  float64 // bytes/s
		srtt    time.Duration
		burst   int
		loss    float64
		maxLane int
		cap     int
		want    int
	}{
		// Reno's window is unbounded without loss: one lane.
		{"no loss, 94 Mbit/s at 180 ms", 94e6 / 8, 180 * time.Millisecond, 230_000, 0, 16, 0, 1},
		// 1.68/√0.008 = 18.8 packets = 23.5 kB per lane; 11.75 MB/s ×
		// 0.18 s × 1.5 = 3.17 MB: far above 16 lanes.
		{"0.8 % loss, 94 Mbit/s at 180 ms", 94e6 / 8, 180 * time.Millisecond, 230_000, 0.008, 16, 0, 16},
		// 4 Mbit/s at 50 ms: 37.5 kB; at 1 % a lane holds 16.8 pkt = 21 kB.
		{"1 % loss, 4 Mbit/s at 50 ms", 4e6 / 8, 50 * time.Millisecond, 0, 0.01, 16, 0, 2},
		// A 230-kB keyframe dominates a 1 Mbit/s average.
		{"keyframe burst", 1e6 / 8, 50 * time.Millisecond, 230_000, 0.01, 16, 0, 11},
		{"a lane that did not help caps the count", 4e6 / 8, 50 * time.Millisecond, 0, 0.5, 16, 1, 1},
	}
	for _, c := range cases {
		d := LaneDemand(c.target, c.srtt, 0, c.burst)
		got := LanesFor(d, RenoWindow(c.loss, mss, 10_000), c.maxLane, c.cap)
		if got != c.want {
			t.Errorf("%s: demand %d B, lane window %d B: %d lanes, want %d", c.name, d, RenoWindow(c.loss, mss, 10_000), got, c.want)
		}
	}
}

func TestLaneTrial(t *testing.T) {
	at := func(s float64) time.Time { return modelStart.Add(time.Duration(s * float64(time.Second))) }
	run := func(steps []struct {
		s        float64
		lanes    int
		delivery float64
		target   float64
	}) *LaneTrial {
		var lt LaneTrial
		for _, x := range steps {
			lt.Observe(at(x.s), x.lanes, x.delivery, x.target)
		}
		return &lt
	}
	type st = struct {
		s        float64
		lanes    int
		delivery float64
		target   float64
	}
	// A second lane that did not raise the delivery: capped at 1.
	flat := []st{{0, 1, 100, 500}, {1, 1, 100, 500}, {2, 2, 100, 500}, {3, 2, 102, 500}, {4.1, 2, 101, 500}}
	if c := run(flat).Cap(); c != 1 {
		t.Errorf("no gain: cap %d, want 1", c)
	}
	// One that did: no cap.
	gain := []st{{0, 1, 100, 500}, {1, 1, 100, 500}, {2, 2, 150, 500}, {3, 2, 160, 500}, {4.1, 2, 160, 500}}
	if c := run(gain).Cap(); c != 0 {
		t.Errorf("gain: cap %d, want 0", c)
	}
	// The cap lapses after LaneTrialHold, or when the target grows.
	lapse := append(append([]st(nil), flat...), st{4.1 + LaneTrialHold.Seconds() + 1, 1, 100, 500})
	if c := run(lapse).Cap(); c != 0 {
		t.Errorf("after the hold: cap %d, want 0", c)
	}
	grown := append(append([]st(nil), flat...), st{5, 1, 100, 700})
	if c := run(grown).Cap(); c != 0 {
		t.Errorf("target grew 40 %%: cap %d, want 0", c)
	}
}

func TestRateHelpersAllocs(t *testing.T) {
	var lt LaneTrial
	now := modelStart
	if n := testing.AllocsPerRun(1000, func() {
		now = now.Add(50 * time.Millisecond)
		_ = DeliveryEstimate(12_000, 1e6, 20*time.Millisecond, 0.02, DefaultLossPenalty)
		_ = LanesFor(LaneDemand(1e6, 50*time.Millisecond, 0, 0), RenoWindow(0.01, 1250, 10_000), 8, lt.Cap())
		lt.Observe(now, 2, 1e6, 1e6)
	}); n != 0 {
		t.Errorf("%v allocations, want 0", n)
	}
}
