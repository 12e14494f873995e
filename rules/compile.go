package rules

import (
	"fmt"
	"math"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bondd/bondd/classify"
	"github.com/bondd/bondd/internal/yamlfile"
)

// Options configure Compile. The zero value is valid.
type Options struct {
	// Classes are the traffic classes the bond's classifier uses. Optional.
	// With them, rules may match the classes' label keys and Compile checks
	// that every class a rule names exists. Label keys are numbered per
	// ClassSet, so a Set compiled against one ClassSet must only evaluate
	// metadata classified with it: when the classes change, compile again
	// (Watcher.SetClasses does).
	Classes *classify.ClassSet
}

// op is a compiled match operation.
type op uint8

// Ops, cheapest first: Compile orders each rule's entries by op so that a
// rule fails on integer compares before it reaches a byte compare.
const (
	opEqSlot     op = iota // slot value == num
	opExistsSlot           // slot present
	opGeSlot               // slot value >= num (budget_used)
	opExists               // md.Has(key): src_ip, dst_ip, class and label keys
	opEqSrcIP              // md.Src == addr
	opEqDstIP              // md.Dst == addr
	opEqClass              // md.Class() == str
	opEqLabel              // label value == str (AppendValue)
)

// maxSlots bounds the keys a set compares as integers: the builtin keys
// but src_ip, dst_ip and class, and the annotations.
const maxSlots = 32

// slotKey is a key with an integer form that Evaluate reads once per
// packet into a slot: a classifier key (classify.Metadata.Uint) or, when
// ann is set, an annotation.
type slotKey struct {
	key classify.Key
	ann annKey
}

// entry is one compiled match entry, 16 bytes so that a rule's entries
// share cache lines.
type entry struct {
	num  uint64 // opEqSlot: the value
	op   op
	slot uint8        // opEqSlot, opExistsSlot: the slot (< maxSlots)
	key  classify.Key // opExists, opEqLabel: the key
	aux  uint16       // opEqClass, opEqLabel: index into Set.strs; opEqSrcIP, opEqDstIP: into Set.addrs
}

// rule is one compiled rule: its entries and its actions, already merged
// within the rule.
type rule struct {
	lo, hi     int32 // entries: Set.entries[lo:hi]
	fields     Fields
	priority   uint8
	balancing  Balancing
	duplicate  uint8
	affinity   classify.Key
	fec        FEC
	deadline   time.Duration
	resequence time.Duration
	prefs      []pref
}

// pref is a compiled preference: the label key interned per set, so that
// the merge compares integers.
type pref struct {
	id uint16 // index of Key among the set's preference keys
	Preference
}

// Set is a compiled rule set: immutable, safe for concurrent use. Its
// rules are in evaluation order (priority descending, then file order).
// The nil *Set is valid and matches nothing.
type Set struct {
	name     string
	rules    []rule
	entries  []entry
	slots    []slotKey    // keys Evaluate reads first, ≤ maxSlots
	strs     []string     // values of class and label entries
	addrs    []netip.Addr // values of src_ip and dst_ip entries
	src      []Rule       // source rules, evaluation order
	warnings []Error
	classes  *classify.ClassSet
}

