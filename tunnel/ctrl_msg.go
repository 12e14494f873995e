package tunnel

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/rules"
)

// The control plane's messages (MoMQ appendix A.2, Table 5), carried on the
// control stream after the hello in the framing of control.go: a 2-byte
// length, then one JSON object with a "type" field. The edge sends
// PATH_STATE_REPORT, PATH_LABEL_UPDATE and PATH_MAPPING_RULE; the
// concentrator answers each PATH_MAPPING_RULE with a PATH_MAPPING_RESULT.
// MoMQ's ENABLE_MOMQ setup parameter becomes the capability list of the
// hello (hello.Control) that the concentrator echoes in its reply, one
// capability per message family.
//
// Every field a peer sends is checked by the parse function of its message
// (parseStateReport, parseLabelUpdate, parseMappingRule,
// parseMappingResult): a message that fails is a protocol violation and
// closes the connection it came on. Unknown JSON fields are ignored, so a
// newer peer may add fields; unknown message types are skipped (counted).
// A parsed message marshals back (json.Marshal) to bytes that parse to the
// same message.

// Control message types after the hello (MoMQ Table 5 code points in the
// comments).
const (
	msgStateReport   = "path_state_report"   // PATH_STATE_REPORT (0x52), edge → concentrator
	msgLabelUpdate   = "path_label_update"   // PATH_LABEL_UPDATE (0x53), edge → concentrator
	msgMappingRule   = "path_mapping_rule"   // PATH_MAPPING_RULE (0x50), edge → concentrator
	msgMappingResult = "path_mapping_result" // PATH_MAPPING_RESULT (0x51), concentrator → edge
)

// Capabilities of hello.Control and helloReply.Control: MoMQ's ENABLE_MOMQ
// (0x10), split per message family so that a concentrator can take one
// family without the others.
const (
	capPathState   = "path_state"   // PATH_STATE_REPORT
	capPathLabels  = "path_labels"  // PATH_LABEL_UPDATE
	capPathMapping = "path_mapping" // PATH_MAPPING_RULE and PATH_MAPPING_RESULT
)

// ctrlCaps is a set of negotiated capabilities, one bit each.
type ctrlCaps uint8

const (
	ctrlCapState ctrlCaps = 1 << iota
	ctrlCapLabels
	ctrlCapMapping

	ctrlCapsAll = ctrlCapState | ctrlCapLabels | ctrlCapMapping
)

// Bounds on the capability list of a hello.
const (
	maxCaps   = 8  // entries
	maxCapLen = 32 // bytes per entry
)

// capsOf returns the capabilities named in list that this build knows;
// unknown names are ignored (a newer peer's).
func capsOf(list []string) ctrlCaps {
	var c ctrlCaps
	for _, s := range list {
		switch s {
		case capPathState:
			c |= ctrlCapState
		case capPathLabels:
			c |= ctrlCapLabels
		case capPathMapping:
			c |= ctrlCapMapping
		}
	}
	return c
}

// names returns the capabilities as hello.Control lists them; nil when empty.
func (c ctrlCaps) names() []string {
	var out []string
	for _, x := range []struct {
		bit  ctrlCaps
		name string
	}{{ctrlCapState, capPathState}, {ctrlCapLabels, capPathLabels}, {ctrlCapMapping, capPathMapping}} {
		if c&x.bit != 0 {
			out = append(out, x.name)
		}
	}
	return out
}

// capFor returns the capability a control message type needs, and whether
// the type is a control message at all.
func capFor(typ string) (ctrlCaps, bool) {
	switch typ {
	case msgStateReport:
		return ctrlCapState, true
	case msgLabelUpdate:
		return ctrlCapLabels, true
	case msgMappingRule, msgMappingResult:
		return ctrlCapMapping, true
	}
	return 0, false
}

// stateReport is PATH_STATE_REPORT (MoMQ A.2): the edge's view of its
// paths. Seq increases by at least one per report of a bond id (an edge
// process); a receiver ignores a report whose Seq is not above the last it
// applied. At most maxPaths entries, one per path name.
type stateReport struct {
	Type  string       `json:"type"`
	Seq   uint64       `json:"seq"` // ≥ 1
	Paths []pathReport `json:"paths,omitempty"`
}

