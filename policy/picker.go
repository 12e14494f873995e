package policy

import "time"

// A Picker chooses the path(s) for one packet. Pick writes the indexes (into
// paths) of the chosen paths into out and returns how many it wrote; 0 means
// no path can take the packet. out must have room for len(paths) entries.
// Pickers are called from one goroutine per bond and must not allocate.
type Picker interface {
	Pick(paths []*Path, now time.Time, out []int) int
}

// LowestRTT sends each packet on the ACTIVE path with the lowest expected
// one-way delay (half the minimum RTT plus the standing queue the smoothed
// RTT shows) whose congestion window has room (queued plus in-flight bytes
// below cwnd) and whose bottleneck is not Saturated, so a path's queues do
// not grow while another path could send at once. When no path has room it
// picks the path with the earliest expected delivery
// (Path.ExpectedDelivery), which spreads a load above any one path's rate
// in proportion to the paths' rates. DEGRADED paths are used only when no
// path is ACTIVE, with one exception: when no ACTIVE path has room, a
// path DEGRADED only for its receiver-seen loss
// (ReasonLoss) that has room takes the packet if its expected delivery,
// the loss penalty included, is earlier than the ACTIVE paths' (lossyRoom):
// a bond carries the sum of its links, and a packet sent where it may be
// lost beats one that waits in a full queue until it expires. A path losing
// 50 % is charged one DefaultLossPenalty (250 ms) more, about a full queue's
// wait, so unprotected packets still keep off it while a clean path can
// take them in time. Rate-controlled paths (pathrate.go) are ranked by
// expected delivery, loss included. It is the default scheduler
// (SchedulerLowestRTT), the base choice under the rules (Select).
type LowestRTT struct{}

// Pick implements [Picker].
func (LowestRTT) Pick(paths []*Path, now time.Time, out []int) int {
	for _, want := range [...]Status{StatusActive, StatusDegraded} {
		best, bestEDT := -1, -1
		var bestDelivery time.Duration
		for i, p := range paths {
			if p.Status(now) != want {
				continue
			}
			if p.HasWindow() && !p.Saturated() && p.HasRoom() && (best < 0 || pickLess(p, paths[best], now)) {
				best = i
			}
			if d := p.expectedDeliveryAt(now); bestEDT < 0 || d < bestDelivery {
				bestEDT, bestDelivery = i, d
			}
		}
		if best < 0 && want == StatusActive && bestEDT >= 0 {
			best = lossyRoom(paths, now, bestDelivery)
		}
		if best < 0 {
			best = bestEDT
		}
		if best >= 0 {
			out[0] = best
			return 1
		}
	}
	return 0
}

// lossyRoom returns the path DEGRADED only for its receiver-seen loss
// (ReasonLoss; not silent, not SUSPECT, not short of byte budget) that has
// room and the earliest expected delivery, loss included, if that is
// earlier than `than` (the best ACTIVE path's); else -1. Silence and
// suspicion are checked here (unheard), not through StatusReason, which
// names loss first for a path that is lossy and silent at once: a silent
// path may be dead, and what it is sent keeps its loss estimate fresh.
func lossyRoom(paths []*Path, now time.Time, than time.Duration) int {
	best := -1
	for i, p := range paths {
		if !p.up() || !p.LossDegradedAt(now) || p.unheard(now) || p.BudgetExhausted(now) ||
			!p.HasWindow() || p.Saturated() || !p.HasRoom() {
			continue
		}
		if d := p.expectedDeliveryAt(now); d < than {
			best, than = i, d
		}
	}
	return best
}

// rttLess orders smoothed RTTs, with 0 (no sample yet) after any sample.
func rttLess(a, b time.Duration) bool {
	if (a == 0) != (b == 0) {
		return a != 0
	}
	return a < b
}
