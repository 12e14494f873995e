package policy

import (
	"fmt"
	"time"

	"github.com/bondd/bondd/rules"
)

// The LEO reconfiguration marker (MoMQ §4.1, rule R2): Starlink reassigns
// satellites on a constellation-wide clock, at seconds 12, 27, 42 and 57 of
// every UTC minute; the outages that follow last 22–172 ms, median 58 ms,
// and 88 % end within 100 ms (MoMQ §4.1 F3–F4, appendix A.4). A path
// configured with a marker is inside a danger zone for Window either side
// of each scheduled second, on the local clock and with no signalling.

// defaultLEOSeconds are Starlink's reconfiguration seconds of each UTC
// minute (MoMQ §4.1, F3).
var defaultLEOSeconds = [...]int{12, 27, 42, 57}

// DefaultLEOSeconds returns Starlink's reconfiguration seconds of each UTC
// minute, 12, 27, 42 and 57 (MoMQ §4.1, F3), in a new slice.
func DefaultLEOSeconds() []int { return append([]int(nil), defaultLEOSeconds[:]...) }

// DefaultLEOWindow is the half-width of a danger zone: ±100 ms around each
// scheduled second (MoMQ §4.1, R2).
const DefaultLEOWindow = 100 * time.Millisecond

// MaxLEOWindow bounds LEOReconf.Window: 7.5 s either side fills the
// 15-second Starlink cycle.
const MaxLEOWindow = 7500 * time.Millisecond

// DefaultLEOHold is how long after each scheduled second a path with a
// marker holds its frames by default: 100 ms, the end of 88 % of the
// outages (MoMQ §4.1, F4; median 58 ms).
const DefaultLEOHold = 100 * time.Millisecond

// MaxLEOHold bounds LEOReconf.Hold: a frame waits at most the send
// queue's 200 ms by default, so a longer hold only expires frames.
const MaxLEOHold = time.Second

// LEOHoldLead is how long before each scheduled second the hold begins:
// a datagram handed to QUIC just before the second may leave after it.
const LEOHoldLead = 10 * time.Millisecond

// LEOReconf is a LEO reconfiguration schedule: the path is in a danger zone
// whenever the UTC clock is within Window of one of Seconds of a minute.
// The zero value is the Starlink schedule. Read-only once attached to a
// path with [Path.SetLEOReconf].
type LEOReconf struct {
	// Seconds are the scheduled seconds of each UTC minute, each 0 to 59.
	// Empty: DefaultLEOSeconds().
	Seconds []int
	// Window is the half-width of each danger zone, 1 ms to MaxLEOWindow.
	// Zero: DefaultLEOWindow.
	Window time.Duration
	// Hold is how long after each scheduled second the path holds the
	// frames queued on it rather than send them into the outage that
	// follows (they wait in its send queue, where their deadlines act,
	// and the pickers count the rest of the hold in the path's expected
	// delivery, so new packets go to another path that delivers
	// earlier); the hold begins LEOHoldLead before the second. Zero: DefaultLEOHold; negative: no
	// hold. At most MaxLEOHold.
	Hold time.Duration
}

// Validate reports a second outside 0–59 or listed twice, a window
// outside 0 (the default) or 1 ms to MaxLEOWindow, or a Hold above
// MaxLEOHold.
func (l LEOReconf) Validate() error {
	var seen [60]bool
	for _, s := range l.Seconds {
		if s < 0 || s > 59 {
			return fmt.Errorf("policy: LEO reconfiguration second %d is outside 0..59", s)
		}
		if seen[s] {
			return fmt.Errorf("policy: LEO reconfiguration second %d is listed twice", s)
		}
		seen[s] = true
	}
	if l.Window != 0 && (l.Window < time.Millisecond || l.Window > MaxLEOWindow) {
		return fmt.Errorf("policy: LEO danger-zone window %v is outside 1ms..%v", l.Window, MaxLEOWindow)
	}
	if l.Hold > MaxLEOHold {
		return fmt.Errorf("policy: LEO hold %v is above %v", l.Hold, MaxLEOHold)
	}
	return nil
}

