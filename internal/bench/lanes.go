package bench

// Scenario lanes: one link whose losses are not congestion, carried on one
// QUIC connection. quic-go's own congestion control (Cubic or NewReno)
// reads every loss as congestion, and on such a link one connection's
// window stays far below what the link carries; bondd once worked around
// that with several connections per uplink (lanes), and now sets the
// path's rate itself (tunnel/ratectl.go). The scenario keeps the name and
// measures the replacement: one emulated path with 25 ms of delay each
// way (50 ms RTT) and a 100 Mbit/s bottleneck, so the loss model alone
// limits the connection; a 20 Mbit/s constant-rate flow of 1200-byte UDP
// packets; for each loss model, rate control quic (quic-go's own
// controller) against bondd over the same seed.

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bondd/bondd/emu"
	"github.com/bondd/bondd/internal/demo"
	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/tunnel"
)

// Lanes scenario parameters.
const (
	lanesRateMbps = 20.0
	lanesDelay    = 25 * time.Millisecond // each way: the base one-way delay
	lanesLinkRate = 100 * emu.Mbps
)

// lanesCondition is one loss model of the scenario.
type lanesCondition struct {
	name, desc string
	link       func(sc emu.Scenario) emu.PathModel
}

// lanesConditions are the loss models, in the order they run: Bernoulli
// loss in both directions at 0, 0.5, 1 and 3 %; Gilbert–Elliott burst loss
// averaging about 1 % in bursts of 5 packets; and the Starlink 100-ms
// trace's uplink (capacity, delay and loss, with its reconfigurations).
func lanesConditions() []lanesCondition {
	bernoulli := func(p float64) func(emu.Scenario) emu.PathModel {
		return func(emu.Scenario) emu.PathModel {
			l := emu.LinkConfig{Delay: lanesDelay, Rate: lanesLinkRate, Loss: p}
			return emu.PathModel{Name: "lossy", Labels: map[string]string{"link_type": "cellular"}, Up: l, Down: l}
		}
	}
	ge := &emu.GilbertElliott{PGoodBad: 0.004, PBadGood: 0.2, LossBad: 0.5}
	return []lanesCondition{
		{"loss0", "no loss", bernoulli(0)},
		{"loss0.5", "0.5 % random loss each way", bernoulli(0.005)},
		{"loss1", "1 % random loss each way", bernoulli(0.01)},
		{"loss3", "3 % random loss each way", bernoulli(0.03)},
		{"ge", fmt.Sprintf("Gilbert–Elliott burst loss each way, %.2f %% on average, mean burst 5 packets", 100*ge.StationaryLoss()),
			func(emu.Scenario) emu.PathModel {
				l := emu.LinkConfig{Delay: lanesDelay, Rate: lanesLinkRate, GilbertElliott: ge}
				return emu.PathModel{Name: "lossy", Labels: map[string]string{"link_type": "cellular"}, Up: l, Down: l}
			}},
		{"starlink", "Starlink 100-ms trace (uplink capacity, delay, loss and reconfigurations)",
			func(leo emu.Scenario) emu.PathModel {
				p := leo.Paths[0]
				p.Name = "starlink"
				return p
			}},
	}
}

// lanesRateControls are the rate controls each condition runs with: the
// baseline first.
var lanesRateControls = []string{tunnel.RateControlQUIC, tunnel.RateControlBondd}

// lanesConfigNames lists the configurations, condition-ratecontrol.
func lanesConfigNames() []string {
	var names []string
	for _, c := range lanesConditions() {
		for _, rc := range lanesRateControls {
			names = append(names, c.name+"-"+rc)
		}
	}
	return names
}

