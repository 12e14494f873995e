package tunnel

import (
	"testing"
	"time"
)

// TestLaneControl drives laneControl with synthetic path samples and checks
// when it adds and removes lanes.
func TestLaneControl(t *testing.T) {
	const rtt = 50 * time.Millisecond
	// A path that is window-limited, losing 1 % of its packets, without RTT
	// inflation: Cubic's loss response, not a full bottleneck.
	lossyLimited := func(i int, now time.Time) laneSample {
		tx := uint64(i) * 60_000
		return laneSample{now: now, active: true, queueBytes: 20_000, cwnd: 30_000, inflight: 29_000,
			srtt: rtt + 3*time.Millisecond, minRTT: rtt, lost: tx / 1200 / 100, txBytes: tx}
	}
	cases := []struct {
		name   string
		max    int
		start  int // lanes before the samples
		secs   int // seconds of samples, one every laneSampleEvery
		sample func(i int, now time.Time) laneSample
		want   int // lanes at the end
	}{
		{name: "random loss, window-limited: adds up to max", max: 4, start: 1, secs: 30, sample: lossyLimited, want: 4},
		{name: "inflated RTT is congestion: no lane", max: 8, start: 1, secs: 30, want: 1,
			sample: func(i int, now time.Time) laneSample {
				s := lossyLimited(i, now)
				s.srtt = 3 * rtt
				return s
			}},
		{name: "no loss: no lane", max: 8, start: 1, secs: 30, want: 1,
			sample: func(i int, now time.Time) laneSample {
				s := lossyLimited(i, now)
				s.lost = 0
				return s
			}},
		{name: "not window-limited: no lane", max: 8, start: 1, secs: 30, want: 1,
			sample: func(i int, now time.Time) laneSample {
				s := lossyLimited(i, now)
				s.queueBytes, s.inflight = 0, 5_000
				return s
			}},
		{name: "outage: no lane", max: 8, start: 1, secs: 30, want: 1,
			sample: func(i int, now time.Time) laneSample {
				s := lossyLimited(i, now)
				s.active = false
				return s
			}},
		{name: "under-used: one lane less per idle stretch", max: 8, start: 4, secs: 65, want: 2,
			sample: func(i int, now time.Time) laneSample {
				// 100 kbit/s handed over; the windows carry 4.8 Mbit/s.
				return laneSample{now: now, active: true, cwnd: 30_000, inflight: 600, srtt: rtt, minRTT: rtt,
					txBytes: uint64(i) * 3_125}
			}},
		{name: "busy enough: keeps its lanes", max: 8, start: 4, secs: 65, want: 4,
			sample: func(i int, now time.Time) laneSample {
				// 4 Mbit/s handed over, windows carry 4.8: one lane fewer would be too few.
				return laneSample{now: now, active: true, cwnd: 30_000, inflight: 20_000, srtt: rtt, minRTT: rtt,
					txBytes: uint64(i) * 125_000}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t0 := time.Unix(1_700_000_000, 0)
			ctl := newLaneControl(c.max, t0)
			ctl.n = c.start
			changes := 0
			var last time.Time
			for i := 1; i <= c.secs*int(time.Second/laneSampleEvery); i++ {
				now := t0.Add(time.Duration(i) * laneSampleEvery)
				d := ctl.sample(c.sample(i, now))
				if d.delta != 0 {
					if changes > 0 && now.Sub(last) < laneEpoch {
						t.Fatalf("changes %s apart, want ≥ %s (hysteresis)", now.Sub(last), laneEpoch)
					}
					if d.reason == "" {
						t.Fatal("change without a reason for the log")
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

func TestLaneMayHand(t *testing.T) {
	cases := []struct {
		name                   string
		unsent, cwnd, inflight int64
		want                   bool
	}{
		{"empty queue always", 0, 10_000, 20_000, true},
		{"below the minimum always", laneMinUnsent - 1, 10_000, 20_000, true},
		{"no window yet", 10, 0, 0, true},
		{"window has room", 4, 100_000, 10_000, true},
		{"window full", 4, 14_000, 10_000, false},
		{"never past the cap", laneMaxUnsent, 1 << 30, 0, false},
	}
	for _, c := range cases {
		var l lane
		l.unsent.Store(c.unsent)
		l.cwnd.Store(c.cwnd)
		l.inflight.Store(c.inflight)
		if got := l.mayHand(); got != c.want {
			t.Errorf("%s: mayHand = %v, want %v", c.name, got, c.want)
		}
	}
}
