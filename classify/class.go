package classify

import (
	"fmt"
	"net/netip"
	"regexp"
)

// Bounds of a ClassSet.
const (
	MaxClasses            = 64 // classes per set
	MaxLabelsPerClass     = 8  // labels per class, besides class itself
	MaxLabelKeys          = 32 // distinct label keys per set
	MaxPrefixesPerClass   = 16 // CIDR prefixes per class (source and destination together)
	MaxPortRangesPerClass = 16 // port ranges per class (all three lists together)
	MaxLabelValueBytes    = 1024
	MaxKeyBytes           = 128
)

// PortRange is an inclusive range of ports, Lo ≤ Hi; a single port has
// Lo == Hi.
type PortRange struct {
	Lo, Hi uint16
}

// Contains reports whether port is in r.
func (r PortRange) Contains(port uint16) bool { return port >= r.Lo && port <= r.Hi }

// Label is one key=value pair a class sets.
type Label struct {
	Key, Value string
}

// ClassMatch is what a packet must have for a class to apply. Every
// non-empty field must match (AND); inside a field any entry may match
// (OR). An empty ClassMatch matches every packet.
type ClassMatch struct {
	// Protos are IANA protocol numbers (6 TCP, 17 UDP, …).
	Protos []uint8
	// Src and Dst are prefixes the source and destination addresses must be
	// in.
	Src, Dst []netip.Prefix
	// SrcPorts and DstPorts are ranges the source and destination ports
	// must be in; Ports are ranges either port may be in. A packet without
	// ports (ICMP, a non-first fragment whose first was not seen) matches
	// none of them.
	SrcPorts, DstPorts, Ports []PortRange
	// DSCP are code points, 0–63.
	DSCP []uint8
}

// Class is a traffic class from configuration: the first class in a set
// whose Match matches a packet sets class=Name and its Labels.
type Class struct {
	Name   string
	Match  ClassMatch
	Labels []Label
}

// ClassSet is a compiled, immutable list of classes, safe for concurrent
// use. It also owns the label keys its classes define.
type ClassSet struct {
	classes   []compiledClass
	labelKeys []string // label key names; label key i is keyLabelBase+i
}

type compiledClass struct {
	name     string
	protos   [4]uint64 // bit per protocol; all zero: any
	anyProto bool
	dscp     uint64 // bit per code point
	anyDSCP  bool
	src, dst []netip.Prefix
	sports   []PortRange
	dports   []PortRange
	ports    []PortRange
	labels   []classLabel
}

type classLabel struct {
	key   uint8 // index into labelKeys
	value string
}

var labelKeyRE = regexp.MustCompile(`^[a-z][a-z0-9_.-]*$`)

// NewClassSet checks and compiles classes. Names must be non-empty, unique
// and at most MaxLabelValueBytes long; label keys must look like
// [a-z][a-z0-9_.-]*, be at most MaxKeyBytes long and not be a builtin key;
// the bounds above apply. The error names the class at fault; it is a
// *FieldError when one class is.
func NewClassSet(classes []Class) (*ClassSet, error) {
	if len(classes) > MaxClasses {
		return nil, fmt.Errorf("classify: %d classes, at most %d", len(classes), MaxClasses)
	}
	s := &ClassSet{}
	names := map[string]bool{}
	keyIdx := map[string]uint8{}
	for i, cl := range classes {
		bad := func(format string, a ...any) (*ClassSet, error) {
			return nil, &FieldError{Field: fmt.Sprintf("classes[%d]", i), What: fmt.Sprintf("class %d (%q)", i+1, cl.Name), Err: fmt.Errorf(format, a...)}
		}
		if cl.Name == "" || len(cl.Name) > MaxLabelValueBytes {
			return bad("name must have 1 to %d bytes", MaxLabelValueBytes)
		}
		if names[cl.Name] {
			return bad("duplicate name")
		}
		names[cl.Name] = true
		m := cl.Match
		cc := compiledClass{name: cl.Name, anyProto: len(m.Protos) == 0, anyDSCP: len(m.DSCP) == 0}
		for _, p := range m.Protos {
			cc.protos[p>>6] |= 1 << (p & 63)
		}
		for _, d := range m.DSCP {
			if d > 63 {
				return bad("DSCP %d above 63", d)
			}
			cc.dscp |= 1 << d
		}
		if len(m.Src)+len(m.Dst) > MaxPrefixesPerClass {
			return bad("%d prefixes, at most %d", len(m.Src)+len(m.Dst), MaxPrefixesPerClass)
		}
		for _, list := range [][]netip.Prefix{m.Src, m.Dst} {
			for _, p := range list {
				if !p.IsValid() {
					return bad("invalid prefix %v", p)
				}
			}
		}
		cc.src, cc.dst = masked(m.Src), masked(m.Dst)
		if n := len(m.SrcPorts) + len(m.DstPorts) + len(m.Ports); n > MaxPortRangesPerClass {
			return bad("%d port ranges, at most %d", n, MaxPortRangesPerClass)
		}
		for _, list := range [][]PortRange{m.SrcPorts, m.DstPorts, m.Ports} {
			for _, r := range list {
				if r.Lo > r.Hi {
					return bad("empty port range %d-%d", r.Lo, r.Hi)
				}
			}
		}
		cc.sports = append([]PortRange(nil), m.SrcPorts...)
		cc.dports = append([]PortRange(nil), m.DstPorts...)
		cc.ports = append([]PortRange(nil), m.Ports...)
		if len(cl.Labels) > MaxLabelsPerClass {
			return bad("%d labels, at most %d", len(cl.Labels), MaxLabelsPerClass)
		}
		seen := map[string]bool{}
		for _, l := range cl.Labels {
			if len(l.Key) > MaxKeyBytes || !labelKeyRE.MatchString(l.Key) {
				return bad("label key %q: want [a-z][a-z0-9_.-]*, at most %d bytes", l.Key, MaxKeyBytes)
			}
			if _, builtin := KeyByName(l.Key); builtin {
				return bad("label key %q is a builtin key", l.Key)
			}
			if seen[l.Key] {
				return bad("label key %q twice", l.Key)
			}
			seen[l.Key] = true
			if len(l.Value) > MaxLabelValueBytes {
				return bad("label %q: value longer than %d bytes", l.Key, MaxLabelValueBytes)
			}
			idx, ok := keyIdx[l.Key]
			if !ok {
				if len(s.labelKeys) == MaxLabelKeys {
					return bad("more than %d distinct label keys in the set", MaxLabelKeys)
				}
				idx = uint8(len(s.labelKeys))
				keyIdx[l.Key] = idx
				s.labelKeys = append(s.labelKeys, l.Key)
			}
			cc.labels = append(cc.labels, classLabel{key: idx, value: l.Value})
		}
		s.classes = append(s.classes, cc)
	}
	return s, nil
}

