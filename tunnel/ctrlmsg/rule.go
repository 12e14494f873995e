package ctrlmsg

import "github.com/bondd/bondd/rules"

// Rule converts an install's rule to the rules package's form, with the
// message's id as is (the receiver prefixes it as it names edge rules).
// Line is 0: the rule has no file.
func (m *MappingRule) Rule() rules.Rule {
	r := rules.Rule{ID: m.ID, Priority: m.Priority}
	for _, e := range m.Match {
		op := rules.OpEquals
		if e.Op == MatchExists {
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

// InstallOf builds the install of rule r (as rules.Parse or rules.Set.Rule
// give it) under request id req.
func InstallOf(req uint64, r *rules.Rule) *MappingRule {
	m := &MappingRule{Type: TypeMappingRule, Request: req, Op: OpInstall, ID: r.ID, Priority: r.Priority}
	for _, e := range r.Match {
		op := MatchEquals
		if e.Op == rules.OpExists {
			op = MatchExists
		}
		m.Match = append(m.Match, RuleMatch{Key: e.Key, Op: op, Value: e.Value})
	}
	for _, a := range r.Actions {
		ra := RuleAction{Name: a.Name, Key: a.Key, Value: a.Value}
		for _, p := range a.Params {
			ra.Params = append(ra.Params, RuleParam{Key: p.Key, Value: p.Value})
		}
		m.Actions = append(m.Actions, ra)
	}
	return m
}
