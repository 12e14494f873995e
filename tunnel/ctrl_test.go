package tunnel

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/bondd/bondd/internal/testkit"
	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/rules"
	"github.com/bondd/bondd/tun/tuntest"
	"github.com/bondd/bondd/tunnel/ctrlmsg"
)

// swapRules is a RuleSource whose set a test swaps.
type swapRules struct{ cur atomic.Pointer[rules.Set] }

func (s *swapRules) Current() *rules.Set { return s.cur.Load() }

func mustRules(t testing.TB, name, text string) *rules.Set {
	t.Helper()
	s, err := rules.CompileBytes(name, []byte(text), rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ctrlEnv is a running concentrator for edge "van-1" and what an edge or a
// hand-made client needs to reach it.
type ctrlEnv struct {
	conc *Concentrator
	addr string
	tls  *tls.Config
}

func newCtrlEnv(t *testing.T, edit func(*EdgeAuth)) *ctrlEnv {
	t.Helper()
	ea := EdgeAuth{ID: "van-1", Token: token, AllowedPrefixes: []netip.Prefix{netip.MustParsePrefix("10.77.0.0/24")}}
	if edit != nil {
		edit(&ea)
	}
	conc, addr, tlsConf := startTestConcentrator(t, tuntest.New(testMTU, 8),
		PathOptions{IdleTimeout: 2 * time.Second, Keepalive: 300 * time.Millisecond}, ea)
	return &ctrlEnv{conc: conc, addr: addr, tls: tlsConf}
}

// startEdge starts edge van-1 with uplinks up0, up1, … labelled
// link_type=cellular, cost_class=metered. The edge is closed at cleanup
// unless the test closes it first.
func (env *ctrlEnv) startEdge(t *testing.T, uplinks int, edit func(*EdgeOptions)) *Edge {
	t.Helper()
	var ups []UplinkOptions
	for i := range uplinks {
		ups = append(ups, UplinkOptions{Name: fmt.Sprintf("up%d", i), Bind: netip.MustParseAddr("127.0.0.1"),
			Labels: map[string]string{"link_type": "cellular", "cost_class": "metered"}})
	}
	eo := EdgeOptions{ID: "van-1", Device: tuntest.New(testMTU, 8), MTU: testMTU, Concentrator: env.addr, TLS: env.tls,
		Token: token, Uplinks: ups, Paths: PathOptions{IdleTimeout: 2 * time.Second, Keepalive: 300 * time.Millisecond,
			RedialMin: 50 * time.Millisecond, RedialMax: 200 * time.Millisecond}}
	if edit != nil {
		edit(&eo)
	}
	e, err := NewEdge(eo)
	if err != nil {
		t.Fatal(err)
	}
	e.Start()
	t.Cleanup(func() { e.Close() })
	return e
}

// concStats returns the concentrator's stats of van-1.
func (env *ctrlEnv) concStats() BondStats { return env.conc.Bond("van-1").Stats() }

// rawClient is a hand-made edge connection: a hello with the given
// capabilities, then whatever the test writes.
type rawClient struct {
	conn  *quic.Conn
	str   *quic.Stream
	reply ctrlmsg.HelloReply
}

func (env *ctrlEnv) dialRaw(t *testing.T, bondID uint64, caps []string) *rawClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := quic.DialAddr(ctx, env.addr, env.tls, &quic.Config{EnableDatagrams: true, MaxIdleTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.CloseWithError(0, "") })
	str, err := conn.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h := ctrlmsg.Hello{Type: ctrlmsg.TypeHello, Version: Version, EdgeID: "van-1", BondID: bondID, Path: "raw", Token: token, Control: caps}
	if err := ctrlmsg.Write(str, &h); err != nil {
		t.Fatal(err)
	}
	rc := &rawClient{conn: conn, str: str}
	typ, body, err := ctrlmsg.Read(str)
	if err != nil || typ != ctrlmsg.TypeHelloReply || json.Unmarshal(body, &rc.reply) != nil || !rc.reply.OK {
		t.Fatalf("hello reply %q %s: %v", typ, body, err)
	}
	return rc
}

func (rc *rawClient) send(t *testing.T, v any) {
	t.Helper()
	if err := ctrlmsg.Write(rc.str, v); err != nil {
		t.Fatal(err)
	}
}

// rule sends a PATH_MAPPING_RULE and returns the result.
func (rc *rawClient) rule(t *testing.T, m *ctrlmsg.MappingRule) *ctrlmsg.MappingResult {
	t.Helper()
	m.Type = ctrlmsg.TypeMappingRule
	rc.send(t, m)
	rc.str.SetReadDeadline(time.Now().Add(5 * time.Second))
	typ, body, err := ctrlmsg.Read(rc.str)
	if err != nil {
		t.Fatalf("no result for %+v: %v", m, err)
	}
	res, err := ctrlmsg.ParseMappingResult(body)
	if typ != ctrlmsg.TypeMappingResult || err != nil || res.Request != m.Request || res.ID != m.ID {
		t.Fatalf("result %q %s: %v", typ, body, err)
	}
	return res
}

// waitClosed waits for the connection to be closed by the peer with code.
func (rc *rawClient) waitClosed(t *testing.T, code quic.ApplicationErrorCode) {
	t.Helper()
	select {
	case <-rc.conn.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("connection still open")
	}
	var ae *quic.ApplicationError
	if err := context.Cause(rc.conn.Context()); !errors.As(err, &ae) || ae.ErrorCode != code || !ae.Remote {
		t.Fatalf("closed with %v, want remote application error %#x", err, code)
	}
}

var allCaps = ctrlmsg.CapsAll.Names()

// install returns a valid install of a downlink rule.
func install(req uint64, id string) *ctrlmsg.MappingRule {
	return &ctrlmsg.MappingRule{Request: req, Op: ctrlmsg.OpInstall, ID: id, Priority: 10,
		Match:   []ctrlmsg.RuleMatch{{Key: "dscp", Op: ctrlmsg.MatchEquals, Value: "46"}},
		Actions: []ctrlmsg.RuleAction{{Name: "prefer", Key: "link_type", Value: "satellite"}}}
}

func ruleIDs(s BondStats) []string {
	if s.Rules == nil {
		return nil
	}
	var ids []string
	for _, r := range s.Rules.Rules {
		ids = append(ids, r.ID)
	}
	return ids
}

func TestControlMappingResults(t *testing.T) {
	env := newCtrlEnv(t, func(ea *EdgeAuth) { ea.AllowEdgeRules = true })
	rc := env.dialRaw(t, 1, allCaps)
	if got := strings.Join(rc.reply.Control, ","); got != "path_state,path_labels,path_mapping,flow_tags,rate" {
		t.Fatalf("negotiated %q", got)
	}

	if r := rc.rule(t, install(1, "voice")); r.Status != ctrlmsg.ResultOK {
		t.Fatalf("install: %+v", r)
	}
	if ids := ruleIDs(env.concStats()); len(ids) != 1 || ids[0] != "edge.voice" {
		t.Fatalf("rules in force %v", ids)
	}
	if r := rc.rule(t, install(2, "voice")); r.Status != ctrlmsg.ResultOK { // replace
		t.Fatalf("replace: %+v", r)
	}

	bad := install(3, "typo")
	bad.Match[0].Key = "dscpp"
	if r := rc.rule(t, bad); r.Status != ctrlmsg.ResultInvalidRule || !strings.Contains(r.Reason, "dscpp") {
		t.Fatalf("invalid rule: %+v", r)
	}

	big := install(4, "big")
	for i := range rules.MaxMatchEntries {
		big.Match = append(big.Match, ctrlmsg.RuleMatch{Key: fmt.Sprintf("k%d", i), Op: ctrlmsg.MatchExists})
	}
	if r := rc.rule(t, big); r.Status != ctrlmsg.ResultRejected || !strings.Contains(r.Reason, "match entries") {
		t.Fatalf("over the limits: %+v", r)
	}

	if r := rc.rule(t, &ctrlmsg.MappingRule{Request: 5, Op: ctrlmsg.OpRemove, ID: "nope"}); r.Status != ctrlmsg.ResultNotFound {
		t.Fatalf("remove unknown: %+v", r)
	}
	if r := rc.rule(t, &ctrlmsg.MappingRule{Request: 6, Op: ctrlmsg.OpRemove, ID: "voice"}); r.Status != ctrlmsg.ResultOK {
		t.Fatalf("remove: %+v", r)
	}
	if ids := ruleIDs(env.concStats()); ids != nil {
		t.Fatalf("rules after remove %v", ids)
	}

	// The install rate: the bucket (10) is nearly empty after 6
	// operations; a quick burst must meet REJECTED.
	rejected := 0
	for i := range 12 {
		r := rc.rule(t, &ctrlmsg.MappingRule{Request: uint64(10 + i), Op: ctrlmsg.OpRemove, ID: "nope"})
		if r.Status == ctrlmsg.ResultRejected && strings.Contains(r.Reason, "per second") {
			rejected++
		}
	}
	if rejected == 0 {
		t.Fatal("no operation was rate limited")
	}
	s := env.concStats().Control
	if s.RulesOK != 3 || s.RulesInvalid != 1 || s.RulesNotFound < 1 || s.RulesRejected != uint64(1+rejected) || s.SessionRules != 0 {
		t.Fatalf("control stats %+v", s)
	}

	// A result is the concentrator's message: from the edge it is a
	// protocol violation.
	rc.send(t, &ctrlmsg.MappingResult{Type: ctrlmsg.TypeMappingResult, Request: 1, ID: "x", Status: ctrlmsg.ResultOK})
	rc.waitClosed(t, codeProtocol)
	waitFor(t, func() bool { return env.concStats().Control.Violations == 1 })
}

func TestControlNotAuthorized(t *testing.T) {
	env := newCtrlEnv(t, nil) // AllowEdgeRules false
	rc := env.dialRaw(t, 1, allCaps)
	r := rc.rule(t, install(1, "voice"))
	if r.Status != ctrlmsg.ResultNotAuthorized || r.Reason != "" {
		t.Fatalf("result %+v", r)
	}
	if r := rc.rule(t, &ctrlmsg.MappingRule{Request: 2, Op: ctrlmsg.OpRemove, ID: "voice"}); r.Status != ctrlmsg.ResultNotAuthorized || r.Reason != "" {
		t.Fatalf("result %+v", r) // not NOT_FOUND: nothing about the session leaks
	}
	if s := env.concStats(); s.Rules != nil || s.Control.RulesNotAuthorized != 2 {
		t.Fatalf("stats %+v %+v", s.Rules, s.Control)
	}
}

func TestControlNotNegotiated(t *testing.T) {
	env := newCtrlEnv(t, func(ea *EdgeAuth) { ea.AllowEdgeRules = true })
	tests := []struct {
		name string
		caps []string
		msg  any
	}{
		{"old edge sends a report", nil, &ctrlmsg.StateReport{Type: ctrlmsg.TypeStateReport, Seq: 1}},
		{"state only sends a rule", ctrlmsg.CapState.Names(), &ctrlmsg.MappingRule{Type: ctrlmsg.TypeMappingRule, Request: 1, Op: ctrlmsg.OpRemove, ID: "x"}},
		{"mapping only sends labels", ctrlmsg.CapMapping.Names(), &ctrlmsg.LabelUpdate{Type: ctrlmsg.TypeLabelUpdate, Path: "raw"}},
		{"malformed report", allCaps, &ctrlmsg.StateReport{Type: ctrlmsg.TypeStateReport, Seq: 0}},
		{"second hello", allCaps, &ctrlmsg.Hello{Type: ctrlmsg.TypeHello}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := env.dialRaw(t, 1, tt.caps)
			if len(rc.reply.Control) != len(tt.caps) {
				t.Fatalf("negotiated %v for %v", rc.reply.Control, tt.caps)
			}
			rc.send(t, tt.msg)
			rc.waitClosed(t, codeProtocol)
			waitFor(t, func() bool { return env.concStats().Control.Violations == uint64(i+1) })
		})
	}
	// An unknown type is skipped, not a violation.
	rc := env.dialRaw(t, 1, allCaps)
	rc.send(t, map[string]string{"type": "path_future_thing"})
	if r := rc.rule(t, install(1, "still-open")); r.Status != ctrlmsg.ResultOK {
		t.Fatalf("after an unknown type: %+v", r)
	}
	if s := env.concStats().Control; s.Unknown != 1 || s.Violations != uint64(len(tests)) {
		t.Fatalf("stats %+v", s)
	}
}

