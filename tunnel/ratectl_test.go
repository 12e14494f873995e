package tunnel

import (
	"context"
	"encoding/binary"
	"math"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/bondd/bondd/emu"
	"github.com/bondd/bondd/policy"
	"github.com/quic-go/quic-go"
)

// loadResult is what runLoad counts: datagrams sent and delivered of the
// bulk flow and of the ping-like flow.
type loadResult struct {
	bulkSent, bulkGot, pingSent, pingGot int
}

func (r loadResult) bulkLoss() float64 { return 1 - float64(r.bulkGot)/float64(r.bulkSent) }
func (r loadResult) pingLoss() float64 { return 1 - float64(r.pingGot)/float64(r.pingSent) }

// runLoad sends a bulk UDP flow of bulkBps (1000-byte packets) and a
// 10 packets/s ping-like flow (100-byte packets) through the edge for
// warm + measure, and counts the packets of the measured part that come
// out of the concentrator's TUN.
func runLoad(t *testing.T, tb *testBond, bulkBps int, warm, measure time.Duration) loadResult {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	got := map[uint64]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case pkt := <-tb.concDev.Outbound():
				if len(pkt) >= 28+9 {
					mu.Lock()
					got[binary.BigEndian.Uint64(pkt[28+1:])|uint64(pkt[28])<<56] = true
					mu.Unlock()
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	const bulkSize, pingSize = 1000, 100
	interval := time.Duration(float64(time.Second) * bulkSize * 8 / float64(bulkBps))
	bulk := make([]byte, bulkSize-28)
	ping := make([]byte, pingSize-28)
	var r loadResult
	var measured []uint64
	start := time.Now()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	nextPing := start
	for i := uint64(0); ; i++ {
		now := <-tick.C
		el := now.Sub(start)
		if el > warm+measure {
			break
		}
		in := el >= warm
		bulk[0] = 'b'
		binary.BigEndian.PutUint64(bulk[1:], i)
		tb.edgeDev.Inject(udp4(edgeAddr, srvAddr, bulk))
		if in {
			r.bulkSent++
			measured = append(measured, uint64('b')<<56|i)
		}
		if !now.Before(nextPing) {
			nextPing = nextPing.Add(100 * time.Millisecond)
			ping[0] = 'p'
			binary.BigEndian.PutUint64(ping[1:], i)
			tb.edgeDev.Inject(udp4(edgeAddr, srvAddr, ping))
			if in {
				r.pingSent++
				measured = append(measured, uint64('p')<<56|i)
			}
		}
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got)
	}
	waitSettled(count, 400*time.Millisecond)
	cancel()
	<-done
	for _, k := range measured {
		if got[k] {
			if k>>56 == 'b' {
				r.bulkGot++
			} else {
				r.pingGot++
			}
		}
	}
	return r
}

// TestRateControlOneBadPath is the one-bad-path case of issue "rate
// control": three paths of about 10, 20 and 35 ms RTT, 3 Mbit/s each, the
// lowest-RTT one losing 50 % at random, carry a 4 Mbit/s bulk flow (it
// needs two paths) and a 10 packets/s ping-like flow. With either rate
// control (bondd's, and quic-go's, the default, where only the
// receiver-seen loss is bondd's) the end-to-end loss of each flow must
// stay within 0.1 point of the two good paths alone, and the bad path is
// DEGRADED for its loss.
func TestRateControlOneBadPath(t *testing.T) {
	if testing.Short() {
		t.Skip("emulated-path run skipped in -short mode")
	}
	for _, mode := range []string{RateControlBondd, RateControlQUIC} {
		t.Run(mode, func(t *testing.T) { oneBadPath(t, mode) })
	}
}

