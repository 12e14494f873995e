package bench

// Scenario lanes: one uplink whose losses are not congestion. quic-go sends
// DATAGRAMs under its connection's loss-based congestion control (Cubic),
// which reads every loss as congestion; this scenario measures what one
// connection delivers over such a path and what lanes (several QUIC
// connections per uplink, tunnel/lanes.go) add. One emulated path with
// 25 ms of delay each way (50 ms RTT) and a 100 Mbit/s bottleneck, so the
// loss model alone limits the connection; a 20 Mbit/s constant-rate flow of
// 1200-byte UDP packets; for each loss model, lanes: 1 against lanes: auto
// over the same seed.

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

// lanesSettings are the lane settings each condition runs with.
var lanesSettings = []struct {
	name  string
	lanes int
}{{"lanes1", 1}, {"auto", tunnel.LanesAuto}}

// lanesConfigNames lists the configurations, condition-setting.
func lanesConfigNames() []string {
	var names []string
	for _, c := range lanesConditions() {
		for _, s := range lanesSettings {
			names = append(names, c.name+"-"+s.name)
		}
	}
	return names
}

// lanesResult is one configuration in results.json.
type lanesResult struct {
	Name        string   `json:"name"`
	Condition   string   `json:"condition"`
	Lanes       string   `json:"lanes"`        // "1" or "auto"
	Delivered   float64  `json:"delivered"`    // packets received / sent
	GoodputMbps float64  `json:"goodput_mbps"` // received UDP payload bytes over the traffic time, as bondd demo
	OWDms       owdStats `json:"owd_ms"`
	CwndBytes   float64  `json:"cwnd_bytes"`  // mean congestion window, summed over lanes, sampled every 100 ms
	MeanLanes   float64  `json:"mean_lanes"`  // mean live lanes, sampled every 100 ms
	FinalLanes  int      `json:"final_lanes"` // live lanes at the end
	QUICLoss    float64  `json:"quic_loss"`   // QUIC packets declared lost / sent (RFC 9002)
	Sent        uint64   `json:"packets_sent"`
	Received    uint64   `json:"packets_received"`
	QueueFull   uint64   `json:"queue_full_drops"`
	Expired     uint64   `json:"expired_drops"`
	Deadline    uint64   `json:"deadline_drops"`
	// Unaccounted is sent − received − the send-queue drops − the QUIC
	// packets declared lost: what no counter explains (negative when
	// QUIC's lost packets carried ACKs or keepalives rather than data).
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
	leo, err := emu.LEOScenario(o.Traces, o.Seed)
	if err != nil {
		return err
	}
	rep := lanesReport{
		benchHeader: o.header([]string{"none (loss models)"}),
		RateMbps:    lanesRateMbps, BaseOWDms: float64(lanesDelay) / 1e6, PacketBytes: demo.PacketBytes,
	}
	fmt.Fprintf(out, "bondd bench lanes: one path, %s each way, %.0f Mbit/s of %d-byte UDP packets, %s per configuration, %d run(s) from seed %d\n",
		lanesDelay, lanesRateMbps, demo.PacketBytes, o.Duration, o.runs(), o.Seed)
	perRun := map[string][]lanesResult{}
	var names []string
	for r := range o.runs() {
		ro := o.forRun(r)
		if leo, err = emu.LEOScenario(ro.Traces, ro.Seed); err != nil {
			return err
		}
		for _, c := range lanesConditions() {
			for _, s := range lanesSettings {
				name := c.name + "-" + s.name
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
				res, mode, err := runLanesConfig(ctx, ro, sc, s.lanes, out)
				if err != nil {
					return fmt.Errorf("lanes %s (seed %d): %w", name, ro.Seed, err)
				}
				res.Name, res.Condition, res.Lanes = name, c.desc, strings.TrimPrefix(s.name, "lanes")
				fmt.Fprintf(out, "  %-17s %s: delivered %.1f %% (%.2f Mbit/s), one-way delay p50 %.1f / p95 %.1f / p99 %.1f ms, cwnd %.0f B, lanes %.1f (end %d), drops %d full / %d expired\n",
					name, mode, 100*res.Delivered, res.GoodputMbps, res.OWDms.P50, res.OWDms.P95, res.OWDms.P99,
					res.CwndBytes, res.MeanLanes, res.FinalLanes, res.QueueFull, res.Expired)
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
		res, err := medianResult(runs, o.Seed, "delivered", "goodput_mbps", "owd_ms", "mean_lanes")
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
	return writePlots(o.Out, cdfPlot("lanes-owd-cdf", "lanes: one-way delay, one 50-ms path, 20 Mbit/s", "one-way delay (ms)", series))
}

// runLanesConfig runs one configuration on a fresh bed, sampling the path's
// congestion window and lanes every 100 ms while the traffic runs.
func runLanesConfig(ctx context.Context, o Options, sc emu.Scenario, lanes int, out io.Writer) (lanesResult, string, error) {
	picker, err := policy.NewPicker(policy.SchedulerDefault)
	if err != nil {
		return lanesResult{}, "", err
	}
	bo := demo.BedOptions{Scenario: sc, Seed: o.Seed, FEC: tunnel.FECOptions{Mode: tunnel.FECOff}, Picker: picker, Lanes: lanes, RateControl: o.RateControl, RetransmitOff: o.RetransmitOff}
	flow := newCBRFlow(lanesRateMbps, demo.PacketBytes, o.Duration)
	var (
		mu                 sync.Mutex
		cwndSum, lanesSum  float64
		samples, lastLanes int
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
			lanesSum += float64(len(p.Lanes))
			samples++
			lastLanes = len(p.Lanes)
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
	}
	res.GoodputMbps = float64(res.Received) * float64(demo.PacketBytes-28) * 8 / o.Duration.Seconds() / 1e6
	res.owdSamples = flow.sortedOWD()
	res.OWDms = summariseOWD(res.owdSamples)
	mu.Lock()
	if samples > 0 {
		res.CwndBytes, res.MeanLanes = cwndSum/float64(samples), lanesSum/float64(samples)
	}
	res.FinalLanes = lastLanes
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

// lanesTargets checks the targets on the 1 %-loss path: lanes: auto
// delivers ≥ 95 % of the offered load with a p95 one-way delay ≤ 2 × the
// base one-way delay; lanes: 1 delivers what it can with its shortfall
// counted (send-queue drops and QUIC losses explain ≥ 95 % of the missing
// packets) and a bounded delay (p99 ≤ max_queue_delay + 2 × base + 50 ms).
func lanesTargets(cs []lanesResult, baseMs float64) []target {
	var one, auto *lanesResult
	for i := range cs {
		switch cs[i].Name {
		case "loss1-lanes1":
			one = &cs[i]
		case "loss1-auto":
			auto = &cs[i]
		}
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
	add("loss1-auto delivered share", "≥ 0.95", auto, func(r *lanesResult) float64 { return r.Delivered }, func(v float64) bool { return v >= 0.95 })
	add("loss1-auto p95 one-way delay / base", "≤ 2", auto, func(r *lanesResult) float64 { return r.OWDms.P95 / baseMs }, func(v float64) bool { return v <= 2 })
	add("loss1-lanes1 shortfall explained by counters", "≥ 0.95", one, func(r *lanesResult) float64 {
		missing := float64(r.Sent - r.Received)
		if missing == 0 {
			return 1
		}
		return min(1, (missing-float64(max(r.Unaccounted, 0)))/missing)
	}, func(v float64) bool { return v >= 0.95 })
	bound := float64(tunnel.DefaultMaxQueueDelay)/1e6 + 2*baseMs + 50
	add(fmt.Sprintf("loss1-lanes1 p99 one-way delay, ms (bound %.0f)", bound), fmt.Sprintf("≤ %.0f", bound), one,
		func(r *lanesResult) float64 { return r.OWDms.P99 }, func(v float64) bool { return v <= bound })
	return ts
}

// lanesMarkdown renders results.md for the lanes scenario.
func lanesMarkdown(r *lanesReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Lanes: one 50-ms path, %.0f Mbit/s offered, %s per configuration, %s\n\n", r.RateMbps,
		time.Duration(r.DurationS*float64(time.Second)), r.Mode)
	fmt.Fprintf(&b, "Command: `%s`, commit %s. Traces: %s.\n\n", r.Command, r.Commit, strings.Join(r.Traces, ", "))
	b.WriteString("| configuration | delivered % | goodput Mbit/s | OWD p50 ms | p95 ms | p99 ms | mean cwnd KB | lanes mean (end) | QUIC loss % | drops full / expired | unaccounted |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, c := range r.Configs {
		fmt.Fprintf(&b, "| %s | %.1f | %.2f | %.1f | %.1f | %.1f | %.1f | %.1f (%d) | %.2f | %d / %d | %d |\n", c.Name, 100*c.Delivered,
			c.GoodputMbps, c.OWDms.P50, c.OWDms.P95, c.OWDms.P99, c.CwndBytes/1000, c.MeanLanes, c.FinalLanes,
			100*c.QUICLoss, c.QueueFull, c.Expired, c.Unaccounted)
	}
	b.WriteString(targetsMarkdown(r.Targets))
	return b.String()
}
