package bench

// Scenario capacity: does the bond carry the sum of its links? Three
// cellular uplinks (S1's paths, emu.CellularScenario) and the Starlink path
// of S2 (emu.LEOPaperScenario, the trace's downlink columns in the
// edge→concentrator direction, as s2Scenario sets it), all in one bond.
//
//   - bond-udp: a constant-rate flow of 1200-byte UDP packets offered at
//     Σ capacity of the four links over the planned traffic window (what
//     the emulator will serve then: emu.CapacityMbps); delivered over the
//     Σ capacity of the window the traffic actually ran in, and one-way
//     delay.
//   - bond-tcp: one TCP connection (iperf3, in the testbed's namespaces,
//     through both TUN devices) over the bond.
//   - single-<path>-tcp: the same TCP flow over a bed of that path alone.
//   - steady-*: the same over three constant links (capacity_steady.go).
//
// The Starlink path replays its trace without wall-clock alignment (its
// outages fall at seconds 12/27/42/57 of the trace's own minute, which is
// where the trace's reconfiguration pattern is), so every link's model
// time is the bed's creation plus a known offset and the capacity of the
// traffic window is exact.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bondd/bondd/emu"
	"github.com/bondd/bondd/internal/demo"
	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/tunnel"
)

// Capacity configuration names.
const (
	capBondUDP = "bond-udp"
	capBondTCP = "bond-tcp"
)

// iperf3Port is the TCP port of the iperf3 server in the concentrator's
// namespace.
const iperf3Port = 5201

// capConfig is one capacity configuration.
type capConfig struct {
	name, desc string
	tcp        bool
	single     int     // index of the one path of a single-path bed, or −1 for the bond
	steady     bool    // on the constant links of steadyScenario, not on the traces
	offer      float64 // UDP: the offered load as a share of Σ capacity; 0 means 1
}

// capacityScenario returns the four paths: S1's three cellular paths and
// S2's Starlink path, without wall-clock alignment, their capacity scaled
// by o.LinkScale.
func capacityScenario(o Options) (emu.Scenario, error) {
	cell, err := emu.CellularScenario(o.Traces, o.Seed)
	if err != nil {
		return cell, err
	}
	s2o := o
	s2o.Scenario = S2
	leo, err := s2Scenario(s2o)
	if err != nil {
		return leo, err
	}
	sat := leo.Paths[0]
	for _, l := range []*emu.LinkConfig{&sat.Up, &sat.Down} {
		l.WallClock = false
	}
	sc := cell
	sc.Name = "capacity"
	sc.Paths = append(slices.Clone(cell.Paths), sat)
	if leo.Source != "builtin" && cell.Source != "builtin" {
		sc.Source = cell.Source + ", " + strings.Split(leo.Source, ", ")[0] // the Starlink trace; not the metered path's
	}
	if o.LinkScale != 0 {
		return sc.ScaleCapacity(o.LinkScale)
	}
	return sc, nil
}

// capConfigs lists the configurations in the order they run.
func capConfigs(sc emu.Scenario) []capConfig {
	cs := []capConfig{
		{name: capBondUDP, desc: "UDP at Σ capacity over the bond", single: -1},
		{name: capBondTCP, desc: "one TCP flow (iperf3) over the bond", tcp: true, single: -1},
	}
	for i, p := range sc.Paths {
		cs = append(cs, capConfig{name: "single-" + p.Name + "-tcp", desc: "one TCP flow over " + p.Name + " alone", tcp: true, single: i})
	}
	return append(cs, steadyCapConfigs()...)
}

// capConfigNames lists the configuration names (the scenario's paths do
// not depend on the seed or the traces).
func capConfigNames() []string {
	var names []string
	for _, c := range capConfigs(emu.Scenario{Paths: []emu.PathModel{{Name: "att"}, {Name: "tmobile"}, {Name: "verizon"}, {Name: s2Sat}}}) {
		names = append(names, c.name)
	}
	return names
}

