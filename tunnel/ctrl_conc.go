package tunnel

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/quic-go/quic-go"

	"github.com/bondd/bondd/classify"
	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/rules"
	"github.com/bondd/bondd/tunnel/ctrlmsg"
)

// The concentrator's side of the control plane (MoMQ appendix A.2). Every
// connection of an edge reads its control stream in routineServeControl; the
// state the messages change belongs to the edge's bond (bondControl) and
// to its session, the edge process that sent the hello's bond id:
//
//   - PATH_STATE_REPORT: the latest report of the session (a higher
//     sequence number than the last one applied), shown in
//     BondStats.PeerPaths. A path the edge reports UNAVAILABLE is not
//     chosen for downlink traffic (policy.Path.SetPeerUnavailable) until
//     a report says otherwise, a new connection of that path arrives, or
//     the session ends; a report never marks down the path it arrived on.
//   - PATH_LABEL_UPDATE: the edge's labels of a path. They override the
//     labels the path was created with for descriptive keys only: every
//     key but cost_class and EdgeAuth.PolicyLabelKeys (see
//     effectiveLabelsLocked).
//   - PATH_MAPPING_RULE: installs or removes one downlink rule of the
//     session, answered with a PATH_MAPPING_RESULT. Only when
//     EdgeAuth.AllowEdgeRules is set; else NOT_AUTHORIZED, with no reason.
//
// The session ends when a hello brings a new bond id (the edge restarted)
// or when the last control stream of the session ends (every connection
// of the edge is down). Its rules, labels and report are then discarded,
// and the edge sends them again on its next connection.

// edgeRulePrefix prefixes the id of every rule an edge installs, inside
// the concentrator's rule set, so that edge rules never collide with the
// concentrator's own and show as such in BondStats.Rules.
const edgeRulePrefix = "edge."

// builtinPolicyLabelKeys are label keys that are never descriptive: an
// edge's PATH_LABEL_UPDATE cannot change them after the hello. Their value
// is the one the edge's hello gave when the path was created, which is the
// edge's configuration; the update message cannot move traffic between
// cost classes behind the concentrator's back. EdgeAuth.PolicyLabelKeys
// adds to them.
var builtinPolicyLabelKeys = []string{"cost_class"}

// ctrlWriteTimeout bounds one write on a control stream: a message none
// of which the stream took in this time is dropped, and one it took part
// of gets this long once more before the connection is closed
// (writeControl).
const ctrlWriteTimeout = 2 * time.Second

// bondControl is a concentrator bond's control-plane state: the edge's
// session, its report, its labels and its downlink rules. It is also the
// RuleSource of the bond's downlink rules when the edge may install rules.
type bondControl struct {
	bond       *Bond
	log        *slog.Logger
	allowRules bool               // EdgeAuth.AllowEdgeRules
	policyKeys map[string]bool    // label keys the edge cannot override
	base       RuleSource         // the concentrator's own downlink rules; may be nil
	classes    *classify.ClassSet // compile options when base has no set
	limiter    rules.InstallLimiter

	mu       sync.Mutex // guards the following
	bondID   uint64     // the session's bond id
	live     int        // control streams of the session being read
	seq      uint64     // sequence number of the report applied last
	report   *ctrlmsg.StateReport
	reportAt time.Time
	labels   map[string]map[string]string // by path name: the edge's labels of that path, as sent
	rules    []rules.Rule                 // the session's rules, ids prefixed, in install order

	// mergeMu serialises compiles of merged (lock order: mu, then
	// mergeMu); merged is read lock-free by Current.
	mergeMu sync.Mutex
	merged  atomic.Pointer[mergedRules] // nil: the session has no rules
}

// mergedRules is the compiled union of the concentrator's rules and a
// session's rules.
type mergedRules struct {
	base    *rules.Set   // the concentrator's set merged in (nil: none)
	session []rules.Rule // the session's rules merged in; not modified
	set     *rules.Set   // the union; base when it did not compile
}

func newBondControl(ea *EdgeAuth, base RuleSource, classes *classify.ClassSet, log *slog.Logger) *bondControl {
	c := &bondControl{log: log, allowRules: ea.AllowEdgeRules, base: base, classes: classes, policyKeys: map[string]bool{}}
	for _, k := range builtinPolicyLabelKeys {
		c.policyKeys[k] = true
	}
	for _, k := range ea.PolicyLabelKeys {
		c.policyKeys[k] = true
	}
	return c
}

// Current returns the downlink rule set in force for the bond: the
// concentrator's own set with the session's rules added, or the own set
// alone when the session has none. Lock-free, except for one compile after
// the concentrator's rule file was reloaded while the session had rules.
func (c *bondControl) Current() *rules.Set {
	var base *rules.Set
	if c.base != nil {
		base = c.base.Current()
	}
	m := c.merged.Load()
	if m == nil {
		return base
	}
	if m.base != base {
		m = c.remerge(base)
	}
	return m.set
}

