package rules

import (
	"slices"
	"testing"
	"time"

	"github.com/bondd/bondd/classify"
)

// TestMoMQMerge is the merge example of MoMQ §4.1: a P-frame arriving
// during a LEO danger zone while an I-frame is in flight matches R1, R3 and
// R4 and gets R1's priority, R3's affinity and R4's preference; an I-frame
// in the same danger zone gets R2's preference, which overrides R4's on the
// same label key.
func TestMoMQMerge(t *testing.T) {
	s := momqSVC(t)
	ids := func(d *Directive) (out []string) {
		for i := 0; i < s.Len(); i++ {
			if d.Rules.Has(i) {
				out = append(out, s.Rule(i).ID)
			}
		}
		return out
	}
	danger := &Annotations{PendingIFrame: true, LEOState: LEOReconf}

	p := metadata(t, nil, videoPkt(0x41, 90000))
	var d Directive
	s.Evaluate(p, danger, &d)
	if got, want := ids(&d), []string{"r1-pframe-interleave", "r3-colocate", "r4-free-path"}; !slices.Equal(got, want) {
		t.Errorf("P-frame matched %v, want %v", got, want)
	}
	want := Directive{
		Fields:         FieldPriority | FieldAffinity | FieldPreferences,
		Priority:       255,
		Affinity:       classify.KeyFrameID,
		AffinityID:     p.FrameID(),
		NumPreferences: 1,
		Preferences:    [MaxPreferences]Preference{{"cost_class", "free"}},
		Rules:          d.Rules,
	}
	if d != want {
		t.Errorf("P-frame directive\n got %v\nwant %v", &d, &want)
	}
	if d.Balancing != SinglePath {
		t.Errorf("balancing %v, want the single_path default", d.Balancing)
	}

	i := metadata(t, nil, videoPkt(0x65, 93000))
	s.Evaluate(i, danger, &d)
	if got, want := ids(&d), []string{"r2-reconf-keyframe", "r3-colocate", "r4-free-path"}; !slices.Equal(got, want) {
		t.Errorf("I-frame matched %v, want %v", got, want)
	}
	if got := d.PreferenceList(); len(got) != 1 || got[0] != (Preference{"cost_class", "metered"}) {
		t.Errorf("I-frame preferences %v, want R2's cost_class=metered only", got)
	}
	if d.Fields.Has(FieldPriority) {
		t.Errorf("I-frame got a priority: %v", &d)
	}

	// Outside the danger zone, with no I-frame in flight: R3 and R4.
	s.Evaluate(p, nil, &d)
	if got, want := ids(&d), []string{"r3-colocate", "r4-free-path"}; !slices.Equal(got, want) {
		t.Errorf("quiet P-frame matched %v, want %v", got, want)
	}
	// A non-RTP packet: only the catch-all.
	s.Evaluate(metadata(t, nil, pkt{proto: 6, src: edgeV4, dst: peerV4, sport: 1, dport: 443}), danger, &d)
	if got := d.String(); got != "prefer=cost_class=free" {
		t.Errorf("TCP packet: %s", got)
	}
}