// lanesResult is one configuration in results.json.
type lanesResult struct {
	Name        string   `json:"name"`
	Condition   string   `json:"condition"`
	RateControl string   `json:"rate_control"` // quic or bondd
	Delivered   float64  `json:"delivered"`    // packets received / sent
	Loss        float64  `json:"loss"`         // end to end: 1 − delivered
	GoodputMbps float64  `json:"goodput_mbps"` // received UDP payload bytes over the traffic time, as bondd demo
	OWDms       owdStats `json:"owd_ms"`
	CwndBytes   float64  `json:"cwnd_bytes"`  // mean congestion window, sampled every 100 ms
	TargetMbps  float64  `json:"target_mbps"` // mean rate-control target, sampled every 100 ms; 0 under quic
	QUICLoss    float64  `json:"quic_loss"`   // QUIC packets declared lost / sent (RFC 9002)
	Sent        uint64   `json:"packets_sent"`
	Received    uint64   `json:"packets_received"`
	QueueFull   uint64   `json:"queue_full_drops"`
	Expired     uint64   `json:"expired_drops"`
	Deadline    uint64   `json:"deadline_drops"`
	// Unaccounted is sent − received − the send-queue drops − the QUIC
	// packets declared lost: what no counter explains (negative when
	// QUIC's lost packets carried ACKs or keepalives rather than data, or
	// when retransmission delivered a datagram QUIC declared lost).
	Unaccounted int64     `json:"unaccounted"`
	Runs        int       `json:"runs"` // runs the numbers are medians over
	CI95        ciMap     `json:"ci95"` // 95 % bootstrap intervals of the medians
	owdSamples  []float64 // sorted, ms (all runs)
}

// lanesReport is results.json for the lanes scenario.
type lanesReport struct {
	benchHeader
	RateMbps    float64       `json:"rate_mbps"`
	BaseOWDms   float64       `json:"base_owd_ms"`
	PacketBytes int           `json:"packet_bytes"`
	Configs     []lanesResult `json:"configs"`
	Targets     []target      `json:"targets"`
}

// runLanes runs the selected configurations and writes the results.
func runLanes(ctx context.Context, o Options, out io.Writer) error {
	rep := lanesReport{
		benchHeader: o.header([]string{"none (loss models)"}),
		RateMbps:    lanesRateMbps, BaseOWDms: float64(lanesDelay) / 1e6, PacketBytes: demo.PacketBytes,
	}
	fmt.Fprintf(out, "bondd bench lanes: one path, one QUIC connection, %s each way, %.0f Mbit/s of %d-byte UDP packets, %s per configuration, %d run(s) from seed %d\n",
		lanesDelay, lanesRateMbps, demo.PacketBytes, o.Duration, o.runs(), o.Seed)
	perRun := map[string][]lanesResult{}
	var names []string
	for r := range o.runs() {
		ro := o.forRun(r)
		leo, err := emu.LEOScenario(ro.Traces, ro.Seed)
		if err != nil {
			return err
		}
		for _, c := range lanesConditions() {
			for _, rc := range lanesRateControls {
				name := c.name + "-" + rc
				if !o.selected(name) {
					continue
				}
				if c.name == "starlink" && rep.Traces[0] == "none (loss models)" {
					rep.Traces = scenarioTraces(leo, o.Traces)
				}
				sc := emu.Scenario{Name: "lanes", Source: leo.Source, Paths: []emu.PathModel{c.link(leo)}}
				if c.name != "starlink" {
					sc.Source = "builtin"
				}
				res, mode, err := runLanesConfig(ctx, ro, sc, rc, out)
				if err != nil {
					return fmt.Errorf("lanes %s (seed %d): %w", name, ro.Seed, err)
				}
				res.Name, res.Condition, res.RateControl = name, c.desc, rc
				fmt.Fprintf(out, "  %-17s %s: delivered %.1f %% (%.2f Mbit/s), one-way delay p50 %.1f / p95 %.1f / p99 %.1f ms, cwnd %.0f B, target %.1f Mbit/s, drops %d full / %d expired\n",
					name, mode, 100*res.Delivered, res.GoodputMbps, res.OWDms.P50, res.OWDms.P95, res.OWDms.P99,
					res.CwndBytes, res.TargetMbps, res.QueueFull, res.Expired)
				rep.Mode = mode
				if r == 0 {
					names = append(names, name)
				}
				perRun[name] = append(perRun[name], res)
			}
		}
	}
	for _, name := range names {
		runs := perRun[name]
		res, err := medianResult(runs, o.Seed, "delivered", "loss", "goodput_mbps", "owd_ms")
		if err != nil {
			return err
		}
		for _, r := range runs {
			res.owdSamples = append(res.owdSamples, r.owdSamples...)
		}
		slices.Sort(res.owdSamples)
		rep.Configs = append(rep.Configs, res)
	}
	rep.Targets = lanesTargets(rep.Configs, rep.BaseOWDms)
	md := lanesMarkdown(&rep)
	if err := writeResults(o.Out, rep, md, out); err != nil || o.NoPlots {
		return err
	}
	var series []cdfSeries
	for _, c := range rep.Configs {
		if strings.HasPrefix(c.Name, "loss1-") || strings.HasPrefix(c.Name, "starlink-") {
			series = append(series, cdfSeries{Name: c.Name, Sorted: c.owdSamples})
		}
	}
	return writePlots(o.Out, cdfPlot("lanes-owd-cdf", "lanes: one-way delay, one 50-ms path, 20 Mbit/s, quic against bondd", "one-way delay (ms)", series))
}

