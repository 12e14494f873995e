package tunnel

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bondd/bondd/emu"
	"github.com/bondd/bondd/policy"
)

// TestSchedulersOnEmuPaths runs the baseline schedulers over two emulated
// paths, a fast one (10 ms each way) and a slow one (60 ms each way), both
// 20 Mbit/s, with a 2 Mbit/s flow that the fast path carries alone, and
// checks the behaviour each source describes: minRTT and BLEST keep nearly
// all traffic on the fast path (BLEST, Ferlin et al. 2016, because sending
// on the slow path would block the fast one's head of line), round-robin
// splits it evenly, and redundant sends everything on both.
func TestSchedulersOnEmuPaths(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the emulated-path scheduler runs in -short mode")
	}
	cases := []struct {
		scheduler  string
		minFast    float64 // share of the fast path's datagrams in all datagrams sent
		maxFast    float64
		wantCopies bool // every packet on both paths
	}{
		{policy.SchedulerMinRTT, 0.9, 1, false},
		{policy.SchedulerBLEST, 0.9, 1, false},
		{policy.SchedulerRoundRobin, 0.4, 0.6, false},
		{policy.SchedulerRedundant, 0.45, 0.55, true},
	}
	for _, c := range cases {
		t.Run(c.scheduler, func(t *testing.T) {
			picker, err := policy.NewPicker(c.scheduler)
			if err != nil {
				t.Fatal(err)
			}
			tb := newTestBondWith(t, token, 2, func(o *EdgeOptions) {
				o.Picker, o.FEC = picker, FECOptions{Mode: FECOff}
				viaRelays(t, o, []emu.RelayLink{symmetric(10*time.Millisecond, 20*emu.Mbps, 0), symmetric(60*time.Millisecond, 20*emu.Mbps, 0)}, 1)
			})
			tb.waitActive(t, 2)
			waitFor(t, func() bool { // both paths have an RTT sample
				p := tb.edge.Bond().Stats().Paths
				return p[0].SmoothedRTT > 0 && p[1].SmoothedRTT > 0
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var got atomic.Int64
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					select {
					case <-tb.concDev.Outbound():
						got.Add(1)
					case <-ctx.Done():
						return
					}
				}
			}()
			before := tb.edge.Bond().Stats().Paths
			// 2 Mbit/s of 1000-byte packets for 1.5 s: one every 4 ms.
			const n = 375
			payload := []byte(fmt.Sprintf("%0972d", 0))
			tick := time.NewTicker(4 * time.Millisecond)
			for range n {
				<-tick.C
				tb.edgeDev.Inject(udp4(edgeAddr, srvAddr, payload))
			}
			tick.Stop()
			// Drain: on 60-ms paths, 300 ms without a packet means none is
			// on its way.
			waitSettled(func() int { return int(got.Load()) }, 300*time.Millisecond)
			cancel()
			<-done
			after := tb.edge.Bond().Stats().Paths
			fast, slow := after[0].TxPackets-before[0].TxPackets, after[1].TxPackets-before[1].TxPackets
			share := float64(fast) / float64(fast+slow)
			t.Logf("%s: fast path %d, slow path %d datagrams (fast share %.2f), %d of %d delivered", c.scheduler, fast, slow, share, got.Load(), n)
			if share < c.minFast || share > c.maxFast {
				t.Errorf("fast path share %.2f, want %.2f..%.2f", share, c.minFast, c.maxFast)
			}
			if c.wantCopies && (fast < n || slow < n) {
				t.Errorf("redundant: %d and %d datagrams for %d packets, want every packet on both", fast, slow, n)
			}
			if got.Load() < n*98/100 {
				t.Errorf("%d of %d packets delivered", got.Load(), n)
			}
		})
	}
}