// TestMergeDimensions checks each dimension's merge rule on rules that all
// match.
func TestMergeDimensions(t *testing.T) {
	md := metadata(t, nil, videoPkt(0x41, 1000))
	tests := []struct {
		name  string
		rules string
		want  string
	}{
		{"max priority", lines(
			"  - {id: a, priority: 1, actions: {priority: 10}}",
			"  - {id: b, priority: 2, actions: {priority: 7}}",
			"  - {id: c, priority: 3, actions: {priority: 0}}",
		), "priority=10"},
		{"single path wins", lines(
			"  - {id: a, priority: 3, actions: {balancing: multi_path}}",
			"  - {id: b, priority: 1, actions: {balancing: single_path}}",
		), "balancing=single_path"},
		{"multi path alone", lines(
			"  - {id: a, priority: 3, actions: {balancing: multi_path}}",
		), "balancing=multi_path"},
		{"preference union by rule priority, higher wins per key", lines(
			"  - {id: low, priority: 1, actions: {prefer: {cost_class: free, link_type: cellular}}}",
			"  - {id: high, priority: 9, actions: {prefer: {cost_class: metered, region: eu}}}",
		), "prefer=cost_class=metered prefer=region=eu prefer=link_type=cellular"},
		{"equal rule priorities keep file order", lines(
			"  - {id: first, priority: 5, actions: {prefer: {cost_class: a}}}",
			"  - {id: second, priority: 5, actions: {prefer: {cost_class: b}}}",
		), "prefer=cost_class=a"},
		{"first affinity whose key is present", lines(
			"  - {id: a, priority: 9, actions: {affinity: src_port}}",
			"  - {id: b, priority: 8, actions: {affinity: icmp_type}}",
			"  - {id: c, priority: 7, actions: {affinity: rtp_ssrc}}",
		), "affinity=src_port"},
		{"absent affinity key falls through", lines(
			"  - {id: b, priority: 8, actions: {affinity: icmp_type}}",
			"  - {id: c, priority: 7, actions: {affinity: rtp_ssrc}}",
		), "affinity=rtp_ssrc"},
		{"bondd actions: the first rule that sets them", lines(
			"  - {id: specific, priority: 9, match: {frame_type: P}, actions: {fec: off, duplicate: 1}}",
			"  - {id: catchall, priority: 1, actions: {fec: adaptive, duplicate: 3, deadline_ms: 200, resequence_ms: 30}}",
		), "fec=off duplicate=1 deadline_ms=200 resequence_ms=30"},
		{"resequence_ms 0 is set: never hold", lines(
			"  - {id: live, priority: 9, actions: {resequence_ms: 0}}",
			"  - {id: catchall, priority: 1, actions: {resequence_ms: 30}}",
		), "resequence_ms=0"},
		{"fec forms", lines(
			"  - {id: a, priority: 1, actions: {fec: {mode: fixed, k: 10, parity: 2}}}",
		), "fec=fixed,k=10,parity=2"},
		{"fec parity shorthand", lines(
			"  - {id: a, priority: 1, actions: {fec: 3}}",
		), "fec=fixed,parity=3"},
		{"fec adaptive params", lines(
			"  - {id: a, priority: 1, actions: {fec: {mode: adaptive, k: 16, alpha: 1.5}}}",
		), "fec=adaptive,k=16,alpha=1.5"},
		{"no rule matches: default", lines(
			"  - {id: a, priority: 1, match: {proto: tcp}, actions: {priority: 3}}",
		), "default"},
		{"unknown action skipped", lines(
			"  - {id: a, priority: 1, actions: {pace: 5, priority: 4}}",
		), "priority=4"},
		{"highest and lowest", lines(
			"  - {id: a, priority: 1, actions: {priority: lowest}}",
		), "priority=0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustCompile(t, "rules:\n"+tt.rules, Options{})
			var d Directive
			s.Evaluate(md, nil, &d)
			if got := d.String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestPreferenceBound checks that preferences beyond MaxPreferences are
// dropped from the lowest-priority rules.
func TestPreferenceBound(t *testing.T) {
	src := "rules:\n"
	for i := 0; i < MaxPreferences+2; i++ {
		src += "  - {id: r" + string(rune('a'+i)) + ", priority: " + string(rune('0'+9-i%10)) + ", actions: {prefer: {k" + string(rune('a'+i)) + ": v}}}\n"
	}
	s := mustCompile(t, src, Options{})
	var d Directive
	s.Evaluate(nil, nil, &d)
	if d.NumPreferences != MaxPreferences || d.Preferences[0].Key != "ka" || d.Preferences[MaxPreferences-1].Key != "kh" {
		t.Errorf("preferences %v", d.PreferenceList())
	}
	if d.Rules.Count() != MaxPreferences+2 {
		t.Errorf("rules matched %d", d.Rules.Count())
	}
}

// TestMatchKinds checks each kind of match entry against packets that have
// and lack the key.
func TestMatchKinds(t *testing.T) {
	cs := testClasses(t)
	video := metadata(t, cs, videoPkt(0x65, 1000))
	voice6 := metadata(t, cs, pkt{v6: true, proto: 17, src: edgeV6, dst: peerV6, sport: 7000, dport: 7001, dscp: 46})
	tcp := metadata(t, cs, pkt{proto: 6, src: edgeV4, dst: peerV4, sport: 5555, dport: 443, dscp: 10})
	tests := []struct {
		match string
		want  [3]bool // video, voice6, tcp
	}{
		{"proto: udp", [3]bool{true, true, false}},
		{"proto: 17", [3]bool{true, true, false}},
		{"proto: TCP", [3]bool{false, false, true}},
		{"dscp: 46", [3]bool{false, true, false}},
		{"dscp: 0x2e", [3]bool{false, true, false}},
		{"dst_port: 443", [3]bool{false, false, true}},
		{"src_ip: 10.1.1.1", [3]bool{true, false, true}},
		{"src_ip: 2001:DB8::1", [3]bool{false, true, false}},
		{"dst_ip: 2001:db8::2", [3]bool{false, true, false}},
		{"ip_version: 6", [3]bool{false, true, false}},
		{"frame_type: IDR", [3]bool{true, false, false}},
		{"frame_type: key", [3]bool{true, false, false}},
		{"frame_type: P", [3]bool{false, false, false}},
		{"codec: h264", [3]bool{true, false, false}},
		{"rtp_ssrc: 0x6A5CC848", [3]bool{true, false, false}},
		{"rtp_ssrc: 1784465480", [3]bool{true, false, false}},
		{"frame_id: 6a5cc848000003e8", [3]bool{true, false, false}},
		{"rtp_marker: false", [3]bool{true, false, false}},
		{"rtp_pt: {exists: true}", [3]bool{true, false, false}},
		{"src_port: {exists: true}", [3]bool{true, true, true}},
		{"icmp_type: {exists: true}", [3]bool{false, false, false}},
		{"class: video", [3]bool{true, false, false}},
		{"class: voice", [3]bool{false, true, false}},
		{"class: {exists: true}", [3]bool{true, true, false}},
		{"tier: gold", [3]bool{true, false, false}},
		{"tier: silver", [3]bool{false, true, false}},
		{"tier: {exists: true}", [3]bool{true, true, false}},
		{"app: conf", [3]bool{true, false, false}},
		{"app: {exists: true}", [3]bool{true, false, false}},
		{"pending_iframe: true", [3]bool{true, true, true}},
		{"leo_state: {exists: true}", [3]bool{false, false, false}},
		{"proto: udp, dscp: 46", [3]bool{false, true, false}},
		{"proto: udp, dscp: 46, class: video", [3]bool{false, false, false}},
	}
	ann := &Annotations{PendingIFrame: true}
	for _, tt := range tests {
		s := mustCompile(t, "rules:\n  - {id: r, priority: 1, match: {"+tt.match+"}, actions: {priority: 1}}\n", Options{Classes: cs})
		for j, md := range []*classify.Metadata{video, voice6, tcp} {
			var d Directive
			s.Evaluate(md, ann, &d)
			if got := d.Rules.Has(0); got != tt.want[j] {
				t.Errorf("%s on packet %d: matched %v, want %v", tt.match, j, got, tt.want[j])
			}
			if got := s.Matches(0, md, ann); got != tt.want[j] {
				t.Errorf("Matches(%s) on packet %d = %v", tt.match, j, got)
			}
		}
	}
}

// TestEvaluateNil checks the nil Set, nil metadata and nil annotations.
func TestEvaluateNil(t *testing.T) {
	d := Directive{Priority: 9, Fields: FieldPriority}
	(*Set)(nil).Evaluate(nil, nil, &d)
	if d != (Directive{}) {
		t.Errorf("nil set: %v", &d)
	}
	s := momqSVC(t)
	s.Evaluate(nil, nil, &d)
	if d.String() != "prefer=cost_class=free" {
		t.Errorf("nil metadata: %v", &d)
	}
	if (*Set)(nil).Len() != 0 || (*Set)(nil).Index("x") != -1 {
		t.Error("nil set accessors")
	}
}

// TestSetAccessors covers Rule, Index, String and Warnings.
func TestSetAccessors(t *testing.T) {
	s := mustCompile(t, lines("rules:",
		"  - {id: low, priority: 1, actions: {priority: 1}}",
		"  - id: high",
		"    priority: 9",
		"    match: {dscp: 46, rtp_pt: {exists: true}}",
		"    actions: {duplicate: 2, teleport: now, prefer: {cost_class: free}}",
	), Options{})
	if s.Len() != 2 || s.Rule(0).ID != "high" || s.Index("low") != 1 || s.Name() != "test.yaml" {
		t.Fatalf("order: %v", s)
	}
	want := "high priority=9 match: dscp=46 and rtp_pt exists actions: duplicate=2 teleport=now prefer=cost_class=free\n" +
		"low priority=1 match: catch-all actions: priority=1\n"
	if s.String() != want {
		t.Errorf("String:\n%s\nwant\n%s", s, want)
	}
	w := s.Warnings()
	if len(w) != 1 || w[0].Line != 6 || w[0].Error() != `test.yaml:6: unknown action "teleport" skipped` {
		t.Errorf("warnings %v", w)
	}
	r := s.Rule(0)
	r.Match[0].Key = "mutated"
	if s.Rule(0).Match[0].Key != "dscp" {
		t.Error("Rule returned shared storage")
	}
}

// TestDirectiveText covers every field of AppendText.
func TestDirectiveText(t *testing.T) {
	d := Directive{
		Fields:   FieldPriority | FieldBalancing | FieldPreferences | FieldAffinity | FieldFEC | FieldDuplicate | FieldDeadline | FieldResequence,
		Priority: 7, Balancing: MultiPath, Affinity: classify.KeyFrameID, Duplicate: 2,
		FEC:      FEC{Mode: FECAdaptive, K: 20, Alpha: 2},
		Deadline: 150 * time.Millisecond, Resequence: 40 * time.Millisecond,
		NumPreferences: 2, Preferences: [MaxPreferences]Preference{{"a", "1"}, {"b", "2"}},
	}
	want := "priority=7 balancing=multi_path prefer=a=1 prefer=b=2 affinity=frame_id fec=adaptive,k=20,alpha=2 duplicate=2 deadline_ms=150 resequence_ms=40"
	if got := d.String(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
