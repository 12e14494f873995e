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
		burst                 bool // the demand comes as one burst a second that partly expires
		dip                   bool // in the epoch after each addition the lanes carry 70 % of what they did before it (a loss event cut every window)
	}
	cases := []struct {
		name  string
		max   int
		start int // lanes before the samples
		secs  int // seconds of samples, one every LaneSampleEvery
		m     model
		want  int // lanes at the end
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
			changes := 0
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
				capacity := min(float64(ctl.n)*c.m.perLane, c.m.link)
				if c.m.dip && ctl.added > 0 && ctl.judged == 0 {
					capacity = 0.7 * min(float64(ctl.n-ctl.added)*c.m.perLane, c.m.link)
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
					if d.Delta > 0 && (d.LossRate <= 0 || (d.Limited < 0.5) == strings.HasPrefix(d.Reason, "window-limited")) {
						t.Fatalf("reason %q contradicts window_limited=%.2f loss_rate=%g", d.Reason, d.Limited, d.LossRate)
					}
					changes++
					last = now
				}
				if ctl.n < 1 || ctl.n > c.max {
					t.Fatalf("lanes %d outside 1..%d", ctl.n, c.max)
				}
			}
			if ctl.n != c.want {
				t.Fatalf("lanes %d after %d s, want %d", ctl.n, c.secs, c.want)
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
