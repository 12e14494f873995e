package policy

import (
	"slices"
	"testing"
	"time"

	"github.com/bondd/bondd/classify"
	"github.com/bondd/bondd/rules"
)

func TestSelect(t *testing.T) {
	now := time.Unix(1000, 0)
	ms := time.Millisecond
	mk := func() []*Path {
		specs := []struct {
			labels map[string]string
			srtt   time.Duration
			up     bool
		}{
			{map[string]string{"cost_class": "metered", "link_type": "cellular"}, 20 * ms, true},
			{map[string]string{"cost_class": "free", "link_type": "satellite"}, 60 * ms, true},
			{map[string]string{"cost_class": "free", "link_type": "cellular"}, 40 * ms, true},
			{map[string]string{"cost_class": "free", "link_type": "wifi"}, 5 * ms, false},
		}
		var ps []*Path
		for i, s := range specs {
			p := NewPath(string(rune('a'+i)), s.labels, 16)
			p.SetConnected(s.up, now)
			p.OnMetrics(s.srtt, s.srtt, 40000, 0)
			ps = append(ps, p)
		}
		return ps
	}
	dir := func(dup uint8, prefs ...rules.Preference) *rules.Directive {
		d := &rules.Directive{Duplicate: dup}
		if len(prefs) > 0 {
			d.Fields |= rules.FieldPreferences
			d.NumPreferences = uint8(copy(d.Preferences[:], prefs))
		}
		return d
	}
	withAff := func(d *rules.Directive, id uint64) *rules.Directive {
		d.Fields |= rules.FieldAffinity
		d.Affinity, d.AffinityID = classify.KeyFrameID, id
		return d
	}
	multi := func(d *rules.Directive) *rules.Directive {
		d.Fields |= rules.FieldBalancing
		d.Balancing = rules.MultiPath
		return d
	}
	free := rules.Preference{Key: "cost_class", Value: "free"}
	metered := rules.Preference{Key: "cost_class", Value: "metered"}
	frame := func(id uint64) Object { return Object{Key: classify.KeyFrameID, ID: id} }
	const fid = 0x6a5cc84800000001
	// seed records object id → path i in the history at now - age.
	seed := func(id uint64, i int, age time.Duration) func([]*Path, *History) {
		return func(ps []*Path, h *History) { h.Record(frame(id), ps[i], now.Add(-age)) }
	}
	spend := func(i int) func([]*Path, *History) { // path i used 95 % of a 1 MB/day budget
		return func(ps []*Path, _ *History) {
			ps[i].SetBudget(Budget{Bytes: 1e6, Period: PeriodDay})
			ps[i].OnBytes(950_000, now)
		}
	}
	both := func(fs ...func([]*Path, *History)) func([]*Path, *History) {
		return func(ps []*Path, h *History) {
			for _, f := range fs {
				f(ps, h)
			}
		}
	}
	tests := []struct {
		name  string
		setup func([]*Path, *History)
		dir   *rules.Directive
		obj   Object
		want  []int
	}{
		{"no directive: lowest RTT", nil, nil, Object{}, []int{0}},
		{"prefer free: fastest free path", nil, dir(0, free), Object{}, []int{2}},
		{"prefer satellite", nil, dir(0, rules.Preference{Key: "link_type", Value: "satellite"}), Object{}, []int{1}},
		{"prefer a down path only: fall back", nil, dir(0, rules.Preference{Key: "link_type", Value: "wifi"}), Object{}, []int{0}},
		{"prefer unknown label: fall back", nil, dir(0, rules.Preference{Key: "carrier", Value: "x"}), Object{}, []int{0}},
		{"second preference used when the first matches nothing", nil, dir(0,
			rules.Preference{Key: "link_type", Value: "wifi"}, rules.Preference{Key: "link_type", Value: "satellite"}), Object{}, []int{1}},
		{"duplicate 2", nil, dir(2), Object{}, []int{0, 2}},
		{"duplicate 8 capped by usable paths", nil, dir(8), Object{}, []int{0, 2, 1}},
		{"prefer free and duplicate 2", nil, dir(2, free), Object{}, []int{2, 0}},

		// affinity binds before any preference is weighed (MoMQ §3).
		{"affinity: recorded path beats preference", seed(fid, 1, 0), withAff(dir(0, free), fid), frame(fid), []int{1}},
		{"affinity: unknown id falls through to prefer", nil, withAff(dir(0, free), fid), frame(fid), []int{2}},
		{"affinity: stale entry falls through", seed(fid, 1, 2*time.Second), withAff(dir(0, free), fid), frame(fid), []int{2}},
		{"affinity: recorded path down falls through", seed(fid, 3, 0), withAff(dir(0, free), fid), frame(fid), []int{2}},
		{"affinity: another object's path", seed(7, 1, 0), withAff(dir(0), 7), frame(fid), []int{1}},
		{"affinity and duplicate 2", seed(fid, 1, 0), withAff(dir(2), fid), frame(fid), []int{1, 0}},

		// single_path (the default balancing) keeps one object on one path.
		{"single_path: the object's recorded path", seed(fid, 1, 0), dir(0), frame(fid), []int{1}},
		{"single_path: recorded path beats prefer", seed(fid, 1, 0), dir(0, free), frame(fid), []int{1}},
		{"single_path: unknown object, default", nil, dir(0), frame(fid), []int{0}},
		{"single_path: stale object, default", seed(fid, 1, 1500*time.Millisecond), dir(0), frame(fid), []int{0}},
		{"single_path: recorded path down, default", seed(fid, 3, 0), dir(0), frame(fid), []int{0}},
		{"multi_path: history ignored", seed(fid, 1, 0), multi(dir(0)), frame(fid), []int{0}},

		// A path at 90 % of its byte budget is DEGRADED for default picks
		// but a rule that prefers it may still use it.
		{"budget: default avoids the metered path", spend(0), nil, Object{}, []int{2}},
		{"budget: directive without prefer avoids it", spend(0), dir(0, free), Object{}, []int{2}},
		{"budget: prefer metered insists", spend(0), dir(0, metered), Object{}, []int{0}},
		{"budget: duplicates avoid it", spend(0), dir(2), Object{}, []int{2, 1}},
		{"budget: affinity follows it", both(spend(0), seed(fid, 0, 0)), withAff(dir(0, free), fid), frame(fid), []int{0}},
		{"budget: used when nothing else is up", both(spend(0), func(ps []*Path, _ *History) {
			ps[1].SetConnected(false, now)
			ps[2].SetConnected(false, now)
		}), nil, Object{}, []int{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			paths := mk()
			out := make([]int, len(paths))
			var sc Scratch
			sc.Grow(len(paths))
			if tt.setup != nil {
				tt.setup(paths, sc.hist)
			}
			n := Select(LowestRTT{}, tt.dir, tt.obj, paths, now, out, &sc)
			if !slices.Equal(out[:n], tt.want) {
				t.Fatalf("picked %v, want %v", out[:n], tt.want)
			}
		})
	}
}

