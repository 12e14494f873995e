package tunnel

import (
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/bondd/bondd/rules"
)

// staticRules is a RuleSource holding one set.
type staticRules struct{ set atomic.Pointer[rules.Set] }

func (s *staticRules) Current() *rules.Set { return s.set.Load() }

// TestBondRules installs a rule set on the edge: packets to port 6000 go
// without FEC, every other packet is protected, and each rule's hits are
// counted.
func TestBondRules(t *testing.T) {
	checkGoroutines(t)
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
}
