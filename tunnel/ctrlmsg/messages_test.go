package ctrlmsg

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
	`{"type":"path_rate_feedback","path":"cell-a","start_us":1000,"end_us":51000,"bytes":62500,"datagrams":50,"lost":3,"highest_seq":4294967295,"owd_min_us":-20000,"owd_mean_us":-18000}`,
	`{"type":"path_rate_feedback","path":"sat","start_us":5,"end_us":5,"bytes":0,"datagrams":0,"lost":0,"highest_seq":0,"owd_min_us":0,"owd_mean_us":0}`,
}

func TestControlParseValid(t *testing.T) {
	for _, in := range ctrlSeeds {
		var typ struct{ Type string }
		json.Unmarshal([]byte(in), &typ)
		m, err := Parse(typ.Type, []byte(in))
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
	m2, err := Parse(typ, b)
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
		{"not json", TypeStateReport, `{`, "unexpected end"},
		{"wrong type", TypeStateReport, `{"type":"path_label_update","seq":1}`, "want"},
		{"seq 0", TypeStateReport, `{"type":"path_state_report","seq":0}`, "sequence number 0"},
		{"seq negative", TypeStateReport, `{"type":"path_state_report","seq":-1}`, "cannot unmarshal"},
		{"seq string", TypeStateReport, `{"type":"path_state_report","seq":"1"}`, "cannot unmarshal"},
		{"status", TypeStateReport, `{"type":"path_state_report","seq":1,"paths":[{"path":"a","status":"active"}]}`, "unknown status"},
		{"no path name", TypeStateReport, `{"type":"path_state_report","seq":1,"paths":[{"status":"ACTIVE"}]}`, "path name"},
		{"repeated path", TypeStateReport, `{"type":"path_state_report","seq":1,"paths":[{"path":"a","status":"ACTIVE"},{"path":"a","status":"DEGRADED"}]}`, "repeated"},
		{"long path", TypeStateReport, `{"type":"path_state_report","seq":1,"paths":[{"path":"` + long(65) + `","status":"ACTIVE"}]}`, "too long"},
		{"many paths", TypeStateReport, `{"type":"path_state_report","seq":1,"paths":` + manyPaths(17) + `}`, "17 paths"},
		{"report label key", TypeStateReport, `{"type":"path_state_report","seq":1,"paths":[{"path":"a","status":"ACTIVE","labels":{"-x":"v"}}]}`, "label key"},
		{"update no path", TypeLabelUpdate, `{"type":"path_label_update","labels":{"a":"b"}}`, "path name"},
		{"many labels", TypeLabelUpdate, `{"type":"path_label_update","path":"a","labels":` + manyLabels(33) + `}`, "33 labels"},
		{"long key", TypeLabelUpdate, `{"type":"path_label_update","path":"a","labels":{"` + long(129) + `":"v"}}`, "label key"},
		{"long value", TypeLabelUpdate, `{"type":"path_label_update","path":"a","labels":{"k":"` + long(1025) + `"}}`, "value"},
		{"empty value", TypeLabelUpdate, `{"type":"path_label_update","path":"a","labels":{"k":""}}`, "value"},
		{"space in key", TypeLabelUpdate, `{"type":"path_label_update","path":"a","labels":{"a b":"v"}}`, "label key"},
		{"labels list", TypeLabelUpdate, `{"type":"path_label_update","path":"a","labels":["a"]}`, "cannot unmarshal"},
		{"no op", TypeMappingRule, `{"type":"path_mapping_rule","request":1,"id":"r","actions":[{"name":"priority","value":"1"}]}`, "unknown operation"},
		{"bad op", TypeMappingRule, `{"type":"path_mapping_rule","request":1,"op":"INSTALL","id":"r","actions":[{"name":"priority","value":"1"}]}`, "unknown operation"},
		{"no id", TypeMappingRule, `{"type":"path_mapping_rule","request":1,"op":"remove"}`, "rule id"},
		{"long id", TypeMappingRule, `{"type":"path_mapping_rule","request":1,"op":"remove","id":"` + long(MaxRuleIDLen+1) + `"}`, "rule id"},
		{"remove with rule", TypeMappingRule, `{"type":"path_mapping_rule","request":1,"op":"remove","id":"r","priority":3}`, "remove carries"},
		{"install no action", TypeMappingRule, `{"type":"path_mapping_rule","request":1,"op":"install","id":"r"}`, "actions"},
		{"match op", TypeMappingRule, `{"type":"path_mapping_rule","request":1,"op":"install","id":"r","match":[{"key":"a","op":"contains","value":"x"}],"actions":[{"name":"priority","value":"1"}]}`, "unknown match operator"},
		{"exists value", TypeMappingRule, `{"type":"path_mapping_rule","request":1,"op":"install","id":"r","match":[{"key":"a","op":"exists","value":"x"}],"actions":[{"name":"priority","value":"1"}]}`, "exists with a value"},
		{"result status", TypeMappingResult, `{"type":"path_mapping_result","request":1,"id":"r","status":"ok"}`, "unknown status"},
		{"result no id", TypeMappingResult, `{"type":"path_mapping_result","request":1,"status":"OK"}`, "rule id"},
		{"not authorized with reason", TypeMappingResult, `{"type":"path_mapping_result","request":1,"id":"r","status":"NOT_AUTHORIZED","reason":"edge not allowed"}`, "NOT_AUTHORIZED with a reason"},
		{"long reason", TypeMappingResult, `{"type":"path_mapping_result","request":1,"id":"r","status":"REJECTED","reason":"` + long(1025) + `"}`, "reason"},
		{"rate no path", TypeRateFeedback, `{"type":"path_rate_feedback","start_us":1,"end_us":2}`, "path name"},
		{"rate backwards", TypeRateFeedback, `{"type":"path_rate_feedback","path":"a","start_us":3,"end_us":2}`, "interval"},
		{"rate long interval", TypeRateFeedback, `{"type":"path_rate_feedback","path":"a","start_us":0,"end_us":60000001}`, "interval"},
		{"rate many lost", TypeRateFeedback, `{"type":"path_rate_feedback","path":"a","lost":67108865}`, "lost"},
		{"rate mean below min", TypeRateFeedback, `{"type":"path_rate_feedback","path":"a","owd_min_us":5,"owd_mean_us":4}`, "mean delay"},
		{"rate negative bytes", TypeRateFeedback, `{"type":"path_rate_feedback","path":"a","bytes":-1}`, "cannot unmarshal"},
		{"Hello is not control", TypeHello, `{"type":"Hello"}`, "unknown type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.typ, []byte(tt.body))
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrBadMessage) {
				t.Fatalf("parse = %v, want an ErrBadMessage containing %q", err, tt.want)
			}
		})
	}
}

