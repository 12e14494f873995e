package rules

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// rule1 wraps a rule body (indented by four spaces) in a file: the rule
// starts at line 2.
func rule1(body ...string) string {
	return "rules:\n  - id: r\n" + strings.Join(body, "\n") + "\n"
}

// TestErrors checks that each broken file is rejected with the right
// file:line and message.
func TestErrors(t *testing.T) {
	long := func(n int) string { return strings.Repeat("k", n) }
	many := func(n int, f func(i int) string) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			b.WriteString(f(i))
		}
		return b.String()
	}
	tests := []struct {
		name string
		src  string
		line int
		msg  string
	}{
		// Shape (Parse).
		{"yaml syntax", "rules:\n  - id: a\n    priority: 1\n   actions: x\n", 4, "YAML: "},
		{"tab indent", "rules:\n\t- id: a\n", 2, "YAML: "},
		{"not a mapping", "- a\n- b\n", 1, "want a mapping with the key rules"},
		{"unknown top key", "rules: []\nversion: 2\n", 2, `unknown key "version"`},
		{"missing rules", "rulez: []\n", 1, "missing key rules"},
		{"rules not a list", "rules:\n  a: 1\n", 2, "rules: want a list of rules"},
		{"two documents", "rules: []\n---\nrules: []\n", 2, "one YAML document"},
		{"rule not a mapping", "rules:\n  - hello\n", 2, "a rule must be a mapping"},
		{"missing id", "rules:\n  - priority: 1\n    actions: {priority: 1}\n", 2, "rule: missing id"},
		{"missing priority", rule1("    actions: {priority: 1}"), 2, `rule "r": missing priority`},
		{"missing actions", rule1("    priority: 1"), 2, `rule "r": missing actions`},
		{"empty actions", rule1("    priority: 1", "    actions: {}"), 4, "a rule needs at least one action"},
		{"null actions", rule1("    priority: 1", "    actions:"), 4, "a rule needs at least one action"},
		{"actions a list", rule1("    priority: 1", "    actions: [priority]"), 4, "actions: want a mapping"},
		{"priority not integer", rule1("    priority: high", "    actions: {priority: 1}"), 3, `priority: "high" is not an integer`},
		{"priority a list", rule1("    priority: [1]", "    actions: {priority: 1}"), 3, "priority: want a single value, not a list"},
		{"unknown rule field", rule1("    priority: 1", "    acitons: {priority: 1}"), 4, `unknown field "acitons"`},
		{"field twice", rule1("    priority: 1", "    priority: 2", "    actions: {priority: 1}"), 4, `"priority" given twice (first at line 3)`},
		{"alias", "base: &b {priority: 1}\nrules:\n  - <<: *b\n    id: r\n", 3, "YAML aliases (*b) are not supported"},
		{"alias in match", rule1("    priority: 1", "    match: &m {dscp: 46}", "    actions: *m"), 5, "YAML aliases (*m) are not supported"},
		{"merge key in rule", "rules:\n  - <<: {priority: 1}\n    id: r\n    priority: 1\n    actions: {priority: 1}\n", 2, "merge keys (<<) are not supported"},
		{"match a list", rule1("    priority: 1", "    match:", "      dscp: [46, 48]", "    actions: {priority: 1}"), 5, "a list is not a value (for OR, write several rules)"},
		{"match not a mapping", rule1("    priority: 1", "    match: dscp", "    actions: {priority: 1}"), 4, "match: want a mapping"},
		{"match null value", rule1("    priority: 1", "    match:", "      dscp:", "    actions: {priority: 1}"), 5, "match dscp: missing value"},
		{"exists false", rule1("    priority: 1", "    match: {dscp: {exists: false}}", "    actions: {priority: 1}"), 4, "exists must be true (the language has no negation)"},
		{"other operator", rule1("    priority: 1", "    match: {dscp: {gt: 5}}", "    actions: {priority: 1}"), 4, "the only operator besides a value is {exists: true}"},
		{"match key twice", rule1("    priority: 1", "    match:", "      dscp: 46", "      dscp: 48", "    actions: {priority: 1}"), 6, `"dscp" given twice (first at line 5)`},
		{"prefer a scalar", rule1("    priority: 1", "    actions:", "      prefer: cost_class=free"), 5, "prefer: want a mapping of path-label key: value pairs"},
		{"action a mapping", rule1("    priority: 1", "    actions:", "      duplicate: {n: 2}"), 5, "duplicate: want a single value, not a mapping"},
		{"action null", rule1("    priority: 1", "    actions:", "      deadline_ms:"), 5, "deadline_ms: missing value"},
		{"action twice", rule1("    priority: 1", "    actions:", "      duplicate: 2", "      duplicate: 3"), 6, `"duplicate" given twice (first at line 5)`},

		// Keys and values (Compile).
		{"unknown key with suggestion", rule1("    priority: 1", "    match: {frme_type: P}", "    actions: {priority: 1}"), 4, `unknown key "frme_type" (did you mean "frame_type"?)`},
		{"label key without classes", rule1("    priority: 1", "    match: {tier: gold}", "    actions: {priority: 1}"), 4, `unknown key "tier" (not a classifier or annotation key; label keys need the traffic classes)`},
		{"dscp out of range", rule1("    priority: 1", "    match:", "      dscp: 64", "    actions: {priority: 1}"), 5, `match bad value "64" for dscp: above 63`},
		{"frame_type B", rule1("    priority: 1", "    match: {frame_type: B}", "    actions: {priority: 1}"), 4, `bad value "B" for frame_type: want IDR, I, key or keyframe (a keyframe), or P or delta`},
		{"proto typo", rule1("    priority: 1", "    match: {proto: tpc}", "    actions: {priority: 1}"), 4, `bad value "tpc" for proto: want a protocol name (`},
		{"unknown proto", rule1("    priority: 1", "    match: {proto: quic}", "    actions: {priority: 1}"), 4, `bad value "quic" for proto`},
		{"pending_iframe false", rule1("    priority: 1", "    match: {pending_iframe: false}", "    actions: {priority: 1}"), 4, "the key is present only while true"},
		{"leo_state value", rule1("    priority: 1", "    match: {leo_state: nominal}", "    actions: {priority: 1}"), 4, `match leo_state: value "nominal"; want reconf`},
		{"bad address", rule1("    priority: 1", "    match: {src_ip: 10.0.0.300}", "    actions: {priority: 1}"), 4, `match src_ip: "10.0.0.300" is not an IPv4 or IPv6 address`},
		{"zoned address", rule1("    priority: 1", "    match: {dst_ip: 'fe80::1%eth0'}", "    actions: {priority: 1}"), 4, "is not an IPv4 or IPv6 address"},
		{"empty class", rule1("    priority: 1", "    match: {class: ''}", "    actions: {priority: 1}"), 4, "empty class name"},
		{"rule id twice", "rules:\n  - {id: a, priority: 1, actions: {priority: 1}}\n  - {id: a, priority: 2, actions: {priority: 1}}\n", 3, `rule id "a" used twice (first at line 2)`},
		{"rule id charset", "rules:\n  - {id: 'a b', priority: 1, actions: {priority: 1}}\n", 2, `rule id "a b": want letters, digits`},
		{"rule id empty", "rules:\n  - {id: '', priority: 1, actions: {priority: 1}}\n", 2, "rule: empty id"},
		{"rule priority range", "rules:\n  - {id: a, priority: 70000, actions: {priority: 1}}\n", 2, `rule "a": priority 70000 out of range 0-65535`},
		{"negative rule priority", "rules:\n  - {id: a, priority: -1, actions: {priority: 1}}\n", 2, "out of range"},

		// Actions (Compile).
		{"priority 256", rule1("    priority: 1", "    actions:", "      priority: 256"), 5, `priority: "256"; want an integer from 0 to 255 (or highest, lowest)`},
		{"balancing", rule1("    priority: 1", "    actions:", "      balancing: both"), 5, `balancing: "both"; want single_path or multi_path`},
		{"prefer empty value", rule1("    priority: 1", "    actions:", "      prefer: {cost_class: ''}"), 5, "prefer cost_class: value of 0 bytes; want 1 to 1024"},
		{"prefer bad key", rule1("    priority: 1", "    actions:", "      prefer: {'cost class': free}"), 5, `prefer: path-label key "cost class"`},
		{"affinity label", rule1("    priority: 1", "    actions:", "      affinity: depends_on"), 5, `affinity: "depends_on" is not a classifier key whose value names an object`},
		{"affinity address", rule1("    priority: 1", "    actions:", "      affinity: src_ip"), 5, "is not a classifier key whose value names an object"},
		{"fec word", rule1("    priority: 1", "    actions:", "      fec: sometimes"), 5, `fec: "sometimes"; want adaptive, off, a parity count from 1 to 128, or a mapping`},
		{"fec off with k", rule1("    priority: 1", "    actions:", "      fec: {mode: off, k: 5}"), 5, "fec: mode off takes no k, alpha or parity"},
		{"fec fixed without parity", rule1("    priority: 1", "    actions:", "      fec: {mode: fixed, k: 5}"), 5, "fec: mode fixed needs parity"},
		{"fec parity above k", rule1("    priority: 1", "    actions:", "      fec: {mode: fixed, k: 4, parity: 5}"), 5, "fec: parity 5 above k 4"},
		{"fec alpha zero", rule1("    priority: 1", "    actions:", "      fec:", "        mode: adaptive", "        alpha: 0"), 7, `fec: alpha "0"; want a number above 0 and at most 16`},
		{"fec alpha NaN", rule1("    priority: 1", "    actions:", "      fec: {mode: adaptive, alpha: .nan}"), 5, "fec: alpha"},
		{"fec k range", rule1("    priority: 1", "    actions:", "      fec:", "        mode: adaptive", "        k: 200"), 7, `fec: k "200"; want 1 to 128`},
		{"fec adaptive parity", rule1("    priority: 1", "    actions:", "      fec: {mode: adaptive, parity: 2}"), 5, "parity is for mode fixed"},
		{"fec fixed alpha", rule1("    priority: 1", "    actions:", "      fec: {mode: fixed, parity: 2, alpha: 2}"), 5, "alpha is for mode adaptive"},
		{"fec unknown param", rule1("    priority: 1", "    actions:", "      fec:", "        mode: adaptive", "        kk: 2"), 7, `fec: unknown parameter "kk"`},
		{"fec no mode", rule1("    priority: 1", "    actions:", "      fec: {k: 4}"), 5, "fec: missing mode"},
		{"fec mode", rule1("    priority: 1", "    actions:", "      fec: {mode: turbo}"), 5, `fec: mode "turbo"`},
		{"duplicate 9", rule1("    priority: 1", "    actions:", "      duplicate: 9"), 5, `duplicate: "9"; want an integer from 1 to 8 paths`},
		{"duplicate 0", rule1("    priority: 1", "    actions:", "      duplicate: 0"), 5, "from 1 to 8"},
		{"deadline 0", rule1("    priority: 1", "    actions:", "      deadline_ms: 0"), 5, `deadline_ms: "0"; want an integer from 1 to 60000 ms`},
		{"deadline unit", rule1("    priority: 1", "    actions:", "      deadline_ms: 150ms"), 5, `deadline_ms: "150ms"`},
		{"resequence range", rule1("    priority: 1", "    actions:", "      resequence_ms: 5001"), 5, "want an integer from 0 to 5000 ms"},

		// Limits (MoMQ Table 8).
		{"101 rules", "rules:\n" + many(MaxRules+1, func(i int) string {
			return fmt.Sprintf("  - {id: r%d, priority: 1, actions: {priority: 1}}\n", i)
		}), MaxRules + 2, "101 rules, at most 100 per set"},
		{"11 match entries", rule1("    priority: 1", "    match:", many(MaxMatchEntries+1, func(i int) string {
			return fmt.Sprintf("      k%d: {exists: true}\n", i)
		})+"    actions: {priority: 1}"), 5 + MaxMatchEntries, `rule "r": 11 match entries, at most 10`},
		{"21 actions", rule1("    priority: 1", "    actions:", "      prefer:", many(MaxActions+1, func(i int) string {
			return fmt.Sprintf("        k%d: v\n", i)
		})), 6 + MaxActions, `rule "r": 21 actions, at most 20`},
		{"key 129 bytes", rule1("    priority: 1", "    match: {"+long(MaxKeyBytes+1)+": x}", "    actions: {priority: 1}"), 4, "key: 129 bytes, at most 128"},
		{"value 1025 bytes", rule1("    priority: 1", "    match: {class: "+long(MaxValueBytes+1)+"}", "    actions: {priority: 1}"), 4, "match class: value of 1025 bytes, at most 1024"},
		{"prefer key 129 bytes", rule1("    priority: 1", "    actions:", "      prefer: {"+long(MaxKeyBytes+1)+": x}"), 5, "prefer: path-label key"},
		{"prefer value 1025 bytes", rule1("    priority: 1", "    actions:", "      prefer: {cost_class: "+long(MaxValueBytes+1)+"}"), 5, "value of 1025 bytes; want 1 to 1024"},
		{"action name 129 bytes", rule1("    priority: 1", "    actions:", "      "+long(MaxKeyBytes+1)+": 1"), 5, "action name: 129 bytes, at most 128"},
		{"rule id 129 bytes", "rules:\n  - {id: " + long(MaxKeyBytes+1) + ", priority: 1, actions: {priority: 1}}\n", 2, "rule id: 129 bytes, at most 128"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := CompileBytes("test.yaml", []byte(tt.src), Options{})
			if err == nil {
				t.Fatalf("compiled:\n%s", tt.src)
			}
			want := fmt.Sprintf("test.yaml:%d: ", tt.line)
			found := false
			for _, l := range strings.Split(err.Error(), "\n") {
				if strings.HasPrefix(l, want) && strings.Contains(l, tt.msg) {
					found = true
				}
			}
			if !found {
				t.Errorf("error\n%v\nhas no line %q…%q", err, want, tt.msg)
			}
			var e *Error
			if !errors.As(err, &e) || e.File != "test.yaml" {
				t.Errorf("error %T is not a *Error for test.yaml", err)
			}
		})
	}
}

