package bench

// Scenario S1, vehicular: paper 1 ("scheduler-agnostic adaptive FEC for
// multipath QUIC datagrams"), §5. Three cellular uplinks replay Mahimahi
// driving traces with 5Gophers base RTTs (emu.CellularScenario); the load is
// a 4 Mbit/s constant-rate flow of 1200-byte UDP packets with sequence
// numbers and send timestamps, like the paper's iperf-style flow.

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/bondd/bondd/emu"
	"github.com/bondd/bondd/fec"
	"github.com/bondd/bondd/internal/demo"
	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/rules"
	"github.com/bondd/bondd/tunnel"
)

// S1 load and FEC parameters.
const (
	// s1RateMbps is the constant rate of the flow, Mbit/s (paper 1 §5.1).
	s1RateMbps = 4.0
	// s1K and s1Alpha are the adaptive FEC parameters of paper 1 §5:
	// k = 20 data packets per block, safety factor α = 2.
	s1K     = 20
	s1Alpha = 2.0
)

// S1 configuration names.
const (
	s1NoFECQUIC = "no-fec-quic-cc" // rate control quic (quic-go's congestion control), no FEC: the paper's MPQUIC baseline
	s1NoFEC     = "no-fec"
	s1Adaptive  = "adaptive-fec"
	s1Fixed     = "fixed-fec"
	s1Dup       = "dup2"
	// Adaptive FEC with a block placement (policy/placement.go), for delay
	// masking (s1mask.go).
	s1AdaptiveRate     = "adaptive-fec-rate"
	s1AdaptiveEarliest = "adaptive-fec-earliest"
	s1AdaptiveBoth     = "adaptive-fec-rate-earliest"
)

// s1ConfigNames lists the S1 configurations in the order they run.
func s1ConfigNames() []string {
	var names []string
	for _, c := range s1Configs() {
		names = append(names, c.name)
	}
	return names
}

// s1Paper are paper 1's figures (§5, vehicular field test, no FEC →
// adaptive FEC), for the table beside ours.
var s1Paper = struct {
	MeanNoFEC, MeanFEC, P95NoFEC, P95FEC, LossNoFEC, LossFEC, CodingRate float64
}{103.0, 70.8, 281.2, 142.3, 0.017, 0.008, 0.94}

// s1Result is one S1 configuration in results.json.
type s1Result struct {
	Name        string      `json:"name"`
	Description string      `json:"description"`
	OWDms       owdStats    `json:"owd_ms"`      // one-way delay of received packets, ms
	LossRate    float64     `json:"loss_rate"`   // flow packets not received / sent
	CodingRate  float64     `json:"coding_rate"` // see s1CodingRate
	WireBytes   uint64      `json:"wire_bytes"`  // datagram bytes handed to QUIC on all paths
	Sent        uint64      `json:"packets_sent"`
	Received    uint64      `json:"packets_received"`
	ParitySent  uint64      `json:"parity_sent"`
	Recovered   uint64      `json:"recovered"`   // data packets the concentrator reconstructed
	QueueDrops  uint64      `json:"queue_drops"` // datagrams dropped from send queues (full, older than 200 ms, or past a rule deadline)
	FixedK      int         `json:"fixed_k,omitempty"`
	FixedRatio  float64     `json:"fixed_ratio,omitempty"`
	RateControl string      `json:"rate_control,omitempty"` // demo.BedOptions.RateControl of the configuration
	Placement   string      `json:"placement,omitempty"`    // tunnel.FECOptions.Placement
	Alpha       float64     `json:"alpha,omitempty"`        // adaptive FEC's α (sweep)
	K           int         `json:"k,omitempty"`            // adaptive FEC's k (sweep)
	Masking     s1Masking   `json:"masking"`                // delay masking at the concentrator (s1mask.go)
	Paths       []benchPath `json:"paths"`
	Runs        int         `json:"runs"` // runs the numbers are medians over
	CI95        ciMap       `json:"ci95"` // 95 % bootstrap intervals of the medians
	owdSamples  []float64   // sorted one-way delays, ms (for the CDF; all runs)
}

// owdStats summarises one-way delay, ms.
type owdStats struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
}