func TestControlStaleReport(t *testing.T) {
	env := newCtrlEnv(t, nil)
	rc := env.dialRaw(t, 1, allCaps)
	rc.send(t, &ctrlmsg.StateReport{Type: ctrlmsg.TypeStateReport, Seq: 5, Paths: []ctrlmsg.PathReport{{Path: "raw", Status: "DEGRADED"}}})
	waitFor(t, func() bool { p := env.concStats().PeerPaths; return p != nil && p.Seq == 5 })
	rc.send(t, &ctrlmsg.StateReport{Type: ctrlmsg.TypeStateReport, Seq: 3, Paths: []ctrlmsg.PathReport{{Path: "raw", Status: "ACTIVE"}}})
	waitFor(t, func() bool { return env.concStats().Control.StaleReports == 1 })
	if p := env.concStats().PeerPaths; p.Seq != 5 || p.Paths[0].Status != "DEGRADED" {
		t.Fatalf("peer paths %+v", p)
	}
}

// TestControlEdgeSession runs a real edge against the concentrator: its
// reports reach the stats, its label update overrides a descriptive key
// but not cost_class, its downlink rules are installed, and all of it is
// discarded when the edge goes away and a new edge process comes.
func TestControlEdgeSession(t *testing.T) {
	testkit.CheckLeaks(t)
	env := newCtrlEnv(t, func(ea *EdgeAuth) { ea.AllowEdgeRules = true })
	var dl swapRules
	dl.cur.Store(mustRules(t, "downlink.yaml", `rules:
  - id: voice
    priority: 10
    match: {dscp: 46}
    actions: {prefer: {link_type: satellite}}
  - id: bulk
    priority: 1
    actions: {fec: off}
`))
	edge := env.startEdge(t, 2, func(o *EdgeOptions) { o.DownlinkRules = &dl })

	defer func() {
		if t.Failed() {
			s := env.concStats()
			t.Logf("concentrator: control %+v peer %+v rules %v; edge control %+v", s.Control, s.PeerPaths, ruleIDs(s), edge.Bond().Stats().Control)
		}
	}()
	waitFor(t, func() bool {
		s := env.concStats()
		return s.Control != nil && s.Control.SessionRules == 2 && s.PeerPaths != nil && len(s.PeerPaths.Paths) == 2 &&
			s.PeerPaths.Paths[0].Status == "ACTIVE" && s.PeerPaths.Paths[1].Status == "ACTIVE"
	})
	if ids := strings.Join(ruleIDs(env.concStats()), ","); ids != "edge.voice,edge.bulk" {
		t.Fatalf("rules in force %s", ids)
	}
	waitFor(t, func() bool { c := edge.Bond().Stats().Control; return c != nil && c.RulesOK >= 2 })

	// A rule set change on the edge reaches the concentrator.
	dl.cur.Store(mustRules(t, "downlink.yaml", `rules:
  - id: voice
    priority: 20
    match: {dscp: 46}
    actions: {duplicate: 2}
`))
	waitFor(t, func() bool {
		set := env.conc.Bond("van-1").rules.src.Current()
		if set.Len() != 1 {
			return false
		}
		r := set.Rule(0)
		return r.ID == "edge.voice" && strings.Contains(r.ActionText(), "duplicate")
	})

	// Labels: link_type and carrier are descriptive, cost_class is not.
	if err := edge.SetLabels("up0", map[string]string{"link_type": "satellite", "carrier": "acme", "cost_class": "free"}); err != nil {
		t.Fatal(err)
	}
	concLabels := func(name string) map[string]string {
		for _, p := range env.concStats().Paths {
			if p.Name == name {
				return p.Labels
			}
		}
		return nil
	}
	waitFor(t, func() bool { return concLabels("up0")["carrier"] == "acme" })
	if l := concLabels("up0"); l["link_type"] != "satellite" || l["cost_class"] != "metered" {
		t.Fatalf("concentrator labels of up0 %v", l)
	}
	if l := concLabels("up1"); l["link_type"] != "cellular" || l["carrier"] != "" {
		t.Fatalf("concentrator labels of up1 %v", l)
	}
	if n := env.concStats().Control.LabelKeysRefused; n != 1 {
		t.Fatalf("label keys refused %d", n)
	}
	if l := edge.Bond().Stats().Paths[0].Labels; l["cost_class"] != "free" {
		t.Fatalf("edge labels of up0 %v", l) // the edge's own view is its own
	}
	// The next report echoes the edge's labels.
	waitFor(t, func() bool { return env.concStats().PeerPaths.Paths[0].Labels["carrier"] == "acme" })
	if err := edge.SetLabels("nope", nil); err == nil {
		t.Fatal("SetLabels of an unknown uplink")
	}
	if err := edge.SetLabels("up0", map[string]string{"bad key": "v"}); err == nil {
		t.Fatal("SetLabels with a bad key")
	}

	// The edge goes away: the session and its state end with its last
	// connection.
	edge.Close()
	waitFor(t, func() bool {
		s := env.concStats()
		return s.Control.SessionRules == 0 && s.Rules == nil && s.PeerPaths == nil && concLabels("up0")["carrier"] == ""
	})
	if l := concLabels("up0"); l["link_type"] != "cellular" {
		t.Fatalf("labels after the session %v", l)
	}

	// A new edge process (a new bond id) without downlink rules.
	edge2 := env.startEdge(t, 1, nil)
	waitFor(t, func() bool { p := env.concStats().PeerPaths; return p != nil && len(p.Paths) == 1 })
	if s := env.concStats(); s.Control.SessionRules != 0 || s.Rules != nil {
		t.Fatalf("rules of the old session survived: %+v", s.Rules)
	}
	edge2.Close()
}

