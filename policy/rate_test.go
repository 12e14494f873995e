package policy

import (
	"testing"
	"time"
)

// feed runs n synthetic 50-ms reports through e: rate bytes/s received,
// the given loss fraction, and a mean one-way delay of owd(i) µs (least
// delay minOWD(i)); the sender always has a backlog.
func feed(e *RateEstimator, start time.Time, n int, rate, loss float64, owd, minOWD func(i int) int64) time.Time {
	now := start
	for i := range n {
		now = now.Add(50 * time.Millisecond)
		got := rate * 0.05
		dgs := uint32(got / 1200)
		lost := uint32(float64(dgs) * loss / (1 - loss))
		r := RateReport{
			Start: uint64(i) * 50_000, End: uint64(i+1) * 50_000,
			Bytes: dgs * 1200, Datagrams: dgs, Lost: lost,
			OWDMin: minOWD(i), OWDMean: owd(i),
		}
		e.Update(now, &r, SendStats{SentBytes: int64(e.Target() * 0.05), BacklogBytes: 100_000, SRTT: 40 * time.Millisecond})
	}
	return now
}

func constOWD(v int64) func(int) int64 { return func(int) int64 { return v } }

// TestRateEstimatorSignals: on a flat delay the bottleneck rate holds at
// least what arrives whatever the random loss (loss alone is not
// congestion), and the target falls below it when the delay keeps
// rising, with or without loss.
func TestRateEstimatorSignals(t *testing.T) {
	const rate = 1e6 // bytes/s the receiver gets
	rising := func(i int) int64 {
		if i < 20 {
			return 20_000
		}
		return 20_000 + int64(i-20)*3_000 // +3 ms per report
	}
	risingMin := func(i int) int64 { return max(20_000, rising(i)-2_000) }
	cases := []struct {
		name        string
		loss        float64
		owd, minOWD func(int) int64
		grows       bool
	}{
		{"flat, no loss", 0, constOWD(20_000), constOWD(20_000), true},
		{"flat, 5% loss", 0.05, constOWD(20_000), constOWD(20_000), true},
		{"flat, 50% loss", 0.5, constOWD(20_000), constOWD(20_000), true},
		{"rising, no loss", 0, rising, risingMin, false},
		{"rising, 10% loss", 0.1, rising, risingMin, false},
	}
	for _, c := range cases {
		e := NewRateEstimator(RateConfig{InitialRate: rate})
		feed(e, modelStart, 50, rate, c.loss, c.owd, c.minOWD)
		got := e.Target()
		if bw := e.Estimate().Capacity; c.grows && bw < 0.98*rate { // 41 datagrams of 1200 B per 50 ms
			t.Errorf("%s: bottleneck rate %.0f B/s, want at least the received %.0f (the pacing gain cycles around it)", c.name, bw, rate)
		}
		if !c.grows && got >= rate {
			t.Errorf("%s: target %.0f B/s, want below the received %.0f", c.name, got, rate)
		}
		if est := e.Estimate(); c.loss > 0 && (est.Loss < c.loss*0.7 || est.Loss > c.loss*1.1) {
			t.Errorf("%s: loss estimate %.3f, want about %.2f", c.name, est.Loss, c.loss)
		}
	}
}

