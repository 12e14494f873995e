package rules

import (
	"errors"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/bondd/bondd/internal/yamlfile"
)

// File is a rule file as written: Parse's output and Compile's input. Rules
// a peer pushes are built as a File in Go, with Line 0.
type File struct {
	// Name is the file's name for errors (a path, or "peer").
	Name string
	// Rules in file order.
	Rules []Rule
}

// Rule is one rule as written.
type Rule struct {
	// ID names the rule: 1 to MaxKeyBytes bytes of [A-Za-z0-9._-], unique
	// in a set. A peer's INSTALL replaces the rule with the same ID.
	ID string
	// Priority orders the rule among the rules, 0 to MaxRulePriority,
	// higher first; equal priorities keep file order. It is not the
	// action priority (queue urgency).
	Priority int
	// Match entries, all of which must hold (AND). None: a catch-all.
	Match []Match
	// Actions in file order; each prefer pair is one Action.
	Actions []Action
	// Line is the rule's line in the file (its "- id:" item).
	Line int
}

// Op is a match operator (MoMQ Table 6).
type Op uint8

// Match operators.
const (
	// OpEquals is key EQUALS value: the key is present and its value,
	// in the canonical form of docs/classify.md, equals Value byte for
	// byte (Value may use the aliases documented there, such as hex
	// numbers or protocol numbers).
	OpEquals Op = iota
	// OpExists is key EXISTS: the key is present.
	OpExists
)

// Match is one match entry as written.
type Match struct {
	Key   string
	Op    Op
	Value string // for OpEquals, the YAML scalar as written
	Line  int
}

// Action is one action entry as written.
type Action struct {
	// Name is the action: priority, balancing, prefer, affinity, fec,
	// duplicate, deadline_ms, resequence_ms, or one Compile does not know
	// (skipped with a warning).
	Name string
	// Key is prefer's path-label key.
	Key string
	// Value is the scalar argument as written (for prefer, the label
	// value); empty for fec in mapping form.
	Value string
	// Params are fec's mode, k, alpha and parity in mapping form.
	Params []Param
	// Line is the action's line.
	Line int
}

// Param is one key: value of an action's mapping form.
type Param struct {
	Key, Value string
	Line       int
}

// String returns the match entry as `key=value` or `key exists`.
func (m Match) String() string {
	if m.Op == OpExists {
		return m.Key + " exists"
	}
	return m.Key + "=" + m.Value
}

// String returns the action as `name=value`, `prefer=key=value` or
// `fec=mode,k=…`.
func (a Action) String() string {
	switch {
	case a.Name == actPrefer:
		return a.Name + "=" + a.Key + "=" + a.Value
	case len(a.Params) > 0:
		parts := make([]string, 0, len(a.Params))
		for _, p := range a.Params {
			if p.Key == "mode" {
				parts = append([]string{p.Value}, parts...)
			} else {
				parts = append(parts, p.Key+"="+p.Value)
			}
		}
		return a.Name + "=" + strings.Join(parts, ",")
	}
	return a.Name + "=" + a.Value
}

// Action names.
const (
	actPriority   = "priority"
	actBalancing  = "balancing"
	actPrefer     = "prefer"
	actAffinity   = "affinity"
	actFEC        = "fec"
	actDuplicate  = "duplicate"
	actDeadline   = "deadline_ms"
	actResequence = "resequence_ms"
)