// remerge compiles the session's rules against a reloaded base set. When
// they no longer fit, base alone is in force and the failure is counted
// and logged; the session's rules are kept for the next attempt.
func (c *bondControl) remerge(base *rules.Set) *mergedRules {
	c.mergeMu.Lock()
	defer c.mergeMu.Unlock()
	m := c.merged.Load()
	if m == nil || m.base == base {
		return m
	}
	next := &mergedRules{base: base, session: m.session}
	set, err := c.compileMerged(base, m.session)
	if err != nil {
		c.bond.ctlCtr.mergeFailures.Add(1)
		c.log.Warn("edge rules do not fit the reloaded rule file; they are suspended", "err", err)
		set = base
	}
	next.set = set
	c.merged.Store(next)
	return next
}

// compileMerged compiles base's rules followed by session: evaluation is
// by rule priority, and among equal priorities the concentrator's rules
// come first.
func (c *bondControl) compileMerged(base *rules.Set, session []rules.Rule) (*rules.Set, error) {
	f := &rules.File{Name: "edge " + c.bond.edgeID}
	classes := c.classes
	if base != nil {
		f.Name = base.Name() + " + edge " + c.bond.edgeID
		classes = base.Classes()
		for i := range base.Len() {
			f.Rules = append(f.Rules, base.Rule(i))
		}
	}
	f.Rules = append(f.Rules, session...)
	return rules.Compile(f, rules.Options{Classes: classes})
}

// publishLocked makes session the session's rules. c.mu is held.
func (c *bondControl) publishLocked(session []rules.Rule) error {
	c.mergeMu.Lock()
	defer c.mergeMu.Unlock()
	if len(session) == 0 {
		c.merged.Store(nil)
		c.rules = nil
		return nil
	}
	var base *rules.Set
	if c.base != nil {
		base = c.base.Current()
	}
	set, err := c.compileMerged(base, session)
	if err != nil {
		return err
	}
	c.rules = session
	c.merged.Store(&mergedRules{base: base, session: session, set: set})
	return nil
}

// begin registers a control stream of session bondID on path p; a new bond
// id ends the previous session first. A stream of a session the bond has
// already left (a late one of a restarted edge's old process) changes
// nothing, so that it cannot reset the new session.
func (c *bondControl) begin(bondID uint64, p *path) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bond.rx.Lock()
	current := c.bond.rx.bondID
	c.bond.rx.Unlock()
	if bondID != current {
		return
	}
	if c.bondID != bondID { // the old session's streams are being closed
		c.resetLocked()
		c.bondID, c.live = bondID, 0
	}
	c.live++
	p.state.SetPeerUnavailable(false) // the peer has just connected it
	if l, ok := c.labels[p.name]; ok {
		p.state.SetLabels(c.effectiveLabelsLocked(p.state, l))
	}
}

// end unregisters a control stream of session bondID; the session ends
// with its last stream.
func (c *bondControl) end(bondID uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bondID != bondID || c.live == 0 {
		return
	}
	if c.live--; c.live == 0 {
		c.resetLocked()
	}
}

// resetLocked discards the session's state: rules, labels, report.
func (c *bondControl) resetLocked() {
	if len(c.rules) > 0 {
		c.log.Info("edge session ended: its downlink rules are discarded", "rules", len(c.rules))
	}
	c.publishLocked(nil)
	c.seq, c.report, c.reportAt, c.labels = 0, nil, time.Time{}, nil
	for _, p := range c.bond.paths.Load().paths {
		p.state.SetLabels(nil)
		p.state.SetPeerUnavailable(false)
	}
}

// routineServeControl reads the control stream of one connection of the edge
// after the hello, until the stream or the connection ends. caps are what
// the hello negotiated; a control message outside them, a message only the
// concentrator sends, or one that does not parse is a protocol violation:
// the connection is closed with codeProtocol and the violation counted.
func (c *bondControl) routineServeControl(conn *quic.Conn, str *quic.Stream, p *path, bondID uint64, caps ctrlmsg.Caps) {
	log := c.log.With("path", p.name)
	log.Debug("routineServeControl started")
	defer log.Debug("routineServeControl stopped")
	c.begin(bondID, p)
	defer c.end(bondID)
	ctr := &c.bond.ctlCtr
	var wmu sync.Mutex // the rate feedback writes on str too (ratectl.go)
	if caps&ctrlmsg.CapRate != 0 {
		p.rc.setPeer(caps, time.Now())
		defer p.rc.startFeedback(conn, str, &wmu)()
	}
	for {
		msg, why, err := readControl(str, caps, ctrlmsg.FromEdge, ctr)
		if err != nil {
			return // the stream or the connection ended
		}
		if why != "" {
			c.violation(conn, log, why)
			return
		}
		switch m := msg.(type) {
		case *ctrlmsg.StateReport:
			c.onReport(bondID, p, m)
		case *ctrlmsg.LabelUpdate:
			c.onLabels(bondID, m)
		case *ctrlmsg.RateFeedback:
			c.bond.onRateFeedback(m, time.Now())
		case *ctrlmsg.MappingRule:
			res := c.onRule(bondID, m)
			if err := writeControl(conn, str, &wmu, res); err != nil {
				if errors.Is(err, errControlBusy) {
					// The edge waits for every result; a new carrier
					// sends all its rules again.
					err = closeStalled(conn, err)
				}
				logControlWrite(c.log, p.name, err)
				return
			}
			ctr.sent.Add(1)
		}
	}
}

