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
