package policy

import (
	"math"
	"time"

	"github.com/bondd/bondd/internal/monoclock"
)

// winMax is a windowed maximum over time, kept in three samples: the
// best, and the best of the later parts of the window (Kathleen Nichols'
// algorithm, as in Linux's lib/minmax.c, which BBR uses for max_bw). The
// zero value is empty (get returns 0); allocation-free.
type winMax struct {
	s [3]struct {
		t time.Time
		v float64
	}
}

func (m *winMax) get() float64 { return m.s[0].v }

// reset makes v at t the only sample.
func (m *winMax) reset(t time.Time, v float64) {
	for i := range m.s {
		m.s[i].t, m.s[i].v = t, v
	}
}

// update adds the sample v at t to a window of length win.
func (m *winMax) update(t time.Time, win time.Duration, v float64) {
	if v >= m.s[0].v || m.s[2].t.IsZero() || t.Sub(m.s[2].t) > win {
		m.reset(t, v)
		return
	}
	switch {
	case v >= m.s[1].v:
		m.s[1].t, m.s[1].v = t, v
		m.s[2] = m.s[1]
	case v >= m.s[2].v:
		m.s[2].t, m.s[2].v = t, v
	}
	// Age the samples out of the window (minmax_subwin_update).
	dt := t.Sub(m.s[0].t)
	switch {
	case dt > win:
		m.s[0], m.s[1] = m.s[1], m.s[2]
		m.s[2].t, m.s[2].v = t, v
		if t.Sub(m.s[0].t) > win {
			m.s[0], m.s[1] = m.s[1], m.s[2]
			m.s[2].t, m.s[2].v = t, v
		}
	case m.s[1].t.Equal(m.s[0].t) && dt > win/4:
		m.s[1].t, m.s[1].v = t, v
		m.s[2] = m.s[1]
	case m.s[2].t.Equal(m.s[1].t) && dt > win/2:
		m.s[2].t, m.s[2].v = t, v
	}
}

// sendHistLen is how many reports' sending rates sendHistory keeps, at
// least an eighth of a round trip apart (push): 0.8 s of reports at
// reportMin on a short path, two round trips on one whose queue stretched
// its sRTT to seconds (the tunnel reports every 50 ms whatever the round
// trip).
const sendHistLen = 16

// sendHistory is the sending rate of the last sendHistLen reports, so that
// what the receiver got can be set against what was sent when it left,
// about a round trip before the report came back. The zero value is
// empty; allocation-free.
type sendHistory struct {
	s [sendHistLen]struct {
		at          int64   // monoclock ns of the report
		smooth, raw float64 // bytes/s: smoothed, and the report's own
	}
	head int
}

// push records the rates of the report at now, unless the newest record is
// less than gap older.
func (h *sendHistory) push(now time.Time, smooth, raw float64, gap time.Duration) {
	if last := h.s[h.head].at; last != 0 && monoclock.Nanos(now)-last < int64(gap) {
		return
	}
	h.head = (h.head + 1) % sendHistLen
	h.s[h.head].at, h.s[h.head].smooth, h.s[h.head].raw = monoclock.Nanos(now), smooth, raw
}

// at returns the rates of the last report at or before t, or of the
// oldest one kept if all are later; smooth and raw themselves while it is
// empty.
func (h *sendHistory) at(t time.Time, smooth, raw float64) (float64, float64) {
	ns := monoclock.Nanos(t)
	for i := range sendHistLen {
		s := &h.s[(h.head-i+sendHistLen)%sendHistLen]
		if s.at == 0 {
			break
		}
		smooth, raw = s.smooth, s.raw
		if s.at <= ns {
			break
		}
	}
	return smooth, raw
}

// updateBase feeds the report's least one-way delay into the base filter,
// a sliding minimum over baseBuckets slots of the receiver clock.
func (e *RateEstimator) updateBase(r *RateReport) {
	slot := r.End / baseBucket
	switch {
	case !e.haveBase:
		e.base = [baseBuckets]int64{r.OWDMin, r.OWDMin, r.OWDMin, r.OWDMin}
		e.baseSlot, e.haveBase = slot, true
		return
	case slot > e.baseSlot:
		n := min(slot-e.baseSlot, baseBuckets)
		for range n {
			copy(e.base[1:], e.base[:baseBuckets-1])
			e.base[0] = math.MaxInt64
		}
		e.baseSlot = slot
	}
	e.base[0] = min(e.base[0], r.OWDMin)
}

func (e *RateEstimator) baseMin() int64 {
	m := e.base[0]
	for _, b := range e.base[1:] {
		m = min(m, b)
	}
	return m
}

// updateTrend adds one (arrival ms, queueing delay ms) point to the
// trendline and updates the modified trend and the adaptive threshold
// (draft-ietf-rmcat-gcc-02 §5.4; WebRTC's TrendlineEstimator).
func (e *RateEstimator) updateTrend(x, y, dtMs float64) {
	e.trendX[e.trendHead], e.trendY[e.trendHead] = x, y
	e.trendHead = (e.trendHead + 1) % trendPoints
	e.trendN = min(e.trendN+1, trendPoints)
	if e.trendN < 3 {
		e.trend = 0
		return
	}
	var sx, sy float64
	for i := range e.trendN {
		sx += e.trendX[i]
		sy += e.trendY[i]
	}
	mx, my := sx/float64(e.trendN), sy/float64(e.trendN)
	var num, den float64
	for i := range e.trendN {
		dx := e.trendX[i] - mx
		num += dx * (e.trendY[i] - my)
		den += dx * dx
	}
	if den <= 0 {
		return
	}
	e.trend = num / den * trendGainMs
	abs := math.Abs(e.trend)
	if abs-e.gamma > gammaMaxStep {
		return
	}
	k := gccKd
	if abs > e.gamma {
		k = gccKu
	}
	e.gamma += k * (abs - e.gamma) * min(dtMs, 100)
	e.gamma = min(max(e.gamma, gammaMin), gammaMax)
}