// violation counts a protocol violation and closes conn.
func (c *bondControl) violation(conn *quic.Conn, log *slog.Logger, why string) {
	c.bond.ctlCtr.violations.Add(1)
	log.Warn("control protocol violation: closing the connection", "err", why)
	conn.CloseWithError(codeProtocol, "control: protocol violation")
}

// onReport applies a PATH_STATE_REPORT that arrived on path from.
func (c *bondControl) onReport(bondID uint64, from *path, m *ctrlmsg.StateReport) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if bondID != c.bondID {
		return // a connection of a replaced session, being closed
	}
	if m.Seq <= c.seq {
		c.bond.ctlCtr.staleReports.Add(1)
		return
	}
	c.seq, c.report, c.reportAt = m.Seq, m, time.Now()
	for _, p := range c.bond.paths.Load().paths {
		down := false
		if i := slices.IndexFunc(m.Paths, func(e ctrlmsg.PathReport) bool { return e.Path == p.name }); i >= 0 {
			down = m.Paths[i].Status == policy.StatusUnavailable.String()
		}
		p.state.SetPeerUnavailable(down && p != from)
	}
}

// onLabels applies a PATH_LABEL_UPDATE. The labels of a path the bond does
// not have yet are kept, for up to maxPaths path names, and applied when
// the path connects.
func (c *bondControl) onLabels(bondID uint64, m *ctrlmsg.LabelUpdate) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if bondID != c.bondID {
		return
	}
	if _, ok := c.labels[m.Path]; !ok && len(c.labels) >= maxPaths {
		c.bond.ctlCtr.labelsIgnored.Add(1)
		return
	}
	if c.labels == nil {
		c.labels = map[string]map[string]string{}
	}
	c.labels[m.Path] = m.Labels
	for _, p := range c.bond.paths.Load().paths {
		if p.name == m.Path {
			p.state.SetLabels(c.effectiveLabelsLocked(p.state, m.Labels))
		}
	}
}

// effectiveLabelsLocked merges the edge's labels of a path into the labels
// the path was created with: the edge's value wins for a descriptive key;
// a policy key (builtinPolicyLabelKeys, EdgeAuth.PolicyLabelKeys) keeps the
// path's own value, or stays absent, and each such key the edge tried to
// change is counted. nil edge labels give nil: the path's own labels.
func (c *bondControl) effectiveLabelsLocked(st *policy.Path, edge map[string]string) map[string]string {
	if edge == nil {
		return nil
	}
	out := maps.Clone(st.Labels)
	if out == nil {
		out = make(map[string]string, len(edge))
	}
	for k, v := range edge {
		if c.policyKeys[k] {
			if st.Labels[k] != v {
				c.bond.ctlCtr.labelKeysRefused.Add(1)
			}
			continue
		}
		out[k] = v
	}
	return out
}

// onRule executes a PATH_MAPPING_RULE and returns its result. The checks,
// in order: authorization (NOT_AUTHORIZED), the install rate
// (rules.InstallLimiter: REJECTED), for a remove the id (NOT_FOUND), for an
// install the limits of rules/limits.go (REJECTED), the rule on its own
// (INVALID_RULE, with the compiler's reason) and the session's rules with
// the concentrator's (REJECTED when they do not fit together). Only OK
// changes the rules in force.
func (c *bondControl) onRule(bondID uint64, m *ctrlmsg.MappingRule) *ctrlmsg.MappingResult {
	res := &ctrlmsg.MappingResult{Type: ctrlmsg.TypeMappingResult, Request: m.Request, ID: m.ID}
	status, reason := c.ruleOp(bondID, m)
	res.Status, res.Reason = status, truncateReason(reason)
	ctr := &c.bond.ctlCtr
	switch status {
	case ctrlmsg.ResultOK:
		ctr.rulesOK.Add(1)
	case ctrlmsg.ResultRejected:
		ctr.rulesRejected.Add(1)
	case ctrlmsg.ResultNotAuthorized:
		ctr.rulesNotAuthorized.Add(1)
		res.Reason = "" // the edge learns nothing of the policy (MoMQ A.2)
	case ctrlmsg.ResultInvalidRule:
		ctr.rulesInvalid.Add(1)
	case ctrlmsg.ResultNotFound:
		ctr.rulesNotFound.Add(1)
	}
	return res
}

