package rules

import (
	"math/bits"
	"strconv"
	"time"

	"github.com/bondd/bondd/classify"
)

// Directive is what the rules advise for one packet: the merge of the
// actions of every rule that matched it (MoMQ §3, "Directive merge"). It is
// a fixed-size value (320 bytes on 64-bit platforms) that the caller owns
// and reuses; Evaluate overwrites all of it. Its strings point into the immutable Set
// that produced it, so it holds no reference to the packet.
//
// A Directive is advice: the policy package honours it when it can and
// falls back to its default selection when it cannot (no healthy path with
// a preferred label, an affinity whose object is not in the history); a
// directive never blocks delivery. A field is meaningful only when Fields
// has its bit; otherwise its documented default applies.
type Directive struct {
	// Fields says which fields a matching rule set.
	Fields Fields
	// Priority is the queue urgency, 0–255, higher values dequeued first
	// (action priority; MoMQ PRIORITY). Merge: the maximum. Default 0.
	Priority uint8
	// Balancing is whether one object's packets may spread over several
	// paths (action balancing; MoMQ BALANCING). Merge: SinglePath if any
	// matching rule asks for it. Default SinglePath.
	Balancing Balancing
	// Duplicate is the number of paths each packet is sent on, 1 to
	// MaxDuplicate (action duplicate). Merge: the highest-priority rule
	// that sets it. Default 1 (the field is 0 when unset).
	Duplicate uint8
	// NumPreferences is the number of valid entries of Preferences.
	NumPreferences uint8
	// Affinity is the metadata key whose value names the object this
	// packet should follow (action affinity; MoMQ PATH_AFFINITY): the
	// scheduler looks AffinityID up in its bounded history of recent
	// object-to-path assignments and sends the packet on the path recorded
	// there, or uses its default selection when the id is absent or that
	// path is down. Merge: the highest-priority matching rule whose
	// affinity key is present in the packet. KeyInvalid when unset.
	Affinity classify.Key
	// AffinityID is Affinity's value in the packet, in the integer form of
	// classify.Metadata.Uint (for frame_id: SSRC<<32 | RTP timestamp).
	AffinityID uint64
	// FEC is the forward-error-correction setting (action fec). Merge: the
	// highest-priority rule that sets it. Default: Mode FECDefault, the
	// bond's configured FEC.
	FEC FEC
	// Deadline is how long a packet may wait in a send queue before it is
	// dropped (action deadline_ms), 1 ms to MaxDeadline. Merge: the
	// highest-priority rule that sets it. Default 0: no deadline.
	Deadline time.Duration
	// Resequence is how long the receiver holds the packet's flow to
	// deliver it in order (action resequence_ms; for a flow whose
	// receiver does not reorder, such as MPEG-TS over UDP, the tunnel's
	// one default), 0 to MaxResequence; a rule's 0 says never hold the
	// flow. Merge: the highest-priority rule that sets it. Unset
	// (FieldResequence absent): the tunnel's default for the flow.
	Resequence time.Duration
	// Preferences are the preferred path labels, most important first
	// (action prefer; MoMQ PATH_PREFERENCE): the union over matching rules
	// in rule order, one entry per label key, the higher rule winning on
	// the same key. Only the first NumPreferences entries are valid; see
	// PreferenceList. Default: none.
	Preferences [MaxPreferences]Preference
	// Rules has bit i set when rule i of the Set (in evaluation order,
	// Set.Rule) matched. For counters and `bondd rules explain`.
	Rules RuleMask
}

// PreferenceList returns the valid preferences, most important first. The
// slice aliases d.
func (d *Directive) PreferenceList() []Preference {
	return d.Preferences[:d.NumPreferences]
}

// Preference is one preferred path label key=value. Path labels come from
// the daemon config and from the peer; the policy package matches them.
type Preference struct {
	Key, Value string
}

// Fields is a set of Directive fields, one bit each.
type Fields uint8

// Directive fields.
const (
	FieldPriority Fields = 1 << iota
	FieldBalancing
	FieldPreferences
	FieldAffinity
	FieldFEC
	FieldDuplicate
	FieldDeadline
	FieldResequence
)

// Has reports whether every field of g is in f.
func (f Fields) Has(g Fields) bool { return f&g == g }

// Balancing says whether one object's packets may use several paths.
type Balancing uint8

// Balancing modes.
const (
	// SinglePath keeps the packets of one object (a video frame, or a
	// single packet) on one path, since reordering across paths is what
	// hurts real-time media most (MoMQ §3). The zero value and default.
	SinglePath Balancing = iota
	// MultiPath lets the scheduler spread one object's packets over paths
	// for throughput.
	MultiPath
)

// String returns single_path or multi_path, as rules write them.
func (b Balancing) String() string {
	if b == MultiPath {
		return "multi_path"
	}
	return "single_path"
}

// FECMode is the kind of forward error correction a rule asks for.
type FECMode uint8

