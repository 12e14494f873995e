package policy

import (
	"testing"
	"time"

	"github.com/bondd/bondd/classify"
	"github.com/bondd/bondd/rules"
)

// benchPaths are three ACTIVE paths with labels, RTTs and windows like the
// S2 scenario plus a cellular path, one with a byte budget and one with a
// LEO marker, so every per-path check runs.
func benchPaths(now time.Time) []*Path {
	specs := []struct {
		labels map[string]string
		srtt   time.Duration
		cwnd   int
	}{
		{map[string]string{"cost_class": "free", "link_type": "satellite"}, 90 * time.Millisecond, 600_000},
		{map[string]string{"cost_class": "metered", "link_type": "terrestrial"}, 30 * time.Millisecond, 82_000},
		{map[string]string{"cost_class": "free", "link_type": "cellular"}, 50 * time.Millisecond, 60_000},
	}
	var ps []*Path
	for i, s := range specs {
		p := NewPath(string(rune('a'+i)), s.labels, 256)
		p.SetConnected(true, now)
		p.OnMetrics(s.srtt, s.srtt, s.cwnd, s.cwnd/2)
		p.SetQueueLen(4, 4800)
		ps = append(ps, p)
	}
	ps[0].SetLEOReconf(&LEOReconf{})
	ps[1].SetBudget(Budget{Bytes: 2e9, Period: PeriodMonth})
	ps[1].OnBytes(1e9, now)
	return ps
}

// BenchmarkPick measures one packet's path choice over three paths: each
// scheduler's Pick, and Select with a directive that prefers
// cost_class=free and has an affinity on frame_id (a history hit: the
// frame's earlier packets went on the satellite path), the per-packet work
// of the MoMQ rule set.
func BenchmarkPick(b *testing.B) {
	now := time.Date(2025, 3, 5, 12, 0, 30, 0, time.UTC)
	for _, name := range Schedulers {
		b.Run("3paths/"+name, func(b *testing.B) {
			paths := benchPaths(now)
			p, _ := NewPicker(name)
			out := make([]int, len(paths))
			b.ReportAllocs()
			for b.Loop() {
				p.Pick(paths, now, out)
			}
		})
	}
	b.Run("3paths/select_prefer_affinity", func(b *testing.B) {
		paths := benchPaths(now)
		d := &rules.Directive{Fields: rules.FieldPreferences | rules.FieldAffinity, NumPreferences: 1,
			Affinity: classify.KeyFrameID, AffinityID: 0x6a5cc84800000001}
		d.Preferences[0] = rules.Preference{Key: "cost_class", Value: "free"}
		obj := Object{Key: classify.KeyFrameID, ID: d.AffinityID}
		out := make([]int, len(paths))
		var sc Scratch
		Select(LowestRTT{}, d, obj, paths, now, out, &sc) // the frame's first packet
		b.ReportAllocs()
		for b.Loop() {
			Select(LowestRTT{}, d, obj, paths, now, out, &sc)
		}
	})
	b.Run("3paths/select_prefer_affinity_miss", func(b *testing.B) {
		paths := benchPaths(now)
		d := &rules.Directive{Fields: rules.FieldPreferences | rules.FieldAffinity, NumPreferences: 1,
			Affinity: classify.KeyFrameID}
		d.Preferences[0] = rules.Preference{Key: "cost_class", Value: "free"}
		out := make([]int, len(paths))
		var sc Scratch
		sc.Grow(len(paths))
		id := uint64(0)
		b.ReportAllocs()
		for b.Loop() {
			id++ // a new frame every packet: lookup misses, prefer decides, record
			d.AffinityID = id
			Select(LowestRTT{}, d, Object{Key: classify.KeyFrameID, ID: id}, paths, now, out, &sc)
		}
	})
	b.Run("3paths/annotations", func(b *testing.B) {
		paths := benchPaths(now)
		b.ReportAllocs()
		for b.Loop() {
			_ = rules.Annotations{PendingIFrame: PendingIFrame(paths, now, 1200), LEOState: LEOState(paths, now)}
		}
	})
}
