package testkit

import (
	"testing"
	"time"
	"unsafe"
)

// StepWall returns tm with its wall-clock reading moved by step and its
// monotonic reading kept: what time.Now returns after the system clock
// steps (NTP or GPS setting a clock that booted at 1970, or an operator's
// date). time.Time keeps a monotonic reading beside the wall seconds
// (bits 30-62 of its first word); no exported call moves one without the
// other. step is whole seconds. It fails t when tm has no monotonic
// reading or when time.Time's layout no longer matches.
func StepWall(t testing.TB, tm time.Time, step time.Duration) time.Time {
	t.Helper()
	sec := int64(step / time.Second)
	p := (*struct {
		wall uint64
		ext  int64
		loc  *time.Location
	})(unsafe.Pointer(&tm))
	if p.wall>>63 == 0 {
		t.Fatal("StepWall: no monotonic reading")
	}
	before := tm.Unix()
	p.wall += uint64(sec) << 30
	if tm.Unix()-before != sec {
		t.Fatalf("StepWall: time.Time's layout changed (moved %d s, want %d)", tm.Unix()-before, sec)
	}
	return tm
}
