package emu

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// tracesDirOrSkip returns the shared traces folder, or skips the test.
// The traces are third-party data kept beside the repository (never in
// it): ../shared/data/traces from the module root.
func tracesDirOrSkip(t testing.TB) string {
	t.Helper()
	dir := DefaultTracesDir()
	if dir == "" {
		t.Skip("traces folder ../shared/data/traces (beside the module root) not found; skipping the real-trace test")
	}
	return dir
}

// checkGoroutines fails the test if, after it ends, more goroutines run
// than when it started (waiting up to 2 s for them to wind down), in the
// manner of wireguard-go's goroutineLeakCheck.
func checkGoroutines(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(2 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Errorf("goroutine leak: %d before, %d after\n%s", before, n, relevantStacks(string(buf)))
		}
	})
}

func relevantStacks(all string) string {
	var out []string
	for _, g := range strings.Split(all, "\n\n") {
		if strings.Contains(g, "emu.") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

func TestDefaultTracesDir(t *testing.T) {
	dir := DefaultTracesDir()
	// The module root is the parent of this package's directory.
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(filepath.Dir(wd), "..", "shared", "data", "traces")
	if _, err := os.Stat(want); err != nil {
		if dir != "" {
			t.Errorf("DefaultTracesDir() = %q, but %s does not exist", dir, want)
		}
		t.Skipf("%s absent: only checked that DefaultTracesDir returns \"\"", want)
	}
	wantAbs, _ := filepath.Abs(want)
	if dir != wantAbs {
		t.Errorf("DefaultTracesDir() = %q, want %q", dir, wantAbs)
	}
}
