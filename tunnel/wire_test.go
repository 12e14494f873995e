package tunnel

import (
	"testing"
	"time"

	"github.com/bondd/bondd/emu"
	"github.com/bondd/bondd/policy"
)

// TestWireUsageMatchesRelay carries traffic both ways over two uplinks,
// each through an emu relay, and compares each path's wire bytes
// (Bond.Usage) with what its relay read: the relay counts UDP payloads,
// so wire bytes are those plus IPv4HeaderBytes+UDPHeaderBytes per
// datagram. They agree within 1 % in each direction (the keepalives of
// the moment between the two reads, and handshake packets that share a
// datagram, are the difference).
func TestWireUsageMatchesRelay(t *testing.T) {
	var relays emu.Relays
	tb := newTestBondWith(t, token, 2, func(o *EdgeOptions) {
		o.FEC = FECOptions{Mode: FECOff}
		l := symmetric(5*time.Millisecond, 50*emu.Mbps, 0)
		relays = viaRelays(t, o, []emu.RelayLink{l, l}, 11)
	})
	tb.waitActive(t, 2)
	tb.exchange(t, tb.edgeDev, tb.concDev, edgeAddr, srvAddr, 2000)
	tb.exchange(t, tb.concDev, tb.edgeDev, srvAddr, edgeAddr, 1000)
	time.Sleep(200 * time.Millisecond) // the last acks
	got := map[string]WireUsage{}
	tb.edge.Bond().Usage(time.Now(), func(p PathUsage) { got[p.Name] = p.WireUsage })
	const hdr = IPv4HeaderBytes + UDPHeaderBytes
	for i, r := range relays {
		name := []string{"up0", "up1"}[i]
		st := r.Stats()
		want := [2]uint64{st.Up.Bytes + hdr*st.Up.Packets, st.Down.DeliveredBytes + hdr*st.Down.Delivered}
		have := [2]uint64{got[name].UpBytes, got[name].DownBytes}
		for d, dir := range []string{"up", "down"} {
			diff := float64(have[d]) - float64(want[d])
			t.Logf("%s %s: bondd %d wire bytes, relay %d (%+.3f %%)", name, dir, have[d], want[d], 100*diff/float64(want[d]))
			if want[d] < 10000 || diff > 0.01*float64(want[d]) || -diff > 0.01*float64(want[d]) {
				t.Errorf("%s %s: bondd counted %d wire bytes, the relay %d: more than 1 %% apart", name, dir, have[d], want[d])
			}
		}
		if got[name].DatagramBytes == 0 || got[name].UpPackets == 0 || got[name].DownPackets == 0 {
			t.Errorf("%s: %+v", name, got[name])
		}
	}
}

// TestBondSetBudgetUsage feeds a path's budget count from outside, as the
// usage accounting does: the path turns DEGRADED at 90 %.
func TestBondSetBudgetUsage(t *testing.T) {
	tb := newTestBondWith(t, token, 1, func(o *EdgeOptions) {
		o.Uplinks[0].Budget = policy.Budget{Bytes: 1000, Period: policy.PeriodMonth}
	})
	tb.waitActive(t, 1)
	b := tb.edge.Bond()
	_, end := policy.PeriodMonth.Bounds(time.Now())
	b.SetBudgetUsage("up0", 950, end)
	b.SetBudgetUsage("no-such-path", 950, end) // ignored
	s := b.Stats().Paths[0]
	if s.BudgetUsedBytes != 950 || s.StatusReason != policy.ReasonBudget {
		t.Errorf("after 950 of 1000 bytes: used %d, status %s (%s)", s.BudgetUsedBytes, s.Status, s.StatusReason)
	}
}

// BenchmarkBondUsage is one sample of a one-path bond's counters (the
// usage accounting takes one a second); the packets themselves cost bondd
// nothing for it: quic-go counts them as it sends and receives.
func BenchmarkBondUsage(b *testing.B) {
	tb := newTestBondWith(b, token, 1, nil)
	tb.waitActive(b, 1)
	bond := tb.edge.Bond()
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		bond.Usage(now, func(PathUsage) {})
	}
}
