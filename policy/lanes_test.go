package policy

import (
	"strings"
	"testing"
	"time"
)

// TestLaneControl drives LaneController with a model of a path and checks when
// it adds and removes lanes. The model: a flow offers demand bit/s; each
// lane carries perLane bit/s of it, up to the link's capacity; what the
// lanes cannot take waits in the queue; QUIC loses lossPer of the packets.
func TestLaneControl(t *testing.T) {
	const rtt = 50 * time.Millisecond
	type model struct {
		demand, perLane, link float64 // bit/s
		lossPer               float64
		srtt, minRTT          time.Duration // 0: rtt
		inactive              bool
		burst                 bool          // the demand comes as one burst a second that partly expires
		dip                   bool          // in the epoch after each addition the lanes carry 70 % of what they did before it (a loss event cut every window)
		linkLater             float64       // bit/s of the link from riseAt on; 0: link throughout
		riseAt                time.Duration // when linkLater starts
	}
	cases := []struct {
		name  string
		max   int
		start int // lanes before the samples
		secs  int // seconds of samples, one every LaneSampleEvery
		m     model
		want  int // lanes at the end
		adds  int // if > 0: at most this many additions
	}{
		{name: "random loss, window-limited: adds up to the demand", max: 8, start: 1, secs: 10,
			m: model{demand: 20e6, perLane: 4e6, link: 100e6, lossPer: 0.01}, want: 7},
		{name: "random loss: never past max", max: 4, start: 1, secs: 10,
			m: model{demand: 20e6, perLane: 4e6, link: 100e6, lossPer: 0.01}, want: 4},
		{name: "bursts that overflow the queue: adds lanes", max: 4, start: 1, secs: 20,
			m: model{demand: 6e6, perLane: 2e6, link: 100e6, lossPer: 0.03, burst: true}, want: 4},
		{name: "random loss, a bad epoch after each addition: keeps what it added", max: 8, start: 1, secs: 10,
			m: model{demand: 20e6, perLane: 4e6, link: 100e6, lossPer: 0.01, dip: true}, want: 7},
		{name: "the link, not the window, limits: lanes removed again", max: 8, start: 1, secs: 10,
			m: model{demand: 20e6, perLane: 4e6, link: 4.2e6, lossPer: 0.01}, want: 1},
		{name: "the link limited in a dip, then rose: lanes added again after LaneRetry", max: 8, start: 1, secs: 20,
			m: model{demand: 20e6, perLane: 4e6, link: 4.2e6, lossPer: 0.01, linkLater: 100e6, riseAt: 4 * time.Second}, want: 7},
		{name: "the link limits for good: the retries back off", max: 8, start: 1, secs: 60,
			m: model{demand: 20e6, perLane: 4e6, link: 4.2e6, lossPer: 0.01}, want: 1, adds: 4},
		{name: "inflated RTT is congestion: no lane", max: 8, start: 1, secs: 10,
			m: model{demand: 20e6, perLane: 4e6, link: 100e6, lossPer: 0.01, srtt: 3 * rtt}, want: 1},
		{name: "a standing queue on a long path is congestion: no lane", max: 8, start: 1, secs: 10,
			m: model{demand: 20e6, perLane: 4e6, link: 100e6, lossPer: 0.01, srtt: 4*rtt + 30*time.Millisecond, minRTT: 4 * rtt}, want: 1},
		{name: "long path without a queue: adds lanes", max: 8, start: 1, secs: 20,
			m: model{demand: 20e6, perLane: 4e6, link: 100e6, lossPer: 0.01, srtt: 4*rtt + 5*time.Millisecond, minRTT: 4 * rtt}, want: 7},
		{name: "no loss: no lane", max: 8, start: 1, secs: 10,
			m: model{demand: 20e6, perLane: 4e6, link: 100e6}, want: 1},
		{name: "outage: no lane", max: 8, start: 1, secs: 10,
			m: model{demand: 20e6, perLane: 4e6, link: 100e6, lossPer: 0.01, inactive: true}, want: 1},
		{name: "under-used: one lane less per idle stretch", max: 8, start: 4, secs: 65,
			m: model{demand: 0.1e6, perLane: 4e6, link: 100e6}, want: 2},
		{name: "busy enough: keeps its lanes", max: 8, start: 4, secs: 65,
			m: model{demand: 10e6, perLane: 4e6, link: 100e6}, want: 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t0 := time.Unix(1_700_000_000, 0)
			ctl := NewLaneController(c.max, t0)
			ctl.n = c.start
			srtt, minRTT := rtt, rtt
			if c.m.srtt != 0 {
				srtt = c.m.srtt
			}
			if c.m.minRTT != 0 {
				minRTT = c.m.minRTT
			}
			dt := LaneSampleEvery.Seconds()
			var tx, offered, lost, drops float64
			changes, adds := 0, 0
			var last time.Time
			for i := 1; i <= c.secs*int(time.Second/LaneSampleEvery); i++ {
				now := t0.Add(time.Duration(i) * LaneSampleEvery)
				demand := c.m.demand
				if c.m.burst { // all of a second's demand in its first sample
					demand = 0
					if i%10 == 0 {
						demand = c.m.demand / dt
					}
				}
				link := c.m.link
				if c.m.linkLater != 0 && now.Sub(t0) >= c.m.riseAt {
					link = c.m.linkLater
				}
				capacity := min(float64(ctl.n)*c.m.perLane, link)
				if c.m.dip && ctl.added > 0 && ctl.judged == 0 {
					capacity = 0.7 * min(float64(ctl.n-ctl.added)*c.m.perLane, link)
				}
				sent := min(demand, capacity)
				offered += demand * dt / 8
				tx += sent * dt / 8
				lost += sent * dt / 8 / 1200 * c.m.lossPer
				s := LaneSample{Now: now, Active: !c.m.inactive, SRTT: srtt, MinRTT: minRTT,
					Cwnd: int(capacity / 8 * srtt.Seconds()), Lost: uint64(lost), TxBytes: uint64(tx), OfferedBytes: uint64(offered)}
				s.Inflight = int(sent / 8 * srtt.Seconds())
				if demand > capacity {
					s.QueueBytes = 300_000
					drops += (demand - capacity) * dt / 8 / 1200 / 2
				}
				s.QueueDrops = uint64(drops)
				d := ctl.Sample(s)
				if d.Delta != 0 && testing.Verbose() {
					t.Logf("%s: %+d → %d (%s) used %.2f demand %.2f cap %.2f", now.Sub(t0), d.Delta, ctl.n, d.Reason, d.UsedBps/1e6, d.DemandBps/1e6, d.CapacityBps/1e6)
				}
				if d.Delta != 0 {
					if changes > 0 && now.Sub(last) < LaneEpoch {
						t.Fatalf("changes %s apart, want ≥ %s (hysteresis)", now.Sub(last), LaneEpoch)
					}
					if d.Reason == "" {
						t.Fatal("change without a reason for the log")
					}
					switch {
					case d.Delta <= 0:
					case strings.HasPrefix(d.Reason, "window-limited") && (d.Limited < 0.5 || d.LossRate <= 0),
						strings.HasPrefix(d.Reason, "queued frames dropped, with loss") && d.LossRate <= 0:
						t.Fatalf("reason %q contradicts window_limited=%.2f loss_rate=%g", d.Reason, d.Limited, d.LossRate)
					}
					changes++
					last = now
					if d.Delta > 0 {
						adds++
					}
				}
				if ctl.n < 1 || ctl.n > c.max {
					t.Fatalf("lanes %d outside 1..%d", ctl.n, c.max)
				}
			}
			if ctl.n != c.want {
				t.Fatalf("lanes %d after %d s, want %d", ctl.n, c.secs, c.want)
			}
			if c.adds > 0 && adds > c.adds {
				t.Fatalf("%d additions in %d s, want at most %d", adds, c.secs, c.adds)
			}
		})
	}
}

