// Package monoclock stores instants as int64 nanoseconds that a step of
// the wall clock does not move. bondd keeps its per-packet and per-path
// timestamps (last datagram received, a frame's deadline, a pacer's
// budget, a timer's deadline) in atomic int64 fields, and time.Time's
// UnixNano, the obvious way to get one, reads the wall clock: a vehicle
// whose clock is set by NTP or GPS after boot (often from 1970, with no
// real-time clock) would see every silence and interval jump by the step
// for the life of the process, every path dead at once or none ever.
//
// An instant here is the wall clock read once at process start plus the
// monotonic time since, in nanoseconds: it reads like UnixNano (a path's
// last datagram at 1.8e18) and moves only with the monotonic clock. A
// time.Time without a monotonic reading (time.Unix, a parsed or rounded
// time, as tests build them) gives its own UnixNano, so synthetic times
// keep their meaning.
package monoclock

import "time"

// base is the process's reference instant; baseNs its wall-clock reading.
var (
	base   = time.Now()
	baseNs = base.UnixNano()
)

// Nanos returns t in nanoseconds on the process clock: base's Unix time
// plus t's monotonic distance from base. For a t without a monotonic
// reading it is t.UnixNano().
func Nanos(t time.Time) int64 { return baseNs + int64(t.Sub(base)) }

// Micros returns [Nanos] in microseconds, the unit of bondd's wire
// timestamps (tunnel.Header.Timestamp).
func Micros(t time.Time) int64 { return Nanos(t) / 1e3 }

// Now returns Nanos(time.Now()).
func Now() int64 { return Nanos(time.Now()) }

// Time returns the instant ns (as given by [Nanos]) as a time.Time that
// carries a monotonic reading, so that comparisons with time.Now() use the
// monotonic clock. Time(Nanos(t)) equals t as an instant.
func Time(ns int64) time.Time { return base.Add(time.Duration(ns - baseNs)) }
