package ctrlmsg

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/bondd/bondd/rules"
)

// Control message types after the hello (MoMQ Table 5 code points in the
// comments).
const (
	TypeStateReport   = "path_state_report"   // PATH_STATE_REPORT (0x52), edge → concentrator
	TypeLabelUpdate   = "path_label_update"   // PATH_LABEL_UPDATE (0x53), edge → concentrator
	TypeMappingRule   = "path_mapping_rule"   // PATH_MAPPING_RULE (0x50), edge → concentrator
	TypeMappingResult = "path_mapping_result" // PATH_MAPPING_RESULT (0x51), concentrator → edge
)

// Caps is a set of control-plane capabilities, one bit per message family
// (MoMQ's ENABLE_MOMQ, 0x10, split so that a concentrator can take one
// family without the others). On the wire a set is the list of its names
// (Hello.Control, HelloReply.Control).
type Caps uint8

// Capabilities.
const (
	CapState   Caps = 1 << iota // "path_state": PATH_STATE_REPORT
	CapLabels                   // "path_labels": PATH_LABEL_UPDATE
	CapMapping                  // "path_mapping": PATH_MAPPING_RULE and PATH_MAPPING_RESULT
	// CapFlowTags ("flow_tags") is a data-plane capability with no
	// message: the peer reads flow tags (DATA header flag FlagFlow, a
	// per-flow sequence number in front of the inner packet) and
	// resequences the flows they number. A sender tags only towards a peer
	// that announced it.
	CapFlowTags

	CapsAll = CapState | CapLabels | CapMapping | CapFlowTags | CapRate // every capability this build knows
)

// capNames are the wire names of the capabilities, in list order.
var capNames = []struct {
	bit  Caps
	name string
}{
	{CapState, "path_state"},
	{CapLabels, "path_labels"},
	{CapMapping, "path_mapping"},
	{CapFlowTags, "flow_tags"},
	{CapRate, "rate"},
}

// CapsOf returns the capabilities named in list that this build knows;
// unknown names (a newer peer's) are ignored.
func CapsOf(list []string) Caps {
	var c Caps
	for _, s := range list {
		for _, n := range capNames {
			if s == n.name {
				c |= n.bit
			}
		}
	}
	return c
}

