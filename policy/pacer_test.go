package policy

import (
	"testing"
	"time"
)

func TestPacer(t *testing.T) {
	ms := func(n int) time.Time { return modelStart.Add(time.Duration(n) * time.Millisecond) }
	type step struct {
		at      int // ms
		n       int // frame bytes
		wait    time.Duration
		consume bool
	}
	cases := []struct {
		name    string
		rate    float64
		burst   int
		steps   []step
		delayed uint64
	}{
		{"full bucket lets a burst go", 1e6, 10_000, []step{
			{0, 5000, 0, true}, {0, 5000, 0, true}, {0, 1000, time.Millisecond, false},
			{1, 1000, 0, true},
		}, 1000},
		{"tokens accrue at the rate", 1e6, 10_000, []step{
			{0, 10_000, 0, true}, {0, 2000, 2 * time.Millisecond, false}, {1, 2000, time.Millisecond, false},
			{2, 2000, 0, true}, {2, 2000, 2 * time.Millisecond, false},
		}, 2000},
		{"depth bounds the burst after idle", 1e6, 3000, []step{
			{0, 3000, 0, true}, {1000, 3000, 0, true}, {1000, 1500, 1500 * time.Microsecond, false},
		}, 0},
		{"a frame above the depth waits for a full bucket", 1e6, 3000, []step{
			{0, 3000, 0, true}, {0, 5000, 3 * time.Millisecond, false}, {3, 5000, 0, true},
			{3, 100, 2100 * time.Microsecond, false},
		}, 5000},
		{"zero rate never releases", 0, 3000, []step{
			{0, 3000, 0, true}, {0, 1, time.Second, false}, {60_000, 1, time.Second, false},
		}, 0},
	}
	for _, c := range cases {
		var p Pacer
		p.SetRate(ms(0), c.rate, c.burst)
		for i, s := range c.steps {
			if got := p.Delay(ms(s.at), s.n); got != s.wait {
				t.Errorf("%s: step %d: Delay(%d ms, %d) = %v, want %v", c.name, i, s.at, s.n, got, s.wait)
			}
			if s.consume {
				p.Consume(ms(s.at), s.n)
			}
		}
		if p.DelayedBytes() != c.delayed {
			t.Errorf("%s: %d bytes held back, want %d", c.name, p.DelayedBytes(), c.delayed)
		}
	}
}

// TestPacerRate: a greedy loop that sleeps what Delay says sends at the
// rate (within one burst) over a long run, and a rate change applies at
// once.
func TestPacerRate(t *testing.T) {
	var p Pacer
	now := modelStart
	p.SetRate(now, 125_000, 12_000) // 1 Mbit/s
	end := now.Add(10 * time.Second)
	for now.Before(end) {
		if d := p.Delay(now, 1200); d > 0 {
			now = now.Add(d)
			continue
		}
		p.Consume(now, 1200)
	}
	if got, want := float64(p.SentBytes()), 125_000*10.0; got < want-1200 || got > want+12_000+1200 {
		t.Errorf("sent %v bytes in 10 s at 125 kB/s, want %v plus at most a burst", got, want)
	}
	p.SetRate(now, 1e6, 12_000)
	sent := p.SentBytes()
	end = now.Add(time.Second)
	for now.Before(end) {
		if d := p.Delay(now, 1200); d > 0 {
			now = now.Add(d)
			continue
		}
		p.Consume(now, 1200)
	}
	if got := float64(p.SentBytes() - sent); got < 0.99e6 || got > 1e6+12_000+1200 {
		t.Errorf("sent %v bytes in 1 s after raising the rate to 1 MB/s", got)
	}
}

func TestPacerAllocs(t *testing.T) {
	var p Pacer
	now := modelStart
	p.SetRate(now, 1e7, 0)
	if n := testing.AllocsPerRun(1000, func() {
		now = now.Add(100 * time.Microsecond)
		if p.Delay(now, 1200) == 0 {
			p.Consume(now, 1200)
		}
	}); n != 0 {
		t.Errorf("%v allocations per packet, want 0", n)
	}
}
