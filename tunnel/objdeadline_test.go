package tunnel

import (
	"testing"
	"time"
)

func TestObjectDeadline(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name   string
		bytes  int
		rate   float64
		base   time.Duration
		margin time.Duration
		want   time.Duration
	}{
		// A 4 Mbit/s GOP-50 H.264 keyframe of about 100 kB on a 10 Mbit/s
		// path: 80 ms to send, plus the margin.
		{"keyframe", 100_000, 10e6, 0, DefaultObjectMargin, 130 * ms},
		{"keyframe, longer base wins", 100_000, 10e6, 200 * ms, DefaultObjectMargin, 200 * ms},
		{"small frame: base", 1_200, 10e6, 100 * ms, DefaultObjectMargin, 100 * ms},
		{"no rate estimate: base", 100_000, 0, 100 * ms, DefaultObjectMargin, 100 * ms},
		{"no frame: base", 0, 10e6, 100 * ms, DefaultObjectMargin, 100 * ms},
		{"slow path: capped", 1_000_000, 1e6, 0, DefaultObjectMargin, MaxObjectDeadline},
		{"huge frame on a tiny rate: capped", 1 << 30, 1, 0, 0, MaxObjectDeadline},
		{"base above the cap stays", 1_000_000, 1e6, 5 * time.Second, 0, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := objectDeadline(tt.bytes, tt.rate, tt.base, tt.margin); got != tt.want {
				t.Fatalf("objectDeadline = %v, want %v", got, tt.want)
			}
		})
	}
}
