package rules

// Annotations are the match keys that are not packet metadata: conditions
// bondd's own components observe and inject into the match context at
// evaluation time (MoMQ §3 "annotations that the relay's own components may
// inject"; §4.1 R1 and R2). The policy package fills them per packet from
// its path state; rules never imports policy. The zero value means no
// annotation is present. It is a fixed-size value the caller owns.
type Annotations struct {
	// PendingIFrame is key pending_iframe. The pending I-frame budget
	// tracker sets it while the packets of an I-frame are in flight, so
	// that a rule can let P-frame packets into the slack
	// B = ceil(S_I/cwnd)·cwnd − S_I bytes of the I-frame's rounds (MoMQ
	// eq. 1, rule R1). The key is present only while true; its value is
	// "true".
	PendingIFrame bool
	// LEOState is key leo_state. The LEO reconfiguration marker sets
	// LEOReconf inside a danger zone (±100 ms around seconds 12, 27, 42 and
	// 57 of each UTC minute for Starlink; MoMQ rule R2). LEONone means the
	// key is absent.
	LEOState LEOState
	// BudgetUsed is key budget_used, in permille (0–1000 for 0–100 %,
	// more past the budget): the largest share of its byte budget any
	// connected path with a budget has used in its period. Present only
	// while HasBudget; a rule "budget_used: 0.8" matches from 800 on.
	BudgetUsed uint64
	// HasBudget is set while some connected path has a byte budget.
	HasBudget bool
}

// LEOState is the value of the leo_state annotation.
type LEOState uint8

// LEO states.
const (
	// LEONone is the zero value: key leo_state absent.
	LEONone LEOState = iota
	// LEOReconf is leo_state=reconf: a satellite path is inside a
	// reconfiguration danger zone.
	LEOReconf
)

var leoStateNames = [...]string{LEONone: "", LEOReconf: "reconf"}

// String returns reconf, or "" for LEONone.
func (s LEOState) String() string {
	if int(s) < len(leoStateNames) {
		return leoStateNames[s]
	}
	return ""
}

// annKey names an annotation key; annNone means "a classifier key".
type annKey uint8

const (
	annNone annKey = iota
	annPendingIFrame
	annLEOState
	annBudgetUsed
)

// Annotation key names, as rules write them.
const (
	KeyPendingIFrame = "pending_iframe"
	KeyLEOState      = "leo_state"
	KeyBudgetUsed    = "budget_used"
)

// AnnotationKeys returns the annotation key names (a new slice).
func AnnotationKeys() []string { return []string{KeyPendingIFrame, KeyLEOState, KeyBudgetUsed} }

var annByName = map[string]annKey{KeyPendingIFrame: annPendingIFrame, KeyLEOState: annLEOState, KeyBudgetUsed: annBudgetUsed}

func (k annKey) String() string {
	switch k {
	case annPendingIFrame:
		return KeyPendingIFrame
	case annLEOState:
		return KeyLEOState
	case annBudgetUsed:
		return KeyBudgetUsed
	}
	return ""
}

// value returns the annotation's integer form and whether it is present:
// pending_iframe is 1 when present; leo_state is its LEOState;
// budget_used is BudgetUsed, in permille.
func (a *Annotations) value(k annKey) (uint64, bool) {
	if a == nil {
		return 0, false
	}
	switch k {
	case annPendingIFrame:
		return 1, a.PendingIFrame
	case annLEOState:
		return uint64(a.LEOState), a.LEOState != LEONone
	case annBudgetUsed:
		return a.BudgetUsed, a.HasBudget
	}
	return 0, false
}