// FEC modes.
const (
	// FECDefault is the zero value: no rule set fec, so the bond's
	// configured FEC applies.
	FECDefault FECMode = iota
	// FECAdaptive sizes the parity of each block from the paths' loss
	// rates: r = min(k, ceil(α·Σ k_i·p_i)) (docs/fec.md, "Parity count").
	FECAdaptive
	// FECOff sends no parity.
	FECOff
	// FECFixed sends FEC.Parity parity packets per block of FEC.K.
	FECFixed
)

var fecModeNames = [...]string{FECDefault: "default", FECAdaptive: "adaptive", FECOff: "off", FECFixed: "fixed"}

// String returns default, adaptive, off or fixed.
func (m FECMode) String() string {
	if int(m) < len(fecModeNames) {
		return fecModeNames[m]
	}
	return "invalid"
}

// FEC is a rule's forward-error-correction setting.
type FEC struct {
	// Mode is the kind of FEC.
	Mode FECMode
	// K is the block size in data packets, 1 to MaxFECK, for FECAdaptive
	// and FECFixed. 0 means the FEC default (k = 20 data packets).
	K uint8
	// Parity is the number of parity packets per block for FECFixed, 1 to
	// MaxFECParity.
	Parity uint8
	// Alpha is the safety factor α of the adaptive parity count, above 0
	// and at most MaxFECAlpha, for FECAdaptive. 0 means the FEC default
	// (α = 2.0).
	Alpha float64
}

// AppendText appends the FEC setting in the form Directive.AppendText
// uses: "adaptive,k=20,alpha=2", "off", "fixed,k=10,parity=2".
func (f FEC) AppendText(b []byte) []byte {
	b = append(b, f.Mode.String()...)
	if f.K != 0 {
		b = append(b, ",k="...)
		b = strconv.AppendUint(b, uint64(f.K), 10)
	}
	if f.Mode == FECFixed {
		b = append(b, ",parity="...)
		b = strconv.AppendUint(b, uint64(f.Parity), 10)
	}
	if f.Alpha != 0 {
		b = append(b, ",alpha="...)
		b = strconv.AppendFloat(b, f.Alpha, 'g', -1, 64)
	}
	return b
}

// RuleMask is a set of rule indexes of a Set (evaluation order), bit i for
// rule i; it holds MaxRules bits.
type RuleMask [2]uint64

// Has reports whether rule i is in m.
func (m *RuleMask) Has(i int) bool {
	return i >= 0 && i < 128 && m[i>>6]&(1<<(uint(i)&63)) != 0
}

func (m *RuleMask) set(i int) { m[i>>6] |= 1 << (uint(i) & 63) }

// Count returns the number of rules in m.
func (m *RuleMask) Count() int { return bits.OnesCount64(m[0]) + bits.OnesCount64(m[1]) }

// AppendText appends the set fields of d in action syntax, separated by
// spaces, in a fixed order (priority, balancing, prefer, affinity, fec,
// duplicate, deadline_ms, resequence_ms), or "default" when no field is
// set. For logs and `bondd rules explain`; not for the packet path.
func (d *Directive) AppendText(b []byte) []byte {
	if d.Fields == 0 {
		return append(b, "default"...)
	}
	start := len(b)
	sep := func() {
		if len(b) > start {
			b = append(b, ' ')
		}
	}
	if d.Fields.Has(FieldPriority) {
		sep()
		b = append(b, "priority="...)
		b = strconv.AppendUint(b, uint64(d.Priority), 10)
	}
	if d.Fields.Has(FieldBalancing) {
		sep()
		b = append(b, "balancing="...)
		b = append(b, d.Balancing.String()...)
	}
	for _, p := range d.PreferenceList() {
		sep()
		b = append(b, "prefer="...)
		b = append(b, p.Key...)
		b = append(b, '=')
		b = append(b, p.Value...)
	}
	if d.Fields.Has(FieldAffinity) {
		sep()
		b = append(b, "affinity="...)
		b = append(b, d.Affinity.String()...)
	}
	if d.Fields.Has(FieldFEC) {
		sep()
		b = append(b, "fec="...)
		b = d.FEC.AppendText(b)
	}
	if d.Fields.Has(FieldDuplicate) {
		sep()
		b = append(b, "duplicate="...)
		b = strconv.AppendUint(b, uint64(d.Duplicate), 10)
	}
	if d.Fields.Has(FieldDeadline) {
		sep()
		b = append(b, "deadline_ms="...)
		b = strconv.AppendInt(b, d.Deadline.Milliseconds(), 10)
	}
	if d.Fields.Has(FieldResequence) {
		sep()
		b = append(b, "resequence_ms="...)
		b = strconv.AppendInt(b, d.Resequence.Milliseconds(), 10)
	}
	return b
}

// String returns AppendText's form.
func (d *Directive) String() string { return string(d.AppendText(nil)) }
