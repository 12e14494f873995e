package policy

import (
	"testing"
	"time"
)

func TestLowestRTT(t *testing.T) {
	now := time.Unix(1000, 0)
	type ps struct {
		connected bool
		silent    time.Duration
		srtt      time.Duration
		queue     int
	}
	tests := []struct {
		name  string
		paths []ps
		want  int // -1: none
	}{
		{"none connected", []ps{{}, {}}, -1},
		{"lowest rtt", []ps{{true, 0, 80 * time.Millisecond, 0}, {true, 0, 30 * time.Millisecond, 0}, {true, 0, 50 * time.Millisecond, 0}}, 1},
		{"skip full queue", []ps{{true, 0, 80 * time.Millisecond, 0}, {true, 0, 30 * time.Millisecond, 4}}, 0},
		{"skip full window", []ps{{true, 0, 80 * time.Millisecond, 0}, {true, 0, 30 * time.Millisecond, 2}}, 0},
		{"no window: earliest delivery", []ps{{true, 0, 80 * time.Millisecond, 3}, {true, 0, 30 * time.Millisecond, 4}}, 1},
		{"active beats degraded", []ps{{true, 0, 80 * time.Millisecond, 0}, {true, 3 * time.Second, 10 * time.Millisecond, 0}}, 0},
		{"degraded when alone", []ps{{false, 0, 0, 0}, {true, 3 * time.Second, 10 * time.Millisecond, 0}}, 1},
		{"measured beats unmeasured", []ps{{true, 0, 0, 0}, {true, 0, 90 * time.Millisecond, 0}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var paths []*Path
			for i, p := range tt.paths {
				path := NewPath(string(rune('a'+i)), nil, 4)
				path.SetConnected(p.connected, now.Add(-p.silent))
				// cwnd 2500 bytes: two queued 1250-byte packets fill it.
				path.OnMetrics(p.srtt, p.srtt, 2500, 0)
				path.SetQueueLen(p.queue, 1250*p.queue)
				paths = append(paths, path)
			}
			out := make([]int, len(paths))
			n := LowestRTT{}.Pick(paths, now, out)
			got := -1
			if n > 0 {
				got = out[0]
			}
			if got != tt.want {
				t.Fatalf("picked %d, want %d", got, tt.want)
			}
		})
	}
}

func TestStatus(t *testing.T) {
	now := time.Unix(1000, 0)
	p := NewPath("a", nil, 1)
	if s := p.Status(now); s != StatusUnavailable {
		t.Fatalf("new path: %v", s)
	}
	p.SetConnected(true, now)
	if s := p.Status(now.Add(time.Second)); s != StatusActive {
		t.Fatalf("after 1s: %v", s)
	}
	if s := p.Status(now.Add(2 * time.Second)); s != StatusDegraded {
		t.Fatalf("after 2s silence: %v", s)
	}
	p.OnMetrics(time.Second, time.Second, 0, 0) // slow path: bound is 4 s
	if s := p.Status(now.Add(3 * time.Second)); s != StatusActive {
		t.Fatalf("slow path after 3s: %v", s)
	}
}

func TestPickAllocs(t *testing.T) {
	now := time.Now()
	paths := []*Path{NewPath("a", nil, 8), NewPath("b", nil, 8)}
	for _, p := range paths {
		p.SetConnected(true, now)
	}
	out := make([]int, 2)
	var pk Picker = LowestRTT{}
	if a := testing.AllocsPerRun(100, func() { pk.Pick(paths, now, out) }); a != 0 {
		t.Fatalf("Pick allocates %v times", a)
	}
}

// TestStandingQueue covers the cwnd view's queueing delay (queueDelay),
// Saturated and the one-way delay the pickers rank by (sendDelay), and
// LowestRTT's spill from a fast path whose bottleneck holds a standing
// queue while its congestion window still has room: the state in which a
// paced TCP sender (BBR) stayed on one path of two.
func TestStandingQueue(t *testing.T) {
	now := time.Unix(1000, 0)
	ms := time.Millisecond
	type ps struct {
		srtt, minRTT     time.Duration
		cwnd, inflight   int
		queued           int
		queue, sendDelay time.Duration // want
		saturated        bool          // want
	}
	// fast: 30 ms base RTT; slow: 90 ms, idle, its sRTT 10 ms above the
	// minimum (the peer's ACK delay for lone packets).
	fastQueued := ps{55 * ms, 30 * ms, 200000, 130000, 0, 25 * ms, 40 * ms, true}
	fastShort := ps{38 * ms, 30 * ms, 200000, 130000, 0, 8 * ms, 23 * ms, false}
	fastLight := ps{55 * ms, 30 * ms, 200000, 20000, 0, 5500 * time.Microsecond, 20500 * time.Microsecond, false}
	slowIdle := ps{100 * ms, 90 * ms, 70000, 0, 0, 0, 45 * ms, false}
	slowFull := ps{100 * ms, 90 * ms, 70000, 70000, 0, 10 * ms, 55 * ms, false}
	tests := []struct {
		name  string
		paths []ps
		want  int
	}{
		{"standing queue: spill to the idle slow path", []ps{fastQueued, slowIdle}, 1},
		{"short queue: stay on the fast path", []ps{fastShort, slowIdle}, 0},
		{"light load on a path with old samples: stay", []ps{fastLight, slowIdle}, 0},
		{"slow path without window: earliest delivery", []ps{fastQueued, slowFull}, 0},
		// sendDelay ranks: the fast path's 25-ms queue puts it 15 ms behind
		// a path 10 ms farther away (neither saturated: 25 < 60/2).
		{"queue beyond the one-way gap: the farther path", []ps{{85 * ms, 60 * ms, 200000, 130000, 0, 25 * ms, 55 * ms, false}, {80 * ms, 80 * ms, 70000, 0, 0, 0, 40 * ms, false}}, 1},
		{"queued at bondd counts as ahead", []ps{{55 * ms, 30 * ms, 200000, 0, 130000, 25 * ms, 40 * ms, true}, slowIdle}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var paths []*Path
			for i, s := range tt.paths {
				p := NewPath(string(rune('a'+i)), nil, 1000)
				p.SetConnected(true, now)
				p.OnMetrics(s.srtt, s.minRTT, s.cwnd, s.inflight)
				p.SetQueueLen(s.queued/1250, s.queued)
				if q := p.queueDelay(); q != s.queue {
					t.Errorf("path %d: queueDelay %v, want %v", i, q, s.queue)
				}
				if d := p.sendDelay(now); d != s.sendDelay {
					t.Errorf("path %d: sendDelay %v, want %v", i, d, s.sendDelay)
				}
				if got := p.Saturated(); got != s.saturated {
					t.Errorf("path %d: Saturated %v, want %v", i, got, s.saturated)
				}
				paths = append(paths, p)
			}
			out := make([]int, len(paths))
			if n := (LowestRTT{}).Pick(paths, now, out); n != 1 || out[0] != tt.want {
				t.Fatalf("picked %v, want %d", out[:n], tt.want)
			}
		})
	}
	// A rate-controlled path's pacer keeps its queue: never Saturated.
	p := NewPath("r", nil, 1000)
	p.SetConnected(true, now)
	p.OnMetrics(55*ms, 30*ms, 200000, 130000)
	p.SetRateControl(true)
	if p.Saturated() {
		t.Error("a rate-controlled path reports Saturated")
	}
}