func oneBadPath(t *testing.T, mode string) {
	good := []emu.RelayLink{symmetric(10*time.Millisecond, 3*emu.Mbps, 0), symmetric(17*time.Millisecond, 3*emu.Mbps, 0)}
	bad := symmetric(5*time.Millisecond, 3*emu.Mbps, 0.5)
	run := func(links []emu.RelayLink) (loadResult, BondStats) {
		tb := newTestBondWith(t, token, len(links), func(o *EdgeOptions) {
			o.FEC = FECOptions{Mode: FECOff}
			o.Paths.RateControl = mode
			for i := range o.Uplinks {
				o.Uplinks[i].Lanes = 1
				if mode == RateControlQUIC {
					o.Uplinks[i].Lanes = LanesAuto // the defaults: lanes must not grow on the bad path
				}
			}
			viaRelays(t, o, links, 1)
		})
		tb.waitActive(t, len(links))
		r := runLoad(t, tb, 4_000_000, 3*time.Second, 6*time.Second)
		return r, tb.edge.Bond().Stats()
	}
	base, _ := run(good)
	got, st := run(append([]emu.RelayLink{bad}, good...))
	for _, p := range st.Paths {
		rate := RateStats{}
		if p.Rate != nil {
			rate = *p.Rate
		}
		t.Logf("path %s: %s %s, %d lanes, tx %d, target %.2f Mbit/s, delivery %.2f Mbit/s, loss %.3f, reports %d, held back %d B",
			p.Name, p.Status, p.StatusReason, len(p.Lanes), p.TxPackets, float64(rate.TargetBps)/1e6, float64(rate.DeliveryBps)/1e6,
			rate.Loss, rate.Reports, rate.HeldBackBytes)
	}
	t.Logf("two good paths: bulk loss %.4f (%d/%d), ping loss %.4f (%d/%d)", base.bulkLoss(), base.bulkGot, base.bulkSent,
		base.pingLoss(), base.pingGot, base.pingSent)
	t.Logf("with the bad path: bulk loss %.4f (%d/%d), ping loss %.4f (%d/%d)", got.bulkLoss(), got.bulkGot, got.bulkSent,
		got.pingLoss(), got.pingGot, got.pingSent)
	if got.bulkLoss() > base.bulkLoss()+0.001 {
		t.Errorf("bulk loss %.4f with the bad path, %.4f without", got.bulkLoss(), base.bulkLoss())
	}
	if got.pingLoss() > base.pingLoss()+0.001 {
		t.Errorf("ping loss %.4f with the bad path, %.4f without", got.pingLoss(), base.pingLoss())
	}
	if bp := st.Paths[0]; bp.Rate == nil || bp.Rate.Loss < 0.15 || bp.StatusReason != "loss" {
		t.Errorf("bad path: %+v, want a receiver-seen loss near 0.5 (a 10-probes-a-second estimate) and DEGRADED (loss)", bp.Rate)
	}
	if n := len(st.Paths[0].Lanes); n != 1 {
		t.Errorf("bad path: %d lanes, want 1: more lanes cannot help a path the scheduler avoids", n)
	}
}

// TestRateControlLanesNoLoss: on a loss-free path with rate control,
// lanes: auto keeps one lane under a load well above the initial rate; and
// reports flow both ways.
func TestRateControlLanesNoLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("emulated-path run skipped in -short mode")
	}
	tb := newTestBondWith(t, token, 1, func(o *EdgeOptions) {
		o.FEC = FECOptions{Mode: FECOff}
		o.Paths.RateControl = RateControlBondd
		viaRelays(t, o, []emu.RelayLink{symmetric(20*time.Millisecond, 20*emu.Mbps, 0)}, 1)
	})
	tb.waitActive(t, 1)
	r := runLoad(t, tb, 8_000_000, time.Second, 3*time.Second)
	st := tb.edge.Bond().Stats().Paths[0]
	t.Logf("8 Mbit/s over a clean 20 Mbit/s path: %d/%d delivered, lanes %d, target %d bit/s", r.bulkGot, r.bulkSent, len(st.Lanes), st.Rate.TargetBps)
	if len(st.Lanes) != 1 || st.LaneMode != "auto" {
		t.Errorf("%d lanes (%s) on a loss-free path, want 1 (auto)", len(st.Lanes), st.LaneMode)
	}
	if st.Rate == nil || !st.Rate.Active || st.Rate.Reports == 0 {
		t.Errorf("rate control not active: %+v", st.Rate)
	}
	// Both directions: the concentrator reported on the uplink, and the
	// edge reports on the downlink once traffic flows that way.
	if cs := tb.conc.Bond("van-1").Stats().Paths[0]; cs.Rate == nil || cs.Rate.FeedbackSent == 0 {
		t.Errorf("the concentrator sent no reports: %+v", cs.Rate)
	}
	tb.exchange(t, tb.concDev, tb.edgeDev, srvAddr, edgeAddr, 200)
	waitFor(t, func() bool {
		r := tb.conc.Bond("van-1").Stats().Paths[0].Rate
		return r != nil && r.Reports > 0 && tb.edge.Bond().Stats().Paths[0].Rate.FeedbackSent > 0
	})
}

// rateControlledPath returns a path of a new bond, with no connection,
// whose rate control is on and negotiated.
func rateControlledPath(t *testing.T) *path {
	t.Helper()
	b, err := newBond("e", nil, bondOptions{mtu: testMTU})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := b.pathFor("p", nil)
	p.rc.on = true
	p.rc.peer.Store(true)
	return p
}