// TestBondControlSession drives a concentrator bond's control state
// directly: peer-reported UNAVAILABLE, the rules of a session and a new
// bond id, and a reload of the concentrator's own rules.
func TestBondControlSession(t *testing.T) {
	var base swapRules
	base.cur.Store(mustRules(t, "conc.yaml", "rules:\n  - id: own\n    priority: 5\n    actions: {priority: 1}\n"))
	b, err := newBond("van-1", tuntest.New(testMTU, 8), bondOptions{mtu: testMTU, paths: PathOptions{}.withDefaults(),
		fec: FECOptions{Mode: FECOff}, rules: &base, log: discardLogger, peer: &EdgeAuth{AllowEdgeRules: true, PolicyLabelKeys: []string{"tier"}}})
	if err != nil {
		t.Fatal(err)
	}
	c := b.ctl
	pa, _ := b.pathFor("a", map[string]string{"link_type": "cellular", "tier": "gold"})
	pb, _ := b.pathFor("b", nil)
	now := time.Now()
	pa.state.SetConnected(true, now)
	pb.state.SetConnected(true, now)
	b.adoptBondID(1)
	c.begin(1, pa)
	c.begin(1, pb)

	// Peer-reported UNAVAILABLE takes a path out of the picker, except the
	// path the report came on.
	c.onReport(1, pb, &ctrlmsg.StateReport{Seq: 1, Paths: []ctrlmsg.PathReport{{Path: "a", Status: "UNAVAILABLE"}, {Path: "b", Status: "UNAVAILABLE"}}})
	if pa.state.Status(now) != policy.StatusUnavailable || pb.state.Status(now) != policy.StatusActive {
		t.Fatalf("status a %v, b %v", pa.state.Status(now), pb.state.Status(now))
	}
	c.onReport(1, pb, &ctrlmsg.StateReport{Seq: 2, Paths: []ctrlmsg.PathReport{{Path: "a", Status: "DEGRADED"}}})
	if pa.state.Status(now) != policy.StatusActive {
		t.Fatalf("status a %v after DEGRADED", pa.state.Status(now))
	}

	// Labels: tier is a policy key by configuration.
	c.onLabels(1, &ctrlmsg.LabelUpdate{Path: "a", Labels: map[string]string{"tier": "bronze", "link_type": "satellite"}})
	if v, _ := pa.state.Label("tier"); v != "gold" {
		t.Fatalf("tier %q", v)
	}
	if v, _ := pa.state.Label("link_type"); v != "satellite" {
		t.Fatalf("link_type %q", v)
	}

	// Rules: the session's join the concentrator's.
	if r := c.onRule(1, install(1, "x")); r.Status != ctrlmsg.ResultOK {
		t.Fatalf("%+v", r)
	}
	if s := c.Current(); s.Len() != 2 || s.Index("edge.x") != 0 || s.Index("own") != 1 { // by priority: 10, then 5
		t.Fatalf("merged set %s", s)
	}
	// The concentrator's file is reloaded: the merge follows.
	base.cur.Store(mustRules(t, "conc.yaml", "rules:\n  - id: own2\n    priority: 50\n    actions: {priority: 1}\n"))
	if s := c.Current(); s.Len() != 2 || s.Index("own2") != 0 || s.Index("edge.x") != 1 {
		t.Fatalf("merged set after reload %s", s)
	}
	// A reload the session's rules do not fit: the concentrator's alone.
	var many strings.Builder
	many.WriteString("rules:\n")
	for i := range rules.MaxRules {
		fmt.Fprintf(&many, "  - id: r%d\n    priority: 1\n    actions: {priority: 1}\n", i)
	}
	full := mustRules(t, "conc.yaml", many.String())
	base.cur.Store(full)
	if s := c.Current(); s != full || b.ctlCtr.mergeFailures.Load() != 1 {
		t.Fatalf("set after a reload that leaves no room: %d rules", s.Len())
	}
	base.cur.Store(mustRules(t, "conc.yaml", "rules:\n  - id: x\n    priority: 5\n    actions: {priority: 1}\n"))
	if c.Current().Len() != 2 {
		t.Fatal("session rules did not come back")
	}

	// The edge restarts: a new bond id ends the session.
	c.onReport(1, pb, &ctrlmsg.StateReport{Seq: 3, Paths: []ctrlmsg.PathReport{{Path: "a", Status: "UNAVAILABLE"}}})
	b.adoptBondID(2)
	c.begin(2, pb)
	if c.Current().Len() != 1 || c.sessionRules() != 0 || pa.state.PeerUnavailable() || c.peerReport() != nil {
		t.Fatal("the old session's state survived a new bond id")
	}
	if v, _ := pa.state.Label("link_type"); v != "cellular" {
		t.Fatalf("labels after the session: link_type %q", v)
	}
	c.end(1) // a connection of the old session ends late: no effect
	c.onRule(2, install(2, "y"))
	c.begin(1, pa) // and one starts late: no effect either
	c.end(1)
	if c.sessionRules() != 1 {
		t.Fatal("a late end of the old session ended the new one")
	}
	c.end(2)
	if c.sessionRules() != 0 {
		t.Fatal("the last stream's end did not end the session")
	}
	// Messages of a session that ended change nothing.
	if r := c.onRule(1, install(3, "z")); r.Status != ctrlmsg.ResultRejected || c.sessionRules() != 0 {
		t.Fatalf("%+v", r)
	}
}