// Names returns the capabilities as a hello lists them; nil when empty.
func (c Caps) Names() []string {
	var out []string
	for _, n := range capNames {
		if c&n.bit != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

// Side is the end of a bond that sends a message type: FromEdge,
// FromConcentrator, or both.
type Side uint8

// Sides.
const (
	FromEdge Side = 1 << iota
	FromConcentrator
)

// Message is a control message after the hello: *StateReport,
// *LabelUpdate, *MappingRule, *MappingResult or *RateFeedback.
type Message interface {
	MessageType() string // the Type* constant of its "type" field
}

// Info describes a message type: the capability both ends must have
// negotiated for it, and who sends it.
type Info struct {
	Cap  Caps
	From Side
}

// typeInfo is one row of types.
type typeInfo struct {
	Info
	parse func(body []byte) (Message, error)
}

// types is every control message type this build knows.
var types = map[string]typeInfo{
	TypeStateReport:   {Info{CapState, FromEdge}, parseAs(ParseStateReport)},
	TypeLabelUpdate:   {Info{CapLabels, FromEdge}, parseAs(ParseLabelUpdate)},
	TypeMappingRule:   {Info{CapMapping, FromEdge}, parseAs(ParseMappingRule)},
	TypeMappingResult: {Info{CapMapping, FromConcentrator}, parseAs(ParseMappingResult)},
	TypeRateFeedback:  {Info{CapRate, FromEdge | FromConcentrator}, parseAs(ParseRateFeedback)},
}

func parseAs[M Message](f func([]byte) (M, error)) func([]byte) (Message, error) {
	return func(b []byte) (Message, error) {
		m, err := f(b)
		if err != nil {
			return nil, err
		}
		return m, nil
	}
}

// Lookup returns what a control message type needs, and whether this build
// knows it as a control message at all (TypeHello and TypeHelloReply are
// not: they belong to the handshake).
func Lookup(typ string) (Info, bool) {
	t, ok := types[typ]
	return t.Info, ok
}

// Parse parses and checks a control message body of type typ with the
// parse function of that type. It returns an error wrapping ErrBadMessage
// for a body that fails, and for a type that is not a control message
// (the hello and its reply included). The result does not retain body.
func Parse(typ string, body []byte) (Message, error) {
	t, ok := types[typ]
	if !ok {
		return nil, badf("unknown type %q", typ)
	}
	return t.parse(body)
}

// Path status names of a PathReport: policy.Status's String values.
const (
	StatusActive      = "ACTIVE"
	StatusDegraded    = "DEGRADED"
	StatusUnavailable = "UNAVAILABLE"
)

// StateReport is PATH_STATE_REPORT (MoMQ A.2): the edge's view of its
// paths. Seq increases by at least one per report of a bond id (an edge
// process); a receiver ignores a report whose Seq is not above the last it
// applied. At most MaxPaths entries, one per path name.
type StateReport struct {
	Type  string       `json:"type"` // TypeStateReport
	Seq   uint64       `json:"seq"`  // ≥ 1
	Paths []PathReport `json:"paths,omitempty"`
}

// MessageType implements Message.
func (*StateReport) MessageType() string { return TypeStateReport }

// PathReport is one path of a StateReport.
type PathReport struct {
	Path   string            `json:"path"`   // the uplink name, 1..MaxNameLen bytes
	Status string            `json:"status"` // StatusActive, StatusDegraded or StatusUnavailable
	Labels map[string]string `json:"labels,omitempty"`
}

// LabelUpdate is PATH_LABEL_UPDATE (MoMQ A.2): the full set of labels the
// edge assigns to one path, replacing the set it sent before (an empty set
// withdraws them).
type LabelUpdate struct {
	Type   string            `json:"type"` // TypeLabelUpdate
	Path   string            `json:"path"`
	Labels map[string]string `json:"labels,omitempty"`
}

// MessageType implements Message.
func (*LabelUpdate) MessageType() string { return TypeLabelUpdate }

// Rule operations of a MappingRule.
const (
	OpInstall = "install" // create the rule, or replace the rule with the same id
	OpRemove  = "remove"  // delete the rule
)

// MappingRule is PATH_MAPPING_RULE (MoMQ A.2): install or remove one rule of
// the edge's downlink rules. Request is the edge's number for the
// operation, echoed in the result. An install carries the rule in the
// structure of rules.Rule: match entries (MoMQ Table 6) and actions (Table
// 7 and bondd's own, named as in docs/rules.md). Whether the rule fits the
// limits and compiles is the receiver's answer (MappingResult), not a
// parse error.
type MappingRule struct {
	Type     string       `json:"type"` // TypeMappingRule
	Request  uint64       `json:"request"`
	Op       string       `json:"op"`                 // OpInstall or OpRemove
	ID       string       `json:"id"`                 // the rule id, 1..MaxRuleIDLen bytes
	Priority int          `json:"priority,omitempty"` // install: the rule's order
	Match    []RuleMatch  `json:"match,omitempty"`    // install: AND of entries; none is a catch-all
	Actions  []RuleAction `json:"actions,omitempty"`  // install: at least one
}

// MessageType implements Message.
func (*MappingRule) MessageType() string { return TypeMappingRule }

// RuleMatch is one match entry (MoMQ Table 6).
type RuleMatch struct {
	Key   string `json:"key"`
	Op    string `json:"op"`              // MatchEquals or MatchExists
	Value string `json:"value,omitempty"` // equals only
}

// Match operators of RuleMatch.Op.
const (
	MatchEquals = "equals"
	MatchExists = "exists"
)

// RuleAction is one action entry: a rules.Action.
type RuleAction struct {
	Name   string      `json:"name"`
	Key    string      `json:"key,omitempty"`   // prefer: the label key
	Value  string      `json:"value,omitempty"` // the scalar argument
	Params []RuleParam `json:"params,omitempty"`
}

// RuleParam is one parameter of an action's mapping form (fec).
type RuleParam struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Result codes of MappingResult.Status (MoMQ A.2).
const (
	ResultOK            = "OK"
	ResultRejected      = "REJECTED"       // limits or rate exceeded; the session's rules are unchanged
	ResultNotAuthorized = "NOT_AUTHORIZED" // the edge may not install rules; never with a reason
	ResultInvalidRule   = "INVALID_RULE"   // the rule does not compile; the reason says why
	ResultNotFound      = "NOT_FOUND"      // remove of a rule id that is not installed
)

// MappingResult is PATH_MAPPING_RESULT (MoMQ A.2): the concentrator's answer
// to one MappingRule. It acknowledges installation, not that the rule was
// followed.
type MappingResult struct {
	Type    string `json:"type"` // TypeMappingResult
	Request uint64 `json:"request"`
	ID      string `json:"id"`
	Status  string `json:"status"`           // a Result* code
	Reason  string `json:"reason,omitempty"` // at most MaxReasonLen bytes; empty for NOT_AUTHORIZED
}

// MessageType implements Message.
func (*MappingResult) MessageType() string { return TypeMappingResult }

// Bounds of the rule messages.
const (
	// MaxRuleIDLen bounds a rule id, in bytes: rules.MaxKeyBytes less room
	// for the prefix the concentrator gives edge rules ("edge.").
	MaxRuleIDLen  = rules.MaxKeyBytes - 5
	MaxReasonLen  = 1024 // bytes of a MappingResult reason
	MaxRuleFields = 64   // match entries, actions, or params of one action
)

// decode unmarshals body into v and checks its type field.
func decode(body []byte, typ string, v any, got *string) error {
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBadMessage, typ, err)
	}
	if *got != typ {
		return badf("type %q, want %q", *got, typ)
	}
	return nil
}

