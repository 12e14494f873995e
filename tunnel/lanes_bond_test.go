package tunnel

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bondd/bondd/emu"
	"github.com/bondd/bondd/internal/testkit"
)

// waitLanes waits until the edge's path 0 and the concentrator's view of it
// have n live lanes each.
func (tb *testBond) waitLanes(t *testing.T, n int) {
	t.Helper()
	waitFor(t, func() bool {
		cs := tb.conc.Bond("van-1").Stats()
		return len(tb.edge.Bond().Stats().Paths[0].Lanes) == n && len(cs.Paths) == 1 && len(cs.Paths[0].Lanes) == n
	})
}

// TestBondLanesFixed runs one uplink as three lanes: both ends see three
// connections for one path, traffic flows both ways, and a lane whose
// connection dies is redialled while the others carry the traffic.
func TestBondLanesFixed(t *testing.T) {
	testkit.CheckLeaks(t)
	tb := newTestBondWith(t, token, 1, func(o *EdgeOptions) { o.Uplinks[0].Lanes = 3 })
	tb.waitActive(t, 1)
	tb.waitLanes(t, 3)
	if m := tb.edge.Bond().Stats().Paths[0].LaneMode; m != "fixed" {
		t.Errorf("lane mode %q, want fixed", m)
	}
	tb.exchange(t, tb.edgeDev, tb.concDev, edgeAddr, srvAddr, 300)
	tb.exchange(t, tb.concDev, tb.edgeDev, srvAddr, edgeAddr, 300)

	// Kill lane 1: the path stays ACTIVE on the other two, then lane 1 is back.
	tb.edge.Bond().paths.Load().paths[0].lanes[1].conn.Load().CloseWithError(0, "test: lane killed")
	tb.exchange(t, tb.edgeDev, tb.concDev, edgeAddr, srvAddr, 300)
	tb.waitLanes(t, 3)
	tb.exchange(t, tb.edgeDev, tb.concDev, edgeAddr, srvAddr, 300)
	if d := tb.edge.Bond().Stats().Drops[DropNoPath]; d != 0 {
		t.Errorf("%d packets found no path while one lane of three was down", d)
	}
}

// TestBondLanesAuto offers a path with 2 % random loss and 20 ms of delay
// each way more than one connection's loss-limited window carries: with
// lanes: auto the edge adds lanes within a few seconds.
func TestBondLanesAuto(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the 6-second lanes run in -short mode")
	}
	tb := newTestBondWith(t, token, 1, func(o *EdgeOptions) {
		o.FEC = FECOptions{Mode: FECOff}
		viaRelays(t, o, []emu.RelayLink{symmetric(20*time.Millisecond, 100*emu.Mbps, 0.02)}, 7)
	})
	tb.waitActive(t, 1)
	// Lanes come within a few seconds; the deadline leaves room for a
	// loaded machine, on which queueing in the process inflates the RTT
	// (and the controller rightly waits) until the load eases.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go func() { // drain the concentrator's TUN
		for {
			select {
			case <-tb.concDev.Outbound():
			case <-ctx.Done():
				return
			}
		}
	}()
	// 12 Mbit/s of 1200-byte packets, in 1-ms batches.
	payload := []byte(fmt.Sprintf("%01172d", 0))
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for lanes := 0; lanes < 2; {
		select {
		case <-ctx.Done():
			t.Fatalf("still %d lane(s) after 20 s: %+v", lanes, tb.edge.Bond().Stats().Paths[0])
		case <-tick.C:
			tb.edgeDev.Inject(udp4(edgeAddr, srvAddr, payload))
			tb.edgeDev.Inject(udp4(edgeAddr, srvAddr, payload))
			lanes = len(tb.edge.Bond().Stats().Paths[0].Lanes)
		}
	}
	if m := tb.edge.Bond().Stats().Paths[0].LaneMode; m != "auto" {
		t.Errorf("lane mode %q, want auto", m)
	}
}