func (c *bondControl) ruleOp(bondID uint64, m *ctrlmsg.MappingRule) (status, reason string) {
	if !c.allowRules {
		return ctrlmsg.ResultNotAuthorized, ""
	}
	if !c.limiter.Allow() {
		return ctrlmsg.ResultRejected, fmt.Sprintf("more than %d rule operations per second", rules.MaxInstallsPerSecond)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if bondID != c.bondID {
		return ctrlmsg.ResultRejected, "session ended"
	}
	id := edgeRulePrefix + m.ID
	i := slices.IndexFunc(c.rules, func(r rules.Rule) bool { return r.ID == id })
	if m.Op == ctrlmsg.OpRemove {
		if i < 0 {
			return ctrlmsg.ResultNotFound, "rule " + m.ID + " is not installed"
		}
		if err := c.publishLocked(slices.Delete(slices.Clone(c.rules), i, i+1)); err != nil {
			return ctrlmsg.ResultRejected, "the remaining rules do not fit the concentrator's rule set"
		}
		return ctrlmsg.ResultOK, ""
	}
	if why := ruleLimits(m); why != "" {
		return ctrlmsg.ResultRejected, why
	}
	r := m.Rule()
	r.ID = id
	alone := r
	alone.ID = m.ID // errors name the rule as the edge knows it
	classes := c.classes
	var base *rules.Set
	if c.base != nil {
		if base = c.base.Current(); base != nil {
			classes = base.Classes()
		}
	}
	if _, err := rules.Compile(&rules.File{Name: "edge rule", Rules: []rules.Rule{alone}}, rules.Options{Classes: classes}); err != nil {
		return ctrlmsg.ResultInvalidRule, strings.ReplaceAll(err.Error(), "\n", "; ")
	}
	next := slices.Clone(c.rules)
	if i >= 0 {
		next[i] = r
	} else {
		next = append(next, r)
	}
	if room := rules.MaxRules - base.Len(); len(next) > room {
		return ctrlmsg.ResultRejected, fmt.Sprintf("at most %d rules per session", max(room, 0))
	}
	if base.Index(r.ID) >= 0 {
		return ctrlmsg.ResultRejected, "rule id in use by the concentrator"
	}
	if err := c.publishLocked(next); err != nil {
		return ctrlmsg.ResultRejected, "the rule does not fit the concentrator's rule set"
	}
	return ctrlmsg.ResultOK, ""
}

// ruleLimits checks an install against the per-rule limits of MoMQ Table 8
// (rules/limits.go) and returns what it breaks, or "".
func ruleLimits(m *ctrlmsg.MappingRule) string {
	switch {
	case len(m.Match) > rules.MaxMatchEntries:
		return fmt.Sprintf("%d match entries, at most %d", len(m.Match), rules.MaxMatchEntries)
	case len(m.Actions) > rules.MaxActions:
		return fmt.Sprintf("%d actions, at most %d", len(m.Actions), rules.MaxActions)
	}
	long := func(k, v string) bool { return len(k) > rules.MaxKeyBytes || len(v) > rules.MaxValueBytes }
	for _, e := range m.Match {
		if long(e.Key, e.Value) {
			return fmt.Sprintf("match key over %d or value over %d bytes", rules.MaxKeyBytes, rules.MaxValueBytes)
		}
	}
	for _, a := range m.Actions {
		bad := long(a.Name, "") || long(a.Key, a.Value)
		for _, p := range a.Params {
			bad = bad || long(p.Key, p.Value)
		}
		if bad {
			return fmt.Sprintf("action key over %d or value over %d bytes", rules.MaxKeyBytes, rules.MaxValueBytes)
		}
	}
	return ""
}

// truncateReason cuts s to at most ctrlmsg.MaxReasonLen bytes at a rune boundary.
func truncateReason(s string) string {
	if len(s) <= ctrlmsg.MaxReasonLen {
		return s
	}
	s = s[:ctrlmsg.MaxReasonLen]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// peerReport returns the session's latest PATH_STATE_REPORT for
// BondStats, or nil.
func (c *bondControl) peerReport() *PeerReport {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.report == nil {
		return nil
	}
	r := &PeerReport{Seq: c.report.Seq, Age: time.Since(c.reportAt), Paths: []PeerPath{}}
	for _, e := range c.report.Paths {
		r.Paths = append(r.Paths, PeerPath{Name: e.Path, Status: e.Status, Labels: e.Labels})
	}
	return r
}

// sessionRules returns the number of rules the session installed.
func (c *bondControl) sessionRules() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.rules)
}