// ParseStateReport parses and checks a PATH_STATE_REPORT body: sequence
// number above 0, at most MaxPaths paths of distinct valid names, known
// statuses, labels as CheckLabels wants. The result does not retain body.
func ParseStateReport(body []byte) (*StateReport, error) {
	var m StateReport
	if err := decode(body, TypeStateReport, &m, &m.Type); err != nil {
		return nil, err
	}
	if m.Seq == 0 {
		return nil, badf("state report: sequence number 0")
	}
	if len(m.Paths) > MaxPaths {
		return nil, badf("state report: %d paths, at most %d", len(m.Paths), MaxPaths)
	}
	seen := make(map[string]bool, len(m.Paths))
	for i := range m.Paths {
		e := &m.Paths[i]
		if !ValidName(e.Path) || seen[e.Path] {
			return nil, badf("state report: path name empty, too long or repeated")
		}
		seen[e.Path] = true
		if !validStatus(e.Status) {
			return nil, badf("state report: path %q: unknown status %q", e.Path, e.Status)
		}
		if err := CheckLabels(e.Labels); err != nil {
			return nil, badf("state report: path %q: %v", e.Path, err)
		}
		if len(e.Labels) == 0 {
			e.Labels = nil
		}
	}
	if len(m.Paths) == 0 {
		m.Paths = nil
	}
	return &m, nil
}

// ParseLabelUpdate parses and checks a PATH_LABEL_UPDATE body.
func ParseLabelUpdate(body []byte) (*LabelUpdate, error) {
	var m LabelUpdate
	if err := decode(body, TypeLabelUpdate, &m, &m.Type); err != nil {
		return nil, err
	}
	if !ValidName(m.Path) {
		return nil, badf("label update: path name empty or too long")
	}
	if err := CheckLabels(m.Labels); err != nil {
		return nil, badf("label update: %v", err)
	}
	if len(m.Labels) == 0 {
		m.Labels = nil
	}
	return &m, nil
}