// pathReport is one path of a stateReport.
type pathReport struct {
	Path   string            `json:"path"`   // the uplink name, 1..maxNameLen bytes
	Status string            `json:"status"` // ACTIVE, DEGRADED or UNAVAILABLE
	Labels map[string]string `json:"labels,omitempty"`
}

// labelUpdate is PATH_LABEL_UPDATE (MoMQ A.2): the full set of labels the
// edge assigns to one path, replacing the set it sent before (an empty set
// withdraws them). The concentrator applies descriptive keys only (see
// bondControl.effectiveLabels).
type labelUpdate struct {
	Type   string            `json:"type"`
	Path   string            `json:"path"`
	Labels map[string]string `json:"labels,omitempty"`
}

// Rule operations of a mappingRule.
const (
	opInstall = "install" // create the rule, or replace the rule with the same id
	opRemove  = "remove"  // delete the rule
)

// mappingRule is PATH_MAPPING_RULE (MoMQ A.2): install or remove one rule of
// the edge's downlink rules. Request is the edge's number for the
// operation, echoed in the result. An install carries the rule in the
// structure of rules.Rule: match entries (MoMQ Table 6) and actions (Table
// 7 and bondd's own, named as in docs/rules.md). Whether the rule fits the
// limits and compiles is the receiver's answer (mappingResult), not a
// parse error.
type mappingRule struct {
	Type     string       `json:"type"`
	Request  uint64       `json:"request"`
	Op       string       `json:"op"`                 // opInstall or opRemove
	ID       string       `json:"id"`                 // the rule id, 1..maxRuleIDLen bytes
	Priority int          `json:"priority,omitempty"` // install: the rule's order
	Match    []ruleMatch  `json:"match,omitempty"`    // install: AND of entries; none is a catch-all
	Actions  []ruleAction `json:"actions,omitempty"`  // install: at least one
}

// ruleMatch is one match entry (MoMQ Table 6).
type ruleMatch struct {
	Key   string `json:"key"`
	Op    string `json:"op"`              // "equals" or "exists"
	Value string `json:"value,omitempty"` // equals only
}

// Match operators of ruleMatch.Op.
const (
	matchEquals = "equals"
	matchExists = "exists"
)

// ruleAction is one action entry: a rules.Action.
type ruleAction struct {
	Name   string      `json:"name"`
	Key    string      `json:"key,omitempty"`   // prefer: the label key
	Value  string      `json:"value,omitempty"` // the scalar argument
	Params []ruleParam `json:"params,omitempty"`
}

// ruleParam is one parameter of an action's mapping form (fec).
type ruleParam struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Result codes of mappingResult.Status (MoMQ A.2).
const (
	resultOK            = "OK"
	resultRejected      = "REJECTED"       // limits or rate exceeded; the session's rules are unchanged
	resultNotAuthorized = "NOT_AUTHORIZED" // the edge may not install rules; never with a reason
	resultInvalidRule   = "INVALID_RULE"   // the rule does not compile; the reason says why
	resultNotFound      = "NOT_FOUND"      // remove of a rule id that is not installed
)

// mappingResult is PATH_MAPPING_RESULT (MoMQ A.2): the concentrator's answer
// to one mappingRule. It acknowledges installation, not that the rule was
// followed.
type mappingResult struct {
	Type    string `json:"type"`
	Request uint64 `json:"request"`
	ID      string `json:"id"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"` // at most maxReasonLen bytes; empty for NOT_AUTHORIZED
}

// Bounds of the control messages, beyond maxControlMsg and the label
// bounds of control.go.
const (
	maxRuleIDLen  = rules.MaxKeyBytes - len(edgeRulePrefix) // bytes
	maxReasonLen  = 1024                                    // bytes of a mappingResult reason
	maxRuleFields = 64                                      // match entries, actions, or params of one action
)

// errControl is wrapped by every parse error of a control message.
var errControl = errors.New("control message")

func ctrlErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errControl, fmt.Sprintf(format, a...))
}

// decodeControl unmarshals body into v and checks its type field.
func decodeControl(body []byte, typ string, v any, got *string) error {
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: %s: %v", errControl, typ, err)
	}
	if *got != typ {
		return ctrlErr("type %q, want %q", *got, typ)
	}
	return nil
}