var (
	ruleIDRE   = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	labelKeyRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/-]*$`)
)

// Compile checks f and compiles it into a Set: it interns every key (an
// unknown key is an error, with a suggestion), turns values into the
// integer forms the classifier produces, checks every action's arguments
// and the limits of MoMQ Table 8, and sorts the rules by priority. Unknown
// actions are skipped with a warning (Set.Warnings). All problems are
// reported as *Error with f.Name and the line, joined. f is not retained.
func Compile(f *File, opts Options) (*Set, error) {
	c := compiler{el: errList{file: f.Name}, opts: opts, slots: map[slotKey]uint8{}, prefKeys: map[string]uint16{}}
	s := &Set{name: f.Name, classes: opts.Classes}
	if len(f.Rules) > MaxRules {
		c.el.add(f.Rules[MaxRules].Line, fmt.Sprintf("%d rules, at most %d per set (MoMQ Table 8)", len(f.Rules), MaxRules))
	}
	ids := map[string]int{}
	order := make([]int, 0, len(f.Rules))
	for i := range f.Rules[:min(len(f.Rules), MaxRules)] {
		r := &f.Rules[i]
		if l, dup := ids[r.ID]; dup && r.ID != "" {
			c.el.add(r.Line, fmt.Sprintf("rule id %q used twice (first at line %d)", r.ID, l))
		} else {
			ids[r.ID] = r.Line
		}
		cr, ok := c.rule(s, r)
		if ok {
			s.rules = append(s.rules, cr)
			s.src = append(s.src, cloneRule(r))
			order = append(order, len(order))
		}
	}
	s.warnings = c.warnings
	if err := c.el.err(); err != nil {
		return nil, err
	}
	// Evaluation order: priority descending, file order among equals.
	slices.SortStableFunc(order, func(a, b int) int { return s.src[b].Priority - s.src[a].Priority })
	rules, src := make([]rule, len(order)), make([]Rule, len(order))
	for i, j := range order {
		rules[i], src[i] = s.rules[j], s.src[j]
	}
	s.rules, s.src = rules, src
	return s, nil
}

// CompileBytes parses and compiles a rule file's contents.
func CompileBytes(name string, data []byte, opts Options) (*Set, error) {
	f, err := Parse(name, data)
	if err != nil {
		return nil, err
	}
	return Compile(f, opts)
}

func cloneRule(r *Rule) Rule {
	c := *r
	c.Match = slices.Clone(r.Match)
	c.Actions = slices.Clone(r.Actions)
	for i := range c.Actions {
		c.Actions[i].Params = slices.Clone(c.Actions[i].Params)
	}
	return c
}

type compiler struct {
	el       errList
	opts     Options
	warnings []Error
	slots    map[slotKey]uint8
	prefKeys map[string]uint16
}

func (c *compiler) errf(line int, format string, a ...any) {
	c.el.add(line, fmt.Sprintf(format, a...))
}

func (c *compiler) rule(s *Set, r *Rule) (rule, bool) {
	before := len(c.el.errs) + c.el.more
	var cr rule
	switch {
	case r.ID == "":
		c.errf(r.Line, "rule: empty id")
	case len(r.ID) > MaxKeyBytes:
		c.errf(r.Line, "rule id: %d bytes, at most %d", len(r.ID), MaxKeyBytes)
	case !ruleIDRE.MatchString(r.ID):
		c.errf(r.Line, "rule id %q: want letters, digits, '.', '_' and '-'", r.ID)
	}
	if r.Priority < 0 || r.Priority > MaxRulePriority {
		c.errf(r.Line, "rule %q: priority %d out of range 0-%d", r.ID, r.Priority, MaxRulePriority)
	}
	if len(r.Match) > MaxMatchEntries {
		c.errf(r.Match[MaxMatchEntries].Line, "rule %q: %d match entries, at most %d (MoMQ Table 8)", r.ID, len(r.Match), MaxMatchEntries)
	}
	if len(r.Actions) > MaxActions {
		c.errf(r.Actions[MaxActions].Line, "rule %q: %d actions, at most %d (MoMQ Table 8)", r.ID, len(r.Actions), MaxActions)
	}
	if len(r.Actions) == 0 {
		c.errf(r.Line, "rule %q: no actions", r.ID)
	}
	lo := len(s.entries)
	seen := map[string]int{}
	for _, m := range r.Match {
		if l, dup := seen[m.Key]; dup {
			c.errf(m.Line, "match: key %q given twice (first at line %d)", m.Key, l)
			continue
		}
		seen[m.Key] = m.Line
		if e, ok := c.entry(s, &m); ok {
			s.entries = append(s.entries, e)
		}
	}
	slices.SortStableFunc(s.entries[lo:], func(a, b entry) int { return int(a.op) - int(b.op) })
	cr.lo, cr.hi = int32(lo), int32(len(s.entries))
	clear(seen)
	for i := range r.Actions {
		c.action(&cr, &r.Actions[i], seen)
	}
	return cr, len(c.el.errs)+c.el.more == before
}

// key resolves a key name: annotations, then the classes' label keys and
// the builtin keys.
func (c *compiler) key(name string, line int) (classify.Key, annKey, bool) {
	if len(name) > MaxKeyBytes {
		c.errf(line, "key: %d bytes, at most %d (MoMQ Table 8)", len(name), MaxKeyBytes)
		return 0, 0, false
	}
	if a, ok := annByName[name]; ok {
		return classify.KeyInvalid, a, true
	}
	var k classify.Key
	var ok bool
	if c.opts.Classes != nil {
		k, ok = c.opts.Classes.KeyByName(name)
	} else {
		k, ok = classify.KeyByName(name)
	}
	if ok {
		return k, annNone, true
	}
	msg := fmt.Sprintf("unknown key %q", name)
	if s := c.suggest(name); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	} else if c.opts.Classes == nil {
		msg += " (not a classifier or annotation key; label keys need the traffic classes)"
	}
	c.errf(line, "%s", msg)
	return 0, 0, false
}

// knownKeys returns every key name a rule may use.
func (c *compiler) knownKeys() []string {
	var names []string
	for _, k := range classify.BuiltinKeys() {
		names = append(names, k.String())
	}
	names = append(names, AnnotationKeys()...)
	if c.opts.Classes != nil {
		for _, k := range c.opts.Classes.LabelKeys() {
			names = append(names, c.opts.Classes.KeyName(k))
		}
	}
	return names
}

// suggest returns the known key closest to name, if it is close
// (yamlfile.Suggest).
func (c *compiler) suggest(name string) string {
	return yamlfile.Suggest(name, c.knownKeys())
}

// slot returns the slot of a key with an integer form, assigning the next
// one on first use.
func (c *compiler) slot(s *Set, sk slotKey, line int) (uint8, bool) {
	if n, ok := c.slots[sk]; ok {
		return n, true
	}
	if len(s.slots) == maxSlots { // only if classify grows past 30 keys
		c.errf(line, "match: more than %d distinct keys in the set", maxSlots)
		return 0, false
	}
	n := uint8(len(s.slots))
	c.slots[sk] = n
	s.slots = append(s.slots, sk)
	return n, true
}

func (c *compiler) entry(s *Set, m *Match) (entry, bool) {
	k, ann, ok := c.key(m.Key, m.Line)
	if !ok {
		return entry{}, false
	}
	e := entry{key: k}
	// Annotations and the classifier keys compared as integers read their
	// value once per packet, into a slot.
	if ann != annNone || k != classify.KeySrcIP && k != classify.KeyDstIP && k != classify.KeyClass && !k.IsLabel() {
		if e.slot, ok = c.slot(s, slotKey{key: k, ann: ann}, m.Line); !ok {
			return entry{}, false
		}
		e.op = opExistsSlot
	} else {
		e.op = opExists
	}
	if m.Op == OpExists {
		return e, true
	}
	v := m.Value
	if len(v) > MaxValueBytes {
		c.errf(m.Line, "match %s: value of %d bytes, at most %d (MoMQ Table 8)", m.Key, len(v), MaxValueBytes)
		return entry{}, false
	}
	switch {
	case ann == annPendingIFrame:
		if b, err := strconv.ParseBool(v); err != nil || !b {
			c.errf(m.Line, "match pending_iframe: value %q; the key is present only while true, so write true (or {exists: true})", v)
			return entry{}, false
		}
		e.op, e.num = opEqSlot, 1
	case ann == annLEOState:
		if v != LEOReconf.String() {
			c.errf(m.Line, "match leo_state: value %q; want reconf", v)
			return entry{}, false
		}
		e.op, e.num = opEqSlot, uint64(LEOReconf)
	case ann == annBudgetUsed:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f >= 0 && f <= 1) {
			c.errf(m.Line, "match budget_used: value %q; want a share of the budget from 0 to 1, like 0.8 (matches from 80 %% used on)", v)
			return entry{}, false
		}
		e.op, e.num = opGeSlot, uint64(math.Round(f*1000))
	case k == classify.KeyClass:
		if v == "" {
			c.errf(m.Line, "match class: empty class name")
			return entry{}, false
		}
		if c.opts.Classes != nil && c.opts.Classes.Index(v) < 0 {
			c.errf(m.Line, "match class: no traffic class %q", v)
			return entry{}, false
		}
		e.op, e.aux = opEqClass, uint16(len(s.strs))
		s.strs = append(s.strs, v)
	case k.IsLabel():
		e.op, e.aux = opEqLabel, uint16(len(s.strs))
		s.strs = append(s.strs, v)
	case k == classify.KeySrcIP || k == classify.KeyDstIP:
		a, err := netip.ParseAddr(v)
		if err != nil || a.Zone() != "" {
			c.errf(m.Line, "match %s: %q is not an IPv4 or IPv6 address", m.Key, v)
			return entry{}, false
		}
		e.op, e.aux = opEqSrcIP, uint16(len(s.addrs))
		s.addrs = append(s.addrs, a)
		if k == classify.KeyDstIP {
			e.op = opEqDstIP
		}
	default:
		n, err := k.ParseValue(v)
		if err != nil {
			c.errf(m.Line, "match %s", strings.TrimPrefix(err.Error(), "classify: "))
			return entry{}, false
		}
		e.op, e.num = opEqSlot, n
	}
	return e, true
}

// uintArg parses a decimal integer action argument in [lo, hi].
func (c *compiler) uintArg(a *Action, what, v string, lo, hi uint64, unit string) (uint64, bool) {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n < lo || n > hi {
		c.errf(a.Line, "%s: %q; want an integer from %d to %d%s", what, v, lo, hi, unit)
		return 0, false
	}
	return n, true
}

func (c *compiler) action(r *rule, a *Action, seen map[string]int) {
	if len(a.Name) > MaxKeyBytes {
		c.errf(a.Line, "action name: %d bytes, at most %d (MoMQ Table 8)", len(a.Name), MaxKeyBytes)
		return
	}
	if a.Name != actPrefer {
		if l, dup := seen[a.Name]; dup {
			c.errf(a.Line, "action %s given twice (first at line %d)", a.Name, l)
			return
		}
		seen[a.Name] = a.Line
	}
	switch a.Name {
	case actPriority:
		v := a.Value
		switch v {
		case "highest":
			v = "255"
		case "lowest":
			v = "0"
		}
		if n, ok := c.uintArg(a, "priority", v, 0, 255, " (or highest, lowest)"); ok {
			r.priority = uint8(n)
			r.fields |= FieldPriority
		}
	case actBalancing:
		switch a.Value {
		case "single_path":
			r.balancing = SinglePath
		case "multi_path":
			r.balancing = MultiPath
		default:
			c.errf(a.Line, "balancing: %q; want single_path or multi_path", a.Value)
			return
		}
		r.fields |= FieldBalancing
	case actPrefer:
		switch {
		case a.Key == "" || len(a.Key) > MaxKeyBytes || !labelKeyRE.MatchString(a.Key):
			c.errf(a.Line, "prefer: path-label key %q: want 1 to %d bytes of letters, digits and _.:/-", a.Key, MaxKeyBytes)
			return
		case a.Value == "" || len(a.Value) > MaxValueBytes:
			c.errf(a.Line, "prefer %s: value of %d bytes; want 1 to %d", a.Key, len(a.Value), MaxValueBytes)
			return
		}
		if l, dup := seen["prefer "+a.Key]; dup {
			c.errf(a.Line, "prefer: label key %q given twice (first at line %d)", a.Key, l)
			return
		}
		seen["prefer "+a.Key] = a.Line
		id, ok := c.prefKeys[a.Key]
		if !ok {
			id = uint16(len(c.prefKeys))
			c.prefKeys[a.Key] = id
		}
		r.prefs = append(r.prefs, pref{id: id, Preference: Preference{Key: a.Key, Value: a.Value}})
		r.fields |= FieldPreferences
	case actAffinity:
		k, ok := classify.KeyByName(a.Value)
		if !ok || k == classify.KeySrcIP || k == classify.KeyDstIP || k == classify.KeyClass {
			c.errf(a.Line, "affinity: %q is not a classifier key whose value names an object (frame_id, rtp_ssrc, ...)", a.Value)
			return
		}
		r.affinity = k
		r.fields |= FieldAffinity
	case actFEC:
		if f, ok := c.fec(a); ok {
			r.fec = f
			r.fields |= FieldFEC
		}
	case actDuplicate:
		if n, ok := c.uintArg(a, "duplicate", a.Value, 1, MaxDuplicate, " paths"); ok {
			r.duplicate = uint8(n)
			r.fields |= FieldDuplicate
		}
	case actDeadline:
		if n, ok := c.uintArg(a, "deadline_ms", a.Value, 1, uint64(MaxDeadline/time.Millisecond), " ms"); ok {
			r.deadline = time.Duration(n) * time.Millisecond
			r.fields |= FieldDeadline
		}
	case actResequence:
		if n, ok := c.uintArg(a, "resequence_ms", a.Value, 0, uint64(MaxResequence/time.Millisecond), " ms"); ok {
			r.resequence = time.Duration(n) * time.Millisecond
			r.fields |= FieldResequence
		}
	default:
		c.warnings = append(c.warnings, Error{File: c.el.file, Line: a.Line,
			Msg: fmt.Sprintf("unknown action %q skipped", a.Name)})
	}
}

// fec compiles `fec: adaptive|off|N` or `fec: {mode: …, k: …, alpha: …,
// parity: …}`.
func (c *compiler) fec(a *Action) (FEC, bool) {
	var f FEC
	params := a.Params
	if len(params) == 0 {
		switch a.Value {
		case "adaptive", "off":
			params = []Param{{Key: "mode", Value: a.Value, Line: a.Line}}
		default:
			params = []Param{{Key: "mode", Value: "fixed", Line: a.Line}, {Key: "parity", Value: a.Value, Line: a.Line}}
		}
	}
	var hasK, hasParity, hasAlpha bool
	bad := func(line int, format string, args ...any) (FEC, bool) {
		c.errf(line, "fec: "+format, args...)
		return FEC{}, false
	}
	for _, p := range params {
		switch p.Key {
		case "mode":
			switch p.Value {
			case "adaptive":
				f.Mode = FECAdaptive
			case "off":
				f.Mode = FECOff
			case "fixed":
				f.Mode = FECFixed
			default:
				return bad(p.Line, "mode %q; want adaptive, off or fixed", p.Value)
			}
		case "k":
			n, err := strconv.ParseUint(p.Value, 10, 8)
			if err != nil || n < 1 || n > MaxFECK {
				return bad(p.Line, "k %q; want 1 to %d data packets per block", p.Value, MaxFECK)
			}
			f.K, hasK = uint8(n), true
		case "parity":
			n, err := strconv.ParseUint(p.Value, 10, 8)
			if err != nil || n < 1 || n > MaxFECParity {
				if a.Value != "" {
					return bad(p.Line, "%q; want adaptive, off, a parity count from 1 to %d, or a mapping", p.Value, MaxFECParity)
				}
				return bad(p.Line, "parity %q; want 1 to %d parity packets per block", p.Value, MaxFECParity)
			}
			f.Parity, hasParity = uint8(n), true
		case "alpha":
			x, err := strconv.ParseFloat(p.Value, 64)
			if err != nil || math.IsNaN(x) || x <= 0 || x > MaxFECAlpha {
				return bad(p.Line, "alpha %q; want a number above 0 and at most %d", p.Value, MaxFECAlpha)
			}
			f.Alpha, hasAlpha = x, true
		default:
			return bad(p.Line, "unknown parameter %q (want mode, k, alpha, parity)", p.Key)
		}
	}
	switch f.Mode {
	case FECDefault:
		return bad(a.Line, "missing mode (adaptive, off or fixed)")
	case FECOff:
		if hasK || hasParity || hasAlpha {
			return bad(a.Line, "mode off takes no k, alpha or parity")
		}
	case FECAdaptive:
		if hasParity {
			return bad(a.Line, "mode adaptive sizes parity itself; parity is for mode fixed")
		}
	case FECFixed:
		if !hasParity {
			return bad(a.Line, "mode fixed needs parity")
		}
		if hasAlpha {
			return bad(a.Line, "alpha is for mode adaptive")
		}
		if hasK && f.Parity > f.K {
			return bad(a.Line, "parity %d above k %d", f.Parity, f.K)
		}
	}
	return f, true
}