// Parse reads a rule file (YAML; docs/rules.md "Syntax") into a File. It
// checks the file's shape: a mapping with the key rules, a list of rules
// with the fields id, priority, match and actions, scalars where scalars
// belong. Keys, values and limits are Compile's business. Errors are
// *Error with name and line, joined. data is not retained.
func Parse(name string, data []byte) (*File, error) {
	p := parser{el: errList{file: name}}
	f := &File{Name: name}
	root, err := yamlfile.Parse(data)
	var se *yamlfile.SyntaxError
	var ee *yamlfile.ExtraDocumentError
	switch {
	case errors.As(err, &se):
		p.el.add(se.Line, "YAML: "+se.Msg)
		return nil, p.el.err()
	case errors.As(err, &ee):
		p.el.add(ee.Line, "a rule file holds one YAML document")
		return nil, p.el.err()
	case root == nil:
		return p.result(f) // empty file: no rules
	}
	if a := findAlias(root); a != nil {
		p.el.add(a.Line, "YAML aliases (*"+a.Value+") are not supported: write each rule out")
		return nil, p.el.err()
	}
	switch {
	case isNull(root):
		return p.result(f)
	case root.Kind != yaml.MappingNode:
		p.el.add(root.Line, "want a mapping with the key rules")
		return nil, p.el.err()
	}
	seen := false
	p.fields(root, "the file", func(key string, k, v *yaml.Node) {
		if key != "rules" {
			p.el.add(k.Line, "unknown key "+strconv.Quote(key)+" (a rule file has only rules)")
			return
		}
		seen = true
		if isNull(v) {
			return
		}
		if v.Kind != yaml.SequenceNode {
			p.el.add(v.Line, "rules: want a list of rules")
			return
		}
		for _, item := range v.Content {
			if r, ok := p.rule(item); ok {
				f.Rules = append(f.Rules, r)
			}
		}
	})
	if !seen {
		p.el.add(root.Line, "missing key rules")
	}
	return p.result(f)
}

// result returns f, or the errors found.
func (p *parser) result(f *File) (*File, error) {
	if err := p.el.err(); err != nil {
		return nil, err
	}
	return f, nil
}

type parser struct {
	el errList
}

// findAlias returns the first alias node under n, or nil. Rule files may
// not use aliases: each alias would make the parser walk its anchor's nodes
// again, so a small file could cost time exponential in its nesting.
// The walk itself does not follow aliases, so it is linear.
func findAlias(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.AliasNode {
		return n
	}
	for _, c := range n.Content {
		if a := findAlias(c); a != nil {
			return a
		}
	}
	return nil
}

func isNull(n *yaml.Node) bool { return yamlfile.IsNull(n) }

// fields calls fn for each key of mapping m, in order, reporting non-scalar
// and duplicate keys.
func (p *parser) fields(m *yaml.Node, what string, fn func(key string, k, v *yaml.Node)) {
	first := map[string]int{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.el.add(k.Line, what+": a key must be a plain string")
			continue
		}
		if k.Value == "<<" {
			p.el.add(k.Line, what+": YAML merge keys (<<) are not supported")
			continue
		}
		if l, dup := first[k.Value]; dup {
			p.el.add(k.Line, what+": "+strconv.Quote(k.Value)+" given twice (first at line "+strconv.Itoa(l)+")")
			continue
		}
		first[k.Value] = k.Line
		fn(k.Value, k, v)
	}
}

// scalar returns v's text, reporting a missing value or a non-scalar.
func (p *parser) scalar(v *yaml.Node, what string) (string, bool) {
	switch {
	case isNull(v):
		p.el.add(v.Line, what+": missing value")
		return "", false
	case v.Kind != yaml.ScalarNode:
		p.el.add(v.Line, what+": want a single value, not a "+kindName(v))
		return "", false
	}
	return v.Value, true
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	}
	return "value"
}

