package tunnel

import (
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/bondd/bondd/classify"
	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/rules"
)

// RuleSource gives the rule set in force; *rules.Watcher is one. Current
// must be lock-free: it is called for every packet.
type RuleSource interface {
	Current() *rules.Set
}

// Rule evaluation on the send path. With a RuleSource installed, the TUN
// reader classifies each packet (classify.Classifier, one per bond, used
// only by that goroutine), fills the annotations from the paths' policy
// state and evaluates the rules into a Directive (MoMQ §3, "Scheduling
// pipeline"). The annotations are bond-wide, because a rule is evaluated
// before a path is chosen:
//
//   - leo_state=reconf while any connected path with a LEO reconfiguration
//     marker is inside its danger zone (policy.LEOState);
//   - budget_used: the largest share of its byte budget a connected path
//     has used (policy.BudgetUsed);
//   - pending_iframe=true while some connected path has an I-frame in
//     flight whose slack B = ⌈S_I/cwnd⌉·cwnd − S_I (MoMQ eq. 1) still has
//     room for this packet (policy.PendingIFrame).
//
// The bond acts on the directive's affinity, balancing (single_path keeps
// the packets of one frame_id on one path), prefer and duplicate
// (policy.Select), fec off and deadline_ms. After the path is chosen,
// track feeds the pending I-frame tracker: a keyframe packet grows S_I on
// its path(s), a P-frame packet is charged to its path's slack. The
// directive's priority orders the send queues (queue.go); resequence_ms
// decides whether the flow is tagged for the far end to deliver in order
// (flowtag.go); the fec block parameters are evaluated and counted but not
// yet acted on.

// ruleState is a bond's per-packet rule scratch, owned by the TUN reader.
type ruleState struct {
	src  RuleSource
	cls  *classify.Classifier
	md   classify.Metadata
	ann  rules.Annotations
	dir  rules.Directive
	hits [rules.MaxRules]atomic.Uint64 // per rule index of the set in force
	// bytes are the inner packet bytes of those hits.
	bytes [rules.MaxRules]atomic.Uint64
	set   atomic.Pointer[rules.Set] // the set hits refer to
}

func newRuleState(src RuleSource, copts classify.Options) (*ruleState, error) {
	if src == nil {
		return nil, nil
	}
	cls, err := classify.New(copts)
	if err != nil {
		return nil, err
	}
	return &ruleState{src: src, cls: cls}, nil
}

// evaluate classifies pkt, annotates it from the state of paths at now and
// evaluates the rules in force into rs.dir. It reports false when no rule
// set is installed.
func (rs *ruleState) evaluate(pkt []byte, paths []*policy.Path, now time.Time) bool {
	set := rs.src.Current()
	if set == nil {
		return false
	}
	rs.ann = rules.Annotations{
		PendingIFrame: policy.PendingIFrame(paths, now, len(pkt)),
		LEOState:      policy.LEOState(paths, now),
	}
	rs.ann.BudgetUsed, rs.ann.HasBudget = policy.BudgetUsed(paths, now)
	if rs.set.Load() != set { // a reload: counts start over for the new set
		for i := range rs.hits {
			rs.hits[i].Store(0)
			rs.bytes[i].Store(0)
		}
		rs.set.Store(set)
	}
	rs.cls.Parse(pkt, &rs.md) // a malformed packet still gets what could be read
	set.Evaluate(&rs.md, &rs.ann, &rs.dir)
	for w, word := range rs.dir.Rules { // only the rules that matched
		for ; word != 0; word &= word - 1 {
			if i := w*64 + bits.TrailingZeros64(word); i < len(rs.hits) {
				rs.hits[i].Add(1)
				rs.bytes[i].Add(uint64(len(pkt)))
			}
		}
	}
	return true
}

// object returns the object the evaluated packet belongs to: its video
// frame (frame_id) when the classifier found one, else none.
func (rs *ruleState) object() policy.Object {
	if rs.md.Has(classify.KeyFrameID) {
		return policy.Object{Key: classify.KeyFrameID, ID: rs.md.FrameID()}
	}
	return policy.Object{}
}

// track feeds the pending I-frame tracker (MoMQ §4.1, R1) after the
// evaluated packet, n bytes, was given the paths picks: a keyframe packet
// adds to the I-frame in flight on each of its paths; a P-frame packet is
// charged to the slack of the I-frame pending on its first path, if there
// is room (once the slack is spent the pending_iframe annotation stays
// absent for P-frames, so they wait behind the I-frame).
func (rs *ruleState) track(paths []*policy.Path, picks []int, n int, now time.Time) {
	if !rs.md.Has(classify.KeyFrameType) {
		return
	}
	switch rs.md.FrameType {
	case classify.FrameKey:
		var id uint64
		if rs.md.Has(classify.KeyFrameID) {
			id = rs.md.FrameID()
		}
		for _, i := range picks {
			paths[i].OnIFramePacket(id, n, now)
		}
	case classify.FrameDelta:
		paths[picks[0]].AdmitPFrame(n, now)
	}
}

// fecOff reports whether the directive turns FEC off for this packet.
func (rs *ruleState) fecOff() bool {
	return rs.dir.Fields.Has(rules.FieldFEC) && rs.dir.FEC.Mode == rules.FECOff
}

// deadline returns the directive's deadline_ms, or 0.
func (rs *ruleState) deadline() time.Duration {
	if rs.dir.Fields.Has(rules.FieldDeadline) {
		return rs.dir.Deadline
	}
	return 0
}

// RuleStats are the rule hits of a bond's send path for the set in force.
type RuleStats struct {
	Set   string     `json:"set"` // the rule file
	Rules []RuleHits `json:"rules"`
}

// RuleHits counts the packets one rule matched.
type RuleHits struct {
	ID   string `json:"id"`
	Hits uint64 `json:"hits"`
	// Bytes are the matched packets' bytes (inner IP packets).
	Bytes uint64 `json:"bytes"`
}

func (rs *ruleState) stats() *RuleStats {
	if rs == nil {
		return nil
	}
	set := rs.src.Current()
	if set == nil {
		return nil
	}
	counted := rs.set.Load() == set // else no packet has met this set yet
	s := &RuleStats{Set: set.Name()}
	for i := range set.Len() {
		h := RuleHits{ID: set.Rule(i).ID}
		if counted {
			h.Hits, h.Bytes = rs.hits[i].Load(), rs.bytes[i].Load()
		}
		s.Rules = append(s.Rules, h)
	}
	return s
}
