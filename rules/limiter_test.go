package rules

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestInstallLimiter(t *testing.T) {
	var l InstallLimiter
	t0 := time.Now()
	for i := 0; i < MaxInstallsPerSecond; i++ {
		if !l.AllowAt(t0) {
			t.Fatalf("install %d refused", i)
		}
	}
	if l.AllowAt(t0) {
		t.Error("11th install in the same instant allowed")
	}
	if l.AllowAt(t0.Add(50 * time.Millisecond)) {
		t.Error("allowed after 50 ms (half a token)")
	}
	if !l.AllowAt(t0.Add(100 * time.Millisecond)) {
		t.Error("refused after 100 ms (one token)")
	}
	if l.AllowAt(t0) {
		t.Error("time going backwards refilled")
	}
	// A long pause refills to the burst, not beyond.
	t1 := t0.Add(time.Hour)
	n := 0
	for l.AllowAt(t1) {
		n++
	}
	if n != MaxInstallsPerSecond {
		t.Errorf("%d installs after an hour, want %d", n, MaxInstallsPerSecond)
	}
	if got := l.Rejected(); got != 4 {
		t.Errorf("rejected %d, want 4", got)
	}
	// A steady 10 per second is sustained for a minute.
	for i := 1; i <= 600; i++ {
		if !l.AllowAt(t1.Add(time.Duration(i) * 100 * time.Millisecond)) {
			t.Fatalf("steady install %d refused", i)
		}
	}
}

// TestInstallLimiterConcurrent: several goroutines together get no more
// than the burst plus the refill.
func TestInstallLimiterConcurrent(t *testing.T) {
	var l InstallLimiter
	var ok atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if l.Allow() {
					ok.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	limit := int64(MaxInstallsPerSecond + time.Since(start).Seconds()*MaxInstallsPerSecond + 1)
	if ok.Load() < MaxInstallsPerSecond || ok.Load() > limit {
		t.Errorf("%d allowed, want %d to %d", ok.Load(), MaxInstallsPerSecond, limit)
	}
}
