package emu

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestCapacityBits(t *testing.T) {
	ms := time.Millisecond
	mm := &MahimahiTrace{Name: "t", Opportunities: []uint32{1, 1, 2, 5}} // period 5 ms, 4 opportunities
	series := &Series{Name: "s", Interval: 100 * ms, Rate: []BitRate{1 * Mbps, 3 * Mbps}}
	outage := &Outages{Period: 10 * time.Second, At: []time.Duration{time.Second}, Durations: []time.Duration{100 * ms}}
	tests := []struct {
		name     string
		cfg      LinkConfig
		from, to time.Duration
		want     float64 // bits
	}{
		{"rate", LinkConfig{Rate: 10 * Mbps}, 0, 2 * time.Second, 20e6},
		{"rate empty window", LinkConfig{Rate: 10 * Mbps}, time.Second, time.Second, 0},
		{"mahimahi one loop", LinkConfig{Mahimahi: mm}, 0, 5 * ms, 4 * 1500 * 8},
		{"mahimahi opportunities after from only", LinkConfig{Mahimahi: mm}, 1 * ms, 2 * ms, 1500 * 8},
		{"mahimahi second loop", LinkConfig{Mahimahi: mm}, 5 * ms, 10 * ms, 4 * 1500 * 8},
		{"mahimahi offset", LinkConfig{Mahimahi: mm, TraceOffset: 1 * ms}, 0, 1 * ms, 1500 * 8},
		{"series split interval", LinkConfig{Series: series}, 50 * ms, 150 * ms, 1e6*0.05 + 3e6*0.05},
		{"series offset", LinkConfig{Series: series, TraceOffset: 100 * ms}, 0, 100 * ms, 3e6 * 0.1},
		{"series loops", LinkConfig{Series: series}, 0, 400 * ms, 2 * (1e6*0.1 + 3e6*0.1)},
		{"outage removed", LinkConfig{Rate: 1 * Mbps, Outages: outage}, 0, 10 * time.Second, 10e6 - 0.1e6},
		{"outage cut by the window", LinkConfig{Rate: 1 * Mbps, Outages: outage}, 1050 * ms, 2 * time.Second, 0.95e6 - 0.05e6},
		{"outage outside the window", LinkConfig{Rate: 1 * Mbps, Outages: outage}, 2 * time.Second, 3 * time.Second, 1e6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CapacityBits(tc.cfg, 1, tc.from, tc.to)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got-tc.want) > 1e-6*max(1, tc.want) {
				t.Errorf("CapacityBits = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCapacityBitsErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cfg      LinkConfig
		from, to time.Duration
	}{
		{"no bottleneck", LinkConfig{Delay: time.Millisecond}, 0, time.Second},
		{"reversed window", LinkConfig{Rate: Mbps}, time.Second, 0},
		{"negative start", LinkConfig{Rate: Mbps}, -time.Second, 0},
		{"invalid config", LinkConfig{Rate: Mbps, Loss: 2}, 0, time.Second},
	} {
		if _, err := CapacityBits(tc.cfg, 1, tc.from, tc.to); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig", tc.name, err)
		}
	}
}

// TestCapacityBitsMatchesLink checks the integration against the link
// model itself: a queue that never empties serves exactly the capacity of
// the window, to within one packet.
func TestCapacityBitsMatchesLink(t *testing.T) {
	ms := time.Millisecond
	series := &Series{Name: "s", Interval: 100 * ms, Rate: []BitRate{2 * Mbps, 7 * Mbps, 0, 4 * Mbps}}
	mm := &MahimahiTrace{Name: "t", Opportunities: []uint32{1, 1, 3, 4, 4, 4, 9, 12, 20}}
	for _, cfg := range []LinkConfig{
		{Series: series, TraceOffset: 30 * ms, QueueBytes: 1 << 30},
		{Mahimahi: mm, TraceOffset: 7 * ms, QueueBytes: 1 << 30},
		{Rate: 3 * Mbps, QueueBytes: 1 << 30, Outages: &Outages{Period: time.Second, At: []time.Duration{200 * ms}, Durations: []time.Duration{0}}},
	} {
		l, err := NewLink(cfg, 1)
		if err != nil {
			t.Fatal(err)
		}
		const size, window = 1500, 2 * time.Second
		var served float64
		for at := time.Duration(0); ; at += 10 * time.Microsecond { // far above every rate: the queue stays full
			rel, drop := l.Send(at, size)
			if drop != Delivered {
				continue
			}
			if rel > window {
				break
			}
			served += size * 8
			if at > window {
				break
			}
		}
		want, err := CapacityBits(cfg, 1, 0, window)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(served-want) > 2*size*8 {
			t.Errorf("%+v: link served %v bits in %v, CapacityBits says %v", cfg, served, window, want)
		}
	}
}

func TestRelayLinkSeed(t *testing.T) {
	if RelayLinkSeed(1, Up) == RelayLinkSeed(1, Down) || RelayLinkSeed(1, Up) != relayLinkSeed(1, Up, 0) || RelayLinkSeed(1, Up) == RelayLinkSeed(2, Up) {
		t.Error("RelayLinkSeed does not derive the relay's per-direction seed")
	}
}