// TestRateEstimatorOwnLoss: after 5 clean seconds have taught the
// estimator a zero loss floor, a second of loss over a standing queue (a
// drop-tail queue overflowing, as in a capacity dip), and the gaps found
// just after such a report, show in Loss but not in OwnLoss, which the
// scheduler and the status read; random loss over no queue, and reports
// in which every datagram was lost, show in both.
func TestRateEstimatorOwnLoss(t *testing.T) {
	const base = 20_000 // µs
	type report struct {
		arrived, lost uint32 // datagrams in the 50-ms report
		queue         int64  // µs above the base, mean and least
		outage        bool   // the sender presumed datagrams lost since the last report
	}
	overflow, clean := report{28, 12, 40_000, false}, report{40, 0, 0, false}
	outageGaps := []report{{10, 300, 0, true}, {40, 20, 0, false}, clean, clean, clean, clean, clean, clean, clean, clean}
	cases := []struct {
		name           string
		cycle          []report // repeated for 20 reports
		ownMin, ownMax float64
	}{
		{"overflow over a 40-ms queue", []report{overflow}, 0, 0.02},
		{"overflow, then the gaps found after it drained", []report{overflow, {28, 12, 0, false}, clean, clean, clean}, 0, 0.02},
		{"the gaps found after an outage", outageGaps, 0, 0.02},
		{"random loss, no queue", []report{{28, 12, 0, false}}, 0.15, 0.3},
		{"random loss over a 0.5-ms queue", []report{{28, 12, 500, false}}, 0.15, 0.3},
		{"everything lost", []report{{0, 40, 0, false}}, 0.5, 1},
	}
	for _, c := range cases {
		e := NewRateEstimator(RateConfig{InitialRate: 1e6})
		now := modelStart
		send := func(i int, rp report) {
			now = now.Add(50 * time.Millisecond)
			r := RateReport{Start: uint64(i) * 50_000, End: uint64(i+1) * 50_000, Bytes: rp.arrived * 1200,
				Datagrams: rp.arrived, Lost: rp.lost, OWDMin: base + rp.queue, OWDMean: base + rp.queue}
			e.Update(now, &r, SendStats{SentBytes: int64(e.Target() * 0.05), BacklogBytes: 100_000, SRTT: 40 * time.Millisecond, Outage: rp.outage})
		}
		for i := range 100 {
			send(i, clean)
		}
		for i := range 20 {
			send(100+i, c.cycle[i%len(c.cycle)])
		}
		est := e.Estimate()
		if est.Loss < 0.05 {
			t.Errorf("%s: Loss %.3f, want ≥ 0.05", c.name, est.Loss)
		}
		if est.OwnLoss < c.ownMin || est.OwnLoss > c.ownMax {
			t.Errorf("%s: OwnLoss %.3f, want %.2f–%.2f", c.name, est.OwnLoss, c.ownMin, c.ownMax)
		}
	}
}

// TestRateEstimatorOwnLossForgotten: a path idle for longer than
// LossMemory starts from no own loss; what it lost before is not news.
func TestRateEstimatorOwnLossForgotten(t *testing.T) {
	e := NewRateEstimator(RateConfig{InitialRate: 1e6})
	now := modelStart
	report := func(i int, arrived, lost uint32) {
		r := RateReport{Start: uint64(i) * 50_000, End: uint64(i+1) * 50_000, Bytes: arrived * 1200,
			Datagrams: arrived, Lost: lost, OWDMin: 20_000, OWDMean: 20_000}
		e.Update(now, &r, SendStats{SentBytes: int64(arrived+lost) * 1200, BacklogBytes: 100_000, SRTT: 40 * time.Millisecond})
	}
	for i := range 60 { // 30 % random loss, no queue
		now = now.Add(50 * time.Millisecond)
		report(i, 28, 12)
	}
	if own := e.Estimate().OwnLoss; own < 0.15 {
		t.Fatalf("OwnLoss %.3f after 3 s of 30 %% loss, want ≥ 0.15", own)
	}
	now = now.Add(LossMemory + time.Second) // idle
	report(60+220, 40, 0)
	if own := e.Estimate().OwnLoss; own > 0.01 {
		t.Errorf("OwnLoss %.3f after %v idle and a clean report, want ≤ 0.01", own, LossMemory+time.Second)
	}
}

