package tunnel

import (
	"sync/atomic"
	"time"
)

// ctrlCounters count a bond's control-plane messages (ctrl_*.go). Every
// refusal of peer input is one of them.
type ctrlCounters struct {
	received, sent, unknown, violations           atomic.Uint64
	staleReports, labelKeysRefused, labelsIgnored atomic.Uint64
	rulesOK, rulesRejected, rulesNotAuthorized    atomic.Uint64
	rulesInvalid, rulesNotFound, mergeFailures    atomic.Uint64
}

// ControlStats count the control-plane messages of a bond (MoMQ appendix
// A.2), in messages. On the concentrator the Rules* counters are the
// PATH_MAPPING_RESULTs it sent, by status; on the edge, the ones it
// received.
type ControlStats struct {
	Received uint64 `json:"received"` // control messages read after the hello
	Sent     uint64 `json:"sent"`     // control messages written after the hello
	// Unknown were of a type this build does not know: skipped.
	Unknown uint64 `json:"unknown"`
	// Violations were malformed, not negotiated in the hello, or of a type
	// only this side sends: each closed its connection with codeProtocol.
	Violations uint64 `json:"violations"`
	// StaleReports were PATH_STATE_REPORTs whose sequence number was not
	// above the last one applied: ignored.
	StaleReports uint64 `json:"stale_reports"`
	// LabelKeysRefused counts the policy label keys (cost_class,
	// EdgeAuth.PolicyLabelKeys) a PATH_LABEL_UPDATE tried to change: those
	// keys were ignored, the rest of the update applied.
	LabelKeysRefused uint64 `json:"label_keys_refused"`
	// LabelsIgnored were PATH_LABEL_UPDATEs for a path name beyond the
	// maxPaths names the bond keeps labels for.
	LabelsIgnored      uint64 `json:"labels_ignored"`
	RulesOK            uint64 `json:"rules_ok"`
	RulesRejected      uint64 `json:"rules_rejected"`
	RulesNotAuthorized uint64 `json:"rules_not_authorized"`
	RulesInvalid       uint64 `json:"rules_invalid"`
	RulesNotFound      uint64 `json:"rules_not_found"`
	// MergeFailures counts reloads of the concentrator's rule file that the
	// session's rules no longer fit: they were suspended.
	MergeFailures uint64 `json:"merge_failures"`
	// SessionRules is the number of downlink rules the edge's current
	// session installed (concentrator only).
	SessionRules int `json:"session_rules"`
}

// PeerReport is the latest PATH_STATE_REPORT an edge sent (MoMQ A.2), on
// the concentrator.
type PeerReport struct {
	Seq   uint64        `json:"seq"`    // the report's sequence number
	Age   time.Duration `json:"age_ns"` // since it arrived
	Paths []PeerPath    `json:"paths"`
}

// PeerPath is one path of a PeerReport: its name, status (ACTIVE,
// DEGRADED or UNAVAILABLE) and labels as the edge sees them.
type PeerPath struct {
	Name   string            `json:"name"`
	Status string            `json:"status"`
	Labels map[string]string `json:"labels,omitempty"`
}

// controlStats returns the bond's control counters, or nil when the bond
// has no control plane traffic yet and is not a concentrator bond.
func (b *Bond) controlStats() *ControlStats {
	c := &b.ctlCtr
	s := &ControlStats{
		Received: c.received.Load(), Sent: c.sent.Load(), Unknown: c.unknown.Load(), Violations: c.violations.Load(),
		StaleReports: c.staleReports.Load(), LabelKeysRefused: c.labelKeysRefused.Load(), LabelsIgnored: c.labelsIgnored.Load(),
		RulesOK: c.rulesOK.Load(), RulesRejected: c.rulesRejected.Load(), RulesNotAuthorized: c.rulesNotAuthorized.Load(),
		RulesInvalid: c.rulesInvalid.Load(), RulesNotFound: c.rulesNotFound.Load(), MergeFailures: c.mergeFailures.Load(),
		SessionRules: b.ctl.sessionRules(),
	}
	if *s == (ControlStats{}) && b.ctl == nil {
		return nil
	}
	return s
}