// TestErrorsCollected checks that one compile reports every error, in
// file order, and that the count is bounded.
func TestErrorsCollected(t *testing.T) {
	src := lines("rules:",
		"  - {id: a, priority: 1, match: {dscp: 99}, actions: {priority: 1}}",
		"  - {id: b, priority: 1, match: {nope: 1}, actions: {duplicate: 0}}",
	)
	_, err := CompileBytes("f.yaml", []byte(src), Options{})
	got := strings.Split(err.Error(), "\n")
	if len(got) != 3 || !strings.HasPrefix(got[0], "f.yaml:2: ") || !strings.HasPrefix(got[2], "f.yaml:3: ") {
		t.Errorf("errors:\n%v", err)
	}

	var b strings.Builder
	b.WriteString("rules:\n")
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&b, "  - {id: r%d, priority: 1, match: {bad%d: 1}, actions: {priority: 1}}\n", i, i)
	}
	_, err = CompileBytes("f.yaml", []byte(b.String()), Options{})
	got = strings.Split(err.Error(), "\n")
	if len(got) != maxErrors+1 || got[maxErrors] != "f.yaml: 30 more errors not shown" {
		t.Errorf("%d lines, last %q", len(got), got[len(got)-1])
	}
}

// TestClassErrors checks class and label keys against traffic classes.
func TestClassErrors(t *testing.T) {
	cs := testClasses(t)
	_, err := CompileBytes("f.yaml", []byte(rule1("    priority: 1", "    match: {class: audio}", "    actions: {priority: 1}")), Options{Classes: cs})
	if err == nil || !strings.Contains(err.Error(), `f.yaml:4: match class: no traffic class "audio"`) {
		t.Errorf("unknown class: %v", err)
	}
	_, err = CompileBytes("f.yaml", []byte(rule1("    priority: 1", "    match: {tierr: gold}", "    actions: {priority: 1}")), Options{Classes: cs})
	if err == nil || !strings.Contains(err.Error(), `did you mean "tier"?`) {
		t.Errorf("label typo: %v", err)
	}
	_, err = CompileBytes("f.yaml", []byte(rule1("    priority: 1", "    actions: {affinity: tier}")), Options{Classes: cs})
	if err == nil || !strings.Contains(err.Error(), `affinity: "tier"`) {
		t.Errorf("label affinity: %v", err)
	}
}

