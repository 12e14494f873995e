package tunnel

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/bondd/bondd/rules"
)

// ctrlSeeds are valid control message bodies of every type, for the table
// tests and as fuzz seeds.
var ctrlSeeds = []string{
	`{"type":"path_state_report","seq":1,"paths":[{"path":"cell-a","status":"ACTIVE","labels":{"link_type":"cellular"}},{"path":"sat","status":"UNAVAILABLE"}]}`,
	`{"type":"path_state_report","seq":18446744073709551615}`,
	`{"type":"path_label_update","path":"cell-a","labels":{"carrier":"acme","cost_class":"free"}}`,
	`{"type":"path_label_update","path":"cell-a"}`,
	`{"type":"path_mapping_rule","request":7,"op":"install","id":"keyframes","priority":400,"match":[{"key":"frame_type","op":"equals","value":"IDR"},{"key":"rtp_ssrc","op":"exists"}],"actions":[{"name":"priority","value":"200"},{"name":"prefer","key":"link_type","value":"satellite"},{"name":"fec","params":[{"key":"mode","value":"fixed"},{"key":"parity","value":"4"}]}]}`,
	`{"type":"path_mapping_rule","request":8,"op":"remove","id":"keyframes"}`,
	`{"type":"path_mapping_result","request":7,"id":"keyframes","status":"OK"}`,
	`{"type":"path_mapping_result","request":9,"id":"x","status":"INVALID_RULE","reason":"edge rule: match frame_typ: unknown key"}`,
	`{"type":"path_mapping_result","request":9,"id":"x","status":"NOT_AUTHORIZED"}`,
}

func TestControlParseValid(t *testing.T) {
	for _, in := range ctrlSeeds {
		var typ struct{ Type string }
		json.Unmarshal([]byte(in), &typ)
		m, err := parseControl(typ.Type, []byte(in))
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		checkRoundTrip(t, typ.Type, m)
	}
}

// checkRoundTrip marshals m, parses the bytes and checks that the result
// equals m and marshals to the same bytes.
func checkRoundTrip(t testing.TB, typ string, m any) {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatalf("marshal %+v: %v", m, err)
	}
	m2, err := parseControl(typ, b)
	if err != nil {
		t.Fatalf("parse of marshalled %s: %v", b, err)
	}
	if !reflect.DeepEqual(m, m2) {
		t.Fatalf("round trip changed the message:\n%+v\n%+v", m, m2)
	}
	if b2, _ := json.Marshal(m2); !bytes.Equal(b, b2) {
		t.Fatalf("round trip changed the bytes:\n%s\n%s", b, b2)
	}
}

