package policy

import (
	"time"

	"github.com/bondd/bondd/classify"
	"github.com/bondd/bondd/internal/monoclock"
)

// Object names the object a packet belongs to (docs/rules.md: the unit a
// rule keeps together): a video frame for RTP video, Key
// classify.KeyFrameID and ID the frame id (SSRC and RTP timestamp). The zero Object (Key classify.KeyInvalid) means the packet
// is an object of its own, so nothing keeps it with others.
type Object struct {
	Key classify.Key
	ID  uint64
}

// Valid reports whether o names an object.
func (o Object) Valid() bool { return o.Key != classify.KeyInvalid }

// History sizes (MoMQ §4.1, R3: "a history of one GOP's worth of entries
// covers every reference the rule can encounter").
const (
	// HistorySize is the number of object-to-path assignments a History
	// holds: 512, ten 1-second GOPs of 50 fps video, or one GOP each of
	// several streams.
	HistorySize = historyWays << historySetBits
	// HistoryMaxAge is how long an assignment stays valid: 1 s, one GOP of
	// the MoMQ evaluation (no reference crosses a GOP boundary). An older
	// entry is stale and reads as absent.
	HistoryMaxAge = time.Second
	// historyWays is the associativity: an id lives in one of 4 slots of
	// one of 2^historySetBits sets.
	historyWays    = 4
	historySetBits = 7
)

// History is a bounded table of recent object-to-path assignments, the
// "bounded history of recent assignments" PATH_AFFINITY resolves against
// (MoMQ §3; §4.1 R3). It is a 4-way set-associative table of HistorySize
// entries: an id maps to one set of 4 slots, and a new id replaces the
// empty, stale or oldest slot of its set, so every operation is a few
// compares and nothing allocates. Paths are held by pointer, not index, so
// an entry survives the path set being renumbered. The zero value is ready;
// not safe for concurrent use (one per scheduling goroutine).
type History struct {
	slots [HistorySize]historyEntry
}

type historyEntry struct {
	key  classify.Key
	id   uint64
	at   int64 // monoclock ns of the last assignment; 0: empty
	path *Path
}

func historySet(o Object) int {
	h := (o.ID ^ uint64(o.Key)<<56) * 0x9e3779b97f4a7c15 // Fibonacci hashing
	return int(h>>(64-historySetBits)) * historyWays
}

// Lookup returns the path recorded for o, or nil when o is not in the
// history or its entry is older than HistoryMaxAge at now.
func (h *History) Lookup(o Object, now time.Time) *Path {
	t := monoclock.Nanos(now)
	set := h.slots[historySet(o):][:historyWays]
	for i := range set {
		if e := &set[i]; e.at != 0 && e.id == o.ID && e.key == o.Key {
			if t-e.at > int64(HistoryMaxAge) {
				return nil
			}
			return e.path
		}
	}
	return nil
}

// Record notes that object o was sent on path p at now.
func (h *History) Record(o Object, p *Path, now time.Time) {
	t := monoclock.Nanos(now)
	set := h.slots[historySet(o):][:historyWays]
	victim := 0
	for i := range set {
		e := &set[i]
		if e.at != 0 && e.id == o.ID && e.key == o.Key {
			victim = i
			break
		}
		if e.at < set[victim].at {
			victim = i
		}
	}
	set[victim] = historyEntry{key: o.Key, id: o.ID, at: t, path: p}
}

// Reset empties the history.
func (h *History) Reset() { h.slots = [HistorySize]historyEntry{} }
