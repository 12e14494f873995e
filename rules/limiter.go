package rules

import (
	"sync"
	"time"
)

// InstallLimiter bounds how often a peer may install rules: a token bucket
// holding MaxInstallsPerSecond tokens, refilled at MaxInstallsPerSecond per
// second, which starts full (MoMQ Table 8: "adapts rules to path changes,
// defeats flooding"). Each rule operation a peer sends (one
// PATH_MAPPING_RULE INSTALL or REMOVE) takes one token; an operation that
// finds none is answered REJECTED and changes nothing, and the session goes
// on. Local reloads of the rule file are not limited.
//
// The zero value is ready to use; keep one per session. Safe for
// concurrent use; it never blocks.
type InstallLimiter struct {
	mu       sync.Mutex
	tokens   float64   // available installs, ≤ MaxInstallsPerSecond
	last     time.Time // when tokens was last refilled; zero: never used
	rejected uint64
}

// Allow reports whether an install may proceed now, taking a token if so.
func (l *InstallLimiter) Allow() bool { return l.AllowAt(time.Now()) }

// AllowAt is Allow at time now (monotonic clock readings compare best).
// Times that go backwards refill nothing.
func (l *InstallLimiter) AllowAt(now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last.IsZero() {
		l.tokens, l.last = MaxInstallsPerSecond, now
	} else if dt := now.Sub(l.last); dt > 0 {
		l.tokens = min(MaxInstallsPerSecond, l.tokens+dt.Seconds()*MaxInstallsPerSecond)
		l.last = now
	}
	if l.tokens < 1 {
		l.rejected++
		return false
	}
	l.tokens--
	return true
}

// Rejected returns how many installs AllowAt refused.
func (l *InstallLimiter) Rejected() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rejected
}
