package rules

import "time"

// Limits of a rule set, from the per-session caps MoMQ recommends (appendix
// A.3, Table 8). They apply to a rule file as a whole and to the rules one
// peer installs; Compile rejects a set that breaks one, with file:line.
const (
	// MaxRules is the number of rules in a set ("an order of magnitude
	// above the four-rule policy").
	MaxRules = 100
	// MaxMatchEntries is the number of match entries per rule ("bounds the
	// metadata one match decision inspects").
	MaxMatchEntries = 10
	// MaxActions is the number of action entries per rule, each prefer
	// pair and each skipped unknown action counting as one ("bounds the
	// merge work per directive").
	MaxActions = 20
	// MaxKeyBytes bounds match keys, prefer label keys, action names and
	// rule ids, in bytes.
	MaxKeyBytes = 128
	// MaxValueBytes bounds match values and prefer label values, in bytes.
	MaxValueBytes = 1024
	// MaxInstallsPerSecond is the rate at which a peer may install rules
	// (InstallLimiter).
	MaxInstallsPerSecond = 10
)

// Bounds of bondd's own actions and of the Directive.
const (
	// MaxPreferences is the number of path preferences a Directive holds.
	// When the matching rules prefer more label keys, the ones from
	// lower-priority rules are dropped: preferences are advice.
	MaxPreferences = 8
	// MaxDuplicate is the largest duplicate count: as many paths as an edge
	// may have uplinks.
	MaxDuplicate = 8
	// MaxFECK is the largest FEC block size k, in data packets.
	MaxFECK = 128
	// MaxFECParity is the largest fixed parity count per block, in packets.
	MaxFECParity = 128
	// MaxFECAlpha is the largest FEC safety factor α.
	MaxFECAlpha = 16
	// MaxDeadline bounds deadline_ms (one minute).
	MaxDeadline = 60 * time.Second
	// MaxResequence bounds resequence_ms: the receiver's reorder buffer is
	// per-session state and must stay bounded.
	MaxResequence = 5 * time.Second
	// MaxRulePriority is the largest rule priority (the rule's order).
	MaxRulePriority = 65535
	// MaxFileBytes is the largest rule file Load reads.
	MaxFileBytes = 1 << 20
)

// DefaultDebounce is how long a Watcher waits after the last change event
// before it reloads, so that an editor's several writes cause one reload.
const DefaultDebounce = 100 * time.Millisecond

// RuleMask must hold a bit per rule.
var _ = [128 - MaxRules]struct{}{}
