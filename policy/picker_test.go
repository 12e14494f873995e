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
