package fec

import (
	"math"
	"sync"
	"testing"
	"time"
)

const rtt = 50 * time.Millisecond

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }

// lossEvents drives l through loss events separated by the given intervals
// (packets sent before each event, oldest first), one loss per event, 2·rtt
// apart; it returns the time after the last event.
func lossEvents(l *LossIntervals, at time.Time, intervals ...int) time.Time {
	for _, n := range intervals {
		l.OnSent(n)
		at = at.Add(2 * rtt)
		l.OnLoss(at, rtt)
	}
	return at
}

// TestLossIntervalsPeriodic: one loss every N packets gives p = 1/N
// exactly, for both the event and the packet rate (RFC 5348 §5.4).
func TestLossIntervalsPeriodic(t *testing.T) {
	for _, n := range []int{1, 2, 10, 100, 1000} {
		var l LossIntervals
		if l.Rate() != 0 || l.PacketRate() != 0 || l.DiscountedRate() != 0 {
			t.Fatal("rate before any loss is not 0")
		}
		at := t0
		for range 12 {
			at = lossEvents(&l, at, n)
		}
		if got, want := l.Rate(), 1/float64(n); !near(got, want) {
			t.Errorf("N=%d: Rate = %v, want %v", n, got, want)
		}
		if got, want := l.PacketRate(), 1/float64(n); !near(got, want) {
			t.Errorf("N=%d: PacketRate = %v, want %v", n, got, want)
		}
		if l.Events() != 12 {
			t.Errorf("Events = %d", l.Events())
		}
	}
}

// TestLossIntervalsWeights checks the weighted mean on a known history,
// its partial form with fewer than 8 intervals, and that a 9th interval
// pushes out the oldest.
func TestLossIntervalsWeights(t *testing.T) {
	var l LossIntervals
	at := lossEvents(&l, t0, 80, 70, 60, 50, 40, 30, 20, 10) // newest first: 10 … 80
	// I_tot1 = 10+20+30+40 + 0.8·50 + 0.6·60 + 0.4·70 + 0.2·80 = 220; W_tot = 6.
	if got, want := l.Rate(), 6.0/220; !near(got, want) {
		t.Fatalf("Rate = %v, want %v", got, want)
	}
	lossEvents(&l, at, 1000) // the 80 falls out: 1000, 10, 20, 30, 40, 50, 60, 70
	// 1000+10+20+30 + 0.8·40 + 0.6·50 + 0.4·60 + 0.2·70 = 1160
	if got, want := l.Rate(), 6.0/1160; !near(got, want) {
		t.Fatalf("Rate after a 9th interval = %v, want %v", got, want)
	}

	var p LossIntervals
	lossEvents(&p, t0, 100, 50, 25) // three intervals: weights 1, 1, 1
	if got, want := p.Rate(), 3.0/175; !near(got, want) {
		t.Fatalf("Rate over 3 intervals = %v, want %v", got, want)
	}
	var q LossIntervals
	lossEvents(&q, t0, 10, 10, 10, 10, 10, 100) // 100, then five 10s: 100+30 + 0.8·10 + 0.6·10; W_tot = 5.4
	if got, want := q.Rate(), 5.4/(100+30+8+6); !near(got, want) {
		t.Fatalf("Rate over 6 intervals = %v, want %v", got, want)
	}
}