// TestEmptyFiles checks the files that hold no rules: they compile to an
// empty set.
func TestEmptyFiles(t *testing.T) {
	for _, src := range []string{"", "# only a comment\n", "rules:\n", "rules: []\n", "---\n"} {
		s, err := CompileBytes("f.yaml", []byte(src), Options{})
		if err != nil || s.Len() != 0 {
			t.Errorf("%q: %v, %d rules", src, err, s.Len())
		}
	}
}

// TestErrorFormat checks Error's forms.
func TestErrorFormat(t *testing.T) {
	for _, tt := range []struct {
		e    Error
		want string
	}{
		{Error{"f.yaml", 3, "bad"}, "f.yaml:3: bad"},
		{Error{"f.yaml", 0, "bad"}, "f.yaml: bad"},
		{Error{"", 3, "bad"}, "line 3: bad"},
		{Error{"", 0, "bad"}, "bad"},
	} {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("%#v: %q, want %q", tt.e, got, tt.want)
		}
	}
}

// TestCompileFromGo compiles rules built in Go, as a peer's would be.
func TestCompileFromGo(t *testing.T) {
	f := &File{Name: "peer", Rules: []Rule{{
		ID: "pushed", Priority: 5,
		Match:   []Match{{Key: "frame_type", Op: OpEquals, Value: "IDR"}},
		Actions: []Action{{Name: "fec", Params: []Param{{Key: "mode", Value: "fixed"}, {Key: "parity", Value: "2"}}}},
	}, {ID: "empty", Priority: 1}}}
	_, err := Compile(f, Options{})
	if err == nil || err.Error() != `peer: rule "empty": no actions` {
		t.Errorf("got %v", err)
	}
	f.Rules = f.Rules[:1]
	s, err := Compile(f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var d Directive
	s.Evaluate(metadata(t, nil, videoPkt(0x65, 1)), nil, &d)
	if d.String() != "fec=fixed,parity=2" {
		t.Errorf("directive %v", &d)
	}
	f.Rules[0].Match[0].Value = "P" // Compile kept no reference
	if s.Rule(0).Match[0].Value != "IDR" {
		t.Error("Set shares the File's storage")
	}
}