// ParseMappingRule parses and checks a PATH_MAPPING_RULE body: the
// operation, the rule id, the shape of an install (operators known, at
// least one action, no more than MaxRuleFields of anything) and that a
// remove carries no rule. The rule's content (keys, values, limits) is
// checked when it is installed.
func ParseMappingRule(body []byte) (*MappingRule, error) {
	var m MappingRule
	if err := decode(body, TypeMappingRule, &m, &m.Type); err != nil {
		return nil, err
	}
	if m.ID == "" || len(m.ID) > MaxRuleIDLen {
		return nil, badf("mapping rule: rule id empty or longer than %d bytes", MaxRuleIDLen)
	}
	switch m.Op {
	case OpRemove:
		if m.Priority != 0 || len(m.Match) != 0 || len(m.Actions) != 0 {
			return nil, badf("mapping rule: remove carries a rule")
		}
	case OpInstall:
		if len(m.Actions) == 0 || len(m.Actions) > MaxRuleFields || len(m.Match) > MaxRuleFields {
			return nil, badf("mapping rule: %d match entries and %d actions (1..%d actions, at most %d entries)",
				len(m.Match), len(m.Actions), MaxRuleFields, MaxRuleFields)
		}
		for _, e := range m.Match {
			switch {
			case e.Op == MatchExists && e.Value != "":
				return nil, badf("mapping rule: exists with a value")
			case e.Op != MatchExists && e.Op != MatchEquals:
				return nil, badf("mapping rule: unknown match operator %q", e.Op)
			}
		}
		for i := range m.Actions {
			a := &m.Actions[i]
			if len(a.Params) > MaxRuleFields {
				return nil, badf("mapping rule: %d parameters, at most %d", len(a.Params), MaxRuleFields)
			}
			if len(a.Params) == 0 {
				a.Params = nil
			}
		}
		if len(m.Match) == 0 {
			m.Match = nil
		}
	default:
		return nil, badf("mapping rule: unknown operation %q", m.Op)
	}
	return &m, nil
}

// ParseMappingResult parses and checks a PATH_MAPPING_RESULT body.
func ParseMappingResult(body []byte) (*MappingResult, error) {
	var m MappingResult
	if err := decode(body, TypeMappingResult, &m, &m.Type); err != nil {
		return nil, err
	}
	switch {
	case m.ID == "" || len(m.ID) > MaxRuleIDLen:
		return nil, badf("mapping result: rule id empty or longer than %d bytes", MaxRuleIDLen)
	case len(m.Reason) > MaxReasonLen:
		return nil, badf("mapping result: reason of %d bytes, at most %d", len(m.Reason), MaxReasonLen)
	}
	switch m.Status {
	case ResultOK, ResultRejected, ResultInvalidRule, ResultNotFound:
	case ResultNotAuthorized:
		if m.Reason != "" {
			return nil, badf("mapping result: NOT_AUTHORIZED with a reason")
		}
	default:
		return nil, badf("mapping result: unknown status %q", m.Status)
	}
	return &m, nil
}

// ValidName reports whether s is a path name or edge id a peer may send:
// 1 to MaxNameLen bytes.
func ValidName(s string) bool { return s != "" && len(s) <= MaxNameLen }

func validStatus(s string) bool {
	return s == StatusActive || s == StatusDegraded || s == StatusUnavailable
}

// CheckLabels checks a label set: at most MaxLabels labels, each key
// 1..MaxLabelKey bytes of the rule language's label-key alphabet (letters,
// digits and _.:/-, starting with a letter or digit), each value
// 1..MaxLabelValue bytes of UTF-8. The error names the first label that
// fails.
func CheckLabels(m map[string]string) error {
	if len(m) > MaxLabels {
		return fmt.Errorf("%d labels, at most %d", len(m), MaxLabels)
	}
	for k, v := range m {
		if !validLabelKey(k) {
			return fmt.Errorf("label key %q: want 1..%d bytes of [A-Za-z0-9_.:/-]", k, MaxLabelKey)
		}
		if v == "" || len(v) > MaxLabelValue || !utf8.ValidString(v) {
			return fmt.Errorf("label %s: value empty, longer than %d bytes or not UTF-8", k, MaxLabelValue)
		}
	}
	return nil
}

// validLabelKey reports whether k is a label key the rule language can
// name: 1..MaxLabelKey bytes of [A-Za-z0-9_.:/-], the first a letter or
// digit.
func validLabelKey(k string) bool {
	if k == "" || len(k) > MaxLabelKey {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '_' && c != '.' && c != ':' && c != '/' && c != '-') {
			return false
		}
	}
	return true
}
