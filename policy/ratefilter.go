package policy

import "time"

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
