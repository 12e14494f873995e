package policy

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// A closed-loop model of one path: a sender paced by a RateEstimator, a
// bottleneck with a drop-tail queue and a time-varying capacity (served in
// 1-ms opportunities, unused ones lost, as in Mahimahi's trace links),
// random loss after the bottleneck, and a receiver that reports every
// 50 ms over a reverse path. Deterministic (seeded), pure, no sockets.

const (
	modelTick   = time.Millisecond
	modelPkt    = 1200
	modelReport = 50 * time.Millisecond
	// modelOffset is the receiver clock's lead over the sender's, µs: the
	// estimator must not care.
	modelOffset = 123_456_789
)

type modelPacket struct {
	size   int
	seq    uint32
	sentUs uint64 // sender clock
	enq    time.Duration
	arrive time.Duration
}

type modelCfg struct {
	dur      time.Duration
	capacity func(t time.Duration) float64 // bytes/s
	prop     func(t time.Duration) time.Duration
	loss     float64
	queueCap int     // bytes of the drop-tail queue
	offered  float64 // bytes/s from the application; 0: always more to send
	leo      *LEOReconf
	warmup   time.Duration
	seed     uint64
	// observe, if set, sees the estimator after each report.
	observe func(t time.Duration, est RateEstimate)
}

type modelResult struct {
	capacity, served, delivered float64 // bytes after warm-up
	dropped                     float64 // bytes the drop-tail queue dropped after warm-up
	queueSum                    float64 // Σ true queueing delay of served packets, s
	queueN                      int
	offered                     float64 // bytes/s
	maxTarget                   float64
	est                         RateEstimate
}

func (r modelResult) util() float64     { return r.served / r.capacity }
func (r modelResult) dropRate() float64 { return r.dropped / (r.dropped + r.served) }
func (r modelResult) meanQueue() time.Duration {
	return time.Duration(r.queueSum / float64(max(r.queueN, 1)) * 1e9)
}

// modelStart is 1 s past a UTC minute, so Starlink's reconfigurations fall
// at t = 11, 26, 41, 56 s of a run.
var modelStart = time.Date(2026, 1, 5, 10, 0, 1, 0, time.UTC)

func runModel(cfg modelCfg) modelResult {
	rng := rand.New(rand.NewPCG(cfg.seed, 7))
	est := NewRateEstimator(RateConfig{LEO: cfg.leo})
	var pacer Pacer
	pacer.SetRate(modelStart, est.Target(), 0)
	var (
		res       modelResult
		queue     []modelPacket // bottleneck queue
		queueB    int
		credit    float64
		wire      []modelPacket // after the bottleneck, towards the receiver
		meter     RateMeter
		reports   []RateReport
		reportAt  []time.Duration
		seq       uint32
		backlog   float64 // application bytes waiting
		sentSince int64
		nextRep   = modelReport
		lastArr   time.Duration
	)
	for t := time.Duration(0); t < cfg.dur; t += modelTick {
		now := modelStart.Add(t)
		measured := t >= cfg.warmup
		// Application.
		if cfg.offered > 0 {
			backlog += cfg.offered * modelTick.Seconds()
		} else {
			backlog = math.Inf(1)
		}
		// Sender: paced.
		for backlog >= modelPkt && pacer.Delay(now, modelPkt) == 0 {
			pacer.Consume(now, modelPkt)
			backlog -= modelPkt
			sentSince += modelPkt
			seq++
			if queueB+modelPkt <= cfg.queueCap {
				queue = append(queue, modelPacket{size: modelPkt, seq: seq, sentUs: uint64(now.UnixMicro()), enq: t})
				queueB += modelPkt
			} else if measured {
				res.dropped += modelPkt
			}
		}
		// Bottleneck.
		c := cfg.capacity(t)
		credit += c * modelTick.Seconds()
		if measured {
			res.capacity += c * modelTick.Seconds()
		}
		for len(queue) > 0 && credit >= float64(queue[0].size) {
			p := queue[0]
			queue = queue[1:]
			queueB -= p.size
			credit -= float64(p.size)
			if measured {
				res.served += float64(p.size)
				res.queueSum += (t - p.enq).Seconds()
				res.queueN++
			}
			if rng.Float64() < cfg.loss {
				continue
			}
			p.arrive = max(t+cfg.prop(t), lastArr)
			lastArr = p.arrive
			wire = append(wire, p)
		}
		if len(queue) == 0 {
			credit = 0 // Mahimahi: an unused delivery opportunity is lost
		}
		// Receiver.
		for len(wire) > 0 && wire[0].arrive <= t {
			p := wire[0]
			wire = wire[1:]
			meter.OnDatagram(uint64(now.UnixMicro())+modelOffset, p.sentUs, p.seq, p.size)
			if measured {
				res.delivered += float64(p.size)
			}
		}
		if t >= nextRep {
			nextRep += modelReport
			reports = append(reports, meter.Report(uint64(now.UnixMicro())+modelOffset))
			reportAt = append(reportAt, t+cfg.prop(t))
		}
		// Feedback reaches the sender.
		for len(reports) > 0 && reportAt[0] <= t {
			r := reports[0]
			reports, reportAt = reports[1:], reportAt[1:]
			bl := int64(0)
			switch {
			case math.IsInf(backlog, 1):
				bl = 1 << 30 // a greedy sender (int64 of +Inf is not defined)
			case backlog >= modelPkt:
				bl = int64(backlog)
			}
			est.Update(now, &r, SendStats{SentBytes: sentSince, BacklogBytes: bl, SRTT: 2 * cfg.prop(t)})
			sentSince = 0
			pacer.SetRate(now, est.Target(), 0)
			if measured {
				res.maxTarget = max(res.maxTarget, est.Target())
			}
			if cfg.observe != nil {
				cfg.observe(t, est.Estimate())
			}
		}
	}
	res.est = est.Estimate()
	res.offered = cfg.offered
	return res
}