// HoldFor returns how much longer, from now (UTC), a path with this
// schedule holds its frames: the rest of the span from LEOHoldLead before
// a scheduled second to Hold after it, or 0 outside every such span (and
// always with a negative Hold). It does not allocate.
func (l *LEOReconf) HoldFor(now time.Time) time.Duration {
	hold := l.Hold
	switch {
	case hold < 0:
		return 0
	case hold == 0:
		hold = DefaultLEOHold
	}
	const minute = int64(time.Minute)
	t := now.UnixNano() % minute
	if t < 0 {
		t += minute
	}
	secs := l.Seconds
	if len(secs) == 0 {
		secs = defaultLEOSeconds[:]
	}
	for _, s := range secs {
		d := t - int64(s)*int64(time.Second) // time since the second, wrapped into (-30 s, 30 s]
		switch {
		case d > minute/2:
			d -= minute
		case d <= -minute/2:
			d += minute
		}
		if d >= -int64(LEOHoldLead) && d < int64(hold) {
			return time.Duration(int64(hold) - d)
		}
	}
	return 0
}

// Active reports whether now (UTC; Unix time has no leap seconds, so
// seconds of the minute are Unix seconds mod 60) is within Window of one of
// the scheduled seconds, wrapping around the minute. It does not allocate.
func (l *LEOReconf) Active(now time.Time) bool {
	const minute = int64(time.Minute)
	w := int64(l.Window)
	if w == 0 {
		w = int64(DefaultLEOWindow)
	}
	secs := l.Seconds
	if len(secs) == 0 {
		secs = defaultLEOSeconds[:]
	}
	t := now.UnixNano() % minute
	if t < 0 {
		t += minute
	}
	for _, s := range secs {
		d := t - int64(s)*int64(time.Second)
		switch {
		case d > minute/2:
			d -= minute
		case d < -minute/2:
			d += minute
		}
		if d >= -w && d <= w {
			return true
		}
	}
	return false
}

// SetLEOReconf attaches a reconfiguration marker to the path, or removes it
// with nil. l is copied (its Seconds slice is shared and must not change).
// Safe for concurrent use.
func (p *Path) SetLEOReconf(l *LEOReconf) {
	if l == nil {
		p.leo.Store(nil)
		return
	}
	c := *l
	p.leo.Store(&c)
}

// LEOHold returns how much longer, from now, the path holds its frames
// around a scheduled reconfiguration ([LEOReconf.HoldFor]); 0 without a
// marker. Allocation-free.
func (p *Path) LEOHold(now time.Time) time.Duration {
	l := p.leo.Load()
	if l == nil {
		return 0
	}
	return l.HoldFor(now)
}

// LEOReconf returns the path's reconfiguration marker, or nil.
func (p *Path) LEOReconf() *LEOReconf { return p.leo.Load() }

// InLEOReconf reports whether the path has a reconfiguration marker and now
// is inside one of its danger zones.
func (p *Path) InLEOReconf(now time.Time) bool {
	l := p.leo.Load()
	return l != nil && l.Active(now)
}

// LEOState returns the leo_state annotation for a packet about to be
// scheduled at now (MoMQ §4.1, R2): rules.LEOReconf when any connected path
// (not UNAVAILABLE) that carries a reconfiguration marker is inside its
// danger zone, rules.LEONone otherwise.
//
// MoMQ's marker annotates the satellite path, but a rule is evaluated per
// packet before a path is chosen, so the annotation cannot be per path:
// bondd raises it bond-wide while any marked path is in danger, which is
// what R2 needs (an I-frame inside a danger zone prefers the metered path
// over whichever path is reconfiguring). A marked path that is down raises
// nothing: no packet would go there anyway.
func LEOState(paths []*Path, now time.Time) rules.LEOState {
	for _, p := range paths {
		if p.InLEOReconf(now) && p.LinkStatus(now) != StatusUnavailable {
			return rules.LEOReconf
		}
	}
	return rules.LEONone
}

// inLEOWindow reports whether the interval the report covers, placed on
// the sender's clock as [now − length − sRTT, now], touches a
// reconfiguration window or the hold after a scheduled second
// (LEOReconf.HoldFor; a hold longer than the window leaves a gap in the
// delivery that is the sender's, not the link's). It samples the span at
// the shorter of the window's half-width and the hold's whole span
// (LEOHoldLead + Hold, at least 10 ms, so a sub-ms Hold costs no more).
func (e *RateEstimator) inLEOWindow(now time.Time, length, srtt time.Duration) bool {
	l := e.cfg.LEO
	if l == nil {
		return false
	}
	step := l.Window
	if step <= 0 {
		step = DefaultLEOWindow
	}
	if l.Hold > 0 {
		step = min(step, LEOHoldLead+l.Hold)
	}
	in := func(t time.Time) bool { return l.Active(t) || l.HoldFor(t) > 0 }
	from := now.Add(-length - srtt)
	for t := from; t.Before(now); t = t.Add(step) {
		if in(t) {
			return true
		}
	}
	return in(now)
}