// s1Report is results.json for S1.
type s1Report struct {
	benchHeader
	RateMbps     float64    `json:"rate_mbps"`
	PacketBytes  int        `json:"packet_bytes"`
	Configs      []s1Result `json:"configs"`
	Targets      []target   `json:"targets"`
	PaperFigures any        `json:"paper_figures"`
}

// target is one acceptance target of the evaluation, checked within one
// run.
type target struct {
	Name  string  `json:"name"`
	Want  string  `json:"want"`
	Got   float64 `json:"got"`
	Met   bool    `json:"met"`
	Known bool    `json:"known"` // false: a configuration it needs did not run
}

// s1Config describes one configuration: how to build its bed.
type s1Config struct {
	name, desc  string
	fec         tunnel.FECOptions
	rules       string // rule file text, or ""
	rateControl string // demo.BedOptions.RateControl; "": Options.RateControl
}

// s1DupRules duplicates every packet on the two paths with the earliest
// expected delivery (the duplicate action of docs/rules.md).
const s1DupRules = `rules:
  - id: dup2
    priority: 100
    actions:
      duplicate: 2
`

// staticRules is a RuleSource with a fixed rule set.
type staticRules struct{ set *rules.Set }

// Current implements tunnel.RuleSource.
func (s staticRules) Current() *rules.Set { return s.set }

// compileRules compiles rule-file text into a RuleSource.
func compileRules(name, text string) (tunnel.RuleSource, error) {
	set, err := rules.CompileBytes(name, []byte(text), rules.Options{})
	if err != nil {
		return nil, err
	}
	return staticRules{set}, nil
}

// matchedFixed returns the fixed-FEC options whose coding rate matches
// codingRate on a flow of rateMbps in packetBytes packets: one parity
// packet per block of k = round(c/(1−c)) data packets (k/(k+1) = c), with a
// block budget long enough for k packets of the flow to fill the block
// (fec's per-block ⌈ratio·k⌉ rounding makes any smaller ratio on the
// adaptive blocks' size a higher overhead, not the same one). ok is false
// when codingRate leaves no parity to match (≥ 1).
func matchedFixed(codingRate, rateMbps float64, packetBytes int) (o tunnel.FECOptions, ok bool) {
	if codingRate >= 1 || codingRate <= 0 {
		return o, false
	}
	k := int(math.Round(codingRate / (1 - codingRate)))
	k = max(1, min(k, fec.DefaultMaxK))
	interval := time.Duration(float64(packetBytes*8) / (rateMbps * 1e6) * float64(time.Second))
	budget := max(fec.DefaultBudget, time.Duration(float64(k)*1.1*float64(interval)))
	return tunnel.FECOptions{Mode: tunnel.FECFixed, K: k, Ratio: 1 / float64(k), Budget: budget}, true
}

// s1Configs lists the S1 configurations in the order they run (fixed-fec
// after adaptive-fec, whose coding rate it matches).
func s1Configs() []s1Config {
	return []s1Config{
		{name: s1NoFECQUIC, desc: "no FEC; rate control quic (quic-go's congestion control): the paper's MPQUIC baseline",
			fec: tunnel.FECOptions{Mode: tunnel.FECOff}, rateControl: demo.RateControlQUIC},
		{name: s1NoFEC, desc: "no FEC; lowest-RTT scheduler with window room (bondd default)", fec: tunnel.FECOptions{Mode: tunnel.FECOff}},
		{name: s1Adaptive, desc: fmt.Sprintf("adaptive FEC, k = %d, α = %g (paper 1)", s1K, s1Alpha), fec: tunnel.FECOptions{Mode: tunnel.FECAdaptive, K: s1K, Alpha: s1Alpha}},
		{name: s1Fixed, desc: "fixed FEC at adaptive-fec's coding rate (paper 1's future work)"},
		{name: s1Dup, desc: "no FEC; every packet on two paths (rule duplicate: 2)", fec: tunnel.FECOptions{Mode: tunnel.FECOff}, rules: s1DupRules},
		{name: s1AdaptiveRate, desc: "adaptive FEC; data and parity spread in proportion to path rate (fec.placement rate)",
			fec: tunnel.FECOptions{Mode: tunnel.FECAdaptive, K: s1K, Alpha: s1Alpha, Placement: policy.PlacementRate}},
		{name: s1AdaptiveEarliest, desc: "adaptive FEC; parity on the earliest path with the fewest of the block's packets (fec.placement earliest)",
			fec: tunnel.FECOptions{Mode: tunnel.FECAdaptive, K: s1K, Alpha: s1Alpha, Placement: policy.PlacementEarliest}},
		{name: s1AdaptiveBoth, desc: "adaptive FEC; fec.placement rate+earliest",
			fec: tunnel.FECOptions{Mode: tunnel.FECAdaptive, K: s1K, Alpha: s1Alpha, Placement: policy.PlacementRateEarliest}},
	}
}

