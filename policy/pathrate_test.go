package policy

import (
	"testing"
	"time"
)

// ratePaths returns connected rate-controlled paths with the given RTTs
// and receiver-seen losses, each at a 1 MB/s target with an empty queue.
func ratePaths(now time.Time, rtts []time.Duration, loss []float64) []*Path {
	var ps []*Path
	for i, rtt := range rtts {
		p := NewPath(string(rune('a'+i)), nil, 64)
		p.SetConnected(true, now)
		p.OnMetrics(rtt, rtt, 10*1252, 0)
		p.SetRateControl(true)
		p.OnRateEstimate(1e6, loss[i], 0, now)
		ps = append(ps, p)
	}
	return ps
}

func TestRatePickersAvoidLossyPath(t *testing.T) {
	now := time.Unix(1000, 0)
	ms := time.Millisecond
	tests := []struct {
		name   string
		picker Picker
		rtts   []time.Duration
		loss   []float64
		queueB []int // bytes queued per path
		want   int
	}{
		{"lowestrtt clean", LowestRTT{}, []time.Duration{10 * ms, 20 * ms, 35 * ms}, []float64{0, 0, 0}, nil, 0},
		{"lowestrtt lossy fastest", LowestRTT{}, []time.Duration{10 * ms, 20 * ms, 35 * ms}, []float64{0.5, 0, 0}, nil, 1},
		{"lowestrtt 3% loss is still ACTIVE but costs", LowestRTT{}, []time.Duration{10 * ms, 20 * ms}, []float64{0.03, 0}, nil, 1},
		{"lowestrtt spreads by rate when full", LowestRTT{}, []time.Duration{10 * ms, 20 * ms}, []float64{0, 0}, []int{200_000, 20_000}, 1},
		{"minrtt lossy fastest", MinRTT{}, []time.Duration{10 * ms, 20 * ms, 35 * ms}, []float64{0.5, 0, 0}, nil, 1},
		{"blest lossy fastest", BLEST{}, []time.Duration{10 * ms, 20 * ms, 35 * ms}, []float64{0.5, 0, 0}, nil, 1},
		{"blest waits on a fast path that delivers sooner", BLEST{}, []time.Duration{10 * ms, 200 * ms}, []float64{0, 0}, []int{20_000, 0}, 0},
		{"blest goes slow when the fast queue is long", BLEST{}, []time.Duration{10 * ms, 40 * ms}, []float64{0, 0}, []int{100_000, 0}, 1},
		{"lossy path used when it is the only one", LowestRTT{}, []time.Duration{10 * ms}, []float64{0.5}, nil, 0},
		// 1 MB/s targets: 300 KB queued is 300 ms; 15 % loss costs 44 ms, 50 % 250 ms.
		{"loss-degraded path takes the excess when no ACTIVE path has room", LowestRTT{}, []time.Duration{10 * ms, 20 * ms}, []float64{0, 0.15}, []int{300_000, 0}, 1},
		{"loss-degraded path waits while an ACTIVE path has room", LowestRTT{}, []time.Duration{10 * ms, 20 * ms}, []float64{0, 0.15}, []int{5_000, 0}, 0},
		{"loss-degraded path waits while the ACTIVE queue is shorter than its loss", LowestRTT{}, []time.Duration{10 * ms, 20 * ms}, []float64{0, 0.5}, []int{100_000, 0}, 0},
		{"loss-degraded path with a queue of its own does not take it", LowestRTT{}, []time.Duration{10 * ms, 20 * ms}, []float64{0, 0.15}, []int{300_000, 300_000}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := ratePaths(now, tt.rtts, tt.loss)
			for i, b := range tt.queueB {
				ps[i].SetQueueLen(b/1250, b)
			}
			out := make([]int, len(ps))
			if n := tt.picker.Pick(ps, now, out); n != 1 || out[0] != tt.want {
				t.Fatalf("picked %v (n=%d), want %d", out[:n], n, tt.want)
			}
		})
	}
	t.Run("loss-degraded path that has gone silent does not take the excess", func(t *testing.T) {
		later := now.Add(3 * time.Second) // past MinSilence for b; a is heard from
		ps := ratePaths(now, []time.Duration{10 * ms, 20 * ms}, []float64{0, 0.15})
		ps[0].OnReceive(later)
		ps[0].OnRateEstimate(1e6, 0, 0, later)
		ps[1].OnRateEstimate(1e6, 0.15, 0, later) // a fresh estimate, as the sender's stale-report path republishes
		ps[0].SetQueueLen(240, 300_000)
		out := make([]int, 2)
		if n := (LowestRTT{}).Pick(ps, later, out); n != 1 || out[0] != 0 {
			t.Fatalf("picked %v (n=%d), want 0", out[:n], n)
		}
	})
	t.Run("loss-degraded path short of byte budget does not take the excess", func(t *testing.T) {
		ps := ratePaths(now, []time.Duration{10 * ms, 20 * ms}, []float64{0, 0.15})
		ps[0].SetQueueLen(240, 300_000)
		ps[1].SetBudget(Budget{Bytes: 10_000, Period: PeriodDay})
		ps[1].OnBytes(9_500, now)
		out := make([]int, 2)
		if n := (LowestRTT{}).Pick(ps, now, out); n != 1 || out[0] != 0 {
			t.Fatalf("picked %v (n=%d), want 0", out[:n], n)
		}
	})
}