// TestLaneSizer checks the rate-control lane decision on a path with no
// live connection: one lane on a clean path at any rate, more on a lossy
// path at a high target, added at once and removed only after
// laneShrinkAfter.
func TestLaneSizer(t *testing.T) {
	p := rateControlledPath(t)
	p.state.OnMetrics(50*time.Millisecond, 50*time.Millisecond, 0, 0)
	now := time.Unix(1000, 0)
	set := func(target, loss float64) {
		p.rc.target.Store(math.Float64bits(target))
		p.rc.estimate.Store(&policy.RateEstimate{Target: target, Delivery: target, Loss: loss})
	}
	var s laneSizer
	n := 1
	step := func(d time.Duration) policy.LaneDecision {
		now = now.Add(d)
		dec := s.decide(p, now, n)
		n += dec.Delta
		return dec
	}
	tests := []struct {
		name         string
		target, loss float64
		wait         time.Duration
		want         int
	}{
		{"clean, 10 MB/s", 10e6, 0, 100 * time.Millisecond, 1},
		{"1 % loss, 2 MB/s", 2e6, 0.01, 100 * time.Millisecond, 7},     // 150 KB in flight over 23.5 KB windows
		{"1 % loss, 0.2 MB/s", 0.2e6, 0.01, 100 * time.Millisecond, 7}, // held: lower demand for less than laneShrinkAfter
		{"1 % loss, 0.2 MB/s later", 0.2e6, 0.01, laneShrinkAfter, 6},  // one lane less
	}
	for _, tt := range tests {
		set(tt.target, tt.loss)
		step(tt.wait)
		if n != tt.want {
			t.Fatalf("%s: %d lanes, want %d", tt.name, n, tt.want)
		}
	}
}

// TestLaneSizerBinding checks lane sizing on a loss-free path whose
// windows bind: once they have bound for laneBindMin (no addition in
// between, the path ACTIVE), the windows the lanes have, not the loss
// prediction, size them (a loss-free window grows slowly once slow start
// has ended); a binding in slow start's first round trips does not count;
// once quic-go's qlog says every lane's window has left slow start, the
// windows the lanes have size them, binding or not; and lanes go only when
// the windows they have hold the demand with one fewer. The steps run in
// order on one path.
func TestLaneSizerBinding(t *testing.T) {
	p := rateControlledPath(t)
	now := time.Unix(1000, 0)
	p.state.SetConnected(true, now)
	var s laneSizer
	n := 1
	steps := []struct {
		name           string
		wait           time.Duration
		target         float64 // bytes/s; demand = target × 75 ms × 1.5
		live           int     // lanes with a connection
		cwnd, inflight int     // summed over the lanes, bytes
		silent         bool    // the peer has not been heard for a long time
		want           int
		avoiding       int // live lanes whose window has left slow start (qlog)
	}{
		// 30 Mbit/s: 422 KB of demand over one 320-KB window that binds.
		{"one lane binds", time.Second, 3.75e6, 1, 320_000, 320_000, false, 1, 0},
		{"one lane has bound for 500 ms", laneBindMin / 2, 3.75e6, 1, 320_000, 320_000, false, 1, 0},
		{"one lane has bound for laneBindMin", laneBindMin / 2, 3.75e6, 1, 320_000, 320_000, false, 2, 0},
		{"the new lane in slow start", 100 * time.Millisecond, 3.75e6, 2, 365_000, 365_000, false, 2, 0},
		{"bound since the addition for less than laneBindMin", laneBindMin / 2, 3.75e6, 2, 365_000, 365_000, false, 2, 0},
		{"bound since the addition for laneBindMin", laneBindMin / 2, 3.75e6, 2, 365_000, 365_000, false, 3, 0},
		{"not binding", laneBindMin, 3.75e6, 3, 600_000, 300_000, false, 3, 0},
		{"not binding for laneShrinkAfter: the windows are needed", laneShrinkAfter + time.Second, 3.75e6, 3, 600_000, 300_000, false, 3, 0},
		{"binding, but the path is silent", policy.MinSilence + time.Second, 7.5e6, 3, 600_000, 600_000, true, 3, 0},
		{"binding and ACTIVE again", 100 * time.Millisecond, 7.5e6, 3, 600_000, 600_000, false, 3, 0},
		{"bound and ACTIVE for laneBindMin", laneBindMin, 7.5e6, 3, 600_000, 600_000, false, 5, 0},
		// 8 Mbit/s: 112 KB of demand, which one 120-KB window holds.
		{"lower demand", laneBindMin, 1e6, 5, 600_000, 100_000, false, 5, 0},
		{"lower demand for laneShrinkAfter", laneShrinkAfter, 1e6, 5, 600_000, 100_000, false, 4, 0},
		// 60 Mbit/s: 844 KB of demand over four 100-KB windows.
		{"not binding, one window in slow start", 100 * time.Millisecond, 7.5e6, 4, 400_000, 300_000, false, 4, 3},
		{"binding for less than laneBindMin, one window in slow start", laneBindMin / 2, 7.5e6, 4, 400_000, 400_000, false, 4, 3},
		{"not binding, every window out of slow start", 100 * time.Millisecond, 7.5e6, 4, 400_000, 300_000, false, MaxLanes, 4},
	}
	for _, st := range steps {
		now = now.Add(st.wait)
		if !st.silent {
			p.state.OnReceive(now)
		}
		for i := range p.lanes {
			if i < st.live {
				p.lanes[i].conn.Store(&quic.Conn{})
			} else {
				p.lanes[i].conn.Store(nil)
			}
			r := &recorder{}
			r.avoiding.Store(i < st.avoiding)
			p.lanes[i].rec.Store(r)
		}
		p.state.OnMetrics(75*time.Millisecond, 55*time.Millisecond, st.cwnd, st.inflight)
		p.rc.target.Store(math.Float64bits(st.target))
		p.rc.estimate.Store(&policy.RateEstimate{Target: st.target, Delivery: st.target})
		d := s.decide(p, now, n)
		n += d.Delta
		if n != st.want {
			t.Fatalf("%s: %d lanes (%q), want %d", st.name, n, d.Reason, st.want)
		}
	}
}