// runS1 runs the selected S1 configurations o.runs() times (runs outer,
// so that every configuration of a run sees the same seed) and writes the
// medians.
func runS1(ctx context.Context, o Options, out io.Writer) error {
	build, configs := emu.CellularScenario, s1Configs()
	if o.Scenario == S1Vary {
		build, configs = varyScenario, nil
		for _, c := range s1Configs() {
			if slices.Contains(s1VaryNames(), c.name) {
				configs = append(configs, c)
			}
		}
	}
	sc, err := build(o.Traces, o.Seed)
	if err != nil {
		return err
	}
	rep := s1Report{
		benchHeader: o.header(scenarioTraces(sc, o.Traces)),
		RateMbps:    s1RateMbps, PacketBytes: demo.PacketBytes,
		PaperFigures: s1Paper,
	}
	fmt.Fprintf(out, "bondd bench %s: %d paths (%s), %.0f Mbit/s of %d-byte UDP packets, %s per configuration, %d run(s) from seed %d\n",
		o.Scenario, len(sc.Paths), sc.Source, s1RateMbps, demo.PacketBytes, o.Duration, o.runs(), o.Seed)
	perRun := map[string][]s1Result{}
	for r := range o.runs() {
		ro := o.forRun(r)
		rsc, err := build(ro.Traces, ro.Seed)
		if err != nil {
			return err
		}
		var adaptiveRate float64
		for _, c := range configs {
			if !o.selected(c.name) {
				continue
			}
			if c.name == s1Fixed {
				f, ok := matchedFixed(adaptiveRate, s1RateMbps, demo.PacketBytes)
				if !ok {
					fmt.Fprintf(out, "  %s: skipped: needs adaptive-fec in the same run, with some parity sent (coding rate %.3f)\n", c.name, adaptiveRate)
					continue
				}
				c.fec = f
				c.desc += fmt.Sprintf(": one parity per %d data packets, block budget %s", f.K, f.Budget.Round(time.Millisecond))
			}
			res, mode, err := runS1Config(ctx, ro, rsc, c, out)
			if err != nil {
				return fmt.Errorf("s1 %s (seed %d): %w", c.name, ro.Seed, err)
			}
			rep.Mode = mode
			if c.name == s1Adaptive {
				adaptiveRate = res.CodingRate
			}
			if c.fec.Mode == tunnel.FECFixed {
				res.FixedK, res.FixedRatio = c.fec.K, c.fec.Ratio
			}
			perRun[c.name] = append(perRun[c.name], res)
		}
	}
	var series []cdfSeries
	for _, c := range configs {
		runs := perRun[c.name]
		if len(runs) == 0 {
			continue
		}
		res, err := medianResult(runs, o.Seed, "owd_ms", "loss_rate", "coding_rate", "masking.masked", "masking.p95_unmasked_max_ms")
		if err != nil {
			return err
		}
		for _, r := range runs {
			res.owdSamples = append(res.owdSamples, r.owdSamples...)
		}
		slices.Sort(res.owdSamples)
		series = append(series, cdfSeries{Name: c.name, Sorted: res.owdSamples})
		rep.Configs = append(rep.Configs, res)
	}
	rep.Targets = s1Targets(rep.Configs, perRun)
	if o.Scenario == S1Vary { // only the matched-overhead comparison applies
		rep.Targets = slices.DeleteFunc(rep.Targets, func(t target) bool { return !strings.HasPrefix(t.Name, "loss, adaptive − fixed") })
	}
	md := s1Markdown(&rep)
	if err := writeResults(o.Out, rep, md, out); err != nil || o.NoPlots {
		return err
	}
	return writePlots(o.Out, cdfPlot(o.Scenario+"-owd-cdf", o.Scenario+": one-way delay (3 cellular paths, 4 Mbit/s; all runs)", "one-way delay (ms)", series))
}