// capResult is one capacity configuration in results.json.
type capResult struct {
	Name         string            `json:"name"`
	Description  string            `json:"description"`
	CapacityMbps float64           `json:"capacity_mbps"` // Σ of the bed's links' capacity during the traffic window (edge→concentrator)
	GoodputMbps  float64           `json:"goodput_mbps"`  // UDP: inner IP bytes received / duration; TCP: iperf3's received payload rate
	Delivered    float64           `json:"delivered"`     // goodput / capacity
	OfferedMbps  float64           `json:"offered_mbps,omitempty"`
	Bound        float64           `json:"fluid_bound,omitempty"` // UDP only: the most of the capacity that OfferedMbps could use (fluidBound)
	OWDms        *owdStats         `json:"owd_ms,omitempty"`      // UDP only
	LossRate     float64           `json:"loss_rate,omitempty"`   // UDP only: packets not received / sent
	QueueDrops   uint64            `json:"queue_drops"`           // datagrams dropped from bondd's send queues
	Drops        map[string]uint64 `json:"drops,omitempty"`       // the run's drops by side and reason (benchRun.dropsDelta)
	Resent       uint64            `json:"resent"`                // datagrams the edge retransmitted (docs/design.md, "Retransmission")
	ResendLate   uint64            `json:"resend_late"`           // losses the edge found too late to retransmit
	CodingRate   float64           `json:"coding_rate,omitempty"` // the edge's FEC: data / (data + parity) packets of its blocks; 1 without parity
	ParitySent   uint64            `json:"parity_sent"`           // parity packets the edge sent
	CPUCores     float64           `json:"cpu_cores"`             // the bench process's CPU time over the traffic time: sender, both bonds and relays
	PathsMbps    []capPath         `json:"paths"`                 // per link of the bed
	Skipped      string            `json:"skipped,omitempty"`     // why the configuration did not run
	Target       *target           `json:"target,omitempty"`      // steady-* with a target: it, evaluated on the medians (steadyTargets)
	Runs         int               `json:"runs,omitempty"`        // runs the medians are taken over
	CI95         ciMap             `json:"ci95,omitempty"`        // 95 % bootstrap intervals of the medians
	owdSamples   []float64         // sorted one-way delays, ms (for the CDF)
	trace        []pathSample
}

// capPath is one link of a capacity bed.
type capPath struct {
	Name         string  `json:"name"`
	CapacityMbps float64 `json:"capacity_mbps"`
	BaseOWDms    float64 `json:"base_owd_ms"` // see baseOWD
	Share        float64 `json:"share"`       // of the datagram bytes bondd sent
}

// capReport is results.json of the capacity scenario.
type capReport struct {
	benchHeader
	PacketBytes int         `json:"packet_bytes"`
	LinkScale   float64     `json:"link_scale"` // every link's capacity × this (--link-scale)
	CPUs        int         `json:"cpus"`       // the host's cores, for cpu_cores
	Configs     []capResult `json:"configs"`
	Targets     []target    `json:"targets"`
}

// windowCapacity returns the capacity of each path of sc (edge→concentrator)
// over model time [from, to) of a bed whose relay i was seeded seed + i,
// Mbit/s.
func windowCapacity(sc emu.Scenario, seed uint64, from, to time.Duration) ([]float64, error) {
	out := make([]float64, len(sc.Paths))
	for i, p := range sc.Paths {
		c, err := emu.CapacityMbps(p.Up, emu.RelayLinkSeed(seed+uint64(i), emu.Up), from, to)
		if err != nil {
			return nil, fmt.Errorf("path %s: %w", p.Name, err)
		}
		out[i] = c
	}
	return out, nil
}

// fluidBin is the time step of fluidBound.
const fluidBin = 10 * time.Millisecond