func TestControlParseInvalid(t *testing.T) {
	long := func(n int) string { return strings.Repeat("k", n) }
	manyLabels := func(n int) string {
		var parts []string
		for i := range n {
			parts = append(parts, `"k`+strings.Repeat("x", i)+`":"v"`)
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	manyPaths := func(n int) string {
		var parts []string
		for i := range n {
			parts = append(parts, `{"path":"p`+strings.Repeat("x", i)+`","status":"ACTIVE"}`)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	tests := []struct {
		name, typ, body, want string
	}{
		{"not json", msgStateReport, `{`, "unexpected end"},
		{"wrong type", msgStateReport, `{"type":"path_label_update","seq":1}`, "want"},
		{"seq 0", msgStateReport, `{"type":"path_state_report","seq":0}`, "sequence number 0"},
		{"seq negative", msgStateReport, `{"type":"path_state_report","seq":-1}`, "cannot unmarshal"},
		{"seq string", msgStateReport, `{"type":"path_state_report","seq":"1"}`, "cannot unmarshal"},
		{"status", msgStateReport, `{"type":"path_state_report","seq":1,"paths":[{"path":"a","status":"active"}]}`, "unknown status"},
		{"no path name", msgStateReport, `{"type":"path_state_report","seq":1,"paths":[{"status":"ACTIVE"}]}`, "path name"},
		{"repeated path", msgStateReport, `{"type":"path_state_report","seq":1,"paths":[{"path":"a","status":"ACTIVE"},{"path":"a","status":"DEGRADED"}]}`, "repeated"},
		{"long path", msgStateReport, `{"type":"path_state_report","seq":1,"paths":[{"path":"` + long(65) + `","status":"ACTIVE"}]}`, "too long"},
		{"many paths", msgStateReport, `{"type":"path_state_report","seq":1,"paths":` + manyPaths(17) + `}`, "17 paths"},
		{"report label key", msgStateReport, `{"type":"path_state_report","seq":1,"paths":[{"path":"a","status":"ACTIVE","labels":{"-x":"v"}}]}`, "label key"},
		{"update no path", msgLabelUpdate, `{"type":"path_label_update","labels":{"a":"b"}}`, "path name"},
		{"many labels", msgLabelUpdate, `{"type":"path_label_update","path":"a","labels":` + manyLabels(33) + `}`, "33 labels"},
		{"long key", msgLabelUpdate, `{"type":"path_label_update","path":"a","labels":{"` + long(129) + `":"v"}}`, "label key"},
		{"long value", msgLabelUpdate, `{"type":"path_label_update","path":"a","labels":{"k":"` + long(1025) + `"}}`, "value"},
		{"empty value", msgLabelUpdate, `{"type":"path_label_update","path":"a","labels":{"k":""}}`, "value"},
		{"space in key", msgLabelUpdate, `{"type":"path_label_update","path":"a","labels":{"a b":"v"}}`, "label key"},
		{"labels list", msgLabelUpdate, `{"type":"path_label_update","path":"a","labels":["a"]}`, "cannot unmarshal"},
		{"no op", msgMappingRule, `{"type":"path_mapping_rule","request":1,"id":"r","actions":[{"name":"priority","value":"1"}]}`, "unknown operation"},
		{"bad op", msgMappingRule, `{"type":"path_mapping_rule","request":1,"op":"INSTALL","id":"r","actions":[{"name":"priority","value":"1"}]}`, "unknown operation"},
		{"no id", msgMappingRule, `{"type":"path_mapping_rule","request":1,"op":"remove"}`, "rule id"},
		{"long id", msgMappingRule, `{"type":"path_mapping_rule","request":1,"op":"remove","id":"` + long(maxRuleIDLen+1) + `"}`, "rule id"},
		{"remove with rule", msgMappingRule, `{"type":"path_mapping_rule","request":1,"op":"remove","id":"r","priority":3}`, "remove carries"},
		{"install no action", msgMappingRule, `{"type":"path_mapping_rule","request":1,"op":"install","id":"r"}`, "actions"},
		{"match op", msgMappingRule, `{"type":"path_mapping_rule","request":1,"op":"install","id":"r","match":[{"key":"a","op":"contains","value":"x"}],"actions":[{"name":"priority","value":"1"}]}`, "unknown match operator"},
		{"exists value", msgMappingRule, `{"type":"path_mapping_rule","request":1,"op":"install","id":"r","match":[{"key":"a","op":"exists","value":"x"}],"actions":[{"name":"priority","value":"1"}]}`, "exists with a value"},
		{"result status", msgMappingResult, `{"type":"path_mapping_result","request":1,"id":"r","status":"ok"}`, "unknown status"},
		{"result no id", msgMappingResult, `{"type":"path_mapping_result","request":1,"status":"OK"}`, "rule id"},
		{"not authorized with reason", msgMappingResult, `{"type":"path_mapping_result","request":1,"id":"r","status":"NOT_AUTHORIZED","reason":"edge not allowed"}`, "NOT_AUTHORIZED with a reason"},
		{"long reason", msgMappingResult, `{"type":"path_mapping_result","request":1,"id":"r","status":"REJECTED","reason":"` + long(1025) + `"}`, "reason"},
		{"hello is not control", msgHello, `{"type":"hello"}`, "unknown type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseControl(tt.typ, []byte(tt.body))
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, errControl) {
				t.Fatalf("parse = %v, want an errControl containing %q", err, tt.want)
			}
		})
	}
}

func TestCapsNegotiation(t *testing.T) {
	if c := capsOf([]string{"path_mapping", "future_thing", "path_state"}); c != ctrlCapMapping|ctrlCapState {
		t.Fatalf("capsOf = %b", c)
	}
	if got := ctrlCapsAll.names(); !reflect.DeepEqual(got, []string{capPathState, capPathLabels, capPathMapping}) {
		t.Fatalf("names = %v", got)
	}
	if ctrlCaps(0).names() != nil {
		t.Fatal("no caps should list nothing (omitted from the hello)")
	}
	h := hello{Version: Version, EdgeID: "e", Path: "p", Control: []string{strings.Repeat("c", maxCapLen+1)}}
	if h.check() == nil {
		t.Fatal("a long capability passed the hello check")
	}
	h.Control = make([]string, maxCaps+1)
	if h.check() == nil {
		t.Fatal("too many capabilities passed the hello check")
	}
}

// TestMappingRuleConversion checks that a rule as Parse gives it survives
// the trip to a message and back to a rule.
func TestMappingRuleConversion(t *testing.T) {
	f, err := rules.Parse("r.yaml", []byte(`rules:
  - id: keyframes
    priority: 400
    match:
      frame_type: IDR
      rtp_ssrc: {exists: true}
    actions:
      priority: 200
      prefer: {link_type: satellite, cost_class: free}
      fec: {mode: adaptive, k: 10}
`))
	if err != nil {
		t.Fatal(err)
	}
	r := f.Rules[0]
	m := mappingRuleFor(3, &r)
	b, _ := json.Marshal(m)
	m2, err := parseMappingRule(b)
	if err != nil {
		t.Fatal(err)
	}
	got := m2.toRule()
	if got.ID != edgeRulePrefix+"keyframes" || got.Priority != 400 || len(got.Match) != 2 || len(got.Actions) != 4 {
		t.Fatalf("rule %+v", got)
	}
	got.ID = r.ID
	if _, err := rules.Compile(&rules.File{Name: "x", Rules: []rules.Rule{got}}, rules.Options{}); err != nil {
		t.Fatalf("converted rule does not compile: %v", err)
	}
	if a, b := got.String(), r.String(); a != b {
		t.Fatalf("converted rule\n%s\nwant\n%s", a, b)
	}
}

func TestRuleLimits(t *testing.T) {
	m := &mappingRule{Op: opInstall, ID: "r", Actions: []ruleAction{{Name: "priority", Value: "1"}}}
	if why := ruleLimits(m); why != "" {
		t.Fatal(why)
	}
	m.Match = make([]ruleMatch, rules.MaxMatchEntries+1)
	if ruleLimits(m) == "" {
		t.Fatal("11 match entries passed")
	}
	m.Match = []ruleMatch{{Key: "k", Op: matchEquals, Value: strings.Repeat("v", rules.MaxValueBytes+1)}}
	if ruleLimits(m) == "" {
		t.Fatal("long value passed")
	}
	m.Match = nil
	m.Actions = make([]ruleAction, rules.MaxActions+1)
	if ruleLimits(m) == "" {
		t.Fatal("21 actions passed")
	}
	m.Actions = []ruleAction{{Name: "fec", Params: []ruleParam{{Key: strings.Repeat("k", rules.MaxKeyBytes+1), Value: "1"}}}}
	if ruleLimits(m) == "" {
		t.Fatal("long param key passed")
	}
}

func TestTruncateReason(t *testing.T) {
	s := strings.Repeat("é", maxReasonLen) // 2 bytes each
	got := truncateReason(s)
	if len(got) > maxReasonLen || !strings.HasPrefix(s, got) || len(got) < maxReasonLen-1 {
		t.Fatalf("len %d", len(got))
	}
}