func mbps(x float64) float64 { return x * 8 / 1e6 }

func constRate(mbit float64) func(time.Duration) float64 {
	return func(time.Duration) float64 { return mbit * 1e6 / 8 }
}

func constDelay(d time.Duration) func(time.Duration) time.Duration {
	return func(time.Duration) time.Duration { return d }
}

// dips returns a capacity of mbit Mbit/s that falls to low Mbit/s for
// 200 ms every 2.5 s: the Starlink trace's short dips.
func dips(mbit, low float64) func(time.Duration) float64 {
	return func(t time.Duration) float64 {
		if t%(2500*time.Millisecond) >= 2300*time.Millisecond {
			return low * 1e6 / 8
		}
		return mbit * 1e6 / 8
	}
}

// mahimahiLike returns a capacity trace that changes every 100 ms by a
// log-normal step (σ = 0.15), within lo–hi Mbit/s, with a 300-ms outage
// every 7 s: the shape of cellular traces.
func mahimahiLike(seed uint64, lo, hi float64, dur time.Duration) func(time.Duration) float64 {
	rng := rand.New(rand.NewPCG(seed, 11))
	steps := make([]float64, dur/(100*time.Millisecond)+1)
	r := (lo + hi) / 2
	for i := range steps {
		r = min(hi, max(lo, r*math.Exp(rng.NormFloat64()*0.15)))
		steps[i] = r * 1e6 / 8
	}
	return func(t time.Duration) float64 {
		if t%(7*time.Second) < 300*time.Millisecond && t > time.Second {
			return 0
		}
		return steps[t/(100*time.Millisecond)]
	}
}