// TestRateEstimatorLEOFreeze: reports that overlap a reconfiguration
// window leave the target alone, however bad they look.
func TestRateEstimatorLEOFreeze(t *testing.T) {
	e := NewRateEstimator(RateConfig{InitialRate: 1e6, LEO: &LEOReconf{}})
	// Before the window (second 5 of the minute): learn a 20-ms base.
	now := time.Date(2026, 1, 5, 10, 0, 5, 0, time.UTC)
	feed(e, now, 10, 1e6, 0, constOWD(20_000), constOWD(20_000))
	before := e.Target()
	// Inside the window (second 12): no data and a 300-ms delay spike.
	in := time.Date(2026, 1, 5, 10, 0, 12, 20_000_000, time.UTC)
	r := RateReport{Start: 500_000, End: 550_000, Bytes: 1200, Datagrams: 1, Lost: 40, OWDMin: 320_000, OWDMean: 320_000}
	e.Update(in, &r, SendStats{BacklogBytes: 1, SRTT: 40 * time.Millisecond})
	est := e.Estimate()
	if !est.Frozen || est.FrozenReports != 1 || est.Target != before {
		t.Errorf("inside the window: %+v, want frozen at target %.0f", est, before)
	}
	// Outside, without a marker, the same report is learnt from.
	e2 := NewRateEstimator(RateConfig{InitialRate: 1e6})
	feed(e2, now, 10, 1e6, 0, constOWD(20_000), constOWD(20_000))
	e2.Update(in, &r, SendStats{BacklogBytes: 1, SRTT: 40 * time.Millisecond})
	if e2.Target() >= before {
		t.Errorf("without a marker the spike left the target at %.0f, want below %.0f", e2.Target(), before)
	}
	// A marker set after the estimator was made (SetLEO) freezes it too.
	e3 := NewRateEstimator(RateConfig{InitialRate: 1e6})
	feed(e3, now, 10, 1e6, 0, constOWD(20_000), constOWD(20_000))
	e3.SetLEO(&LEOReconf{})
	e3.Update(in, &r, SendStats{BacklogBytes: 1, SRTT: 40 * time.Millisecond})
	if est := e3.Estimate(); !est.Frozen || est.Target != before {
		t.Errorf("with the marker set later: %+v, want frozen at target %.0f", est, before)
	}
	// A hold longer than the window: the sender's own gap, 300 ms after
	// the second, is not the link's either.
	late := time.Date(2026, 1, 5, 10, 0, 12, 300_000_000, time.UTC)
	for _, hold := range []time.Duration{400 * time.Millisecond, -1} {
		e4 := NewRateEstimator(RateConfig{InitialRate: 1e6, LEO: &LEOReconf{Window: 20 * time.Millisecond, Hold: hold}})
		feed(e4, now, 10, 1e6, 0, constOWD(20_000), constOWD(20_000))
		e4.Update(late, &r, SendStats{BacklogBytes: 1, SRTT: 40 * time.Millisecond})
		if frozen := e4.Estimate().Frozen; frozen != (hold > 0) {
			t.Errorf("hold %v, 300 ms after the second, 20-ms window: frozen %v, want %v", hold, frozen, hold > 0)
		}
	}
}

func TestRateEstimatorBadReport(t *testing.T) {
	e := NewRateEstimator(RateConfig{})
	before := e.Estimate()
	e.Update(modelStart, &RateReport{Start: 10, End: 5, Bytes: 1 << 30, Datagrams: 3}, SendStats{BacklogBytes: 1})
	if e.Estimate() != before {
		t.Errorf("a backwards report changed the estimate: %+v", e.Estimate())
	}
	e.Update(modelStart, &RateReport{Start: 10, End: 11, Bytes: 1<<32 - 1, Datagrams: 1}, SendStats{BacklogBytes: 1})
	if tg := e.Target(); tg > DefaultMaxRate {
		t.Errorf("target %v above the maximum", tg)
	}
}

func TestRateEstimatorAllocs(t *testing.T) {
	e := NewRateEstimator(RateConfig{LEO: &LEOReconf{}})
	now := modelStart
	var i uint64
	if n := testing.AllocsPerRun(1000, func() {
		i++
		now = now.Add(50 * time.Millisecond)
		r := RateReport{Start: i * 50_000, End: (i + 1) * 50_000, Bytes: 60_000, Datagrams: 50, Lost: 1, OWDMin: 20_000, OWDMean: 21_000 + int64(i%7)*500}
		e.Update(now, &r, SendStats{SentBytes: 60_000, BacklogBytes: 1, SRTT: 40 * time.Millisecond})
	}); n != 0 {
		t.Errorf("%v allocations per report, want 0", n)
	}
}