func (p *parser) rule(n *yaml.Node) (Rule, bool) {
	r := Rule{Line: n.Line}
	if n.Kind != yaml.MappingNode {
		p.el.add(n.Line, "a rule must be a mapping with id, priority, match and actions")
		return r, false
	}
	before := len(p.el.errs) + p.el.more
	var hasID, hasPrio, hasActions bool
	p.fields(n, "rule", func(key string, k, v *yaml.Node) {
		switch key {
		case "id":
			r.ID, hasID = p.scalar(v, "id")
		case "priority":
			s, ok := p.scalar(v, "priority")
			if !ok {
				hasPrio = true
				return
			}
			hasPrio = true
			prio, err := strconv.Atoi(s)
			if err != nil {
				p.el.add(v.Line, "priority: "+strconv.Quote(s)+" is not an integer (the rule's order, higher first)")
				return
			}
			r.Priority = prio
		case "match":
			r.Match = p.match(v)
		case "actions":
			hasActions = true
			r.Actions = p.actions(v)
		default:
			p.el.add(k.Line, "rule: unknown field "+strconv.Quote(key)+" (want id, priority, match, actions)")
		}
	})
	if !hasID {
		p.el.add(n.Line, "rule: missing id")
	}
	if !hasPrio {
		p.el.add(n.Line, "rule "+strconv.Quote(r.ID)+": missing priority")
	}
	if !hasActions {
		p.el.add(n.Line, "rule "+strconv.Quote(r.ID)+": missing actions")
	}
	return r, len(p.el.errs)+p.el.more == before
}

func (p *parser) match(v *yaml.Node) []Match {
	if isNull(v) {
		return nil // catch-all
	}
	if v.Kind != yaml.MappingNode {
		p.el.add(v.Line, "match: want a mapping of key: value entries")
		return nil
	}
	var out []Match
	p.fields(v, "match", func(key string, k, val *yaml.Node) {
		m := Match{Key: key, Line: k.Line}
		switch {
		case isNull(val):
			p.el.add(val.Line, "match "+key+": missing value (write "+key+": VALUE, or "+key+": {exists: true})")
			return
		case val.Kind == yaml.ScalarNode:
			m.Op, m.Value = OpEquals, val.Value
		case val.Kind == yaml.MappingNode:
			if len(val.Content) != 2 || val.Content[0].Value != "exists" {
				p.el.add(val.Line, "match "+key+": the only operator besides a value is {exists: true}")
				return
			}
			ex := val.Content[1]
			if b, err := strconv.ParseBool(ex.Value); ex.Kind != yaml.ScalarNode || err != nil || !b {
				p.el.add(ex.Line, "match "+key+": exists must be true (the language has no negation)")
				return
			}
			m.Op = OpExists
		default:
			p.el.add(val.Line, "match "+key+": a list is not a value (for OR, write several rules)")
			return
		}
		out = append(out, m)
	})
	return out
}

func (p *parser) actions(v *yaml.Node) []Action {
	if isNull(v) || v.Kind == yaml.MappingNode && len(v.Content) == 0 {
		p.el.add(v.Line, "actions: a rule needs at least one action")
		return nil
	}
	if v.Kind != yaml.MappingNode {
		p.el.add(v.Line, "actions: want a mapping of name: value entries")
		return nil
	}
	var out []Action
	p.fields(v, "actions", func(name string, k, val *yaml.Node) {
		a := Action{Name: name, Line: k.Line}
		switch name {
		case actPrefer:
			if isNull(val) || val.Kind != yaml.MappingNode || len(val.Content) == 0 {
				p.el.add(val.Line, "prefer: want a mapping of path-label key: value pairs")
				return
			}
			p.fields(val, "prefer", func(lk string, kn, lv *yaml.Node) {
				if s, ok := p.scalar(lv, "prefer "+lk); ok {
					out = append(out, Action{Name: actPrefer, Key: lk, Value: s, Line: kn.Line})
				}
			})
			return
		case actFEC:
			if val.Kind == yaml.MappingNode {
				p.fields(val, "fec", func(pk string, kn, pv *yaml.Node) {
					if s, ok := p.scalar(pv, "fec "+pk); ok {
						a.Params = append(a.Params, Param{Key: pk, Value: s, Line: kn.Line})
					}
				})
				out = append(out, a)
				return
			}
		case actPriority, actBalancing, actAffinity, actDuplicate, actDeadline, actResequence:
		default:
			// Unknown: Compile skips it with a warning, whatever its shape.
			if val.Kind == yaml.ScalarNode {
				a.Value = val.Value
			}
			out = append(out, a)
			return
		}
		if s, ok := p.scalar(val, name); ok {
			a.Value = s
			out = append(out, a)
		}
	})
	return out
}