// TestRateModelCapacity: a greedy sender fills the bottleneck (≥ 90 % of
// its capacity after a 5-s warm-up) with a short queue, under random loss
// up to 50 %, on constant, stepped and trace-driven capacity.
func TestRateModelCapacity(t *testing.T) {
	const dur = 60 * time.Second
	step := func(t time.Duration) float64 {
		switch {
		case t < 20*time.Second:
			return 40e6 / 8
		case t < 40*time.Second:
			return 10e6 / 8
		default:
			return 25e6 / 8
		}
	}
	// Queue bounds: QueueTarget (15 ms) + 10 ms on a steady link, + 15 ms
	// with 5 % random loss and 70 ms with 50 % (the loss thins the
	// delivery samples, and max_bw, a maximum of noisy samples, sits above
	// the capacity until the drain bound of 30 ms holds it); the traces
	// add a 300-ms outage every 7 s, whose queue no rate can avoid, and
	// capacity steps that max_bw follows down only once a queue shows.
	// (The traced bound was 75 ms while runModel passed a greedy sender's
	// backlog as a negative number, so that nothing keyed on a backlog
	// ran here; with it, trace-loss1 holds a 77-ms mean queue at 0.98 of
	// its capacity.)
	const steady, lossy, traced = 25 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond
	cases := []struct {
		name     string
		capacity func(time.Duration) float64
		prop     time.Duration
		loss     float64
		minUtil  float64
		maxQueue time.Duration
		queueCap int     // bytes; 0: 1 MB
		maxDrop  float64 // share of what reaches the bottleneck its queue may drop; 0: 0.04
	}{
		{"const20-loss0", constRate(20), 20 * time.Millisecond, 0, 0.90, steady, 0, 0},
		{"const20-loss1", constRate(20), 20 * time.Millisecond, 0.01, 0.90, steady, 0, 0},
		{"const20-loss5", constRate(20), 20 * time.Millisecond, 0.05, 0.90, lossy, 0, 0},
		{"const20-loss50", constRate(20), 20 * time.Millisecond, 0.50, 0.90, 70 * time.Millisecond, 0, 0},
		{"steps-loss0", step, 20 * time.Millisecond, 0, 0.90, steady, 0, 0},
		{"steps-loss5", step, 20 * time.Millisecond, 0.05, 0.90, lossy, 0, 0},
		{"trace-loss0", mahimahiLike(1, 2, 50, dur), 20 * time.Millisecond, 0, 0.90, traced, 0, 0},
		{"trace-loss1", mahimahiLike(2, 2, 50, dur), 40 * time.Millisecond, 0.01, 0.90, traced, 0, 0},
		{"trace-loss5", mahimahiLike(3, 2, 50, dur), 20 * time.Millisecond, 0.05, 0.90, traced, 0, 0},
		// A long path on a fast-varying trace: the reports are a round
		// trip late, so the share served may be lower, and every probe's queue lasts
		// a round trip before a report shows it. Without any probing
		// above the ProbeBW cycle it served 0.873 at a 72-ms mean queue;
		// the delivery-keyed climb serves 0.962 at 97 ms (the climb on
		// an emptied queue, before it: 0.977 at 106 ms).
		{"trace-rtt180", mahimahiLike(1, 2, 50, dur), 90 * time.Millisecond, 0.01, 0.85, 110 * time.Millisecond, 0, 0},
		{"const94-rtt180", constRate(94), 90 * time.Millisecond, 0.01, 0.90, steady, 0, 0},
		// A LEO path's short dips into a shallow queue (20 ms at 80
		// Mbit/s): each overflows it and restarts max_bw; the refill takes
		// the rate back within about a second (0.25 of capacity without
		// it). A sender at the capacity before a dip loses what the queue
		// cannot hold, 1.5 of the 23 MB of 2.5 s.
		{"dips80-rtt80", dips(80, 5), 40 * time.Millisecond, 0.01, 0.70, traced, 200_000, 0.08},
		// Buffers shallower than QueueTarget (6 and 12 ms at 20 Mbit/s):
		// the queue overflows before its delay shows; loss above the
		// path's own is the signal.
		{"shallow15k-loss0", constRate(20), 20 * time.Millisecond, 0, 0.90, steady, 15_000, 0},
		{"shallow15k-loss1", constRate(20), 20 * time.Millisecond, 0.01, 0.90, steady, 15_000, 0},
		{"shallow30k-loss5", constRate(20), 20 * time.Millisecond, 0.05, 0.90, steady, 30_000, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			qc := c.queueCap
			if qc == 0 {
				qc = 1 << 20
			}
			r := runModel(modelCfg{dur: dur, capacity: c.capacity, prop: constDelay(c.prop), loss: c.loss,
				queueCap: qc, warmup: 5 * time.Second, seed: 1})
			t.Logf("capacity %.1f Mbit/s, served %.1f (%.3f), delivered %.1f, mean queue %v, queue drops %.3f, loss est %.3f, overuses %d",
				mbps(r.capacity/55), mbps(r.served/55), r.util(), mbps(r.delivered/55), r.meanQueue(), r.dropRate(), r.est.Loss, r.est.Overuses)
			maxDrop := c.maxDrop
			if maxDrop == 0 {
				maxDrop = 0.04
			}
			if d := r.dropRate(); d > maxDrop {
				t.Errorf("the bottleneck queue dropped %.3f of what reached it, want ≤ %.2f", d, maxDrop)
			}
			if r.util() < c.minUtil {
				t.Errorf("served %.3f of capacity, want ≥ %.2f", r.util(), c.minUtil)
			}
			if q := r.meanQueue(); q > c.maxQueue {
				t.Errorf("mean queueing delay %v, want ≤ %v", q, c.maxQueue)
			}
		})
	}
}

type modelSample struct {
	t time.Duration
	e RateEstimate
}