// TestLossIntervalsEvent: losses within one RTT of an event's first loss
// join it (RFC 5348 §5.2): the event rate stays, the packet rate counts
// them; a loss later than one RTT starts a new event.
func TestLossIntervalsEvent(t *testing.T) {
	var l LossIntervals
	at := lossEvents(&l, t0, 100, 100, 100)
	l.OnLoss(at.Add(rtt/2), rtt)
	l.OnLoss(at.Add(rtt), rtt)
	if l.Events() != 3 {
		t.Fatalf("Events = %d, want 3", l.Events())
	}
	if got := l.Rate(); !near(got, 0.01) {
		t.Fatalf("Rate = %v, want 0.01", got)
	}
	if got, want := l.PacketRate(), 5.0/300; !near(got, want) {
		t.Fatalf("PacketRate = %v, want %v", got, want)
	}
	l.OnSent(100)
	l.OnLoss(at.Add(rtt+time.Millisecond), rtt)
	if l.Events() != 4 {
		t.Fatalf("Events = %d, want 4", l.Events())
	}
	// A loss reported before any packet was counted still closes a 1-packet interval.
	var z LossIntervals
	z.OnLoss(t0, rtt)
	if z.Rate() != 1 || z.PacketRate() != 1 {
		t.Fatalf("first loss with nothing sent: Rate %v PacketRate %v", z.Rate(), z.PacketRate())
	}
}

// TestLossIntervalsKept: with no new event the estimate is kept (paper 1
// §4.3), however many packets go out; DiscountedRate, the full RFC 5348
// §5.4 rule, lets the open interval lower it.
func TestLossIntervalsKept(t *testing.T) {
	var l LossIntervals
	lossEvents(&l, t0, 100, 100, 100, 100, 100, 100, 100, 100)
	before := l.Rate()
	if d := l.DiscountedRate(); !near(d, before) {
		t.Fatalf("DiscountedRate with an empty open interval = %v, want %v", d, before)
	}
	l.OnSent(50) // shorter than the mean: I_tot1 wins
	if d := l.DiscountedRate(); !near(d, before) {
		t.Fatalf("DiscountedRate with a short open interval = %v, want %v", d, before)
	}
	l.OnSent(1_000_000 - 50)
	if l.Rate() != before {
		t.Fatalf("Rate moved without a loss event: %v → %v", before, l.Rate())
	}
	// I_tot0 = 1e6 + 100+100+100 + 0.8·100 + 0.6·100 + 0.4·100 + 0.2·100; W_tot = 6.
	if got, want := l.DiscountedRate(), 6/(1e6+300+200); !near(got, want) {
		t.Fatalf("DiscountedRate = %v, want %v", got, want)
	}
	l.Reset()
	if l.Rate() != 0 || l.Events() != 0 || l.DiscountedRate() != 0 {
		t.Fatal("Reset left state")
	}
}

// TestLossIntervalsConcurrent exercises the documented goroutine split
// (run with -race): OnSent from a sender, OnLoss from a tracer, Rate from a
// block closer.
func TestLossIntervalsConcurrent(t *testing.T) {
	var l LossIntervals
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 20000 {
			l.OnSent(1)
		}
	})
	wg.Go(func() {
		for i := range 200 {
			l.OnLoss(t0.Add(time.Duration(i)*time.Second), rtt)
		}
	})
	wg.Go(func() {
		for range 2000 {
			if p := l.Rate(); p < 0 || p > 1 {
				t.Errorf("Rate %v out of range", p)
			}
			_ = l.DiscountedRate()
		}
	})
	wg.Wait()
	if l.Events() != 200 {
		t.Fatalf("Events = %d", l.Events())
	}
}

// TestUpperRate: before a loss, 3/(n+3) of the n packets sent; after, Rate.
func TestUpperRate(t *testing.T) {
	var l LossIntervals
	for _, tt := range []struct {
		sent int
		want float64
	}{{0, 1}, {27, 0.1}, {2997, 0.001}} {
		l.OnSent(tt.sent - int(l.open.Load()))
		if got := l.UpperRate(); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("after %d packets without loss: UpperRate = %v, want %v", tt.sent, got, tt.want)
		}
	}
	l.OnLoss(time.Now(), 0)
	if got, want := l.UpperRate(), l.Rate(); got != want || want != 1.0/2997 {
		t.Errorf("after a loss: UpperRate = %v, Rate %v, want 1/2997", got, want)
	}
}
