package emu

import (
	"fmt"
	"math"
)

// ScaleCapacity returns a copy of c whose bottleneck carries f times the
// capacity at every instant, 0 < f ≤ 1 for a Mahimahi trace (other
// bottlenecks take any f > 0): a constant Rate and each interval of a
// Series' Rate are multiplied by f; a Mahimahi trace keeps, of every
// 1/f of its delivery opportunities, one (opportunity i stays when
// ⌊(i+1)·f⌋ > ⌊i·f⌋, and the last one always, so the trace's period and
// the timing of its dips and outages are unchanged). A byte limit of the
// queue (QueueBytes, or DefaultQueueBytes when neither limit is set)
// scales with the rate, down to two full-size packets, so that the queue
// holds the same time; QueueDelay, delay, loss and outages are kept. The
// copy shares nothing that it changed with c; an f of 1 returns c as it is.
//
// It returns an error wrapping [ErrInvalidConfig] when f is out of range
// or c is not valid.
//
// A bed scaled down by f carries the same scenario at f times the packet
// rate: on a host whose CPU cannot forward the real rate, it measures the
// bond rather than the host.
func (c LinkConfig) ScaleCapacity(f float64) (LinkConfig, error) {
	if err := c.Validate(); err != nil {
		return c, err
	}
	if !(f > 0) || math.IsInf(f, 1) {
		return c, invalidf("capacity scale %v must be positive and finite", f)
	}
	if f == 1 {
		return c, nil
	}
	kind, _ := c.bottleneck()
	if kind == bnNone {
		return c, nil // no bottleneck: nothing to scale
	}
	switch {
	case c.QueueBytes > 0:
		c.QueueBytes = max(int(float64(c.QueueBytes)*f), 2*MahimahiOpportunityBytes)
	case c.QueueDelay == 0:
		c.QueueBytes = max(int(float64(DefaultQueueBytes)*f), 2*MahimahiOpportunityBytes)
	}
	switch kind {
	case bnRate:
		c.Rate = BitRate(float64(c.Rate) * f)
	case bnMahimahi:
		if f > 1 {
			return c, invalidf("capacity scale %v of mahimahi trace %s must be at most 1", f, c.Mahimahi.Name)
		}
		ops := c.Mahimahi.Opportunities
		kept := make([]uint32, 0, int(float64(len(ops))*f)+1)
		for i, o := range ops {
			if int64(float64(i+1)*f) > int64(float64(i)*f) || i == len(ops)-1 {
				kept = append(kept, o)
			}
		}
		c.Mahimahi = &MahimahiTrace{Name: fmt.Sprintf("%s×%g", c.Mahimahi.Name, f), Opportunities: kept}
	}
	if c.Series != nil && len(c.Series.Rate) > 0 {
		s := *c.Series
		s.Rate = make([]BitRate, len(c.Series.Rate))
		for i, r := range c.Series.Rate {
			s.Rate[i] = BitRate(float64(r) * f)
		}
		c.Series = &s
	}
	return c, nil
}

// ScaleCapacity returns a copy of s whose every link's capacity is scaled
// by f (see [LinkConfig.ScaleCapacity]); the paths' names and labels are
// kept. It returns the first link's error, naming the path.
func (s Scenario) ScaleCapacity(f float64) (Scenario, error) {
	if !(f > 0) || math.IsInf(f, 1) {
		return s, invalidf("capacity scale %v must be positive and finite", f)
	}
	if f == 1 {
		return s, nil
	}
	paths := make([]PathModel, len(s.Paths))
	for i, p := range s.Paths {
		var err error
		if p.Up, err = p.Up.ScaleCapacity(f); err != nil {
			return s, fmt.Errorf("path %s up: %w", p.Name, err)
		}
		if p.Down, err = p.Down.ScaleCapacity(f); err != nil {
			return s, fmt.Errorf("path %s down: %w", p.Name, err)
		}
		paths[i] = p
	}
	s.Paths = paths
	return s, nil
}