// fluidBound returns the share of the capacity of sc's links
// (edge→concentrator, relay i seeded seed + i) over model time [from, to)
// that a constant offered load of offeredMbps could use at best: an ideal
// scheduler feeding every link's capacity from one shared queue that holds
// up to maxWait of the offered load (bondd's send-queue limit), stepped in
// fluidBin bins. What a link could carry while the queue was empty, or
// what arrived when the queue was full, is lost to any scheduler; so
// with links whose capacity swings (S1's cellular traces drop to zero
// for seconds, the Starlink trace's second-by-second capacity spans
// 45–183 Mbit/s) the bound is below 1 even when offered = Σ capacity.
// 0..1; 0 when the links carry nothing.
func fluidBound(sc emu.Scenario, seed uint64, from, to time.Duration, offeredMbps float64, maxWait time.Duration) (float64, error) {
	n := int((to - from) / fluidBin)
	if n <= 0 {
		return 0, nil
	}
	capBits := make([]float64, n)
	var total float64
	for i, p := range sc.Paths {
		lseed := emu.RelayLinkSeed(seed+uint64(i), emu.Up)
		for k := range n {
			c, err := emu.CapacityBits(p.Up, lseed, from+time.Duration(k)*fluidBin, from+time.Duration(k+1)*fluidBin)
			if err != nil {
				return 0, fmt.Errorf("path %s: %w", p.Name, err)
			}
			capBits[k] += c
			total += c
		}
	}
	if total <= 0 {
		return 0, nil
	}
	in := offeredMbps * 1e6 * fluidBin.Seconds() // bits offered per bin
	limit := offeredMbps * 1e6 * maxWait.Seconds()
	var queue, served float64
	for _, c := range capBits {
		queue = min(queue+in, limit+in)
		s := min(queue, c)
		queue -= s
		served += s
	}
	return served / total, nil
}

// baseOWD is a link's base one-way delay without queueing, ms: Delay plus
// the median of its DelaySamples plus the median of its series' one-way
// delay.
func baseOWD(l emu.LinkConfig) float64 {
	d := float64(l.Delay) / 1e6
	med := func(v []time.Duration) float64 {
		if len(v) == 0 {
			return 0
		}
		s := slices.Clone(v)
		slices.Sort(s)
		return float64(s[len(s)/2]) / 1e6
	}
	d += med(l.DelaySamples)
	if l.Series != nil {
		d += med(l.Series.OWD)
	}
	return d
}

// runCapacity runs the selected configurations o.Runs times and writes
// the results.
func runCapacity(ctx context.Context, o Options, out io.Writer) error {
	sc, err := capacityScenario(o)
	if err != nil {
		return err
	}
	rep := capReport{benchHeader: o.header(capTraces(o, sc)), PacketBytes: demo.PacketBytes, LinkScale: 1, CPUs: runtime.NumCPU()}
	if o.LinkScale != 0 {
		rep.LinkScale = o.LinkScale
	}
	fmt.Fprintf(out, "bondd bench capacity: %s, %s per configuration, %d run(s) from seed %d\n",
		strings.Join(rep.Traces, ", "), o.Duration, o.runs(), o.Seed)
	perRun := map[string][]capResult{}
	var trace []pathSample
	for r := range o.runs() {
		ro := o.forRun(r)
		rsc, err := capacityScenario(ro)
		if err != nil {
			return err
		}
		ssc, err := steadyScenario(ro)
		if err != nil {
			return err
		}
		for _, c := range capConfigs(rsc) {
			if !o.selected(c.name) {
				continue
			}
			csc := rsc
			if c.steady {
				csc = ssc
			}
			res, mode, err := runCapConfig(ctx, ro, csc, c, out)
			if err != nil {
				return fmt.Errorf("capacity %s: %w", c.name, err)
			}
			if mode != "" {
				rep.Mode = mode
			}
			perRun[c.name] = append(perRun[c.name], res)
			trace = append(trace, res.trace...)
		}
	}
	var series []cdfSeries
	for _, c := range capConfigs(sc) {
		runs := perRun[c.name]
		if len(runs) == 0 {
			continue
		}
		res, err := medianResult(runs, o.Seed, "capacity_mbps", "goodput_mbps", "delivered", "owd_ms", "loss_rate")
		if err != nil {
			return err
		}
		var all []float64
		for _, r := range runs {
			all = append(all, r.owdSamples...)
		}
		slices.Sort(all)
		res.owdSamples = all
		if len(all) > 0 {
			series = append(series, cdfSeries{Name: c.name, Sorted: all})
		}
		rep.Configs = append(rep.Configs, res)
	}
	if rep.Mode == "" {
		rep.Mode = "inprocess"
	}
	rep.Targets = capAllTargets(rep.Configs)
	md := capMarkdown(&rep)
	if err := writeResults(o.Out, rep, md, out); err != nil {
		return err
	}
	if err := writePathTrace(o.Out, trace); err != nil || o.NoPlots {
		return err
	}
	return writePlots(o.Out, cdfPlot("capacity-owd-cdf", "capacity: one-way delay of UDP through the bond (all runs)", "one-way delay (ms)", series))
}

