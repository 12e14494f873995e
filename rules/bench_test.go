package rules

import (
	"fmt"
	"strings"
	"testing"

	"github.com/bondd/bondd/classify"
)

// rules100 returns a 100-rule set shaped like a large deployment: 96 rules
// that each steer one UDP or TCP service by port and DSCP (none of which
// match the benchmark's video packet), two video rules and the catch-all,
// plus one label rule.
func rules100(tb testing.TB, cs *classify.ClassSet) *Set {
	var b strings.Builder
	b.WriteString("rules:\n")
	for i := 0; i < 96; i++ {
		proto := []string{"udp", "tcp"}[i%2]
		fmt.Fprintf(&b, "  - {id: svc%d, priority: %d, match: {proto: %s, dst_port: %d, dscp: %d}, actions: {priority: %d, prefer: {cost_class: free}, deadline_ms: %d}}\n",
			i, 1000-i, proto, 6000+i, i%64, i%256, 100+i)
	}
	b.WriteString("  - {id: video-p, priority: 500, match: {frame_type: P, pending_iframe: true}, actions: {priority: highest}}\n")
	b.WriteString("  - {id: video-colocate, priority: 400, match: {frame_id: {exists: true}}, actions: {affinity: frame_id, fec: adaptive}}\n")
	b.WriteString("  - {id: gold, priority: 300, match: {tier: gold}, actions: {duplicate: 2}}\n")
	b.WriteString("  - {id: default, priority: 0, actions: {prefer: {cost_class: free}}}\n")
	s, err := CompileBytes("rules100.yaml", []byte(b.String()), Options{Classes: cs})
	if err != nil {
		tb.Fatal(err)
	}
	if s.Len() != MaxRules {
		tb.Fatalf("%d rules", s.Len())
	}
	return s
}

// rules100Worst returns the most expensive set the limits allow in
// practice: 100 rules of 10 match entries that all match the video packet,
// each with 20 actions (12 preferences on distinct label keys and every
// other action).
func rules100Worst(tb testing.TB) *Set {
	match := "{proto: udp, ip_version: 4, dst_port: 5004, src_port: 40000, dscp: 0, rtp_pt: 96, codec: h264, frame_type: P, rtp_ssrc: 0x6a5cc848, pending_iframe: true}"
	var b strings.Builder
	b.WriteString("rules:\n")
	for i := 0; i < MaxRules; i++ {
		fmt.Fprintf(&b, "  - id: w%d\n    priority: %d\n    match: %s\n    actions: {priority: %d, balancing: multi_path, affinity: frame_id, fec: adaptive, duplicate: 2, deadline_ms: 100, resequence_ms: 50, x_unknown: 1, prefer: {", i, i, match, i)
		for j := 0; j < 12; j++ {
			fmt.Fprintf(&b, "k%d_%d: v, ", i, j)
		}
		b.WriteString("}}\n")
	}
	s, err := CompileBytes("worst.yaml", []byte(b.String()), Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// BenchmarkEvaluate measures evaluation plus merge for one packet.
// Targets (issue 5): ≤ 200 ns for the four MoMQ rules and ≤ 2 µs for 100
// rules, with 0 allocations.
func BenchmarkEvaluate(b *testing.B) {
	cs := testClasses(b)
	pframe := metadata(b, cs, videoPkt(0x41, 90000))
	iframe := metadata(b, cs, videoPkt(0x65, 93000))
	danger := &Annotations{PendingIFrame: true, LEOState: LEOReconf}
	momq := momqSVC(b)
	cases := []struct {
		name string
		set  *Set
		md   *classify.Metadata
		ann  *Annotations
	}{
		{"momq4/pframe_danger", momq, pframe, danger},
		{"momq4/iframe_danger", momq, iframe, danger},
		{"momq4/pframe_quiet", momq, pframe, nil},
		{"rules100/pframe_danger", rules100(b, cs), pframe, danger},
		{"rules100_worst/pframe_danger", rules100Worst(b), pframe, danger},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var d Directive
			for b.Loop() {
				c.set.Evaluate(c.md, c.ann, &d)
			}
		})
	}
}