// TestRateEstimatorOutageReport: a 50-ms report from inside a short
// outage (2 datagrams arrived, 40 lost, a queue standing), then reports of
// the gaps found as the link comes back, cut a 20-Mbit/s path's target by
// 0.85 × at most half of the rate received over the last 0.5 s, at most
// once per round trip: it stays above 0.3 × the rate (0.38 ×), and is
// back near the rate within a second. Before, the target fell to 0.85 ×
// the outage report's rate, 0.3 Mbit/s, and each report of late gaps cut
// again: S2's Starlink path sat at 0.1 Mbit/s for 2.5 s.
func TestRateEstimatorOutageReport(t *testing.T) {
	const rate = 2.5e6 // bytes/s
	e := NewRateEstimator(RateConfig{InitialRate: rate})
	now := modelStart
	var end uint64
	report := func(dgs, lost uint32, owd, minOWD int64) {
		now = now.Add(50 * time.Millisecond)
		r := RateReport{Start: end, End: end + 50_000, Bytes: dgs * 1200, Datagrams: dgs, Lost: lost, OWDMin: minOWD, OWDMean: owd}
		end += 50_000
		e.Update(now, &r, SendStats{SentBytes: int64(e.Target() * 0.05), BacklogBytes: 100_000, SRTT: 100 * time.Millisecond})
	}
	for range 60 {
		report(104, 0, 20_000, 20_000) // 2.5 MB/s
	}
	before := e.Target()
	report(2, 40, 35_000, 30_000) // the outage: a queue and a burst of loss
	for range 3 {
		report(10, 20, 32_000, 28_000) // the gaps found as it comes back
	}
	if got := e.Target(); got < 0.3*rate {
		t.Errorf("after the outage the target is %.0f B/s (%.0f before), want ≥ %.0f", got, before, 0.3*rate)
	}
	for range 20 {
		report(104, 0, 20_000, 20_000) // 2.5 MB/s
	}
	if got := e.Target(); got < 0.8*rate {
		t.Errorf("1 s after the outage the target is %.0f B/s, want ≥ %.0f", got, 0.8*rate)
	}
}

// TestRateEstimatorDrainFewDatagrams: a report of one or two datagrams at
// a high one-way delay (S2's Starlink path at the start of a
// reconfiguration's loss: seed 3, second 22 of the run) drains the queue
// from what arrived over the last backoffWindow, as a loss back-off does,
// not from its own one datagram: that took the target from 17 Mbit/s to
// 0.3 in one report. A report with datagrams enough is still a rate:
// a capacity drop is followed at once (TestRateModelCapacityDrop).
func TestRateEstimatorDrainFewDatagrams(t *testing.T) {
	const rate = 1.5e6 // bytes/s, 12 Mbit/s
	tests := []struct {
		name     string
		dgs      uint32
		min, max float64 // of the target over rate
	}{
		{"one datagram", 1, 0.35, 1},
		{"two datagrams", 2, 0.35, 1},
		{"a fifth of the rate", 25, 0.1, 0.25},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := NewRateEstimator(RateConfig{InitialRate: rate})
			now := modelStart
			var end uint64
			report := func(dgs uint32, owd int64) {
				now = now.Add(80 * time.Millisecond)
				r := RateReport{Start: end, End: end + 80_000, Bytes: dgs * 1200, Datagrams: dgs, OWDMin: owd - 2_000, OWDMean: owd}
				end += 80_000
				e.Update(now, &r, SendStats{SentBytes: int64(e.Target() * 0.08), BacklogBytes: 100_000, SRTT: 60 * time.Millisecond})
			}
			for range 60 {
				report(100, 30_000) // 1.5 MB/s at the base delay
			}
			report(tt.dgs, 100_000) // 70 ms above the base
			if got := e.Target() / rate; got < tt.min || got > tt.max {
				t.Errorf("target %.3f × the rate before, want %.2f–%.2f", got, tt.min, tt.max)
			}
		})
	}
}

