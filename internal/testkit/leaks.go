package testkit

import (
	"runtime"
	"testing"
	"time"
)

// LeakWait is how long [CheckLeaks] lets the test's goroutines wind down.
const LeakWait = 5 * time.Second

// CheckLeaks fails tb if, after tb's other cleanups, more goroutines run than
// when Check was called, once they have had [LeakWait] to end. The error
// carries every goroutine's stack.
func CheckLeaks(tb testing.TB) {
	tb.Helper()
	before := runtime.NumGoroutine()
	tb.Cleanup(func() {
		deadline := time.Now().Add(LeakWait)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond) // polls the count it waits for
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			tb.Errorf("goroutine leak: %d running, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
		}
	})
}
