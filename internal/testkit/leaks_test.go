package testkit

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// settle waits until no goroutine has ended for 50 ms (at most 2 s): a
// subtest's goroutine that is still exiting when the next one takes its
// count would hide the next one's leak (CheckLeaks counts goroutines).
func settle() {
	n, still := runtime.NumGoroutine(), 0
	for end := time.Now().Add(2 * time.Second); still < 5 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
		if m := runtime.NumGoroutine(); m == n {
			still++
		} else {
			n, still = m, 0
		}
	}
}

// recorder is a testing.TB that records Errorf and runs cleanups on demand.
type recorder struct {
	testing.TB
	cleanups []func()
	errs     []string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Cleanup(f func())          { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Errorf(f string, a ...any) { r.errs = append(r.errs, f) }
func (r *recorder) run() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

func TestCheckLeaks(t *testing.T) {
	t.Run("clean", func(t *testing.T) {
		r := &recorder{TB: t}
		CheckLeaks(r)
		done := make(chan struct{})
		go func() { <-done }()
		close(done)
		r.run()
		if len(r.errs) != 0 {
			t.Errorf("goroutine that ended reported: %v", r.errs)
		}
	})
	t.Run("leak", func(t *testing.T) {
		settle()
		r := &recorder{TB: t}
		CheckLeaks(r)
		stop := make(chan struct{})
		defer close(stop)
		go func() { <-stop }()
		r.run()
		if len(r.errs) != 1 || !strings.Contains(r.errs[0], "goroutine leak") {
			t.Errorf("leaked goroutine not reported: %v", r.errs)
		}
	})
}