// TestSelectSinglePathSticks checks that once an object's first packet has
// a path, its later packets follow it although the default choice moves,
// and that they fall through when that path goes down.
func TestSelectSinglePathSticks(t *testing.T) {
	now := time.Unix(1000, 0)
	paths := makePaths(now, pathSpec{StatusActive, 20 * time.Millisecond, 40000, 0, 0},
		pathSpec{StatusActive, 30 * time.Millisecond, 40000, 0, 0})
	out := make([]int, 2)
	var sc Scratch
	d := &rules.Directive{}
	obj := Object{Key: classify.KeyFrameID, ID: 42}
	if n := Select(LowestRTT{}, d, obj, paths, now, out, &sc); n != 1 || out[0] != 0 {
		t.Fatalf("first packet on %v, want path 0", out[:n])
	}
	paths[0].OnMetrics(90*time.Millisecond, 90*time.Millisecond, 40000, 0) // path 0 is now the slower
	if n := Select(LowestRTT{}, d, obj, paths, now.Add(20*time.Millisecond), out, &sc); n != 1 || out[0] != 0 {
		t.Fatalf("second packet of the frame on %v, want path 0 like the first", out[:n])
	}
	if n := Select(LowestRTT{}, d, Object{Key: classify.KeyFrameID, ID: 43}, paths, now, out, &sc); n != 1 || out[0] != 1 {
		t.Fatalf("next frame on %v, want the now faster path 1", out[:n])
	}
	paths[0].SetConnected(false, now)
	if n := Select(LowestRTT{}, d, obj, paths, now.Add(30*time.Millisecond), out, &sc); n != 1 || out[0] != 1 {
		t.Fatalf("packet after its path went down on %v, want path 1", out[:n])
	}
}

