package emu

import "time"

// CapacityBits returns how many bits the bottleneck of a link built from
// cfg with NewLink(cfg, seed) can serve during model time [from, to): the
// capacity of its Rate, Mahimahi trace or Series rate over that window,
// with TraceOffset applied, less what falls inside its Outages (a link in
// an outage carries nothing). Random loss does not reduce it: loss drops
// packets the link could have carried.
//
//   - Rate: Rate × (to − from).
//   - Mahimahi: the delivery opportunities at trace times in
//     (from + offset, to + offset] (a packet arriving at t uses only
//     opportunities after t, as in mm-link), × 1500 bytes × 8.
//   - Series: Σ over intervals of rate × the part of the window inside the
//     interval (the fluid rate server of Link).
//
// WallClock is not applied: for a link behind a Relay, pass the config the
// relay used (see [RelayLinkSeed]) or a config without WallClock. It
// returns an error wrapping [ErrInvalidConfig] for an invalid cfg, a
// window with to < from or from < 0, or a link without a capacity source
// (its capacity is unbounded).
func CapacityBits(cfg LinkConfig, seed uint64, from, to time.Duration) (float64, error) {
	if err := cfg.Validate(); err != nil {
		return 0, err
	}
	if from < 0 || to < from {
		return 0, invalidf("capacity window [%v, %v) is not a window of model time", from, to)
	}
	kind, _ := cfg.bottleneck()
	if kind == bnNone {
		return 0, invalidf("link has no capacity source: its capacity is unbounded")
	}
	bits := rawCapacityBits(&cfg, kind, from, to)
	if cfg.Outages != nil {
		o := cfg.Outages.withDefaults()
		for _, w := range o.windows(seed, max(0, from-o.Max), to) {
			s, e := max(w.Start, from), min(w.Start+w.Duration, to)
			if e > s {
				bits -= rawCapacityBits(&cfg, kind, s, e)
			}
		}
	}
	return max(bits, 0), nil
}

// CapacityMbps returns CapacityBits over [from, to) as a mean rate in
// Mbit/s (0 for an empty window).
func CapacityMbps(cfg LinkConfig, seed uint64, from, to time.Duration) (float64, error) {
	bits, err := CapacityBits(cfg, seed, from, to)
	if err != nil || to <= from {
		return 0, err
	}
	return bits / (to - from).Seconds() / 1e6, nil
}

// RelayLinkSeed returns the seed a [Relay] created with Options.Seed =
// relaySeed gives the first model of direction dir (NewLink's seed), so
// that [CapacityBits] sees the same outage windows as the relay's link.
func RelayLinkSeed(relaySeed uint64, dir Direction) uint64 {
	return relayLinkSeed(relaySeed, dir, 0)
}

// rawCapacityBits is the bottleneck's capacity over [from, to), outages
// not subtracted.
func rawCapacityBits(cfg *LinkConfig, kind bottleneckKind, from, to time.Duration) float64 {
	switch kind {
	case bnRate:
		return float64(cfg.Rate) * (to - from).Seconds()
	case bnMahimahi:
		m := cfg.Mahimahi
		n := m.firstAfter(to+cfg.TraceOffset) - m.firstAfter(from+cfg.TraceOffset)
		return float64(n) * MahimahiOpportunityBytes * 8
	case bnSeries:
		s := cfg.Series
		var bits float64
		for t := from + cfg.TraceOffset; t < to+cfg.TraceOffset; {
			k := int64(t / s.Interval)
			end := min(time.Duration(k+1)*s.Interval, to+cfg.TraceOffset)
			bits += float64(s.Rate[int(k%int64(s.Len()))]) * (end - t).Seconds()
			t = end
		}
		return bits
	}
	return 0
}
