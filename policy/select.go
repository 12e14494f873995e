package policy

import (
	"time"

	"github.com/bondd/bondd/rules"
)

// Scratch is the working space of Select, sized by Grow to the number of
// paths. One per calling goroutine; the zero value is ready.
type Scratch struct {
	subset []*Path
	index  []int
	out    []int
}

// Grow makes room for n paths. It allocates only when n grows.
func (s *Scratch) Grow(n int) {
	if cap(s.subset) < n {
		s.subset, s.index, s.out = make([]*Path, 0, n), make([]int, 0, n), make([]int, n)
	}
}

// Select applies a packet's directive around the base picker and writes the
// chosen path indexes into out, returning how many (0: no usable path).
// It acts on two actions (MoMQ §3, "Scheduling pipeline"):
//
//   - prefer: the first preference (most important first) that some usable
//     path's labels match restricts the choice to the matching paths; when
//     no usable path matches any preference, the choice is base's over all
//     paths (a preference is advice, delivery never blocks on it);
//   - duplicate n: the packet goes on up to n distinct usable paths, base's
//     choice first, then the others by earliest expected delivery.
//
// A nil directive, or one without these fields, is base.Pick. Usable means
// ACTIVE, or DEGRADED when no path is ACTIVE. Select does not allocate once
// sc has grown; out needs room for len(paths) entries.
func Select(base Picker, dir *rules.Directive, paths []*Path, now time.Time, out []int, sc *Scratch) int {
	if dir == nil || !dir.Fields.Has(rules.FieldPreferences) && dir.Duplicate <= 1 {
		return base.Pick(paths, now, out)
	}
	sc.Grow(len(paths))
	usable := StatusActive
	if !anyWithStatus(paths, now, StatusActive) {
		usable = StatusDegraded
	}
	// prefer: the first preference some usable path matches.
	k := 0
	if dir.Fields.Has(rules.FieldPreferences) {
		for _, pref := range dir.PreferenceList() {
			sc.subset, sc.index = sc.subset[:0], sc.index[:0]
			for i, p := range paths {
				if v, ok := p.Labels[pref.Key]; ok && v == pref.Value && p.Status(now) == usable {
					sc.subset, sc.index = append(sc.subset, p), append(sc.index, i)
				}
			}
			if len(sc.subset) == 0 {
				continue
			}
			if n := base.Pick(sc.subset, now, sc.out); n > 0 {
				for j := range n {
					out[j] = sc.index[sc.out[j]]
				}
				k = n
			}
			break
		}
	}
	if k == 0 {
		k = base.Pick(paths, now, out)
	}
	// duplicate: add the best other usable paths until n.
	for want := min(int(dir.Duplicate), len(paths)); k > 0 && k < want; k++ {
		best := -1
		for i, p := range paths {
			if p.Status(now) != usable || contains(out[:k], i) {
				continue
			}
			if best < 0 || p.ExpectedDelivery() < paths[best].ExpectedDelivery() {
				best = i
			}
		}
		if best < 0 {
			break
		}
		out[k] = best
	}
	return k
}

func anyWithStatus(paths []*Path, now time.Time, st Status) bool {
	for _, p := range paths {
		if p.Status(now) == st {
			return true
		}
	}
	return false
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
