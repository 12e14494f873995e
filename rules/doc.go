// Package rules is bondd's rule language: operators steer traffic by
// writing rules that match packet metadata and state delivery preferences,
// modelled on the MoMQ path-mapping rules (Media over Multipath QUIC, §3,
// Table 1 and appendix A.2–A.3) and applied to IP packets.
//
// # Shape
//
// A rule file (YAML, documented in docs/rules.md) holds rules. A rule has an
// id, a priority that orders it among the rules (higher first), match
// entries and actions. A match entry is key EQUALS value (byte for byte, on
// the canonical forms of docs/classify.md) or key EXISTS; entries combine
// with AND and a rule without entries is a catch-all. Keys come from the
// classifier (classify.Key) and from two annotations the policy package
// injects (Annotations: pending_iframe, leo_state). Actions are MoMQ's four
// (priority, balancing, prefer, affinity) and bondd's own (fec, duplicate,
// deadline_ms, resequence_ms); an unknown action is skipped with a warning,
// as MoMQ's length-prefixed action entries allow.
//
// # Pipeline
//
//	Parse:    bytes → *File (the rules as written, with file:line)
//	Compile:  *File → *Set (keys interned to classify.Key, values to
//	          integers, limits of MoMQ Table 8 enforced, rules sorted)
//	Evaluate: *Set + *classify.Metadata + *Annotations → Directive
//
// Every problem Parse or Compile finds is an *Error carrying the file and
// line; several are joined with errors.Join.
//
// # Evaluation
//
// (*Set).Evaluate walks the rules in priority order and merges the actions
// of every matching rule per dimension into a fixed-size Directive: the
// highest priority; single path if any rule asks for it; the first
// affinity; preferences as a union ordered by rule priority, the higher
// rule winning on the same label key; and, for bondd's own actions, the
// highest-priority rule that sets them. It allocates nothing, takes no lock
// and costs at most a bounded number of integer comparisons per rule.
// Directives are advice: the scheduler falls back to its default selection
// when one cannot be met, and evaluation never blocks delivery.
//
// # Concurrency
//
// A *Set is immutable and safe for concurrent use. A Watcher publishes the
// current Set through an atomic.Pointer: readers (the TUN reader
// goroutines) call Current and never lock; a reload on a file change or on
// an explicit Reload (SIGHUP) swaps in a new Set only if it compiled, and
// the running Set stays in force otherwise. InstallLimiter bounds how often
// a peer may install rules (10 per second).
package rules
