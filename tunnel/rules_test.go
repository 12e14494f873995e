package tunnel

import (
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/bondd/bondd/internal/testkit"
	"github.com/bondd/bondd/rules"
)

// staticRules is a RuleSource holding one set.
type staticRules struct{ set atomic.Pointer[rules.Set] }

func (s *staticRules) Current() *rules.Set { return s.set.Load() }

// TestBondRules installs a rule set on the edge: packets to port 6000 go
// without FEC, every other packet is protected, and each rule's hits are
// counted.
func TestBondRules(t *testing.T) {
	testkit.CheckLeaks(t)
	set, err := rules.CompileBytes("test-rules.yaml", []byte(`
rules:
  - id: telemetry-no-fec
    priority: 10
    match: {proto: udp, dst_port: 6000}
    actions: {fec: off, deadline_ms: 50}
  - id: everything
    priority: 0
    actions: {priority: 1}
`), rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	src := &staticRules{}
	src.set.Store(set)
	tb := newTestBondWith(t, token, 1, func(o *EdgeOptions) { o.Rules = src })
	tb.waitActive(t, 1)
	tb.exchange(t, tb.edgeDev, tb.concDev, edgeAddr, srvAddr, 30)                                   // port 6000: no FEC
	tb.exchange(t, tb.edgeDev, tb.concDev, edgeAddr, netip.MustParseAddrPort("10.78.0.1:7000"), 20) // FEC
	st := tb.edge.Bond().Stats()
	if st.FEC.DataProtected != 20 {
		t.Errorf("%d packets protected, want the 20 that no rule exempts", st.FEC.DataProtected)
	}
	if st.Rules == nil || len(st.Rules.Rules) != 2 {
		t.Fatalf("rule stats %+v", st.Rules)
	}
	if h := st.Rules.Rules; h[0].ID != "telemetry-no-fec" || h[0].Hits != 30 || h[1].Hits != 50 {
		t.Errorf("rule hits %+v, want telemetry-no-fec 30 and everything 50", h)
	}
	if h := st.Rules.Rules; h[0].Bytes < 30*28 || h[1].Bytes <= h[0].Bytes { // IPv4 + UDP headers at least
		t.Errorf("rule bytes %+v: telemetry-no-fec should count at least 30 headers, everything more", h)
	}
}

// TestBondRulesSteer checks the path actions: prefer keeps a flow on the
// paths whose label matches, duplicate sends each packet on two paths and
// the concentrator drops the copies.
func TestBondRulesSteer(t *testing.T) {
	testkit.CheckLeaks(t)
	set, err := rules.CompileBytes("steer.yaml", []byte(`
rules:
  - id: bulk-free
    priority: 10
    match: {dst_port: 7000}
    actions: {prefer: {cost_class: free}}
  - id: control-twice
    priority: 10
    match: {dst_port: 6000}
    actions: {duplicate: 2}
`), rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	src := &staticRules{}
	src.set.Store(set)
	tb := newTestBondWith(t, token, 2, func(o *EdgeOptions) {
		o.Rules = src
		o.FEC.Mode = FECOff
		o.Uplinks[0].Labels = map[string]string{"cost_class": "metered"}
		o.Uplinks[1].Labels = map[string]string{"cost_class": "free"}
	})
	tb.waitActive(t, 2)
	tx := func() (uint64, uint64) {
		p := tb.edge.Bond().Stats().Paths
		return p[0].TxPackets, p[1].TxPackets
	}
	m0, f0 := tx()
	tb.exchange(t, tb.edgeDev, tb.concDev, edgeAddr, netip.MustParseAddrPort("10.78.0.1:7000"), 40)
	m1, f1 := tx()
	if m1 != m0 || f1-f0 != 40 {
		t.Errorf("prefer cost_class=free: metered path sent %d, free path %d; want 0 and 40", m1-m0, f1-f0)
	}
	tb.exchange(t, tb.edgeDev, tb.concDev, edgeAddr, srvAddr, 30) // port 6000, each delivered once
	// The first copies have arrived; the second may still be leaving the
	// slower path's queue.
	waitFor(t, func() bool { return tb.conc.Bond("van-1").Stats().Drops[DropDuplicate] == 30 })
	if m2, f2 := tx(); m2-m1 != 30 || f2-f1 != 30 {
		t.Errorf("duplicate 2: paths sent %d and %d, want 30 each", m2-m1, f2-f1)
	}
}
