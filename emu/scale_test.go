package emu

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"
)

func TestScaleCapacity(t *testing.T) {
	ops := make([]uint32, 0, 3000)
	for i := range 3000 { // 1 opportunity per ms for 1 s, then 2 per ms for 1 s
		if i < 1000 {
			ops = append(ops, uint32(i+1))
		} else {
			ops = append(ops, uint32(1000+(i-1000)/2+1))
		}
	}
	mm := &MahimahiTrace{Name: "m", Opportunities: ops}
	series := &Series{Name: "s", Interval: time.Second, Rate: []BitRate{10 * Mbps, 40 * Mbps}, OWD: []time.Duration{20 * time.Millisecond, 30 * time.Millisecond}}
	cases := []struct {
		name      string
		c         LinkConfig
		f         float64
		wantQueue int
		err       bool
	}{
		{"rate", LinkConfig{Rate: 20 * Mbps, QueueBytes: 150_000, Delay: 10 * time.Millisecond}, 0.25, 37_500, false},
		{"rate, time-limited queue", LinkConfig{Rate: 20 * Mbps, QueueDelay: 50 * time.Millisecond}, 0.5, 0, false},
		{"rate, default queue", LinkConfig{Rate: 20 * Mbps}, 0.1, 15_000, false},
		{"queue floor", LinkConfig{Rate: 20 * Mbps, QueueBytes: 6000}, 0.1, 3000, false},
		{"rate up", LinkConfig{Rate: 20 * Mbps, QueueBytes: 10_000}, 2, 20_000, false},
		{"mahimahi", LinkConfig{Mahimahi: mm, QueueBytes: 150_000}, 0.25, 37_500, false},
		{"mahimahi, a third", LinkConfig{Mahimahi: mm, QueueBytes: 150_000}, 1.0 / 3, 50_000, false},
		{"series", LinkConfig{Series: series, QueueBytes: 150_000}, 0.5, 75_000, false},
		{"identity", LinkConfig{Mahimahi: mm, QueueBytes: 150_000}, 1, 150_000, false},
		{"zero", LinkConfig{Rate: Mbps}, 0, 0, true},
		{"negative", LinkConfig{Rate: Mbps}, -1, 0, true},
		{"NaN", LinkConfig{Rate: Mbps}, math.NaN(), 0, true},
		{"infinite", LinkConfig{Rate: Mbps}, math.Inf(1), 0, true},
		{"mahimahi up", LinkConfig{Mahimahi: mm}, 2, 0, true},
		{"invalid link", LinkConfig{Loss: 2}, 0.5, 0, true},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			before := slices.Clone(ops)
			got, err := tt.c.ScaleCapacity(tt.f)
			if tt.err {
				if !errors.Is(err, ErrInvalidConfig) {
					t.Fatalf("err %v, want ErrInvalidConfig", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := got.Validate(); err != nil {
				t.Fatalf("scaled link invalid: %v", err)
			}
			if got.QueueBytes != tt.wantQueue {
				t.Errorf("QueueBytes %d, want %d", got.QueueBytes, tt.wantQueue)
			}
			if got.Delay != tt.c.Delay || got.QueueDelay != tt.c.QueueDelay || got.Loss != tt.c.Loss {
				t.Errorf("delay, queue delay or loss changed")
			}
			// The capacity in every window scales by f (a Mahimahi trace
			// to within two opportunities per window).
			for _, w := range [][2]time.Duration{{0, time.Second}, {time.Second, 2 * time.Second}, {500 * time.Millisecond, 1500 * time.Millisecond}, {0, 10 * time.Second}} {
				orig, _ := CapacityBits(tt.c, 1, w[0], w[1])
				scaled, _ := CapacityBits(got, 1, w[0], w[1])
				slack := 2 * MahimahiOpportunityBytes * 8.0
				if tt.c.Mahimahi == nil {
					slack = 1e-6 * orig
				}
				if math.Abs(scaled-tt.f*orig) > slack {
					t.Errorf("window %v: %.0f bits, want %.0f × %.0f", w, scaled, tt.f, orig)
				}
			}
			if tt.c.Mahimahi != nil && got.Mahimahi.Period() != tt.c.Mahimahi.Period() {
				t.Errorf("period %v, want %v", got.Mahimahi.Period(), tt.c.Mahimahi.Period())
			}
			if !slices.Equal(ops, before) || series.Rate[0] != 10*Mbps {
				t.Error("the original trace changed")
			}
			if tt.c.Series != nil && !slices.Equal(got.Series.OWD, tt.c.Series.OWD) {
				t.Error("series delays changed")
			}
		})
	}
}

func TestScenarioScaleCapacity(t *testing.T) {
	sc := Scenario{Name: "x", Paths: []PathModel{
		{Name: "a", Labels: map[string]string{"k": "v"}, Up: LinkConfig{Rate: 8 * Mbps}, Down: LinkConfig{Rate: 4 * Mbps}},
		{Name: "b", Up: LinkConfig{Delay: time.Millisecond}, Down: LinkConfig{}},
	}}
	got, err := sc.ScaleCapacity(0.5)
	if err != nil {
		t.Fatal(err)
	}
	if got.Paths[0].Up.Rate != 4*Mbps || got.Paths[0].Down.Rate != 2*Mbps || got.Paths[0].Labels["k"] != "v" {
		t.Errorf("path a: %+v", got.Paths[0])
	}
	if sc.Paths[0].Up.Rate != 8*Mbps {
		t.Error("the original scenario changed")
	}
	if got.Paths[1].Up.Delay != time.Millisecond || got.Paths[1].Up.QueueBytes != 0 || got.Paths[1].Up.Rate != 0 {
		t.Error("a link without a bottleneck changed")
	}
	if _, err := sc.ScaleCapacity(0); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("scale 0: %v", err)
	}
	bad := Scenario{Paths: []PathModel{{Name: "bad", Up: LinkConfig{Loss: -1}}}}
	if _, err := bad.ScaleCapacity(0.5); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("invalid link: %v", err)
	}
}