func recordModel(cfg modelCfg) (modelResult, []modelSample) {
	var tr []modelSample
	cfg.observe = func(t time.Duration, e RateEstimate) { tr = append(tr, modelSample{t, e}) }
	return runModel(cfg), tr
}

// TestRateModelCapacityDrop: a drop from 40 to 10 Mbit/s is followed
// within 300 ms (target ≤ 1.2 × the new capacity), and the measured
// queue is back under 2 × QueueTarget within 2.5 s (the drain sends at
// ≥ 0.85 × what arrives, so that a base delay that moved up costs little).
func TestRateModelCapacityDrop(t *testing.T) {
	const at = 20 * time.Second
	for _, prop := range []time.Duration{10 * time.Millisecond, 25 * time.Millisecond} {
		_, tr := recordModel(modelCfg{dur: 30 * time.Second, prop: constDelay(prop), queueCap: 1 << 20, seed: 1,
			capacity: func(t time.Duration) float64 {
				if t < at {
					return 40e6 / 8
				}
				return 10e6 / 8
			}})
		followed, drained := time.Duration(-1), time.Duration(-1)
		for _, x := range tr {
			if x.t < at {
				continue
			}
			if followed < 0 && x.e.Target <= 1.2*10e6/8 {
				followed = x.t - at
			}
			if followed >= 0 && drained < 0 && x.e.QueueDelay <= 2*DefaultQueueTarget {
				drained = x.t - at
			}
		}
		t.Logf("one-way %v: target followed the drop after %v, queue drained after %v", prop, followed, drained)
		if followed < 0 || followed > 300*time.Millisecond {
			t.Errorf("one-way %v: target followed the drop after %v, want ≤ 300ms", prop, followed)
		}
		if drained < 0 || drained > 2500*time.Millisecond {
			t.Errorf("one-way %v: queue drained after %v, want ≤ 2.5s", prop, drained)
		}
	}
}

// starlinkEvent reports whether t (from modelStart) is inside a 60-ms
// outage at a reconfiguration (t = 11, 26, 41, 56 s: seconds 12, 27, 42,
// 57 of the minute) and the index of the last reconfiguration.
func starlinkEvent(t time.Duration) (outage bool, k int) {
	x := t - 11*time.Second + 10*time.Millisecond
	if x < 0 {
		return false, -1
	}
	k = int(x / (15 * time.Second))
	return x-time.Duration(k)*15*time.Second < 60*time.Millisecond, k
}

// TestRateModelLEOFreeze: a Starlink-like path (60 Mbit/s, a 60-ms
// outage at each reconfiguration and the base delay alternating between
// 25 and 40 ms from one satellite to the next). With the LEO marker the
// estimator skips the windows' reports, holds its rate across them (never
// below 0.55 × the rate before in the second after: the drain that
// re-measures the base runs at 0.75 of a rate that the ProbeBW gain cycle
// moves between 0.75 and 1.25 × max_bw) and keeps the link
// ≥ 95 % used; without it the first reconfiguration that raises the base
// costs more than half the rate.
func TestRateModelLEOFreeze(t *testing.T) {
	capacity := func(t time.Duration) float64 {
		if out, _ := starlinkEvent(t); out {
			return 0
		}
		return 60e6 / 8
	}
	prop := func(t time.Duration) time.Duration {
		if _, k := starlinkEvent(t); k%2 == 0 {
			return 40 * time.Millisecond
		}
		return 25 * time.Millisecond
	}
	worst := func(tr []modelSample) float64 {
		w := math.Inf(1)
		for _, ev := range []time.Duration{11 * time.Second, 26 * time.Second, 41 * time.Second, 56 * time.Second} {
			before := 0.0
			for _, x := range tr {
				if x.t < ev-300*time.Millisecond {
					before = x.e.Target
				}
				if x.t >= ev && x.t < ev+time.Second && before > 0 {
					w = min(w, x.e.Target/before)
				}
			}
		}
		return w
	}
	on, trOn := recordModel(modelCfg{dur: 60 * time.Second, capacity: capacity, prop: prop, queueCap: 1 << 20,
		warmup: 5 * time.Second, seed: 1, leo: &LEOReconf{}})
	off, trOff := recordModel(modelCfg{dur: 60 * time.Second, capacity: capacity, prop: prop, queueCap: 1 << 20,
		warmup: 5 * time.Second, seed: 1})
	wOn, wOff := worst(trOn), worst(trOff)
	t.Logf("LEO marker: util %.3f, mean queue %v, frozen reports %d, worst target/before %.2f", on.util(), on.meanQueue(), on.est.FrozenReports, wOn)
	t.Logf("no marker:  util %.3f, mean queue %v, worst target/before %.2f", off.util(), off.meanQueue(), wOff)
	if on.est.FrozenReports == 0 {
		t.Error("no report was frozen")
	}
	if wOn < 0.55 {
		t.Errorf("with the marker the target fell to %.2f of its value before a reconfiguration, want ≥ 0.55", wOn)
	}
	if on.util() < 0.95 {
		t.Errorf("with the marker the link was %.3f used, want ≥ 0.95", on.util())
	}
	if wOff >= 0.5 {
		t.Errorf("without the marker the target kept %.2f of its value: the scenario does not exercise the freeze", wOff)
	}
}