func TestHistory(t *testing.T) {
	now := time.Unix(1000, 0)
	a, b := NewPath("a", nil, 1), NewPath("b", nil, 1)
	var h History
	o := func(id uint64) Object { return Object{Key: classify.KeyFrameID, ID: id} }
	if h.Lookup(o(1), now) != nil {
		t.Fatal("empty history found an entry")
	}
	h.Record(o(1), a, now)
	h.Record(Object{Key: classify.KeyRTPSSRC, ID: 1}, b, now) // same id, other key
	if h.Lookup(o(1), now) != a || h.Lookup(Object{Key: classify.KeyRTPSSRC, ID: 1}, now) != b {
		t.Fatal("entries with the same id and different keys mixed up")
	}
	h.Record(o(1), b, now)
	if h.Lookup(o(1), now) != b {
		t.Fatal("re-recording did not update")
	}
	if h.Lookup(o(1), now.Add(HistoryMaxAge+1)) != nil {
		t.Fatal("stale entry found")
	}
	// Many more objects than slots: the most recent GOP's worth survive.
	for i := range uint64(10 * HistorySize) {
		h.Record(o(i), a, now.Add(time.Duration(i)*time.Microsecond))
	}
	end := now.Add(10 * HistorySize * time.Microsecond)
	found := 0
	for i := uint64(10*HistorySize - 50); i < 10*HistorySize; i++ {
		if h.Lookup(o(i), end) == a {
			found++
		}
	}
	if found < 50 {
		t.Fatalf("only %d of the last 50 objects (one 50 fps GOP) are in the history", found)
	}
}

func TestSelectAllocs(t *testing.T) {
	now := time.Now()
	paths := []*Path{NewPath("a", map[string]string{"k": "v"}, 8), NewPath("b", nil, 8)}
	for _, p := range paths {
		p.SetConnected(true, now)
	}
	d := &rules.Directive{Fields: rules.FieldPreferences, NumPreferences: 1, Duplicate: 2}
	d.Preferences[0] = rules.Preference{Key: "k", Value: "v"}
	out := make([]int, 2)
	var sc Scratch
	sc.Grow(2)
	d.Fields |= rules.FieldAffinity
	d.Affinity, d.AffinityID = classify.KeyFrameID, 7
	obj := Object{Key: classify.KeyFrameID, ID: 7}
	if a := testing.AllocsPerRun(100, func() { Select(LowestRTT{}, d, obj, paths, now, out, &sc) }); a != 0 {
		t.Fatalf("Select allocates %v times", a)
	}
}

// TestSelectOverduePath: a preference or an affinity does not insist on a
// rate-controlled path whose queue already holds more than its
// QueueDelayLimit at the target rate, less what its pacer's bucket lets go
// at once (Path.Overdue): the packet would be dropped there. The free path (preferred, affinity of the frame) has a
// 1 MB/s target and a 200-ms limit; the metered one is idle.
func TestSelectOverduePath(t *testing.T) {
	now := time.Unix(1000, 0)
	ms := time.Millisecond
	pref := rules.Preference{Key: "cost_class", Value: "free"}
	tests := []struct {
		name     string
		queued   int // bytes queued on the free path
		bucket   int // bytes its pacer lets go at once; 0: none published
		limit    time.Duration
		affinity bool
		want     int
	}{
		{"prefer, short queue", 100_000, 0, 200 * ms, false, 0},
		{"prefer, queue past the limit", 300_000, 0, 200 * ms, false, 1},
		{"prefer, the bucket lets the excess go at once", 300_000, 150_000, 200 * ms, false, 0},
		{"prefer, the bucket holds too little", 300_000, 50_000, 200 * ms, false, 1},
		{"prefer, no limit", 300_000, 0, 0, false, 0},
		{"affinity, short queue", 100_000, 0, 200 * ms, true, 0},
		{"affinity, queue past the limit", 300_000, 0, 200 * ms, true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			free := NewPath("free", map[string]string{"cost_class": "free"}, 256)
			metered := NewPath("metered", map[string]string{"cost_class": "metered"}, 256)
			for _, p := range []*Path{free, metered} {
				p.SetConnected(true, now)
				p.OnMetrics(40*ms, 40*ms, 100_000, 0)
				p.SetRateControl(true)
				p.OnRateEstimate(1e6, 0, 0, now)
				p.QueueDelayLimit = tt.limit
			}
			paths := []*Path{free, metered}
			var sc Scratch
			out := make([]int, 2)
			obj := Object{Key: classify.KeyFrameID, ID: 7}
			d := &rules.Directive{Fields: rules.FieldPreferences, NumPreferences: 1}
			d.Preferences[0] = pref
			if tt.affinity {
				// The frame's first packet went to the free path.
				if n := Select(LowestRTT{}, d, obj, paths, now, out, &sc); n != 1 || out[0] != 0 {
					t.Fatalf("first packet on %v, want the free path", out[:n])
				}
				d = &rules.Directive{Fields: rules.FieldAffinity, Affinity: obj.Key, AffinityID: obj.ID}
			}
			free.SetQueueLen(tt.queued/1200, tt.queued)
			if tt.bucket > 0 {
				free.OnPacer(float64(tt.bucket), tt.bucket, now)
			}
			if n := Select(LowestRTT{}, d, Object{}, paths, now, out, &sc); n != 1 || out[0] != tt.want {
				t.Errorf("on %v, want path %d", out[:n], tt.want)
			}
		})
	}
}