// runLanesConfig runs one configuration with rate control rc on both ends
// of a fresh bed, sampling the path's congestion window and rate target
// every 100 ms while the traffic runs.
func runLanesConfig(ctx context.Context, o Options, sc emu.Scenario, rc string, out io.Writer) (lanesResult, string, error) {
	picker, err := policy.NewPicker(policy.SchedulerDefault)
	if err != nil {
		return lanesResult{}, "", err
	}
	bo := demo.BedOptions{Scenario: sc, Seed: o.Seed, FEC: tunnel.FECOptions{Mode: tunnel.FECOff}, Picker: picker, RateControl: rc, RetransmitOff: o.RetransmitOff}
	flow := newCBRFlow(lanesRateMbps, demo.PacketBytes, o.Duration)
	var (
		mu                  sync.Mutex
		cwndSum, targetSum  float64
		samples, targetSeen int
	)
	traffic := func(ctx context.Context, bed *demo.Bed, start time.Time) error {
		sctx, stop := context.WithCancel(ctx)
		defer stop()
		go every(sctx, 100*time.Millisecond, func() {
			if time.Now().Before(start) {
				return
			}
			p := bed.Edge.Stats().Paths[0]
			mu.Lock()
			cwndSum += float64(p.CongestionWindow)
			samples++
			if p.Rate != nil && p.Rate.Active {
				targetSum += float64(p.Rate.TargetBps)
				targetSeen++
			}
			mu.Unlock()
		})
		return flow.send(ctx, bed, start)
	}
	run, err := runOnBedAt(ctx, o, bo, time.Time{}, out, traffic, flow.deliver)
	if err != nil {
		return lanesResult{}, "", err
	}
	res := lanesResult{Sent: flow.sent, Received: flow.received}
	if res.Sent > 0 {
		res.Delivered = float64(res.Received) / float64(res.Sent)
		res.Loss = 1 - res.Delivered
	}
	res.GoodputMbps = float64(res.Received) * float64(demo.PacketBytes-28) * 8 / o.Duration.Seconds() / 1e6
	res.owdSamples = flow.sortedOWD()
	res.OWDms = summariseOWD(res.owdSamples)
	mu.Lock()
	if samples > 0 {
		res.CwndBytes = cwndSum / float64(samples)
	}
	if targetSeen > 0 {
		res.TargetMbps = targetSum / float64(targetSeen) / 1e6
	}
	mu.Unlock()
	a, b := run.edge1.Paths[0], run.edge0.Paths[0]
	res.QueueFull, res.Expired, res.Deadline = a.Drops[tunnel.DropQueueFull]-b.Drops[tunnel.DropQueueFull], a.Drops[tunnel.DropExpired]-b.Drops[tunnel.DropExpired], a.Drops[tunnel.DropDeadline]-b.Drops[tunnel.DropDeadline]
	lost := a.PacketsLost - b.PacketsLost
	if s := a.PacketsSent - b.PacketsSent; s > 0 {
		res.QUICLoss = float64(lost) / float64(s)
	}
	res.Unaccounted = int64(res.Sent) - int64(res.Received) - int64(res.QueueFull+res.Expired+res.Deadline) - int64(lost)
	return res, run.mode, nil
}

