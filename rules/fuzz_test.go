package rules

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/bondd/bondd/classify"
)

// FuzzParse feeds arbitrary bytes to the parser and compiler. Neither may
// panic; every error must be an *Error for the file with a line inside it;
// a set that compiles must respect the limits, evaluate without panicking
// into a well-formed Directive, and keep no reference to the input.
//
//	go test ./rules -run '^$' -fuzz FuzzParse -fuzztime 60s
func FuzzParse(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join(examplesDir, "*.yaml"))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		"", "rules:\n", "rules: []\n", "- a\n", "rules: {a: 1}\n",
		lines("rules:", "  - {id: a, priority: 1, match: {dscp: 46, tier: gold}, actions: {priority: 9, prefer: {cost_class: free}}}"),
		lines("rules:", "  - id: b", "    priority: 2", "    match: {frame_id: {exists: true}, leo_state: reconf}", "    actions: {affinity: frame_id, fec: {mode: fixed, k: 4, parity: 1}, x: [1]}"),
		lines("rules:", "  - &r {id: c, priority: 3, actions: {duplicate: 2}}", "  - *r"),
		"rules:\n  - id: a\n   priority: 1\n",
	} {
		f.Add([]byte(s))
	}
	cs := testClasses(f)
	c := newClassifier(f, cs)
	var mds []classify.Metadata
	for _, p := range []pkt{videoPkt(0x65, 1), videoPkt(0x41, 2),
		{v6: true, proto: 6, src: edgeV6, dst: peerV6, sport: 1, dport: 2, dscp: 46}} {
		var md classify.Metadata
		c.Parse(p.bytes(), &md)
		mds = append(mds, md)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		orig := bytes.Clone(data)
		s, err := CompileBytes("fuzz.yaml", data, Options{Classes: cs})
		if err != nil {
			n := yamlLines(data)
			for _, e := range unjoin(err) {
				var re *Error
				if !errors.As(e, &re) || re.File != "fuzz.yaml" || re.Line < 0 || re.Line > n {
					t.Fatalf("bad error %#v (input has %d lines)", e, n)
				}
			}
			return
		}
		if s.Len() > MaxRules {
			t.Fatalf("%d rules", s.Len())
		}
		before := s.String()
		for i := range data {
			data[i] = 'x'
		}
		if s.String() != before {
			t.Fatal("the set refers to the input bytes")
		}
		copy(data, orig)
		for i := range mds {
			for _, ann := range []*Annotations{nil, {PendingIFrame: true, LEOState: LEOReconf}} {
				var d Directive
				s.Evaluate(&mds[i], ann, &d)
				if d.NumPreferences > MaxPreferences || d.Rules.Count() > s.Len() {
					t.Fatalf("directive %v", &d)
				}
				for j := s.Len(); j < 128; j++ {
					if d.Rules.Has(j) {
						t.Fatalf("rule bit %d of %d", j, s.Len())
					}
				}
				_ = d.String()
			}
		}
	})
}

// yamlLines bounds the number of lines YAML sees in data: it breaks lines
// at \n, \r, NEL, LS and PS.
func yamlLines(data []byte) int {
	n := 1
	for _, sep := range []string{"\n", "\r", "\u0085", "\u2028", "\u2029"} {
		n += bytes.Count(data, []byte(sep))
	}
	return n
}

// unjoin splits an errors.Join error.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
