package policy

import (
	"fmt"
	"sync/atomic"
	"time"
)

// Baseline schedulers, selectable for comparison with the rule-driven
// default. Each considers ACTIVE paths first and falls back to DEGRADED
// ones only when none is ACTIVE, like LowestRTT.

// RoundRobin sends packet i on the (i mod n)-th usable path, skipping paths
// whose send queue is full. It is safe for concurrent use.
type RoundRobin struct{ next atomic.Uint64 }

// Pick implements [Picker].
func (r *RoundRobin) Pick(paths []*Path, now time.Time, out []int) int {
	for _, want := range [...]Status{StatusActive, StatusDegraded} {
		n := uint64(len(paths))
		start := r.next.Add(1) - 1
		for j := range n {
			i := int((start + j) % n)
			if p := paths[i]; p.Status(now) == want && p.HasRoom() {
				out[0] = i
				return 1
			}
		}
	}
	return 0
}

// MinRTT sends each packet on the usable path with the lowest smoothed RTT
// whose congestion window has room, and otherwise on the lowest-RTT path
// regardless: the Linux MPTCP default scheduler (Paasch et al., "Experimental
// evaluation of multipath TCP schedulers", CSWS 2014). Unlike LowestRTT it
// never spreads a load that exceeds the fast path's window by expected
// delivery time; packets queue behind the fast path instead.
type MinRTT struct{}

// Pick implements [Picker].
func (MinRTT) Pick(paths []*Path, now time.Time, out []int) int {
	for _, want := range [...]Status{StatusActive, StatusDegraded} {
		best, bestAny := -1, -1
		for i, p := range paths {
			if p.Status(now) != want {
				continue
			}
			if p.HasWindow() && p.HasRoom() && (best < 0 || baselineLess(p, paths[best], now)) {
				best = i
			}
			if bestAny < 0 || baselineLess(p, paths[bestAny], now) {
				bestAny = i
			}
		}
		if best < 0 {
			best = bestAny
		}
		if best >= 0 {
			out[0] = best
			return 1
		}
	}
	return 0
}

// BLEST is the blocking-estimation scheduler of Ferlin et al., "BLEST:
// Blocking Estimation-based MPTCP Scheduler for Heterogeneous Networks" (IFIP
// Networking 2016), §III, applied to datagrams. The fastest path (lowest
// smoothed RTT) is used while its congestion window has room. When it has
// none, a slower path s is used only if the packet would not arrive later
// than by waiting for the fast path f: BLEST's head-of-line estimate
// X = cwnd_f · (RTT_s / RTT_f) bytes could leave on f while one packet
// crosses s; if the bytes already ahead of the packet on f, scaled by
// Lambda, fit into X, waiting for f delivers sooner and the packet stays on
// f. Lambda (the paper's λ, default 1) tunes how eagerly slow paths are
// skipped. On rate-controlled paths (pathrate.go) the estimate is the
// expected delivery time of each (DeliveryEstimate) and the fastest path
// is the one with the earliest.
type BLEST struct {
	Lambda float64
}

// Pick implements [Picker].
func (s BLEST) Pick(paths []*Path, now time.Time, out []int) int {
	lambda := s.Lambda
	if lambda == 0 {
		lambda = 1
	}
	for _, want := range [...]Status{StatusActive, StatusDegraded} {
		fast := -1
		for i, p := range paths {
			if p.Status(now) == want && (fast < 0 || baselineLess(p, paths[fast], now)) {
				fast = i
			}
		}
		if fast < 0 {
			continue
		}
		f := paths[fast]
		if f.HasWindow() && f.HasRoom() {
			out[0] = fast
			return 1
		}
		// The fastest slower path with window room, if sending on it beats waiting.
		slow := -1
		for i, p := range paths {
			if i != fast && p.Status(now) == want && p.HasWindow() && p.HasRoom() &&
				(slow < 0 || baselineLess(p, paths[slow], now)) {
				slow = i
			}
		}
		if slow >= 0 && f.RateControlled() && paths[slow].RateControlled() {
			// With rates, BLEST's estimate is the delivery time itself:
			// the slow path wins if it delivers sooner than waiting on f.
			if float64(f.expectedDeliveryAt(now))*lambda > float64(paths[slow].expectedDeliveryAt(now)) {
				out[0] = slow
				return 1
			}
		} else if slow >= 0 {
			rttF, rttS := f.SmoothedRTT(), paths[slow].SmoothedRTT()
			ahead := float64(f.QueueBytes() + f.BytesInFlight())
			if rttF <= 0 || ahead*lambda > float64(f.CongestionWindow())*float64(rttS)/float64(rttF) {
				out[0] = slow
				return 1
			}
		}
		out[0] = fast
		return 1
	}
	return 0
}

// Redundant sends every packet on every usable path (ACTIVE, or DEGRADED
// when none is ACTIVE), the "redundant" scheduler of MPTCP evaluations
// (Frömmgen et al., "ReMP TCP", 2016): the lowest latency and loss money
// can buy, at n times the traffic. The receiver drops the copies.
type Redundant struct{}

// Pick implements [Picker].
func (Redundant) Pick(paths []*Path, now time.Time, out []int) int {
	for _, want := range [...]Status{StatusActive, StatusDegraded} {
		n := 0
		for i, p := range paths {
			if p.Status(now) == want {
				out[n] = i
				n++
			}
		}
		if n > 0 {
			return n
		}
	}
	return 0
}

// Scheduler names accepted by NewPicker. A scheduler is the base choice
// of a path: the rules (a rule file) apply on top of whichever is chosen
// (Select), and no scheduler name turns them on or off.
const (
	SchedulerLowestRTT  = "lowestrtt" // LowestRTT, the default
	SchedulerRoundRobin = "roundrobin"
	SchedulerMinRTT     = "minrtt"
	SchedulerBLEST      = "blest"
	SchedulerRedundant  = "redundant"

	// SchedulerDefault is the scheduler of an empty name.
	SchedulerDefault = SchedulerLowestRTT
	// SchedulerRulesAlias, "rules", is the name earlier versions gave
	// SchedulerLowestRTT; NewPicker still accepts it, so that configs and
	// --scheduler flags written for them keep working. It does not turn
	// the rules on: a rule file does.
	SchedulerRulesAlias = "rules"
)

// Schedulers lists the names NewPicker accepts, SchedulerRulesAlias aside.
var Schedulers = []string{SchedulerLowestRTT, SchedulerRoundRobin, SchedulerMinRTT, SchedulerBLEST, SchedulerRedundant}

// NewPicker returns the picker named name ("" and SchedulerRulesAlias are
// SchedulerLowestRTT), or an error naming the choices.
func NewPicker(name string) (Picker, error) {
	switch name {
	case "", SchedulerLowestRTT, SchedulerRulesAlias:
		return LowestRTT{}, nil
	case SchedulerRoundRobin:
		return &RoundRobin{}, nil
	case SchedulerMinRTT:
		return MinRTT{}, nil
	case SchedulerBLEST:
		return BLEST{}, nil
	case SchedulerRedundant:
		return Redundant{}, nil
	}
	return nil, fmt.Errorf("policy: unknown scheduler %q; expected one of %v", name, Schedulers)
}