// runCapConfig runs one configuration on a fresh bed. A TCP configuration
// without a netns bed or without iperf3 is skipped (Skipped says why).
func runCapConfig(ctx context.Context, o Options, sc emu.Scenario, c capConfig, out io.Writer) (capResult, string, error) {
	res := capResult{Name: c.name, Description: c.desc}
	bo := demo.BedOptions{Scenario: sc, Seed: o.Seed, RateControl: o.RateControl, RetransmitOff: o.RetransmitOff}
	var err error
	if bo.Picker, err = policy.NewPicker(policy.SchedulerDefault); err != nil {
		return res, "", err
	}
	if c.single >= 0 {
		bo.Scenario.Paths = []emu.PathModel{sc.Paths[c.single]}
		bo.Seed = o.Seed + uint64(c.single) // the relay seed the path has in the bond
	}
	if c.tcp {
		if o.Inprocess || !isRoot() {
			res.Skipped = "a TCP flow needs the netns testbed (root)"
		} else if _, err := exec.LookPath("iperf3"); err != nil {
			res.Skipped = "iperf3 is not installed"
		}
		if res.Skipped != "" {
			fmt.Fprintf(out, "  %-22s skipped: %s\n", c.name, res.Skipped)
			return res, "", nil
		}
	}
	offered := 0.0
	if !c.tcp {
		caps, err := windowCapacity(bo.Scenario, bo.Seed, o.Settle, o.Settle+o.Duration)
		if err != nil {
			return res, "", err
		}
		for _, v := range caps {
			offered += v
		}
		if c.offer > 0 {
			offered *= c.offer
		}
	}
	var (
		flow    *cbrFlow
		tcp     tcpRun
		traffic func(context.Context, *demo.Bed, time.Time) error
		deliver = func([]byte, time.Time) {}
	)
	if c.tcp {
		traffic = tcp.run(o.Duration)
	} else {
		flow = newCBRFlow(offered, demo.PacketBytes, o.Duration)
		traffic, deliver = flow.send, flow.deliver
	}
	traced := func(ctx context.Context, bed *demo.Bed, start time.Time) error {
		tr := tracePaths(ctx, bed, bo.Scenario, bo.Seed, start)
		err := traffic(ctx, bed, start)
		res.trace = tr.finish()
		for i := range res.trace {
			res.trace[i].Seed, res.trace[i].Config = o.Seed, c.name
		}
		return err
	}
	run, err := runOnBedAt(ctx, o, bo, time.Time{}, out, traced, deliver)
	if err != nil {
		return res, "", err
	}
	from := run.start.Sub(run.created)
	caps, err := windowCapacity(bo.Scenario, bo.Seed, from, from+o.Duration)
	if err != nil {
		return res, "", err
	}
	shares := run.paths()
	for i, p := range bo.Scenario.Paths {
		cp := capPath{Name: p.Name, CapacityMbps: caps[i], BaseOWDms: baseOWD(p.Up)}
		if i < len(shares) {
			cp.Share = shares[i].Share
		}
		res.PathsMbps = append(res.PathsMbps, cp)
		res.CapacityMbps += caps[i]
	}
	res.QueueDrops = run.queueDrops
	res.Drops, res.Resent, res.ResendLate = run.dropsDelta(), run.resent, run.resendLate
	res.CPUCores = run.cpuCores
	res.CodingRate, res.ParitySent, _ = run.fecDelta()
	if !c.tcp {
		if res.Bound, err = fluidBound(bo.Scenario, bo.Seed, from, from+o.Duration, offered, tunnel.DefaultMaxQueueDelay); err != nil {
			return res, "", err
		}
	}
	if c.tcp {
		res.GoodputMbps = tcp.mbps
	} else {
		res.OfferedMbps = offered
		res.GoodputMbps = float64(flow.received) * demo.PacketBytes * 8 / o.Duration.Seconds() / 1e6
		if flow.sent > 0 {
			res.LossRate = 1 - float64(flow.received)/float64(flow.sent)
		}
		res.owdSamples = flow.sortedOWD()
		s := summariseOWD(res.owdSamples)
		res.OWDms = &s
	}
	if res.CapacityMbps > 0 {
		res.Delivered = res.GoodputMbps / res.CapacityMbps
	}
	line := fmt.Sprintf("  %-22s %s: capacity %.2f Mbit/s, goodput %.2f Mbit/s (%.1f %%), CPU %.2f cores", c.name, run.mode, res.CapacityMbps, res.GoodputMbps, 100*res.Delivered, res.CPUCores)
	if res.Bound > 0 {
		line += fmt.Sprintf(", fluid bound %.1f %%", 100*res.Bound)
	}
	if res.OWDms != nil {
		line += fmt.Sprintf(", one-way delay p50 %.1f / p95 %.1f / p99 %.1f ms, loss %.2f %%", res.OWDms.P50, res.OWDms.P95, res.OWDms.P99, 100*res.LossRate)
	}
	line += fmt.Sprintf(", coding rate %.3f", res.CodingRate)
	fmt.Fprintln(out, line)
	return res, run.mode, nil
}