func masked(ps []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.Masked())
	}
	return out
}

// Len returns the number of classes.
func (s *ClassSet) Len() int { return len(s.classes) }

// Index returns the index of the class named name (the integer form of the
// class key), or -1.
func (s *ClassSet) Index(name string) int {
	for i := range s.classes {
		if s.classes[i].name == name {
			return i
		}
	}
	return -1
}

// KeyByName returns the builtin or label key named name.
func (s *ClassSet) KeyByName(name string) (Key, bool) {
	if k, ok := KeyByName(name); ok {
		return k, true
	}
	for i, n := range s.labelKeys {
		if n == name {
			return keyLabelBase + Key(i), true
		}
	}
	return KeyInvalid, false
}

// KeyName returns the name of k: a builtin key's or one of s's label keys'.
func (s *ClassSet) KeyName(k Key) string {
	if k.IsLabel() && int(k-keyLabelBase) < len(s.labelKeys) {
		return s.labelKeys[k-keyLabelBase]
	}
	return k.String()
}

// LabelKeys returns the label keys s defines, in order of first use.
func (s *ClassSet) LabelKeys() []Key {
	ks := make([]Key, len(s.labelKeys))
	for i := range ks {
		ks[i] = keyLabelBase + Key(i)
	}
	return ks
}

func (s *ClassSet) labelValue(class uint8, k Key) (string, bool) {
	if s == nil || int(class) >= len(s.classes) {
		return "", false
	}
	for _, l := range s.classes[class].labels {
		if keyLabelBase+Key(l.key) == k {
			return l.value, true
		}
	}
	return "", false
}

// Match returns the index of the first class md matches, or -1. It reads
// only the IP and transport fields (proto, addresses, ports, dscp).
func (s *ClassSet) Match(md *Metadata) int {
	for i := range s.classes {
		if s.classes[i].matches(md) {
			return i
		}
	}
	return -1
}

// match sets md's class from the first matching class.
func (s *ClassSet) match(md *Metadata) {
	if i := s.Match(md); i >= 0 {
		md.class, md.classes = uint8(i+1), s
		md.set(KeyClass)
	}
}

func (cc *compiledClass) matches(md *Metadata) bool {
	if !cc.anyProto && cc.protos[md.Proto>>6]&(1<<(md.Proto&63)) == 0 {
		return false
	}
	if !cc.anyDSCP && cc.dscp&(1<<md.DSCP) == 0 {
		return false
	}
	if !inPrefixes(cc.src, md.Src) || !inPrefixes(cc.dst, md.Dst) {
		return false
	}
	if len(cc.sports)+len(cc.dports)+len(cc.ports) > 0 {
		if !md.Has(KeySrcPort) {
			return false
		}
		if !inRanges(cc.sports, md.SrcPort) || !inRanges(cc.dports, md.DstPort) {
			return false
		}
		if len(cc.ports) > 0 && !inRanges(cc.ports, md.SrcPort) && !inRanges(cc.ports, md.DstPort) {
			return false
		}
	}
	return true
}

func inPrefixes(ps []netip.Prefix, a netip.Addr) bool {
	if len(ps) == 0 {
		return true
	}
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func inRanges(rs []PortRange, port uint16) bool {
	if len(rs) == 0 {
		return true
	}
	for _, r := range rs {
		if r.Contains(port) {
			return true
		}
	}
	return false
}
