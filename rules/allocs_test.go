package rules

import (
	"testing"
)

// TestEvaluateAllocs checks that evaluation plus merge allocates nothing,
// for the MoMQ set, a 100-rule set with class and label entries, and the
// worst-case set.
func TestEvaluateAllocs(t *testing.T) {
	cs := testClasses(t)
	pframe := metadata(t, cs, videoPkt(0x41, 90000))
	danger := &Annotations{PendingIFrame: true, LEOState: LEOReconf}
	label := mustCompile(t, lines("rules:",
		"  - {id: a, priority: 3, match: {tier: gold, class: video, src_ip: 10.1.1.1}, actions: {prefer: {cost_class: free}, affinity: frame_id}}",
		"  - {id: b, priority: 2, match: {app: {exists: true}}, actions: {fec: {mode: fixed, k: 4, parity: 1}}}",
	), Options{Classes: cs})
	for name, s := range map[string]*Set{
		"momq4":          momqSVC(t),
		"rules100":       rules100(t, cs),
		"rules100_worst": rules100Worst(t),
		"labels":         label,
		"nil":            nil,
	} {
		var d Directive
		if n := testing.AllocsPerRun(200, func() { s.Evaluate(pframe, danger, &d) }); n != 0 {
			t.Errorf("%s: %v allocations per Evaluate", name, n)
		}
		if s != nil && d.Rules.Count() == 0 {
			t.Errorf("%s: nothing matched; the test measures the wrong path", name)
		}
	}
}
