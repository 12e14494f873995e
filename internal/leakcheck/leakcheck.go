// Package leakcheck is the goroutine leak check bondd's tests share, in the
// manner of wireguard-go's goroutineLeakCheck: a test that starts goroutines
// calls [Check] first, so that the check runs after its other cleanups.
package leakcheck

import (
	"runtime"
	"testing"
	"time"
)

// Wait is how long [Check] lets the test's goroutines wind down.
const Wait = 5 * time.Second

// Check fails tb if, after tb's other cleanups, more goroutines run than
// when Check was called, once they have had [Wait] to end. The error
// carries every goroutine's stack.
func Check(tb testing.TB) {
	tb.Helper()
	before := runtime.NumGoroutine()
	tb.Cleanup(func() {
		deadline := time.Now().Add(Wait)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond) // polls the count it waits for
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			tb.Errorf("goroutine leak: %d running, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
		}
	})
}