func TestRateLossStatus(t *testing.T) {
	now := time.Unix(1000, 0)
	p := ratePaths(now, []time.Duration{20 * time.Millisecond}, []float64{0})[0]
	steps := []struct {
		loss   float64
		at     time.Duration
		status Status
		reason string
	}{
		{0.02, 0, StatusActive, ""},
		{0.5, 100 * time.Millisecond, StatusDegraded, ReasonLoss},
		{0.07, 200 * time.Millisecond, StatusDegraded, ReasonLoss}, // hysteresis
		{0.04, 300 * time.Millisecond, StatusActive, ""},
		{0.2, 400 * time.Millisecond, StatusDegraded, ReasonLoss},
	}
	for _, s := range steps {
		at := now.Add(s.at)
		p.OnMetrics(20*time.Millisecond, 20*time.Millisecond, 0, 0)
		p.OnReceive(at)
		p.OnRateEstimate(1e6, s.loss, 0, at)
		if st, r := p.Status(at), p.StatusReason(at); st != s.status || r != s.reason {
			t.Fatalf("loss %.2f: %v %q, want %v %q", s.loss, st, r, s.status, s.reason)
		}
		if st, r := p.StatusAndReason(at); st != s.status || r != s.reason {
			t.Fatalf("loss %.2f: StatusAndReason %v %q, want %v %q", s.loss, st, r, s.status, s.reason)
		}
	}
	// A stale figure is forgotten.
	if late := now.Add(LossMemory + time.Second); p.ReceiverLoss(late) != 0 || p.LossDegradedAt(late) {
		t.Fatal("stale loss still counts")
	}
	// The first figure after a stale one starts the hysteresis afresh:
	// 7 % alone is ACTIVE, though the last figure, 20 %, had been DEGRADED.
	if late := now.Add(LossMemory + time.Second); func() bool {
		p.OnReceive(late)
		p.OnRateEstimate(1e6, 0.07, 0, late)
		return p.LossDegradedAt(late)
	}() {
		t.Fatal("7 % after a stale 20 % is still DEGRADED (loss)")
	}
	// Without rate control (quic-go keeps the rate) the receiver-seen loss
	// degrades the path as well, and is charged in its expected delivery.
	q := NewPath("q", nil, 1000)
	q.SetConnected(true, now)
	for _, s := range steps {
		at := now.Add(s.at)
		q.OnMetrics(20*time.Millisecond, 20*time.Millisecond, 64000, 0)
		q.OnReceive(at)
		q.OnReceiverLoss(s.loss, at)
		if st, r := q.Status(at), q.StatusReason(at); st != s.status || r != s.reason {
			t.Fatalf("without rate control, loss %.2f: %v %q, want %v %q", s.loss, st, r, s.status, s.reason)
		}
		want := 10*time.Millisecond + time.Duration(s.loss/(1-s.loss)*float64(DefaultLossPenalty))
		if d := q.expectedDeliveryAt(at); d != want {
			t.Errorf("without rate control, loss %.2f: expected delivery %v, want %v", s.loss, d, want)
		}
	}
}

func TestRateHasWindow(t *testing.T) {
	now := time.Unix(1000, 0)
	p := ratePaths(now, []time.Duration{20 * time.Millisecond}, []float64{0})[0]
	for _, tt := range []struct {
		queued int
		want   bool
	}{{0, true}, {11_000, true}, {12_000, false}} { // 1 MB/s × 10 ms + 1500
		p.SetQueueLen(tt.queued/1250, tt.queued)
		if got := p.HasWindow(); got != tt.want {
			t.Fatalf("queued %d: HasWindow %v", tt.queued, got)
		}
	}
}

// TestHasRoom checks that the send queue's capacity now (SetQueueCap), not
// the configured one, decides whether a path has room.
func TestHasRoom(t *testing.T) {
	for _, c := range []struct {
		name           string
		queued, capNow int // packets; capNow 0: not set
		want           bool
	}{
		{"below the configured capacity", 3, 0, true},
		{"at the configured capacity", 4, 0, false},
		{"grown for a fast path", 4, 8, true},
		{"full at the grown capacity", 8, 8, false},
		{"cut back below what is queued", 6, 4, false},
	} {
		p := NewPath("a", nil, 4)
		p.SetQueueLen(c.queued, 1250*c.queued)
		if c.capNow > 0 {
			p.SetQueueCap(c.capNow)
		}
		if got := p.HasRoom(); got != c.want {
			t.Errorf("%s: HasRoom %v, want %v", c.name, got, c.want)
		}
	}
}
