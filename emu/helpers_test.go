package emu

import (
	"os"
	"path/filepath"
	"testing"
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
