package emu

import (
	"math"
	"time"
)

// Defaults of [Outages], from Starlink's reconfiguration pattern as given in
// the bondd design (scenario S2): the satellite schedule is reconfigured at
// seconds 12, 27, 42 and 57 of every minute, and the link goes dark for a
// median 58 ms, 22 to 172 ms.
const (
	DefaultOutagePeriod = 60 * time.Second
	DefaultOutageMedian = 58 * time.Millisecond
	DefaultOutageMin    = 22 * time.Millisecond
	DefaultOutageMax    = 172 * time.Millisecond
	// DefaultOutageSigma is the shape of the log-normal outage duration.
	// With σ = 0.45 the 1st and 99th percentiles of the unclamped
	// distribution are 58·e^(∓2.326·0.45) = 20 and 166 ms, close to the
	// reported 22–172 ms range; clamping to [Min, Max] then gives exactly
	// that range and, because Min < Median < Max, keeps the median.
	DefaultOutageSigma = 0.45
)

// DefaultOutageAt is the default list of outage start offsets within
// [DefaultOutagePeriod]: seconds 12, 27, 42 and 57 of a minute.
var DefaultOutageAt = []time.Duration{12 * time.Second, 27 * time.Second, 42 * time.Second, 57 * time.Second}

// Outages schedules periodic link outages, such as Starlink's satellite
// reconfigurations. During an outage every packet that arrives is dropped
// (counted as an outage drop). The zero value is the Starlink pattern.
//
// Window i of cycle c starts at model time c·Period + At[i] − Phase and
// lasts either Durations[(c·len(At)+i) mod len(Durations)] when Durations is
// set (durations "taken from a trace"), or a draw from a log-normal
// distribution with median Median and shape Sigma, clamped to [Min, Max].
// The draw depends only on the seed, c and i, not on the traffic.
type Outages struct {
	// Period is the length of one cycle. Default 60 s.
	Period time.Duration
	// At lists the outage start offsets within a cycle, each in
	// [0, Period). Default [DefaultOutageAt].
	At []time.Duration
	// Phase is the position within the cycle at model time 0, in
	// [0, Period): with Phase = 10 s the first outage (At = 12 s) starts at
	// model time 2 s. LinkConfig.WallClock sets it from the UTC clock.
	Phase time.Duration
	// Median, Min and Max shape the drawn durations. Defaults 58, 22 and
	// 172 ms. Need Min ≤ Median ≤ Max ≤ Period.
	Median, Min, Max time.Duration
	// Sigma is the log-normal shape σ (of ln duration). Default 0.45 (see
	// [DefaultOutageSigma]); a negative value means 0 (always Median).
	Sigma float64
	// Durations, when non-empty, replaces the drawn durations by this list,
	// used in order and repeated. Each must be in [0, Period].
	Durations []time.Duration
}

func (o Outages) withDefaults() Outages {
	if o.Period == 0 {
		o.Period = DefaultOutagePeriod
	}
	if len(o.At) == 0 {
		o.At = DefaultOutageAt
	}
	if o.Median == 0 {
		o.Median = DefaultOutageMedian
	}
	if o.Min == 0 {
		o.Min = min(DefaultOutageMin, o.Median)
	}
	if o.Max == 0 {
		o.Max = max(DefaultOutageMax, o.Median)
	}
	if o.Sigma == 0 {
		o.Sigma = DefaultOutageSigma
	}
	if o.Sigma < 0 {
		o.Sigma = 0
	}
	return o
}

func (o Outages) validate() error {
	if o.Period <= 0 {
		return invalidf("outage period %v must be positive", o.Period)
	}
	for _, a := range o.At {
		if a < 0 || a >= o.Period {
			return invalidf("outage start %v outside [0, period %v)", a, o.Period)
		}
	}
	if o.Phase < 0 || o.Phase >= o.Period {
		return invalidf("outage phase %v outside [0, period %v)", o.Phase, o.Period)
	}
	if o.Min < 0 || o.Min > o.Median || o.Median > o.Max || o.Max > o.Period {
		return invalidf("outage durations need 0 ≤ min ≤ median ≤ max ≤ period, have %v, %v, %v, %v", o.Min, o.Median, o.Max, o.Period)
	}
	if math.IsNaN(o.Sigma) || math.IsInf(o.Sigma, 0) {
		return invalidf("outage sigma %v", o.Sigma)
	}
	for _, d := range o.Durations {
		if d < 0 || d > o.Period {
			return invalidf("outage duration %v outside [0, period %v]", d, o.Period)
		}
	}
	return nil
}

// duration returns the length of window i of cycle c.
func (o *Outages) duration(seed uint64, c int64, i int) time.Duration {
	k := c*int64(len(o.At)) + int64(i)
	if n := int64(len(o.Durations)); n > 0 {
		return o.Durations[((k%n)+n)%n]
	}
	d := time.Duration(float64(o.Median) * math.Exp(o.Sigma*hashNormal(seed, streamOutage, k)))
	return min(max(d, o.Min), o.Max)
}

// in reports whether model time t falls inside an outage window. o must
// have its defaults applied.
func (o *Outages) in(seed uint64, t time.Duration) bool {
	pos := t + o.Phase
	c := int64(pos / o.Period)
	p := pos - time.Duration(c)*o.Period
	for i, a := range o.At {
		if p >= a && p < a+o.duration(seed, c, i) {
			return true
		}
		// A window of the previous cycle may spill over the cycle boundary.
		if c > 0 && p+o.Period < a+o.duration(seed, c-1, i) {
			return true
		}
	}
	return false
}

// Window is one outage interval in model time: [Start, Start+Duration).
type Window struct {
	Start    time.Duration
	Duration time.Duration
}

// windows lists the windows that start in [from, to), in order.
func (o *Outages) windows(seed uint64, from, to time.Duration) []Window {
	var out []Window
	if to <= from {
		return out
	}
	c0 := int64((from + o.Phase) / o.Period)
	for c := max(c0-1, 0); ; c++ {
		base := time.Duration(c)*o.Period - o.Phase
		if base >= to {
			break
		}
		for i, a := range o.At {
			s := base + a
			if s >= from && s < to {
				out = append(out, Window{Start: s, Duration: o.duration(seed, c, i)})
			}
		}
	}
	sortWindows(out)
	return out
}

func sortWindows(w []Window) {
	for i := 1; i < len(w); i++ {
		for j := i; j > 0 && w[j].Start < w[j-1].Start; j-- {
			w[j], w[j-1] = w[j-1], w[j]
		}
	}
}
