package policy

// FEC block placement. Paper 1 (§5, discussion) explains part of its p95
// gain by delay masking: when a block's packets travel on different
// paths, parity arriving over a fast path rebuilds data still delayed on a
// slow one. Whether that can happen depends on where a block's packets go,
// which paper 1 leaves to the scheduler. Two placements make it likelier;
// each is a configuration (fec.placement), never a silent change:
//
//   - rate: a block's data packets are spread over the usable paths in
//     proportion to each path's rate (RateSpread), so every block has
//     packets on several paths;
//   - earliest: each parity packet goes to the usable path with the
//     earliest expected delivery, and among paths about as early, to the
//     one carrying the fewest of the block's packets (ParityPath), so
//     parity arrives ahead of late data without sharing its fate.

import (
	"fmt"
	"sync"
	"time"
)

// Placement names (the fec.placement setting).
const (
	PlacementDefault      = ""              // data and parity through the bond's picker
	PlacementRate         = "rate"          // data (and parity) spread in proportion to path rate (RateSpread)
	PlacementEarliest     = "earliest"      // parity placed by ParityPath, data through the bond's picker
	PlacementRateEarliest = "rate+earliest" // both
)

// Placements lists the valid placement names, default first.
var Placements = []string{PlacementDefault, PlacementRate, PlacementEarliest, PlacementRateEarliest}

// ValidatePlacement returns an error naming the valid placements when s is
// not one.
func ValidatePlacement(s string) error {
	for _, p := range Placements {
		if s == p {
			return nil
		}
	}
	return fmt.Errorf("policy: unknown FEC placement %q; expected rate, earliest or rate+earliest", s)
}

// PlacementSpreadsData reports whether placement s spreads data by rate.
func PlacementSpreadsData(s string) bool { return s == PlacementRate || s == PlacementRateEarliest }

// PlacementPlacesParity reports whether placement s places parity with
// ParityPath.
func PlacementPlacesParity(s string) bool {
	return s == PlacementEarliest || s == PlacementRateEarliest
}

// PathRate returns the send rate of p, bytes/s: its target rate when it is
// rate-controlled and has one, else its congestion window per smoothed
// RTT; 0 when neither is known yet.
func PathRate(p *Path) float64 {
	if p.RateControlled() {
		if t := p.TargetRate(); t > 0 {
			return t
		}
	}
	srtt := p.SmoothedRTT()
	if srtt <= 0 {
		return 0
	}
	return float64(p.CongestionWindow()) / srtt.Seconds()
}

// RateSpread is a Picker that spreads packets over the usable paths in
// proportion to their rates (PathRate), by smooth weighted round-robin
// (the credit scheme of nginx's upstream balancer): each pick adds every
// candidate's weight to its credit, picks the largest credit and takes the
// candidates' total weight from it, so over any run of picks each
// candidate's share stays within one packet of its weight's share.
// Candidates are the paths of the best usable status (ACTIVE, else
// DEGRADED) with queue room and window room (Path.HasWindow, and not
// Path.Saturated); when none has window room, the packet goes to the path
// with the earliest expected delivery, as with LowestRTT, so that a load
// above the paths' windows does not pile into a slow path's queue. A path without a rate estimate weighs
// as the slowest that has one (1 when none has). Safe for concurrent use
// (one mutex: the TUN reader picks data, the FEC flush routine parity);
// it allocates only when the number of paths grows.
type RateSpread struct {
	mu     sync.Mutex
	credit []float64 // by path index
}

// Pick implements [Picker].
func (r *RateSpread) Pick(paths []*Path, now time.Time, out []int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.credit) != len(paths) {
		if cap(r.credit) < len(paths) {
			r.credit = make([]float64, len(paths))
		}
		r.credit = r.credit[:len(paths)]
		clear(r.credit)
	}
	for _, want := range [...]Status{StatusActive, StatusDegraded} {
		i := r.pickLocked(paths, now, want)
		if i < 0 { // no window room anywhere: the earliest expected delivery, as LowestRTT
			var best time.Duration
			for j, p := range paths {
				if p.Status(now) == want && p.HasRoom() {
					if d := p.expectedDeliveryAt(now); i < 0 || d < best {
						i, best = j, d
					}
				}
			}
		}
		if i >= 0 {
			out[0] = i
			return 1
		}
	}
	return 0
}

// candidate reports whether p may take a packet of status want now.
func candidate(p *Path, now time.Time, want Status) bool {
	return p.Status(now) == want && p.HasRoom() && p.HasWindow() && !p.Saturated()
}

// pickLocked is one round of smooth weighted round-robin over the
// candidates; -1 when there are none.
func (r *RateSpread) pickLocked(paths []*Path, now time.Time, want Status) int {
	slowest := 0.0
	for _, p := range paths {
		if x := PathRate(p); x > 0 && (slowest == 0 || x < slowest) && candidate(p, now, want) {
			slowest = x
		}
	}
	if slowest == 0 {
		slowest = 1
	}
	best, total := -1, 0.0
	for i, p := range paths {
		if !candidate(p, now, want) {
			continue
		}
		w := PathRate(p)
		if w <= 0 {
			w = slowest
		}
		r.credit[i] += w
		total += w
		if best < 0 || r.credit[i] > r.credit[best] {
			best = i
		}
	}
	if best >= 0 {
		r.credit[best] -= total
	}
	return best
}

// ParityTie is how close, in expected delivery, paths count as equally
// early for ParityPath.
const ParityTie = 5 * time.Millisecond

// ParityPath returns the index of the path for one parity packet of a
// block whose packets so far went counts[i] on path i (indexes past the
// end of counts count 0). Among the paths of the best usable status
// (ACTIVE, else DEGRADED) with queue and window room, the ones whose
// expected delivery (Path.ExpectedDelivery) is within ParityTie of the
// earliest compete, and of those the one carrying the fewest of the
// block's packets wins (then the earliest). Delivery ranks first because
// parity masks a delay only if it arrives before the late data; the count
// keeps parity off the path that carries the block when another is as
// early, so one path's loss burst does not take data and parity together.
// -1 when no path has room: the caller skips the parity rather than queue
// it behind data. The caller adds one to counts[i] before placing the
// block's next parity packet, so r parity packets spread over equally
// early paths. Allocates nothing.
func ParityPath(paths []*Path, counts []int, now time.Time) int {
	count := func(i int) int {
		if i < len(counts) {
			return counts[i]
		}
		return 0
	}
	for _, want := range [...]Status{StatusActive, StatusDegraded} {
		earliest, found := time.Duration(0), false
		for _, p := range paths {
			if candidate(p, now, want) {
				if d := p.expectedDeliveryAt(now); !found || d < earliest {
					earliest, found = d, true
				}
			}
		}
		if !found {
			continue
		}
		best := -1
		var bestD time.Duration
		for i, p := range paths {
			if !candidate(p, now, want) {
				continue
			}
			d := p.expectedDeliveryAt(now)
			if d > earliest+ParityTie {
				continue
			}
			if best < 0 || count(i) < count(best) || count(i) == count(best) && d < bestD {
				best, bestD = i, d
			}
		}
		return best
	}
	return -1
}
