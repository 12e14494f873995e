package bench

import (
	"testing"
	"time"

	"github.com/bondd/bondd/emu"
)

// TestSatFrameBound checks the ideal sender against links whose answer is
// known: frame i (20 ms apart) is lost iff no capacity is left for it
// before its deadline.
func TestSatFrameBound(t *testing.T) {
	series := func(rates []emu.BitRate, loss []float64) *emu.Series {
		return &emu.Series{Name: "test", Interval: 100 * time.Millisecond, Rate: rates, Loss: loss}
	}
	fast := emu.BitRate(10e9)
	// 10 s of fast link with a hole at [1 s, 2 s) (intervals 10–19).
	hole := make([]emu.BitRate, 100)
	for i := range hole {
		if i < 10 || i >= 20 {
			hole[i] = fast
		}
	}
	lossy := make([]float64, 100)
	for i := 10; i < 20; i++ {
		lossy[i] = 1
	}
	full := make([]emu.BitRate, 100)
	for i := range full {
		full[i] = fast
	}
	// 8 Mbit/s: the P-frames take about 4.4 Mbit/s, a 230-kB I-frame
	// needs over 230 ms of the whole link, more than its 200 ms.
	slow := make([]emu.BitRate, 100)
	for i := range slow {
		slow[i] = 8e6
	}
	// Paced: 200 ms to leave the sender; queued: 300 ms with the link's
	// 100-ms queue.
	tests := []struct {
		name         string
		s            *emu.Series
		paced, queue int
	}{
		{"no hole", series(full, nil), 0, 0},
		// Frames captured at 1.00–1.80 s are due by 2.00 s at the latest,
		// when the link comes back: 41 frames; with 300 ms, 1.00–1.70 s:
		// 36 frames.
		{"hole", series(hole, nil), 41, 36},
		// The trace's loss takes the same share of the capacity.
		{"loss as a hole", series(full, lossy), 41, 36},
		// Every I-frame (one per second) is hopeless in 200 ms and takes
		// nothing from the P-frames; in 300 ms each fits.
		{"slow", series(slow, nil), 10, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := emu.Scenario{Paths: []emu.PathModel{{Name: s2Sat, Up: emu.LinkConfig{Series: tt.s, QueueDelay: 100 * time.Millisecond}}}}
			fb, err := satFrameBound(sc, Options{Duration: 10 * time.Second, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			if fb.Frames != 500 || fb.LostPaced != tt.paced || fb.Lost != tt.queue {
				t.Errorf("lost %d (paced) and %d of %d frames, want %d and %d of 500", fb.LostPaced, fb.Lost, fb.Frames, tt.paced, tt.queue)
			}
		})
	}
	if _, err := satFrameBound(emu.Scenario{}, Options{Duration: time.Second}); err == nil {
		t.Error("no Starlink path: no error")
	}
}

// TestS2Baselines checks which S2 configurations hold their frames
// through the reconfigurations: bondd's own (single paths, the rules),
// not paper 2's multipath baselines.
func TestS2Baselines(t *testing.T) {
	want := map[string]bool{"roundrobin": true, "minrtt": true, "blest": true, "redundant": true}
	for _, c := range s2Configs() {
		if got := c.baseline(); got != want[c.name] {
			t.Errorf("%s: baseline %v, want %v", c.name, got, want[c.name])
		}
	}
}
