package emu

import (
	"time"

	"golang.org/x/sys/unix"
)

// preciseSleep sleeps d with nanosleep(2). Go timers on Linux round short
// sleeps up to about a millisecond; nanosleep wakes within tens of µs once
// the calling thread's timer slack (default 50 µs) is cut to 1 ns with
// prctl(PR_SET_TIMERSLACK). The goroutine is not locked to a thread (a
// locked thread makes every hand-off between goroutines cost a thread
// switch), so the slack is set on every call, on whichever runtime thread
// runs it; a smaller slack only makes that thread's later timed waits more
// precise.
func preciseSleep(d time.Duration) {
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	ts := unix.NsecToTimespec(int64(d))
	_ = unix.Nanosleep(&ts, nil)
}