// runS1Config runs one configuration on a fresh bed.
func runS1Config(ctx context.Context, o Options, sc emu.Scenario, c s1Config, out io.Writer) (s1Result, string, error) {
	picker, err := policy.NewPicker(policy.SchedulerDefault)
	if err != nil {
		return s1Result{}, "", err
	}
	rc := c.rateControl
	if rc == "" {
		rc = o.RateControl
	}
	bo := demo.BedOptions{Scenario: sc, Seed: o.Seed, FEC: c.fec, Picker: picker, RateControl: rc, RetransmitOff: o.RetransmitOff}
	if c.rules != "" {
		if bo.Rules, err = compileRules(c.name+".yaml", c.rules); err != nil {
			return s1Result{}, "", err
		}
	}
	flow := newCBRFlow(s1RateMbps, demo.PacketBytes, o.Duration)
	run, err := runOnBedAt(ctx, o, bo, time.Time{}, out, flow.send, flow.deliver)
	if err != nil {
		return s1Result{}, "", err
	}
	res := s1Result{Name: c.name, Description: c.desc, WireBytes: run.wireBytes, QueueDrops: run.queueDrops, Paths: run.paths(), RateControl: rc,
		Placement: c.fec.Placement}
	res.Sent, res.Received = flow.sent, flow.received
	if res.Sent > 0 {
		res.LossRate = 1 - float64(res.Received)/float64(res.Sent)
	}
	res.owdSamples = flow.sortedOWD()
	res.OWDms = summariseOWD(res.owdSamples)
	res.CodingRate, res.ParitySent, res.Recovered = s1CodingRate(&run, c)
	res.Masking = s1MaskingOf(&run, res.owdSamples, res.Received)
	fmt.Fprintf(out, "  %-13s %s: loss %.2f %%, one-way delay mean %.1f / p95 %.1f / p99 %.1f ms, coding rate %.3f, %.1f MB on the wire\n",
		c.name, run.mode, 100*res.LossRate, res.OWDms.Mean, res.OWDms.P95, res.OWDms.P99, res.CodingRate, float64(res.WireBytes)/1e6)
	return res, run.mode, nil
}

// s1CodingRate is the share of useful datagrams among those sent: with FEC
// k/(k+r) over the blocks sent during the run (paper 1's coding rate);
// with duplication, the inner packets the edge sent over the datagrams the
// paths sent (about 1/2); otherwise 1.
func s1CodingRate(run *benchRun, c s1Config) (rate float64, parity, recovered uint64) {
	if c.fec.Mode != tunnel.FECOff {
		return run.fecDelta()
	}
	rate = 1
	if c.rules != "" && run.wirePkts > 0 {
		rate = min(1, float64(run.edge1.TxPackets-run.edge0.TxPackets)/float64(run.wirePkts))
	}
	return rate, 0, 0
}

// cbrFlow is the S1 load: n packets at a constant interval, each payload
// starting with its sequence number and send time (Unix ns), both
// big-endian uint64. Sender and receiver share one clock (one process), so
// the receiver measures one-way delay. send runs on one goroutine and
// deliver on another; read the results after both have returned.
type cbrFlow struct {
	interval time.Duration
	n        uint64 // packets to send
	payload  []byte // the sender's buffer, payloadLen bytes

	sent uint64 // sender's

	seen     []bool    // receiver's, by sequence number
	owdMs    []float64 // receiver's, one-way delay of each first copy, ms
	received uint64
}

// newCBRFlow returns a flow of rateMbps in packetBytes-byte IPv4/UDP
// packets (payload packetBytes − 28 bytes) for duration. Its receive state
// is allocated up front, so neither side allocates per packet.
func newCBRFlow(rateMbps float64, packetBytes int, duration time.Duration) *cbrFlow {
	interval := time.Duration(float64(packetBytes*8) / (rateMbps * 1e6) * float64(time.Second))
	n := uint64(duration / interval)
	return &cbrFlow{interval: interval, n: n, payload: make([]byte, packetBytes-28),
		seen: make([]bool, n), owdMs: make([]float64, 0, n)}
}

