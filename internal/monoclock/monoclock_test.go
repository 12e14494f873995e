package monoclock

import (
	"testing"
	"time"

	"github.com/bondd/bondd/internal/testkit"
)

func TestNanos(t *testing.T) {
	tests := []struct {
		name string
		t    time.Time
		want int64
	}{
		{"base", base, baseNs},
		{"synthetic time is its UnixNano", time.Unix(1000, 5), 1000e9 + 5},
		{"monotonic: distance from base", base.Add(1500 * time.Millisecond), baseNs + 1.5e9},
		{"before base", base.Add(-time.Hour), baseNs - 3600e9},
	}
	for _, tt := range tests {
		if got := Nanos(tt.t); got != tt.want {
			t.Errorf("%s: Nanos = %d, want %d", tt.name, got, tt.want)
		}
	}
	if got, want := Micros(base.Add(2500*time.Microsecond)), baseNs/1e3+2500; got != want {
		t.Errorf("Micros = %d, want %d", got, want)
	}
}

// TestWallStep: instants taken from time.Now keep their distance when the
// wall clock steps between them, forward (NTP or GPS setting a clock that
// booted at 1970) or back.
func TestWallStep(t *testing.T) {
	t0 := time.Now()
	for _, step := range []time.Duration{56 * 365 * 24 * time.Hour, time.Hour, -time.Hour} {
		t1 := testkit.StepWall(t, t0.Add(time.Second), step)
		if d := t1.UnixNano() - t0.UnixNano(); d == int64(time.Second) {
			t.Fatalf("step %v: the wall clock did not step", step)
		}
		if d := Nanos(t1) - Nanos(t0); d != int64(time.Second) {
			t.Errorf("step %v: Nanos(t1)-Nanos(t0) = %v, want 1s", step, time.Duration(d))
		}
		if !Time(Nanos(t1)).Equal(t0.Add(time.Second)) {
			t.Errorf("step %v: Time(Nanos(t1)) is not the unstepped instant", step)
		}
	}
}

func TestTime(t *testing.T) {
	for _, ns := range []int64{baseNs, baseNs + 12345, baseNs - 7e9, 1000e9} {
		got := Time(ns)
		if Nanos(got) != ns {
			t.Errorf("Nanos(Time(%d)) = %d", ns, Nanos(got))
		}
		if got.Round(0) == got {
			t.Errorf("Time(%d) has no monotonic reading", ns)
		}
		if !got.Equal(time.Unix(0, ns)) {
			t.Errorf("Time(%d) = %v, want the instant %v", ns, got, time.Unix(0, ns))
		}
	}
	now := time.Now()
	if !Time(Nanos(now)).Equal(now) {
		t.Errorf("Time(Nanos(now)) != now")
	}
}

func BenchmarkNanos(b *testing.B) {
	now := time.Now()
	var s int64
	for b.Loop() {
		s += Nanos(now)
	}
	_ = s
}
