package rules

import "github.com/bondd/bondd/classify"

// noMetadata stands in for a nil *classify.Metadata: no key present.
var noMetadata classify.Metadata

// Evaluate matches md and ann against the rules in evaluation order and
// merges the actions of every matching rule into d (see merge). It
// overwrites all of d. md may be nil (no metadata), as may ann (no
// annotations) and s (no rules: the default Directive).
//
// Cost: for each rule, at most its match entries' compares, each an
// integer compare except class and label values, which compare bytes; then
// the merge of its actions for the rules that match. No allocation, no
// lock; safe for concurrent use. md and ann are not retained.
func (s *Set) Evaluate(md *classify.Metadata, ann *Annotations, d *Directive) {
	*d = Directive{}
	if s == nil {
		return
	}
	if md == nil {
		md = &noMetadata
	}
	var m merger
	for i := range s.rules {
		r := &s.rules[i]
		if !s.matches(r, md, ann) {
			continue
		}
		d.Rules.set(i)
		m.merge(d, r, md)
	}
}

// Matches reports whether rule i (evaluation order) matches md and ann.
func (s *Set) Matches(i int, md *classify.Metadata, ann *Annotations) bool {
	if md == nil {
		md = &noMetadata
	}
	return s.matches(&s.rules[i], md, ann)
}

func (s *Set) matches(r *rule, md *classify.Metadata, ann *Annotations) bool {
	for j := r.lo; j < r.hi; j++ {
		if !s.entries[j].matches(md, ann) {
			return false
		}
	}
	return true
}

func (e *entry) matches(md *classify.Metadata, ann *Annotations) bool {
	switch e.op {
	case opEqAnn:
		v, ok := ann.value(e.ann)
		return ok && v == e.num
	case opExistsAnn:
		_, ok := ann.value(e.ann)
		return ok
	case opEqUint:
		v, ok := md.Uint(e.key)
		return ok && v == e.num
	case opExists:
		return md.Has(e.key)
	case opEqSrcIP:
		return md.Has(classify.KeySrcIP) && md.Src == e.addr
	case opEqDstIP:
		return md.Has(classify.KeyDstIP) && md.Dst == e.addr
	case opEqClass:
		return md.Class() == e.str
	case opEqLabel:
		return labelEquals(md, e.key, e.str)
	}
	return false
}

// labelEquals compares a label key's value with want. Label values are at
// most classify.MaxLabelValueBytes long, so the stack buffer never grows.
func labelEquals(md *classify.Metadata, k classify.Key, want string) bool {
	if !md.Has(k) {
		return false
	}
	var buf [classify.MaxLabelValueBytes]byte
	v, _ := md.AppendValue(buf[:0], k)
	return string(v) == want
}