// send paces the flow from start against the clock (no drift).
func (f *cbrFlow) send(ctx context.Context, bed *demo.Bed, start time.Time) error {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	timer.Stop()
	for seq := range f.n {
		if err := sleepUntil(ctx, start.Add(time.Duration(seq)*f.interval), timer); err != nil {
			return err
		}
		binary.BigEndian.PutUint64(f.payload[0:], seq)
		binary.BigEndian.PutUint64(f.payload[8:], uint64(time.Now().UnixNano()))
		if bed.Send(f.payload) == nil {
			f.sent++
		}
	}
	return nil
}

// deliver records one received payload.
func (f *cbrFlow) deliver(p []byte, now time.Time) {
	if len(p) < 16 {
		return
	}
	seq := binary.BigEndian.Uint64(p)
	if seq >= f.n || f.seen[seq] {
		return
	}
	f.seen[seq] = true
	f.received++
	f.owdMs = append(f.owdMs, float64(now.UnixNano()-int64(binary.BigEndian.Uint64(p[8:])))/1e6)
}

// sortedOWD returns the one-way delays, ms, sorted (in place).
func (f *cbrFlow) sortedOWD() []float64 {
	slices.Sort(f.owdMs)
	return f.owdMs
}

// quantile returns the q-quantile (nearest rank) of sorted, or 0.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(len(sorted)-1, i))]
}

// mean returns the arithmetic mean of v, or 0.
func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// summariseOWD summarises sorted one-way delays, ms.
func summariseOWD(sorted []float64) owdStats {
	return owdStats{Mean: mean(sorted), P50: quantile(sorted, 0.50), P95: quantile(sorted, 0.95), P99: quantile(sorted, 0.99)}
}

// s1Targets checks issue 16's S1 targets on the medians cs: against
// no-fec-quic-cc (rate control quic, the paper's baseline) adaptive FEC
// cuts loss by ≥ 75 % and p95 one-way delay by ≥ 55 %, at a coding rate
// ≥ 0.92 (paper 1: 53 %, 49 %, 0.94); adaptive FEC loses no more than
// no-fec on any run (perRun, by configuration, runs in seed order); and it
// loses less than fixed FEC at the same coding rate.
func s1Targets(cs []s1Result, perRun map[string][]s1Result) []target {
	by := map[string]*s1Result{}
	for i := range cs {
		by[cs[i].Name] = &cs[i]
	}
	base, ad, fx := by[s1NoFECQUIC], by[s1Adaptive], by[s1Fixed]
	var ts []target
	add := func(name, want string, known bool, got float64, met bool) {
		ts = append(ts, target{Name: name, Want: want, Known: known, Got: got, Met: known && met})
	}
	cut := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return 1 - a/b
	}
	known := base != nil && ad != nil
	var lc, dc float64
	if known {
		lc, dc = cut(ad.LossRate, base.LossRate), cut(ad.OWDms.P95, base.OWDms.P95)
	}
	add("loss cut, adaptive-fec vs no-fec-quic-cc", "≥ 0.75", known, lc, lc >= 0.75)
	add("p95 one-way delay cut, adaptive-fec vs no-fec-quic-cc", "≥ 0.55", known, dc, dc >= 0.55)
	var cr float64
	if ad != nil {
		cr = ad.CodingRate
	}
	add("adaptive coding rate", "≥ 0.92", ad != nil, cr, cr >= 0.92)
	nf, af := perRun[s1NoFEC], perRun[s1Adaptive]
	worse := 0
	for i := range min(len(nf), len(af)) {
		if af[i].LossRate > nf[i].LossRate {
			worse++
		}
	}
	add("runs where adaptive-fec loses more than no-fec", "0", len(nf) > 0 && len(af) > 0, float64(worse), worse == 0)
	var d float64
	if ad != nil && fx != nil {
		d = ad.LossRate - fx.LossRate
	}
	add("loss, adaptive − fixed at the same coding rate", "< 0", ad != nil && fx != nil, d, d < 0)
	return ts
}

