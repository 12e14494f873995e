package policy

import (
	"testing"
	"time"
)

// placementPath is a test path: connected, with a window of cwnd bytes per
// srtt, and queued bytes.
type placementPath struct {
	srtt   time.Duration
	cwnd   int
	queued int // bytes; a queue of 1250-byte packets
}

func placementPaths(now time.Time, ps []placementPath) []*Path {
	var paths []*Path
	for i, p := range ps {
		path := NewPath(string(rune('a'+i)), nil, 64)
		path.SetConnected(true, now)
		path.OnMetrics(p.srtt, p.srtt, p.cwnd, 0)
		path.SetQueueLen(p.queued/1250, p.queued)
		paths = append(paths, path)
	}
	return paths
}

// TestRateSpread checks that RateSpread's picks follow the paths' rates
// (cwnd/srtt) within one packet per path, skip a path without window room
// while another has room, and weigh an unmeasured path as the slowest.
func TestRateSpread(t *testing.T) {
	now := time.Unix(1000, 0)
	tests := []struct {
		name  string
		paths []placementPath
		picks int
		want  []int // picks per path
	}{
		{"rates 4:2:1", []placementPath{{10 * time.Millisecond, 40000, 0}, {20 * time.Millisecond, 40000, 0}, {40 * time.Millisecond, 40000, 0}}, 70, []int{40, 20, 10}},
		{"equal", []placementPath{{30 * time.Millisecond, 30000, 0}, {30 * time.Millisecond, 30000, 0}}, 20, []int{10, 10}},
		{"full window skipped", []placementPath{{10 * time.Millisecond, 2500, 2500}, {40 * time.Millisecond, 40000, 0}}, 10, []int{0, 10}},
		{"no window anywhere: earliest delivery", []placementPath{{10 * time.Millisecond, 2500, 2500}, {40 * time.Millisecond, 2500, 2500}}, 10, []int{10, 0}},
		{"unmeasured as slowest", []placementPath{{0, 0, 0}, {10 * time.Millisecond, 30000, 0}, {20 * time.Millisecond, 30000, 0}}, 40, []int{10, 20, 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			paths := placementPaths(now, tt.paths)
			var r RateSpread
			got := make([]int, len(paths))
			out := make([]int, len(paths))
			for range tt.picks {
				if r.Pick(paths, now, out) != 1 {
					t.Fatal("no pick")
				}
				got[out[0]]++
			}
			for i := range got {
				if d := got[i] - tt.want[i]; d < -1 || d > 1 {
					t.Fatalf("picks per path %v, want %v (±1)", got, tt.want)
				}
			}
		})
	}
	var r RateSpread
	if r.Pick(nil, now, nil) != 0 {
		t.Error("picked from no paths")
	}
	paths := placementPaths(now, []placementPath{{10 * time.Millisecond, 30000, 0}, {20 * time.Millisecond, 30000, 0}})
	out := make([]int, 2)
	if a := testing.AllocsPerRun(100, func() { r.Pick(paths, now, out) }); a != 0 {
		t.Errorf("RateSpread.Pick: %v allocs", a)
	}
}

// TestParityPath checks the parity placement: the earliest expected
// delivery, then among paths as early (within ParityTie) the fewest of the
// block's packets, never a path without window room.
func TestParityPath(t *testing.T) {
	now := time.Unix(1000, 0)
	fast, fast2, slow := placementPath{10 * time.Millisecond, 40000, 0}, placementPath{14 * time.Millisecond, 40000, 0}, placementPath{60 * time.Millisecond, 40000, 0}
	full := placementPath{5 * time.Millisecond, 2500, 2500}
	tests := []struct {
		name   string
		paths  []placementPath
		counts []int
		want   int
	}{
		{"earliest wins over fewer data", []placementPath{fast, slow}, []int{12, 8}, 0},
		{"as early: fewest data", []placementPath{fast, fast2, slow}, []int{10, 6, 0}, 1},
		{"as early, same count: earliest", []placementPath{fast2, fast, slow}, []int{3, 3, 0}, 1},
		{"counts shorter than paths", []placementPath{fast, slow, fast2}, []int{3, 3}, 2},
		{"no window: skipped", []placementPath{full, slow}, []int{0, 20}, 1},
		{"none with room", []placementPath{full}, nil, -1},
		{"no paths", nil, nil, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParityPath(placementPaths(now, tt.paths), tt.counts, now); got != tt.want {
				t.Fatalf("ParityPath = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestValidatePlacement(t *testing.T) {
	for _, s := range Placements {
		if err := ValidatePlacement(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	if ValidatePlacement("fastest") == nil {
		t.Error(`"fastest" accepted`)
	}
	if !PlacementSpreadsData(PlacementRateEarliest) || PlacementSpreadsData(PlacementEarliest) ||
		!PlacementPlacesParity(PlacementRateEarliest) || PlacementPlacesParity(PlacementRate) || PlacementPlacesParity("") {
		t.Error("placement predicates")
	}
}