// TestLaneMemory measures the heap a lane costs, both ends of the bond in
// this process (two quic-go connections, their routines' buffers, the
// control streams): 8 fixed lanes against 1 on one uplink, after a GC.
// The bound is loose (1 MiB per lane); the figure goes to the log.
func TestLaneMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("brings up two bonds")
	}
	heap := func(lanes int) uint64 {
		tb := newTestBondWith(t, token, 1, func(o *EdgeOptions) {
			o.Uplinks[0].Lanes = lanes
			o.Paths.RateControl = RateControlBondd
		})
		tb.waitActive(t, 1)
		tb.waitLanes(t, lanes)
		tb.exchange(t, tb.edgeDev, tb.concDev, edgeAddr, srvAddr, 200)
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		tb.edge.Close()
		tb.conc.Close()
		return m.HeapAlloc
	}
	one := heap(1)
	eight := heap(MaxLanes)
	per := (int64(eight) - int64(one)) / (MaxLanes - 1)
	t.Logf("heap with 1 lane %d KiB, with %d lanes %d KiB: about %d KiB per lane (both ends)", one>>10, MaxLanes, eight>>10, per>>10)
	if per > 1<<20 {
		t.Errorf("a lane costs %d KiB of heap, want under 1 MiB", per>>10)
	}
}

// TestPacerBurst: the path's pacer lets a burst of the pacerBurstTime
// bucket go at once, and on an application-limited path (a video path
// whose only backlog is its keyframe) a burst of the lanes' windows: the
// keyframe leaves at what quic-go's windows allow, not at a target that
// only measured the video's average rate.
func TestPacerBurst(t *testing.T) {
	const (
		target = 1e6 // bytes/s: a 4-ms bucket holds 4 KB, DefaultPacerBurst more
		cwnd   = 300_000
		frame  = 1200
	)
	tests := []struct {
		name       string
		appLimited bool
		want       int // bytes released at once
	}{
		{"backlogged", false, policy.DefaultPacerBurst + frame},
		{"application-limited", true, cwnd + frame},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := rateControlledPath(t)
			p.state.OnMetrics(50*time.Millisecond, 40*time.Millisecond, cwnd, 0)
			p.rc.target.Store(math.Float64bits(target))
			p.rc.estimate.Store(&policy.RateEstimate{Target: target, AppLimited: tt.appLimited})
			now := time.Unix(1000, 0)
			sent := 0
			for p.rc.pace(now) == 0 && sent < 10*cwnd {
				p.rc.release(make([]byte, frame), now)
				sent += frame
			}
			// The bucket may go below zero by one frame.
			if sent < tt.want-frame || sent > tt.want {
				t.Errorf("released %d bytes at once, want %d", sent, tt.want)
			}
		})
	}
}
