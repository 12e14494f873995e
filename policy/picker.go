package policy

import "time"

// A Picker chooses the path(s) for one packet. Pick writes the indexes (into
// paths) of the chosen paths into out and returns how many it wrote; 0 means
// no path can take the packet. out must have room for len(paths) entries.
// Pickers are called from one goroutine per bond and must not allocate.
type Picker interface {
	Pick(paths []*Path, now time.Time, out []int) int
}

// LowestRTT sends each packet on the ACTIVE path with the lowest smoothed RTT
// that has send-queue room; failing that, on the DEGRADED path with the
// lowest RTT that has room; failing that, on the best connected path even
// though its queue is full (the queue then drops its oldest packet). It is the
// interim default until rule-driven selection lands.
type LowestRTT struct{}

// Pick implements [Picker].
func (LowestRTT) Pick(paths []*Path, now time.Time, out []int) int {
	best, bestFull := -1, -1
	var bestKey, bestFullKey pathKey
	for i, p := range paths {
		st := p.Status(now)
		if st == StatusUnavailable {
			continue
		}
		k := pathKey{status: st, srtt: p.SmoothedRTT()}
		if p.HasRoom() {
			if best < 0 || k.better(bestKey) {
				best, bestKey = i, k
			}
		} else if bestFull < 0 || k.better(bestFullKey) {
			bestFull, bestFullKey = i, k
		}
	}
	if best < 0 {
		best = bestFull
	}
	if best < 0 {
		return 0
	}
	out[0] = best
	return 1
}

type pathKey struct {
	status Status
	srtt   time.Duration
}

// better orders by status (ACTIVE first), then by smoothed RTT; an RTT of 0
// (no sample yet) sorts after any measured RTT.
func (a pathKey) better(b pathKey) bool {
	if a.status != b.status {
		return a.status > b.status
	}
	if (a.srtt == 0) != (b.srtt == 0) {
		return a.srtt != 0
	}
	return a.srtt < b.srtt
}
