package tunnel

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/bondd/bondd/classify"
	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/rules"
)

// rtpH264 is an RTP packet (payload type 96, port 5004) with one H.264
// NAL unit: an IDR slice when key, else a non-IDR slice; n payload bytes.
func rtpH264(key bool, seq uint16, ts uint32, n int) []byte {
	p := make([]byte, 13+n)
	p[0], p[1] = 0x80, 96
	binary.BigEndian.PutUint16(p[2:], seq)
	binary.BigEndian.PutUint32(p[4:], ts)
	binary.BigEndian.PutUint32(p[8:], 0x6a5cc848)
	p[12] = 0x41
	if key {
		p[12] = 0x65
	}
	return udp4(netip.MustParseAddrPort("10.77.17.2:40000"), netip.MustParseAddrPort("10.78.0.1:5004"), p)
}

// TestRuleAnnotations checks the send path's rule stage: annotations from
// the path state before evaluation (leo_state, pending_iframe), the object
// handed to Select, and the pending I-frame tracker fed after the pick.
func TestRuleAnnotations(t *testing.T) {
	set, err := rules.CompileBytes("ann.yaml", []byte(`
rules:
  - id: r1
    priority: 400
    match: {frame_type: P, pending_iframe: true}
    actions: {priority: highest}
  - id: r2
    priority: 300
    match: {frame_type: IDR, leo_state: reconf}
    actions: {prefer: {cost_class: metered}}
`), rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	src := &staticRules{}
	src.set.Store(set)
	rs, err := newRuleState(src, classify.Options{PayloadTypes: map[uint8]classify.Codec{96: classify.CodecH264}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sat := policy.NewPath("sat", map[string]string{"cost_class": "free"}, 64)
	ter := policy.NewPath("ter", map[string]string{"cost_class": "metered"}, 64)
	paths := []*policy.Path{sat, ter}
	for _, p := range paths {
		p.SetConnected(true, now)
		p.OnMetrics(50*time.Millisecond, 40*time.Millisecond, 10_000, 0)
	}

	// No marker: an I-frame is not in a danger zone.
	if !rs.evaluate(rtpH264(true, 1, 9000, 1000), paths, now) {
		t.Fatal("no rule set")
	}
	if rs.ann.LEOState != rules.LEONone || rs.ann.PendingIFrame || rs.dir.Rules.Count() != 0 {
		t.Fatalf("annotations %+v, %d rules matched; want none", rs.ann, rs.dir.Rules.Count())
	}
	if o := rs.object(); o.Key != classify.KeyFrameID || o.ID != 0x6a5cc848<<32|9000 {
		t.Fatalf("object %+v, want the frame id", o)
	}
	// A marker whose danger zones cover the whole minute (±7.5 s around
	// every 15 s): leo_state=reconf now, and R2 matches the I-frame.
	sat.SetLEOReconf(&policy.LEOReconf{Seconds: []int{0, 15, 30, 45}, Window: policy.MaxLEOWindow})
	rs.evaluate(rtpH264(true, 2, 9000, 1000), paths, now)
	if rs.ann.LEOState != rules.LEOReconf || !rs.dir.Rules.Has(set.Index("r2")) {
		t.Fatalf("in a danger zone: annotations %+v, directive %s", rs.ann, rs.dir.String())
	}
	// Three I-frame packets on sat: S_I = 3 × 1041 bytes, B = 10000 − 3123.
	for i := range 3 {
		pkt := rtpH264(true, uint16(3+i), 9000, 1000)
		rs.evaluate(pkt, paths, now)
		rs.track(paths, []int{0}, len(pkt), now)
	}
	if b, _ := sat.IFrameSlack(now); b != 10_000-3*1041 || ter.IFramePending(now) {
		t.Fatalf("slack %d on sat (pending on ter: %v), want %d on sat only", b, ter.IFramePending(now), 10_000-3*1041)
	}
	// P-frame packets: pending_iframe while the slack has room, R1 matches,
	// and each is charged to sat's slack.
	admitted := 0
	for i := range 10 {
		pkt := rtpH264(false, uint16(10+i), 10800, 1000)
		rs.evaluate(pkt, paths, now)
		if rs.ann.PendingIFrame != rs.dir.Rules.Has(set.Index("r1")) {
			t.Fatalf("P-frame %d: pending_iframe %v but r1 matched %v", i, rs.ann.PendingIFrame, rs.dir.Rules.Has(set.Index("r1")))
		}
		if rs.ann.PendingIFrame {
			admitted++
		}
		rs.track(paths, []int{0}, len(pkt), now)
	}
	if _, used := sat.IFrameSlack(now); admitted != 6 || used != 6*1041 {
		t.Fatalf("%d P-frame packets admitted (%d bytes), want 6 (the slack holds 6 × 1041 bytes)", admitted, used)
	}
	pkt := rtpH264(false, 30, 10800, 1000)
	if a := testing.AllocsPerRun(100, func() {
		rs.evaluate(pkt, paths, now)
		rs.track(paths, []int{0}, len(pkt), now)
	}); a != 0 {
		t.Fatalf("the rule stage allocates %v times per packet", a)
	}
}

// TestPolicyStats checks the status reason, the budget fields and the
// per-label byte counts of BondStats.
func TestPolicyStats(t *testing.T) {
	now := time.Now()
	ter := policy.NewPath("ter", map[string]string{"cost_class": "metered", "link_type": "cellular"}, 8)
	sat := policy.NewPath("sat", map[string]string{"cost_class": "free", "link_type": "satellite"}, 8)
	cell := policy.NewPath("cell", map[string]string{"cost_class": "metered", "link_type": "cellular"}, 8)
	for _, p := range []*policy.Path{ter, sat, cell} {
		p.SetConnected(true, now)
	}
	ter.SetBudget(policy.Budget{Bytes: 1000, Period: policy.PeriodMonth})
	ter.OnBytes(950, now)
	sat.OnBytes(5000, now)
	cell.OnBytes(50, now)
	s := BondStats{Paths: []PathStats{{Name: "sat"}, {Name: "ter"}, {Name: "cell"}}}
	s.addPolicyStats([]*policy.Path{ter, sat, cell}, now)
	p := s.Paths[1]
	if p.StatusReason != policy.ReasonBudget || p.BudgetBytes != 1000 || p.BudgetUsedBytes != 950 || p.BudgetPeriod != "month" {
		t.Errorf("budget path stats %+v", p)
	}
	if s.Paths[0].StatusReason != "" || s.Paths[0].BudgetBytes != 0 {
		t.Errorf("path without budget %+v", s.Paths[0])
	}
	want := map[string]uint64{"cost_class=metered": 1000, "link_type=cellular": 1000, "cost_class=free": 5000, "link_type=satellite": 5000}
	for k, v := range want {
		if s.LabelTxBytes[k] != v {
			t.Errorf("label_tx_bytes %v, want %v", s.LabelTxBytes, want)
			break
		}
	}
}