// TestRateEstimatorRefillAfterLongDip: S2's Starlink path across a
// reconfiguration (seed 3): seconds of reports with a datagram or two at
// a high one-way delay, longer than refillMemory, then a clean link at the
// old capacity. The refill's memory lasts while the dip goes on, and far
// below its goal the refill climbs at Startup's gain: the target is back
// at half its old rate within a second of the link coming back. Before,
// the memory ran out inside the dip and the climb from 0.1 Mbit/s at
// 1.25 × per round took about 1.5 s to 6 Mbit/s, the frames of it expiring
// in the send queue.
func TestRateEstimatorRefillAfterLongDip(t *testing.T) {
	const capacity = 1.5e6 // bytes/s, 12 Mbit/s
	e := NewRateEstimator(RateConfig{InitialRate: capacity})
	now := modelStart
	var end uint64
	report := func(dgs uint32, owd int64) {
		now = now.Add(80 * time.Millisecond)
		r := RateReport{Start: end, End: end + 80_000, Bytes: dgs * 1200, Datagrams: dgs, OWDMin: owd - 2_000, OWDMean: owd}
		end += 80_000
		e.Update(now, &r, SendStats{SentBytes: int64(e.Target() * 0.08), BacklogBytes: 100_000, SRTT: 60 * time.Millisecond})
	}
	for range 60 {
		report(100, 30_000)
	}
	for i := range 45 { // 3.6 s
		report(1+uint32(i%2), 30_000+int64(90+i%4*20)*1000)
	}
	at := now
	for e.Target() < 0.5*capacity && now.Sub(at) < 5*time.Second {
		sent := min(e.Target(), capacity) * 0.08
		report(max(1, uint32(sent/1200)), 30_000)
	}
	if took := now.Sub(at); took > time.Second {
		t.Errorf("after the dip the target took %v to get back to half the capacity, want ≤ 1s", took)
	}
}

// TestRateEstimatorAppLimited: RateEstimate.AppLimited holds when the
// sender had no backlog and sent below the target in at least half of the
// reports of the last appWindow, as on a video path whose only backlog is
// its keyframe once a second.
func TestRateEstimatorAppLimited(t *testing.T) {
	tests := []struct {
		name    string
		backlog func(i int) bool // report i had a backlog (and sent at the target)
		want    bool
	}{
		{"greedy", func(int) bool { return true }, false},
		{"idle", func(int) bool { return false }, true},
		{"a keyframe a second", func(i int) bool { return i%20 < 4 }, true},
		{"backlogged 3 reports in 4", func(i int) bool { return i%4 != 0 }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := NewRateEstimator(RateConfig{InitialRate: 1e6})
			now := modelStart
			for i := range 100 { // 5 s of 50-ms reports
				now = now.Add(50 * time.Millisecond)
				// P-frames: 10 datagrams a report; a backlog is sent at the
				// target. The link carries what is sent.
				s := SendStats{SentBytes: 10 * 1200, SRTT: 40 * time.Millisecond}
				if tt.backlog(i) {
					s.SentBytes, s.BacklogBytes = int64(e.Target()*0.05), 50_000
				}
				dgs := uint32(s.SentBytes / 1200)
				r := RateReport{Start: uint64(i) * 50_000, End: uint64(i+1) * 50_000, Bytes: dgs * 1200, Datagrams: dgs, OWDMin: 20_000, OWDMean: 20_000}
				e.Update(now, &r, s)
			}
			if got := e.Estimate().AppLimited; got != tt.want {
				t.Errorf("AppLimited = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestRateEstimateStartup: RateEstimate.Startup holds from a new estimator
// until the full-pipe test ends Startup, on a link that carries 8 Mbit/s
// whatever is sent to it.
func TestRateEstimateStartup(t *testing.T) {
	const link = 1e6 // bytes/s
	e := NewRateEstimator(RateConfig{})
	if !e.Estimate().Startup {
		t.Fatal("a new estimator is not in Startup")
	}
	now := modelStart
	var end uint64
	left := -1
	for i := range 100 {
		now = now.Add(50 * time.Millisecond)
		got := min(e.Target(), link) * 0.05
		r := RateReport{Start: end, End: end + 50_000, Bytes: uint32(got), Datagrams: uint32(got / 1200), OWDMin: 20_000, OWDMean: 20_000}
		end += 50_000
		e.Update(now, &r, SendStats{SentBytes: int64(e.Target() * 0.05), BacklogBytes: 100_000, SRTT: 40 * time.Millisecond})
		if !e.Estimate().Startup {
			left = i
			break
		}
	}
	if left < 0 {
		t.Fatalf("still in Startup after 5 s at the link's rate (target %.0f B/s)", e.Target())
	}
	if c := e.Estimate().Capacity; c < 0.9*link || c > 1.1*link {
		t.Errorf("left Startup after %d reports with max_bw %.0f B/s, want about %.0f", left+1, c, float64(link))
	}
}
