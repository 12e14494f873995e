package policy

import (
	"time"

	"github.com/bondd/bondd/rules"
)

// Scratch is the working space of Select, sized by Grow to the number of
// paths, and the affinity history it keeps. One per calling goroutine; the
// zero value is ready.
type Scratch struct {
	subset []*Path
	index  []int
	out    []int
	hist   *History // allocated by the first Grow
}

// Grow makes room for n paths. It allocates only when n grows, and the
// affinity history (about 16 KiB) on its first call.
func (s *Scratch) Grow(n int) {
	if cap(s.subset) < n {
		s.subset, s.index, s.out = make([]*Path, 0, n), make([]int, 0, n), make([]int, n)
	}
	if s.hist == nil {
		s.hist = new(History)
	}
}

// Select applies a packet's directive around the base picker and writes the
// chosen path indexes into out, returning how many (0: no usable path).
// obj is the object the packet belongs to (the zero Object: none). Select
// follows MoMQ's path-selection stage (§3, "Scheduling pipeline": "an
// affinity binds while a preference biases, so a resolvable affinity
// decides the path before any preference is weighed"), first rule that
// yields a path wins:
//
//  1. affinity: the path the history recorded for the object the directive's
//     AffinityID names (MoMQ PATH_AFFINITY), if that path is still usable;
//  2. single_path (the Balancing default): the path the history recorded
//     for obj itself, so every packet of one object (a video frame) goes on
//     the path of its first packet (MoMQ BALANCING);
//  3. prefer: the first preference (most important first) that some usable
//     path's labels match restricts base's choice to the matching paths
//     (MoMQ PATH_PREFERENCE);
//  4. base's choice over all paths.
//
// Then duplicate n adds the other usable paths by earliest expected
// delivery until the packet is on n paths. Finally the history records the
// first chosen path for obj and for AffinityID, so a later packet can
// follow. A stale (older than HistoryMaxAge) or unknown reference, or a
// recorded path that is no longer usable, falls through to the next step:
// a directive is advice and delivery never blocks on it.
//
// Usable means ACTIVE, or DEGRADED when no path is ACTIVE, and not
// [Path.Overdue] for steps 1 to 3. Steps 1 to 3 are
// the rules insisting on paths, and judge paths by [Path.LinkStatus]: a
// path DEGRADED only because its byte budget runs short stays usable for
// them. Step 4 and duplicate judge by [Path.Status], where such a path is
// DEGRADED and is used only when nothing else is ACTIVE.
//
// A nil directive is base.Pick. Select does not allocate once sc has grown;
// out needs room for len(paths) entries.
func Select(base Picker, dir *rules.Directive, obj Object, paths []*Path, now time.Time, out []int, sc *Scratch) int {
	if dir == nil {
		return base.Pick(paths, now, out)
	}
	affinity := dir.Fields.Has(rules.FieldAffinity)
	prefer := dir.Fields.Has(rules.FieldPreferences)
	if !affinity && !prefer && !obj.Valid() && dir.Duplicate <= 1 {
		return base.Pick(paths, now, out)
	}
	sc.Grow(len(paths))
	usable, ruleUsable := usableStatus(paths, now)
	aff := Object{Key: dir.Affinity, ID: dir.AffinityID}
	k := 0
	if affinity {
		k = follow(sc.hist.Lookup(aff, now), paths, now, ruleUsable, out)
	}
	if k == 0 && obj.Valid() && dir.Balancing == rules.SinglePath {
		k = follow(sc.hist.Lookup(obj, now), paths, now, ruleUsable, out)
	}
	if k == 0 && prefer {
		for _, pref := range dir.PreferenceList() {
			sc.subset, sc.index = sc.subset[:0], sc.index[:0]
			for i, p := range paths {
				if v, ok := p.Label(pref.Key); ok && v == pref.Value && ruleUsableAt(p, now, ruleUsable) {
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
	if k > 0 {
		if obj.Valid() {
			sc.hist.Record(obj, paths[out[0]], now)
		}
		if affinity && aff != obj {
			sc.hist.Record(aff, paths[out[0]], now)
		}
	}
	return k
}

// usableStatus returns the status a path needs to be usable for default
// choices (by Status) and for the rules (by LinkStatus): ACTIVE when some
// path has it, DEGRADED otherwise.
func usableStatus(paths []*Path, now time.Time) (def, link Status) {
	def, link = StatusDegraded, StatusDegraded
	for _, p := range paths {
		if p.LinkStatus(now) == StatusActive {
			link = StatusActive
			if !p.BudgetExhausted(now) {
				def = StatusActive
				break
			}
		}
	}
	return def, link
}

// ruleUsableAt reports whether p is usable for steps 1 to 3 of [Select]:
// LinkStatus want, and not [Path.Overdue].
func ruleUsableAt(p *Path, now time.Time, want Status) bool {
	return p.LinkStatus(now) == want && !p.Overdue(now)
}

// follow writes the index of p into out[0] and returns 1 when p is one of
// paths and usable for the rules (ruleUsableAt); else 0.
func follow(p *Path, paths []*Path, now time.Time, want Status, out []int) int {
	if p == nil || !ruleUsableAt(p, now, want) {
		return 0
	}
	for i, q := range paths {
		if q == p {
			out[0] = i
			return 1
		}
	}
	return 0
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