// parseStateReport parses and checks a PATH_STATE_REPORT body. The result
// does not retain body.
func parseStateReport(body []byte) (*stateReport, error) {
	var m stateReport
	if err := decodeControl(body, msgStateReport, &m, &m.Type); err != nil {
		return nil, err
	}
	if m.Seq == 0 {
		return nil, ctrlErr("state report: sequence number 0")
	}
	if len(m.Paths) > maxPaths {
		return nil, ctrlErr("state report: %d paths, at most %d", len(m.Paths), maxPaths)
	}
	seen := make(map[string]bool, len(m.Paths))
	for i := range m.Paths {
		e := &m.Paths[i]
		if !validName(e.Path) || seen[e.Path] {
			return nil, ctrlErr("state report: path name empty, too long or repeated")
		}
		seen[e.Path] = true
		if _, ok := parseStatus(e.Status); !ok {
			return nil, ctrlErr("state report: path %q: unknown status %q", e.Path, e.Status)
		}
		if err := checkLabels(e.Labels); err != nil {
			return nil, ctrlErr("state report: path %q: %v", e.Path, err)
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

// parseLabelUpdate parses and checks a PATH_LABEL_UPDATE body.
func parseLabelUpdate(body []byte) (*labelUpdate, error) {
	var m labelUpdate
	if err := decodeControl(body, msgLabelUpdate, &m, &m.Type); err != nil {
		return nil, err
	}
	if !validName(m.Path) {
		return nil, ctrlErr("label update: path name empty or too long")
	}
	if err := checkLabels(m.Labels); err != nil {
		return nil, ctrlErr("label update: %v", err)
	}
	if len(m.Labels) == 0 {
		m.Labels = nil
	}
	return &m, nil
}

// parseMappingRule parses and checks a PATH_MAPPING_RULE body: the
// operation, the rule id, the shape of an install (operators known, at
// least one action, no more than maxRuleFields of anything) and that a
// remove carries no rule. The rule's content (keys, values, limits) is
// checked when it is installed.
func parseMappingRule(body []byte) (*mappingRule, error) {
	var m mappingRule
	if err := decodeControl(body, msgMappingRule, &m, &m.Type); err != nil {
		return nil, err
	}
	if m.ID == "" || len(m.ID) > maxRuleIDLen {
		return nil, ctrlErr("mapping rule: rule id empty or longer than %d bytes", maxRuleIDLen)
	}
	switch m.Op {
	case opRemove:
		if m.Priority != 0 || len(m.Match) != 0 || len(m.Actions) != 0 {
			return nil, ctrlErr("mapping rule: remove carries a rule")
		}
	case opInstall:
		if len(m.Actions) == 0 || len(m.Actions) > maxRuleFields || len(m.Match) > maxRuleFields {
			return nil, ctrlErr("mapping rule: %d match entries and %d actions (1..%d actions, at most %d entries)",
				len(m.Match), len(m.Actions), maxRuleFields, maxRuleFields)
		}
		for _, e := range m.Match {
			switch {
			case e.Op == matchExists && e.Value != "":
				return nil, ctrlErr("mapping rule: exists with a value")
			case e.Op != matchExists && e.Op != matchEquals:
				return nil, ctrlErr("mapping rule: unknown match operator %q", e.Op)
			}
		}
		for i := range m.Actions {
			a := &m.Actions[i]
			if len(a.Params) > maxRuleFields {
				return nil, ctrlErr("mapping rule: %d parameters, at most %d", len(a.Params), maxRuleFields)
			}
			if len(a.Params) == 0 {
				a.Params = nil
			}
		}
		if len(m.Match) == 0 {
			m.Match = nil
		}
	default:
		return nil, ctrlErr("mapping rule: unknown operation %q", m.Op)
	}
	return &m, nil
}

// parseMappingResult parses and checks a PATH_MAPPING_RESULT body.
func parseMappingResult(body []byte) (*mappingResult, error) {
	var m mappingResult
	if err := decodeControl(body, msgMappingResult, &m, &m.Type); err != nil {
		return nil, err
	}
	switch {
	case m.ID == "" || len(m.ID) > maxRuleIDLen:
		return nil, ctrlErr("mapping result: rule id empty or longer than %d bytes", maxRuleIDLen)
	case len(m.Reason) > maxReasonLen:
		return nil, ctrlErr("mapping result: reason of %d bytes, at most %d", len(m.Reason), maxReasonLen)
	}
	switch m.Status {
	case resultOK, resultRejected, resultInvalidRule, resultNotFound:
	case resultNotAuthorized:
		if m.Reason != "" {
			return nil, ctrlErr("mapping result: NOT_AUTHORIZED with a reason")
		}
	default:
		return nil, ctrlErr("mapping result: unknown status %q", m.Status)
	}
	return &m, nil
}

// parseControl parses a control message body of type typ with the parse
// function of that type. It returns an error for a type that is not a
// control message (hello and hello_reply included).
func parseControl(typ string, body []byte) (any, error) {
	switch typ {
	case msgStateReport:
		return parseStateReport(body)
	case msgLabelUpdate:
		return parseLabelUpdate(body)
	case msgMappingRule:
		return parseMappingRule(body)
	case msgMappingResult:
		return parseMappingResult(body)
	}
	return nil, ctrlErr("unknown type %q", typ)
}

// validName reports whether s is a path name a peer may send: 1 to
// maxNameLen bytes.
func validName(s string) bool { return s != "" && len(s) <= maxNameLen }

// checkLabels checks a label set a peer sent: at most maxLabels labels,
// each key 1..maxLabelKey bytes of the rule language's label-key alphabet
// (letters, digits and _.:/-, starting with a letter or digit), each value
// 1..maxLabelValue bytes of UTF-8.
func checkLabels(m map[string]string) error {
	if len(m) > maxLabels {
		return fmt.Errorf("%d labels, at most %d", len(m), maxLabels)
	}
	for k, v := range m {
		if !validLabelKey(k) {
			return fmt.Errorf("label key %q: want 1..%d bytes of [A-Za-z0-9_.:/-]", k, maxLabelKey)
		}
		if v == "" || len(v) > maxLabelValue || !utf8.ValidString(v) {
			return fmt.Errorf("label %s: value empty, longer than %d bytes or not UTF-8", k, maxLabelValue)
		}
	}
	return nil
}

// validLabelKey reports whether k is a label key the rule language can
// name: 1..maxLabelKey bytes of [A-Za-z0-9_.:/-], the first a letter or
// digit.
func validLabelKey(k string) bool {
	if k == "" || len(k) > maxLabelKey {
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

// parseStatus maps a status name of a report to a policy.Status.
func parseStatus(s string) (policy.Status, bool) {
	switch s {
	case "ACTIVE":
		return policy.StatusActive, true
	case "DEGRADED":
		return policy.StatusDegraded, true
	case "UNAVAILABLE":
		return policy.StatusUnavailable, true
	}
	return 0, false
}

// toRule converts an install's rule to the rules package's form, with the
// id prefixed by edgeRulePrefix. Line is 0: the rule has no file.
func (m *mappingRule) toRule() rules.Rule {
	r := rules.Rule{ID: edgeRulePrefix + m.ID, Priority: m.Priority}
	for _, e := range m.Match {
		op := rules.OpEquals
		if e.Op == matchExists {
			op = rules.OpExists
		}
		r.Match = append(r.Match, rules.Match{Key: e.Key, Op: op, Value: e.Value})
	}
	for _, a := range m.Actions {
		ra := rules.Action{Name: a.Name, Key: a.Key, Value: a.Value}
		for _, p := range a.Params {
			ra.Params = append(ra.Params, rules.Param{Key: p.Key, Value: p.Value})
		}
		r.Actions = append(r.Actions, ra)
	}
	return r
}

// mappingRuleFor builds the install of rule r (as Parse or Set.Rule give
// it) under request id req.
func mappingRuleFor(req uint64, r *rules.Rule) *mappingRule {
	m := &mappingRule{Type: msgMappingRule, Request: req, Op: opInstall, ID: r.ID, Priority: r.Priority}
	for _, e := range r.Match {
		op := matchEquals
		if e.Op == rules.OpExists {
			op = matchExists
		}
		m.Match = append(m.Match, ruleMatch{Key: e.Key, Op: op, Value: e.Value})
	}
	for _, a := range r.Actions {
		ra := ruleAction{Name: a.Name, Key: a.Key, Value: a.Value}
		for _, p := range a.Params {
			ra.Params = append(ra.Params, ruleParam{Key: p.Key, Value: p.Value})
		}
		m.Actions = append(m.Actions, ra)
	}
	return m
}