// TestRateModelAppLimited: a sender that offers less than the link (after
// a start that drains a backlog) keeps its target within 2.3 × its offered
// rate (2 × the received rate, plus the jitter of a 50-ms sample: at
// 0.5 Mbit/s, 2.6 datagrams),
// whatever the link's capacity, and delivers all it offers.
func TestRateModelAppLimited(t *testing.T) {
	for _, offered := range []float64{0.5, 2, 8} {
		r := runModel(modelCfg{dur: 30 * time.Second, capacity: constRate(50), prop: constDelay(20 * time.Millisecond),
			queueCap: 1 << 20, offered: offered * 1e6 / 8, warmup: 5 * time.Second, seed: 1})
		ratio := r.maxTarget / r.offered
		t.Logf("offered %.1f Mbit/s: max target %.2f Mbit/s (%.2f ×), delivered %.2f Mbit/s", offered, mbps(r.maxTarget), ratio, mbps(r.delivered/25))
		if ratio > 2.3 {
			t.Errorf("offered %.1f Mbit/s: target reached %.2f × the offered rate, want ≤ 2.3", offered, ratio)
		}
		if got := r.delivered / 25; got < 0.97*r.offered {
			t.Errorf("offered %.1f Mbit/s: delivered only %.2f Mbit/s", offered, mbps(got))
		}
	}
}

// TestRateModelOutageBaseStep: a 2.5-s outage (the link carries 0.15 Mbit/s)
// after which the link's one-way delay is 5 ms higher than before, as the
// Lagos trace's is in S2 (seed 3, 21.8–24.25 s). Every report after the
// outage shows a least one-way delay 5 ms above the base filter's, which
// reads as a queue that never empties; the target must still climb back
// to 0.8 × the capacity within 1.5 s of the link's return, on what the
// link delivers. With the climb keyed on the queue emptying (before the
// delivery-keyed climb, rate.go) it took 2.2 s at a 40-ms one-way delay
// (0.8 s now), 0.4 s at 20 ms (0.5 s now): the refill ended at its
// target and the ProbeBW cycle grew 1.25 × per eight rounds after it.
func TestRateModelOutageBaseStep(t *testing.T) {
	const (
		capacity = 80e6 / 8 // bytes/s
		from     = 10 * time.Second
		to       = 12500 * time.Millisecond
	)
	for _, prop := range []time.Duration{20 * time.Millisecond, 40 * time.Millisecond} {
		_, tr := recordModel(modelCfg{dur: 16 * time.Second, queueCap: 200_000, seed: 1,
			capacity: func(t time.Duration) float64 {
				if t >= from && t < to {
					return 0.15e6 / 8 // a trickle: a few datagrams per report
				}
				return capacity
			},
			prop: func(t time.Duration) time.Duration {
				if t >= to {
					return prop + 5*time.Millisecond
				}
				return prop
			}})
		back := time.Duration(-1)
		least := math.Inf(1)
		for _, x := range tr {
			if x.t >= to && x.t < to+1500*time.Millisecond {
				least = min(least, x.e.Target)
			}
			if x.t >= to && back < 0 && x.e.Target >= 0.8*capacity {
				back = x.t - to
			}
		}
		t.Logf("one-way %v: target back at 0.8 × capacity %v after the link returned (least target in the next 1.5 s %.2f Mbit/s)", prop, back, mbps(least))
		if least >= 0.8*capacity {
			t.Errorf("one-way %v: the target never fell after the outage (least %.2f Mbit/s): the test measured no recovery", prop, mbps(least))
		}
		if back < 0 || back > 1500*time.Millisecond {
			t.Errorf("one-way %v: target back at 0.8 × capacity after %v, want ≤ 1.5s", prop, back)
		}
	}
}