// s1Markdown renders results.md for S1.
func s1Markdown(r *s1Report) string {
	var b strings.Builder
	title := "S1, vehicular"
	if r.Scenario == S1Vary {
		title = "s1-vary, S1 with burst loss on one path and a handover outage on another"
	}
	fmt.Fprintf(&b, "# %s: %d configurations, %s each, %d run(s), %s\n\n", title, len(r.Configs), time.Duration(r.DurationS*float64(time.Second)), r.Runs, r.Mode)
	fmt.Fprintf(&b, "Command: `%s`, commit %s. Traces: %s. Medians over the runs; [95 %% bootstrap interval] where there are several.\n\n", r.Command, r.Commit, strings.Join(r.Traces, ", "))
	b.WriteString("| configuration | mean OWD ms | p95 OWD ms | p99 OWD ms | loss % | coding rate | wire MB | parity | recovered |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, c := range r.Configs {
		lossCI := ""
		if v, ok := c.CI95["loss_rate"]; ok && v[0] != v[1] {
			lossCI = fmt.Sprintf(" [%.2f, %.2f]", 100*v[0], 100*v[1])
		}
		fmt.Fprintf(&b, "| %s | %.1f | %.1f%s | %.1f | %.2f%s | %.3f | %.2f | %d | %d |\n", c.Name, c.OWDms.Mean, c.OWDms.P95, c.CI95.text("owd_ms.p95"), c.OWDms.P99,
			100*c.LossRate, lossCI, c.CodingRate, float64(c.WireBytes)/1e6, c.ParitySent, c.Recovered)
	}
	b.WriteString("\nPaper 1 (§5, vehicular field test) beside ours:\n\n")
	b.WriteString("| figure | paper: no FEC → adaptive | bondd: no-fec-quic-cc → adaptive-fec |\n| --- | --- | --- |\n")
	var none, ad *s1Result
	for i := range r.Configs {
		switch r.Configs[i].Name {
		case s1NoFECQUIC:
			none = &r.Configs[i]
		case s1Adaptive:
			ad = &r.Configs[i]
		}
	}
	pair := func(f func(*s1Result) float64, format string) string {
		if none == nil || ad == nil {
			return "not run"
		}
		return fmt.Sprintf(format+" → "+format, f(none), f(ad))
	}
	fmt.Fprintf(&b, "| mean one-way delay, ms | %.1f → %.1f | %s |\n", s1Paper.MeanNoFEC, s1Paper.MeanFEC, pair(func(c *s1Result) float64 { return c.OWDms.Mean }, "%.1f"))
	fmt.Fprintf(&b, "| p95 one-way delay, ms | %.1f → %.1f | %s |\n", s1Paper.P95NoFEC, s1Paper.P95FEC, pair(func(c *s1Result) float64 { return c.OWDms.P95 }, "%.1f"))
	fmt.Fprintf(&b, "| loss, %% | %.1f → %.1f | %s |\n", 100*s1Paper.LossNoFEC, 100*s1Paper.LossFEC, pair(func(c *s1Result) float64 { return 100 * c.LossRate }, "%.2f"))
	codingRate := "not run"
	if ad != nil {
		codingRate = fmt.Sprintf("%.3f", ad.CodingRate)
	}
	fmt.Fprintf(&b, "| coding rate | %.2f | %s |\n", s1Paper.CodingRate, codingRate)
	b.WriteString(s1MaskingMarkdown(r.Configs))
	b.WriteString(targetsMarkdown(r.Targets))
	return b.String()
}

// targetsMarkdown renders the targets table.
func targetsMarkdown(ts []target) string {
	var b strings.Builder
	b.WriteString("\nTargets (ratios within this run):\n\n| target | want | got | met |\n| --- | --- | ---: | --- |\n")
	for _, t := range ts {
		got, met := fmt.Sprintf("%.4g", t.Got), "no"
		if t.Met {
			met = "yes"
		}
		if !t.Known {
			got, met = "—", "not run"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", t.Name, t.Want, got, met)
	}
	return b.String()
}