// tcpRun runs one iperf3 TCP test through a netns bed: the server in the
// concentrator's namespace on demo.ConcAddr, the client in the edge's,
// from demo.EdgeAddr. mbps is the receiver's goodput.
type tcpRun struct{ mbps float64 }

// run returns the traffic function of runOnBedAt.
func (t *tcpRun) run(d time.Duration) func(context.Context, *demo.Bed, time.Time) error {
	return func(ctx context.Context, bed *demo.Bed, start time.Time) error {
		if bed.EdgeNS == "" || bed.ConcNS == "" {
			return errors.New("a TCP flow needs the netns testbed")
		}
		sctx, scancel := context.WithCancel(ctx)
		defer scancel()
		srv := exec.CommandContext(sctx, "ip", "netns", "exec", bed.ConcNS, "iperf3", "-s", "-1", "--forceflush",
			"-B", demo.ConcAddr.String(), "-p", strconv.Itoa(iperf3Port))
		stdout, err := srv.StdoutPipe()
		if err != nil {
			return err
		}
		if err := srv.Start(); err != nil {
			return fmt.Errorf("iperf3 server: %w", err)
		}
		defer func() { scancel(); srv.Wait() }() // the server has exited after its one test, or is killed
		// Wait for the server to listen: it says so on its first line.
		sc := bufio.NewScanner(stdout)
		listening := false
		for sc.Scan() {
			if strings.Contains(sc.Text(), "Server listening") {
				listening = true
				break
			}
		}
		if !listening {
			return errors.New("iperf3 server did not start listening")
		}
		go io.Copy(io.Discard, stdout)
		secs := max(1, int(math.Round(d.Seconds())))
		cli := exec.CommandContext(ctx, "ip", "netns", "exec", bed.EdgeNS, "iperf3", "-c", demo.ConcAddr.String(),
			"-B", demo.EdgeAddr.String(), "-p", strconv.Itoa(iperf3Port), "-t", strconv.Itoa(secs), "-J", "--connect-timeout", "5000")
		if err := sleepUntil(ctx, start, nil); err != nil {
			return err
		}
		b, err := cli.Output()
		if err != nil {
			return fmt.Errorf("iperf3 client: %w: %s", err, clipBytes(b))
		}
		mbps, err := iperf3Goodput(b)
		if err != nil {
			return err
		}
		t.mbps = mbps
		return nil
	}
}