// lanesTargets checks the targets: on the 1 % and 3 % random-loss
// paths bondd delivers ≥ 95 % of the offered 20 Mbit/s on one connection,
// with a p95 one-way delay on the 1 % path ≤ 2 × the base one-way delay;
// and quic, the baseline, delivers what it can with its shortfall counted
// (send-queue drops and QUIC losses explain ≥ 95 % of the missing
// packets) and a bounded delay (p99 ≤ max_queue_delay + 2 × base + 50 ms).
func lanesTargets(cs []lanesResult, baseMs float64) []target {
	by := map[string]*lanesResult{}
	for i := range cs {
		by[cs[i].Name] = &cs[i]
	}
	var ts []target
	add := func(name, want string, r *lanesResult, got func(*lanesResult) float64, met func(float64) bool) {
		t := target{Name: name, Want: want, Known: r != nil}
		if r != nil {
			t.Got = got(r)
			t.Met = met(t.Got)
		}
		ts = append(ts, t)
	}
	delivered := func(r *lanesResult) float64 { return r.Delivered }
	atLeast95 := func(v float64) bool { return v >= 0.95 }
	add("loss1-bondd delivered share", "≥ 0.95", by["loss1-bondd"], delivered, atLeast95)
	add("loss3-bondd delivered share", "≥ 0.95", by["loss3-bondd"], delivered, atLeast95)
	add("loss1-bondd p95 one-way delay / base", "≤ 2", by["loss1-bondd"], func(r *lanesResult) float64 { return r.OWDms.P95 / baseMs }, func(v float64) bool { return v <= 2 })
	add("loss1-quic shortfall explained by counters", "≥ 0.95", by["loss1-quic"], func(r *lanesResult) float64 {
		missing := float64(r.Sent - r.Received)
		if missing == 0 {
			return 1
		}
		return min(1, (missing-float64(max(r.Unaccounted, 0)))/missing)
	}, atLeast95)
	bound := float64(tunnel.DefaultMaxQueueDelay)/1e6 + 2*baseMs + 50
	add(fmt.Sprintf("loss1-quic p99 one-way delay, ms (bound %.0f)", bound), fmt.Sprintf("≤ %.0f", bound), by["loss1-quic"],
		func(r *lanesResult) float64 { return r.OWDms.P99 }, func(v float64) bool { return v <= bound })
	return ts
}

// lanesMarkdown renders results.md for the lanes scenario.
func lanesMarkdown(r *lanesReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# One lossy link: one 50-ms path, one QUIC connection, %.0f Mbit/s offered, %s per configuration, %s\n\n", r.RateMbps,
		time.Duration(r.DurationS*float64(time.Second)), r.Mode)
	fmt.Fprintf(&b, "Command: `%s`, commit %s. Traces: %s.\n\n", r.Command, r.Commit, strings.Join(r.Traces, ", "))
	b.WriteString("| configuration | rate control | delivered % | goodput Mbit/s | loss % | OWD p50 ms | p95 ms | p99 ms | mean cwnd KB | mean target Mbit/s | QUIC loss % | drops full / expired | unaccounted |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, c := range r.Configs {
		target := "-"
		if c.TargetMbps > 0 {
			target = fmt.Sprintf("%.1f", c.TargetMbps)
		}
		fmt.Fprintf(&b, "| %s | %s | %.1f | %.2f | %.2f | %.1f | %.1f | %.1f | %.1f | %s | %.2f | %d / %d | %d |\n", c.Name, c.RateControl,
			100*c.Delivered, c.GoodputMbps, 100*c.Loss, c.OWDms.P50, c.OWDms.P95, c.OWDms.P99, c.CwndBytes/1000, target,
			100*c.QUICLoss, c.QueueFull, c.Expired, c.Unaccounted)
	}
	b.WriteString(targetsMarkdown(r.Targets))
	return b.String()
}
