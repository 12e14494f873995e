package rules

import (
	"slices"
	"strconv"
	"strings"

	"github.com/bondd/bondd/classify"
)

// Name returns the name the set was compiled under (File.Name).
func (s *Set) Name() string {
	if s == nil {
		return ""
	}
	return s.name
}

// Len returns the number of rules.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.rules)
}

// Rule returns rule i in evaluation order, as written (a copy). Directive
// .Rules bit i refers to it.
func (s *Set) Rule(i int) Rule { return cloneRule(&s.src[i]) }

// Index returns the evaluation-order index of the rule with the given id,
// or -1.
func (s *Set) Index(id string) int {
	if s == nil {
		return -1
	}
	return slices.IndexFunc(s.src, func(r Rule) bool { return r.ID == id })
}

// Warnings returns what Compile skipped (unknown actions), with lines.
func (s *Set) Warnings() []Error {
	if s == nil {
		return nil
	}
	return slices.Clone(s.warnings)
}

// Classes returns the ClassSet the set was compiled against, or nil.
func (s *Set) Classes() *classify.ClassSet {
	if s == nil {
		return nil
	}
	return s.classes
}

// String lists the rules in evaluation order, one per line:
// "id priority=N match=… actions=…".
func (s *Set) String() string {
	var b strings.Builder
	for i := 0; i < s.Len(); i++ {
		r := &s.src[i]
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// String returns the rule on one line: its id, priority, match entries
// (or "catch-all") and actions.
func (r *Rule) String() string {
	return r.ID + " priority=" + strconv.Itoa(r.Priority) + " match: " + r.MatchText() + " actions: " + r.ActionText()
}

// MatchText returns the match entries separated by " and ", or
// "catch-all".
func (r *Rule) MatchText() string {
	if len(r.Match) == 0 {
		return "catch-all"
	}
	parts := make([]string, len(r.Match))
	for i, m := range r.Match {
		parts[i] = m.String()
	}
	return strings.Join(parts, " and ")
}

// ActionText returns the actions separated by spaces.
func (r *Rule) ActionText() string {
	parts := make([]string, len(r.Actions))
	for i, a := range r.Actions {
		parts[i] = a.String()
	}
	return strings.Join(parts, " ")
}