// TestLaneControlStalled: a path that sends nothing while its queue expires
// and QUIC declares its last packets lost (a black hole) gets no lane: its
// window is not what limits it.
func TestLaneControlStalled(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	ctl := NewLaneController(8, t0)
	for i := 0; i <= 30; i++ {
		s := LaneSample{Now: t0.Add(time.Duration(i) * LaneSampleEvery), Active: true, SRTT: 20 * time.Millisecond,
			MinRTT: 20 * time.Millisecond, Cwnd: 40000, Inflight: 40000, QueueBytes: 10000,
			Lost: uint64(i), TxBytes: 1000, OfferedBytes: uint64(1000 + 1000*i), QueueDrops: uint64(i)}
		if d := ctl.Sample(s); d.Delta > 0 {
			t.Fatalf("at %d: added %d lanes (%s) to a path that sent nothing", i, d.Delta, d.Reason)
		}
	}
}

// TestLaneControlBursts drives LaneController with a video-like path: a
// steady 6.7 Mbit/s with a 200-KB burst (a keyframe) every second, on a
// window that a loss cut to 60 KB, so that each burst waits and some of it
// expires from the queue. The lanes added after the loss end the drops;
// there are as many as the burst needs (1.25 × 230 KB over 60 KB of
// window, at most LaneGrowth at once). When the bursts came before the
// loss, on a window that carried them, the lanes come at the loss, before
// the next burst waits. On a LEO path the base RTT steps up at a
// reconfiguration, which a path without a schedule reads as a standing
// queue.
func TestLaneControlBursts(t *testing.T) {
	const minRTT = 46 * time.Millisecond
	const reconfAt = 9 * time.Second
	cases := []struct {
		name       string
		lossAt     time.Duration // QUIC declares 100 packets lost then; < 0: never
		burstsFrom time.Duration // bursts drop queued frames from then on, while one lane
		leo        bool          // the path has a reconfiguration schedule: a window at reconfAt
		step       time.Duration // the base RTT steps up by this at reconfAt
		spike      time.Duration // each burst adds this to the smoothed RTT of its sample
		cut        bool          // the window is 300 KB, enough for a burst, until the loss
		spread     bool          // the bursts never wait in this path's queue (the scheduler spreads them over paths with room)
		secs       int
		want       int // lanes at the end
		reason     string
	}{
		{name: "a loss cut the window, then bursts expire: adds lanes", lossAt: reconfAt, burstsFrom: 10 * time.Second,
			secs: 20, want: 4, reason: "queued frames dropped since a loss cut the window, no RTT inflation"},
		{name: "a loss cuts the window below the bursts: lanes before the next burst", lossAt: reconfAt + 500*time.Millisecond, burstsFrom: time.Second,
			cut: true, secs: 20, want: 4, reason: "a loss cut the window below what the last bursts need"},
		{name: "bursts the scheduler spreads over other paths: no lane ahead", lossAt: reconfAt + 500*time.Millisecond, burstsFrom: time.Second,
			cut: true, spread: true, secs: 20, want: 1},
		{name: "bursts expire, no loss ever: no lane", lossAt: -1, burstsFrom: 10 * time.Second, secs: 20, want: 1},
		{name: "the loss was too long ago: no lane", lossAt: time.Second, burstsFrom: time.Second + LaneLossMemory + time.Second, secs: 45, want: 1},
		{name: "LEO: the base RTT steps up at a reconfiguration: adds lanes", lossAt: reconfAt, burstsFrom: 10 * time.Second,
			leo: true, step: 25 * time.Millisecond, secs: 20, want: 4, reason: "queued frames dropped since a loss cut the window, no RTT inflation"},
		{name: "each burst's own queue inflates its sample: adds lanes", lossAt: reconfAt, burstsFrom: 10 * time.Second,
			spike: 50 * time.Millisecond, secs: 20, want: 4, reason: "queued frames dropped since a loss cut the window, no RTT inflation"},
		{name: "no schedule: the same step reads as a standing queue: no lane", lossAt: reconfAt, burstsFrom: 10 * time.Second,
			step: 25 * time.Millisecond, secs: 20, want: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t0 := time.Unix(1_700_000_000, 0)
			ctl := NewLaneController(8, t0)
			var lost, drops, offered, tx uint64
			var reason string
			for i := 0; i <= c.secs*int(time.Second/LaneSampleEvery); i++ {
				at := time.Duration(i) * LaneSampleEvery
				s := LaneSample{Now: t0.Add(at), Active: true, MinRTT: minRTT, SRTT: minRTT + 2*time.Millisecond,
					Cwnd: 60_000 + 40_000*(ctl.Lanes()-1), Inflight: 40_000, LEO: c.leo} // a new lane starts with 32 packets
				if c.cut && at < c.lossAt {
					s.Cwnd = 300_000
				}
				if at >= reconfAt {
					s.SRTT += c.step
				}
				s.Reconf = c.leo && (at-reconfAt).Abs() <= DefaultLEOWindow
				if c.lossAt >= 0 && at == c.lossAt {
					lost += 100
				}
				sent := uint64(84_000) // 6.7 Mbit/s per 100 ms
				if at%time.Second == 0 && at >= c.burstsFrom {
					sent += 200_000
					s.QueueBytes = 150_000 // paced out over a few milliseconds: it waits in the queue at first
					if c.spread {
						s.QueueBytes = 0
					}
					if ctl.Lanes() == 1 && s.Cwnd < 284_000 && !c.spread { // the cut window: the burst waits, and its tail expires
						s.QueueBytes, s.Inflight = 200_000, s.Cwnd
						s.SRTT += c.spike
						drops += 20
						sent -= 20 * 1200
						offered += 20 * 1200
					}
				}
				offered += sent
				tx += sent
				s.Lost, s.QueueDrops, s.OfferedBytes, s.TxBytes = lost, drops, offered, tx
				if d := ctl.Sample(s); d.Delta > 0 && reason == "" {
					reason = d.Reason
					if testing.Verbose() {
						t.Logf("%s: %+d → %d (%s)", at, d.Delta, ctl.Lanes(), d.Reason)
					}
				}
			}
			if ctl.Lanes() != c.want {
				t.Fatalf("lanes %d after %d s (first addition: %q), want %d", ctl.Lanes(), c.secs, reason, c.want)
			}
			if c.cut && drops > 0 {
				t.Fatalf("%d frames dropped: the lanes came after a burst waited", drops)
			}
			if c.want > 1 && reason != c.reason {
				t.Fatalf("added for %q, want %q", reason, c.reason)
			}
		})
	}
}