// iperf3Goodput reads the receiver's goodput, Mbit/s, from iperf3's -J
// output (end.sum_received.bits_per_second). Errors: not JSON, an error
// reported by iperf3, no receiver summary.
func iperf3Goodput(b []byte) (float64, error) {
	var r struct {
		Error string `json:"error"`
		End   struct {
			SumReceived *struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return 0, fmt.Errorf("iperf3 output: %w", err)
	}
	if r.Error != "" {
		return 0, fmt.Errorf("iperf3: %s", r.Error)
	}
	if r.End.SumReceived == nil || r.End.SumReceived.BitsPerSecond < 0 || math.IsNaN(r.End.SumReceived.BitsPerSecond) {
		return 0, errors.New("iperf3 output has no receiver summary (end.sum_received)")
	}
	return r.End.SumReceived.BitsPerSecond / 1e6, nil
}

// clipBytes shortens command output for an error message.
func clipBytes(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// capTargets checks the capacity targets within this run: bond-udp
// delivers ≥ 0.85 × the fluid bound (the most of Σ capacity its constant
// offered rate could use), with p95 one-way delay ≤ the slowest path's
// base one-way delay + 100 ms, and bond-tcp ≥ 1.15 × the best single path
// (Σ / best is about 1.35 on these traces).
func capTargets(cs []capResult) []target {
	const udpShare, tcpGain = 0.85, 1.15
	by := map[string]*capResult{}
	var best *capResult
	for i := range cs {
		c := &cs[i]
		by[c.Name] = c
		if strings.HasPrefix(c.Name, "single-") && c.Skipped == "" && (best == nil || c.GoodputMbps > best.GoodputMbps) {
			best = c
		}
	}
	var ts []target
	udp := by[capBondUDP]
	udpName := "bond-udp delivered / fluid bound"
	if udp != nil && udp.Skipped == "" && udp.OWDms != nil && udp.Bound > 0 {
		r := udp.Delivered / udp.Bound
		ts = append(ts, target{Name: fmt.Sprintf("%s (%.3f of Σ / %.3f)", udpName, udp.Delivered, udp.Bound), Want: fmt.Sprintf("≥ %.2f", udpShare), Known: true, Got: r, Met: r >= udpShare})
		slowest := 0.0
		for _, p := range udp.PathsMbps {
			slowest = max(slowest, p.BaseOWDms)
		}
		ts = append(ts, target{Name: fmt.Sprintf("bond-udp p95 one-way delay, ms (slowest base %.1f + 100)", slowest),
			Want: fmt.Sprintf("≤ %.1f", slowest+100), Known: true, Got: udp.OWDms.P95, Met: udp.OWDms.P95 <= slowest+100})
	} else {
		ts = append(ts, target{Name: udpName, Want: fmt.Sprintf("≥ %.2f", udpShare)},
			target{Name: "bond-udp p95 one-way delay, ms", Want: "≤ slowest base + 100"})
	}
	tcp := by[capBondTCP]
	if tcp != nil && tcp.Skipped == "" && best != nil && best.GoodputMbps > 0 {
		r := tcp.GoodputMbps / best.GoodputMbps
		ts = append(ts, target{Name: "bond-tcp / best single path (" + best.Name + ")", Want: fmt.Sprintf("≥ %.2f", tcpGain), Known: true, Got: r, Met: r >= tcpGain})
	} else {
		ts = append(ts, target{Name: "bond-tcp / best single path", Want: fmt.Sprintf("≥ %.2f", tcpGain)})
	}
	return ts
}

// cpuBoundShare is the share of the host's cores busy above which a
// configuration is reported as limited by the host's CPU.
const cpuBoundShare = 0.9

// capMarkdown renders results.md of the capacity scenario.
func capMarkdown(r *capReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Capacity: %d configurations, %s each, %s\n\n", len(r.Configs), time.Duration(r.DurationS*float64(time.Second)), r.Mode)
	fmt.Fprintf(&b, "Command: `%s`, commit %s. Traces: %s.", r.Command, r.Commit, strings.Join(r.Traces, ", "))
	if r.LinkScale != 1 {
		fmt.Fprintf(&b, " Every link's capacity × %g.", r.LinkScale)
	}
	b.WriteString("\n")
	var busy []string
	traces := false
	for _, c := range r.Configs {
		traces = traces || !isSteady(c.Name)
		if c.Skipped == "" && r.CPUs > 0 && c.CPUCores >= cpuBoundShare*float64(r.CPUs) {
			busy = append(busy, c.Name)
		}
	}
	if traces {
		b.WriteString("\n| configuration | runs | Σ capacity Mbit/s | goodput Mbit/s | delivered | fluid bound | OWD p50 ms | p95 ms | p99 ms | loss % | coding rate | CPU cores | per-path capacity Mbit/s |\n")
		b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
	}
	for _, c := range r.Configs {
		if isSteady(c.Name) {
			continue
		}
		if c.Skipped != "" {
			fmt.Fprintf(&b, "| %s | — | — | — | — | — | — | — | — | — | — | — | skipped: %s |\n", c.Name, c.Skipped)
			continue
		}
		owd, loss := "— | — | —", "—"
		if c.OWDms != nil {
			owd = fmt.Sprintf("%.1f | %.1f | %.1f", c.OWDms.P50, c.OWDms.P95, c.OWDms.P99)
			loss = fmt.Sprintf("%.2f", 100*c.LossRate)
		}
		var ps []string
		for _, p := range c.PathsMbps {
			ps = append(ps, fmt.Sprintf("%s %.2f", p.Name, p.CapacityMbps))
		}
		bound := "—"
		if c.Bound > 0 {
			bound = fmt.Sprintf("%.3f", c.Bound)
		}
		fmt.Fprintf(&b, "| %s | %d | %.2f%s | %.2f%s | %.3f | %s | %s | %s | %.3f | %.2f | %s |\n", c.Name, max(1, c.Runs), c.CapacityMbps, c.CI95.text("capacity_mbps"),
			c.GoodputMbps, c.CI95.text("goodput_mbps"), c.Delivered, bound, owd, loss, c.CodingRate, c.CPUCores, strings.Join(ps, ", "))
	}
	if traces {
		b.WriteString(capNote)
	}
	b.WriteString(steadyMarkdown(r.Configs))
	if len(busy) > 0 {
		fmt.Fprintf(&b, "\n**The host's CPU limited %s** (≥ %.0f %% of its %d cores busy): the figures measure the host as much as the bond; "+
			"--link-scale runs the same links at a fraction of their capacity.\n", strings.Join(busy, ", "), 100*cpuBoundShare, r.CPUs)
	}
	b.WriteString(targetsMarkdown(r.Targets))
	return b.String()
}

// capNote explains the columns of the traces' table of capMarkdown.
const capNote = "\nCapacity is what the emulator's bottlenecks could serve edge→concentrator during the traffic window (emu.CapacityBits: " +
	"trace capacity less outages, IP bytes). UDP goodput counts inner IP packets (1200 bytes) received; bondd's and QUIC's headers " +
	"(about 5 % of a 1200-byte packet) come out of the same capacity. TCP goodput is iperf3's received payload rate. " +
	"CPU cores is the bench process's CPU time over the traffic time: the sender, both bonds and the relays run in it (iperf3 does not). " +
	"The fluid bound is the most of the capacity that the constant offered rate could use: an ideal scheduler feeding every link from one " +
	"queue of up to 200 ms of the offered load, in 10-ms steps (what a link could carry while that queue was empty is lost to any scheduler). " +
	"The coding rate is the edge's FEC: data packets over data and parity packets of its blocks (1: no parity); parity comes out of the same capacity.\n"