func TestCapsNegotiation(t *testing.T) {
	if c := CapsOf([]string{"path_mapping", "future_thing", "path_state"}); c != CapMapping|CapState {
		t.Fatalf("CapsOf = %b", c)
	}
	if got := CapsAll.Names(); !reflect.DeepEqual(got, []string{"path_state", "path_labels", "path_mapping", "flow_tags", "rate"}) {
		t.Fatalf("names = %v", got)
	}
	if Caps(0).Names() != nil {
		t.Fatal("no caps should list nothing (omitted from the Hello)")
	}
	h := Hello{Version: Version, EdgeID: "e", Path: "p", Control: []string{strings.Repeat("c", MaxCapLen+1)}}
	if h.Check(Version, lanes) == nil {
		t.Fatal("a long capability passed the Hello check")
	}
	h.Control = make([]string, MaxCaps+1)
	if h.Check(Version, lanes) == nil {
		t.Fatal("too many capabilities passed the Hello check")
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
	m := InstallOf(3, &r)
	b, _ := json.Marshal(m)
	m2, err := ParseMappingRule(b)
	if err != nil {
		t.Fatal(err)
	}
	got := m2.Rule()
	if got.ID != "keyframes" || got.Priority != 400 || len(got.Match) != 2 || len(got.Actions) != 4 {
		t.Fatalf("rule %+v", got)
	}
	if _, err := rules.Compile(&rules.File{Name: "x", Rules: []rules.Rule{got}}, rules.Options{}); err != nil {
		t.Fatalf("converted rule does not compile: %v", err)
	}
	if a, b := got.String(), r.String(); a != b {
		t.Fatalf("converted rule\n%s\nwant\n%s", a, b)
	}
}
