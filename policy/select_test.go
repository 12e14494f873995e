package policy

import (
	"testing"
	"time"

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
	tests := []struct {
		name string
		dir  *rules.Directive
		want []int
	}{
		{"no directive: lowest RTT", nil, []int{0}},
		{"prefer free: fastest free path", dir(0, rules.Preference{Key: "cost_class", Value: "free"}), []int{2}},
		{"prefer satellite", dir(0, rules.Preference{Key: "link_type", Value: "satellite"}), []int{1}},
		{"prefer a down path only: fall back", dir(0, rules.Preference{Key: "link_type", Value: "wifi"}), []int{0}},
		{"prefer unknown label: fall back", dir(0, rules.Preference{Key: "carrier", Value: "x"}), []int{0}},
		{"second preference used when the first matches nothing", dir(0,
			rules.Preference{Key: "link_type", Value: "wifi"}, rules.Preference{Key: "link_type", Value: "satellite"}), []int{1}},
		{"duplicate 2", dir(2), []int{0, 2}},
		{"duplicate 8 capped by usable paths", dir(8), []int{0, 2, 1}},
		{"prefer free and duplicate 2", dir(2, rules.Preference{Key: "cost_class", Value: "free"}), []int{2, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			paths := mk()
			out := make([]int, len(paths))
			var sc Scratch
			n := Select(LowestRTT{}, tt.dir, paths, now, out, &sc)
			if !equalInts(out[:n], tt.want) {
				t.Fatalf("picked %v, want %v", out[:n], tt.want)
			}
		})
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
	if a := testing.AllocsPerRun(100, func() { Select(LowestRTT{}, d, paths, now, out, &sc) }); a != 0 {
		t.Fatalf("Select allocates %v times", a)
	}
}
