package policy

import (
	"testing"
	"time"
)

// TestSendHistory: reports every 50 ms, and the rate sent one round trip
// before a report is found for round trips from 50 ms to seconds: the
// history keeps its entries at least an eighth of a round trip apart.
func TestSendHistory(t *testing.T) {
	for _, srtt := range []time.Duration{50 * time.Millisecond, 150 * time.Millisecond, time.Second, 3 * time.Second} {
		var h sendHistory
		t0 := time.Unix(1000, 0)
		now := t0
		for i := range 200 { // 10 s; the rate sent at report i is i
			now = t0.Add(time.Duration(i) * 50 * time.Millisecond)
			h.push(now, float64(i), float64(i), srtt/8)
		}
		want := float64(199) - float64(srtt/(50*time.Millisecond))
		got, raw := h.at(now.Add(-srtt), -1, -1)
		if got != raw || got > want || got < want-float64(srtt/8/(50*time.Millisecond))-1 {
			t.Errorf("sRTT %v: rate a round trip ago %v (raw %v), want the report's %v, at most an eighth of a round trip earlier", srtt, got, raw, want)
		}
	}
}
