package main

// bondd bench: the evaluation harness of docs/evaluation.md. It re-runs the
// experiments of both papers over the link emulator with the public traces:
//
//   - S1, vehicular (paper 1, "scheduler-agnostic adaptive FEC", §5): three
//     cellular uplinks, a 4 Mbit/s constant-rate UDP flow; no FEC, adaptive
//     FEC, fixed FEC at the same coding rate, duplication (bench_s1.go);
//   - S2, LEO plus terrestrial (paper 2, MoMQ, §5): a Starlink path and a
//     metered terrestrial path, SVC video over RTP H.264; single path, the
//     four transport schedulers, and the MoMQ rules, also added one at a
//     time (bench_s2.go, bench_video.go).
//
// Every configuration of a scenario gets a new testbed built from the same
// scenario, seed and trace offset, and its traffic starts the same time
// after the emulated links start, so the configurations see the same trace
// segment and the comparisons are paired. Results go to --out as
// results.json, results.md and CDF plots (bench_plot.go).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/bondd/bondd/emu"
	"github.com/bondd/bondd/tunnel"
)

// Bench scenario names (the SCENARIO argument).
const (
	benchS1    = "s1"
	benchS2    = "s2"
	benchLanes = "lanes"
)

// Bench timing defaults.
const (
	// benchDefaultDuration is how long each configuration's traffic runs
	// in a full run, as documented in docs/evaluation.md.
	benchDefaultDuration = 60 * time.Second
	// benchSettle is how long after the emulated links start (relay
	// creation) the traffic starts: time for every path's handshake, so
	// that all configurations start at the same point of the traces.
	benchSettle = 3 * time.Second
	// benchDrain is how long the receiver keeps listening after the last
	// packet was sent: more than the longest queueing (200 ms send queue,
	// 240 ms cellular queue) plus base delay and FEC block timeout.
	benchDrain = 2 * time.Second
)

// benchOptions are the flags of bondd bench.
type benchOptions struct {
	scenario  string        // benchS1, benchS2 or benchLanes
	out       string        // output folder (created)
	duration  time.Duration // traffic time of each configuration
	seed      uint64        // emulator seed, the same for every configuration
	traces    string        // folder laid out like shared/data/traces
	inprocess bool          // in-process testbed even as root
	configs   []string      // configuration names to run; empty: all
	// align (S2 only) starts every configuration's links right after a
	// 15-s boundary of the UTC clock (waiting up to 15 s), so that the
	// wall-clock-aligned Starlink trace and its reconfigurations line up
	// the same way for every configuration (see alignLEO).
	align bool
	// settle and drain override benchSettle and benchDrain when non-zero
	// (tests shorten them).
	settle, drain time.Duration
	// noPlots skips the plots (results.json and results.md only).
	noPlots bool
	// lanes is every uplink's lanes setting in s1 and s2
	// (tunnel.LanesAuto by default); the lanes scenario sets its own.
	lanes     int
	lanesFlag string
}

// newBenchCmd returns the bench command.
func newBenchCmd() *cobra.Command {
	var o benchOptions
	cmd := &cobra.Command{
		Use:   "bench SCENARIO",
		Short: "Re-run the papers' experiments (s1: vehicular FEC, s2: LEO + terrestrial video; lanes: lossy uplinks) and write tables and plots",
		Long: `Bench runs one evaluation scenario over link-emulator paths that replay
public real traces, once per configuration, and writes results.md (tables,
with the papers' figures beside ours), results.json and CDF plots (PNG and
SVG) into --out.

  s1  vehicular (adaptive FEC paper, section 5): three cellular uplinks
      replaying Mahimahi driving traces with 5Gophers base RTTs; a 4 Mbit/s
      constant-rate flow of 1200-byte UDP packets; configurations no-fec,
      adaptive-fec, fixed-fec (same coding rate as adaptive-fec), dup2.
  s2  LEO + terrestrial (MoMQ paper, section 5): the Starlink 100-ms trace
      with its 15-s reconfigurations, and a 15 ms metered path; SVC video
      (50 fps, 1 s GOP) as RTP H.264; configurations single-starlink,
      single-metered, roundrobin, minrtt, blest, redundant, rules (the four
      MoMQ rules) and the rules added one at a time (rules-r4, rules-r4-r1,
      rules-r4-r1-r2).
  lanes  one 50 ms path whose losses are not congestion (0, 0.5, 1, 3 %
      random loss, Gilbert-Elliott bursts, the Starlink trace) and a
      20 Mbit/s flow: one QUIC connection (lanes1) against lanes: auto.

Every configuration runs over the same trace segment with the same seed. As
root the testbed is built from network namespaces with real TUN devices;
otherwise, or with --inprocess, in one process. See docs/evaluation.md.`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{benchS1, benchS2, benchLanes},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.scenario = strings.ToLower(args[0])
			var err error
			if o.lanes, err = parseLanes(o.lanesFlag); err != nil {
				return err
			}
			if o.scenario == benchLanes && cmd.Flags().Changed("lanes") {
				return errors.New("--lanes applies to s1 and s2; the lanes scenario runs each loss model with lanes 1 and auto")
			}
			if cmd.Flags().Changed("traces") && o.traces != "" && !emu.HasCellularTraces(o.traces) {
				return fmt.Errorf("--traces %s: expected a folder laid out like shared/data/traces, with cellular/ and leo/", o.traces)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			err = runBench(ctx, o, cmd.OutOrStdout())
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				return errors.New("bench interrupted; the testbed was removed")
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.out, "out", "bench-out", "folder for results.md, results.json and the plots")
	f.DurationVar(&o.duration, "duration", benchDefaultDuration, "traffic time of each configuration (shorten for CI)")
	f.Uint64Var(&o.seed, "seed", 1, "seed of the link emulator, the same for every configuration")
	f.StringVar(&o.traces, "traces", emu.DefaultTracesDir(), "folder laid out like shared/data/traces (cellular/, leo/); empty: built-in models")
	f.BoolVar(&o.inprocess, "inprocess", false, "run in one process without TUN devices even as root")
	f.StringSliceVar(&o.configs, "configs", nil, "run only these configurations (comma-separated names)")
	f.StringVar(&o.lanesFlag, "lanes", "auto", fmt.Sprintf("s1, s2: QUIC connections per uplink, auto or 1..%d", tunnel.MaxLanes))
	f.BoolVar(&o.align, "align", true, "s2: start each configuration at the same phase of the UTC minute's 15-s reconfiguration cycle (waits up to 15 s each)")
	return cmd
}

// benchHeader is what results.json says about the run as a whole.
type benchHeader struct {
	Scenario  string    `json:"scenario"` // "s1", "s2" or "lanes"
	Mode      string    `json:"mode"`     // "netns" or "inprocess"
	Seed      uint64    `json:"seed"`
	DurationS float64   `json:"duration_s"` // traffic time per configuration, s
	Traces    []string  `json:"traces"`     // trace files replayed, relative to the traces folder, or ["builtin"]
	Started   time.Time `json:"started"`    // wall clock at the start of the run
	Command   string    `json:"command"`    // the command line that reproduces the run
}

// runBench runs o.scenario and writes its results into o.out.
func runBench(ctx context.Context, o benchOptions, out io.Writer) error {
	if o.duration <= 0 {
		return errors.New("--duration must be positive")
	}
	if o.out == "" {
		o.out = "bench-out"
	}
	if o.settle == 0 {
		o.settle = benchSettle
	}
	if o.drain == 0 {
		o.drain = benchDrain
	}
	var names []string
	switch o.scenario {
	case benchS1:
		names = s1ConfigNames()
	case benchS2:
		names = s2ConfigNames()
	case benchLanes:
		names = lanesConfigNames()
	default:
		return fmt.Errorf("unknown scenario %q; expected %s, %s or %s", o.scenario, benchS1, benchS2, benchLanes)
	}
	for _, c := range o.configs {
		if !slices.Contains(names, c) {
			return fmt.Errorf("scenario %s has no configuration %q; it has %s", o.scenario, c, strings.Join(names, ", "))
		}
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	switch o.scenario {
	case benchS1:
		return runS1(ctx, o, out)
	case benchLanes:
		return runLanes(ctx, o, out)
	default:
		return runS2(ctx, o, out)
	}
}

// selected reports whether configuration name is to run.
func (o *benchOptions) selected(name string) bool {
	return len(o.configs) == 0 || slices.Contains(o.configs, name)
}

// commandLine is the bondd bench invocation that reproduces o.
func (o *benchOptions) commandLine() string {
	var b strings.Builder
	fmt.Fprintf(&b, "bondd bench %s --duration %s --seed %d", o.scenario, o.duration, o.seed)
	if o.inprocess {
		b.WriteString(" --inprocess")
	}
	if len(o.configs) > 0 {
		fmt.Fprintf(&b, " --configs %s", strings.Join(o.configs, ","))
	}
	if o.scenario == benchS2 && !o.align {
		b.WriteString(" --align=false")
	}
	if o.lanes != tunnel.LanesAuto && o.scenario != benchLanes {
		fmt.Fprintf(&b, " --lanes %d", o.lanes)
	}
	return b.String()
}

// scenarioTraces lists the trace files sc replays relative to tracesDir,
// or ["builtin"].
func scenarioTraces(sc emu.Scenario, tracesDir string) []string {
	if sc.Source == "builtin" {
		return []string{"builtin"}
	}
	var files []string
	for _, p := range sc.Paths {
		for _, f := range p.Files {
			if rel, err := filepath.Rel(tracesDir, f); err == nil && !strings.HasPrefix(rel, "..") {
				f = filepath.ToSlash(rel)
			}
			if !slices.Contains(files, f) {
				files = append(files, f)
			}
		}
	}
	return files
}

// benchRun is one configuration's pass over a fresh testbed: the edge's
// and the concentrator's counters at the start and the end of the traffic.
type benchRun struct {
	mode                string
	start               time.Time // when the traffic started
	edge0, edge1        tunnel.BondStats
	conc0, conc1        tunnel.BondStats
	pathNames           []string
	pathTxBytes         []uint64 // per path, datagram bytes handed to QUIC during the run
	pathTxPackets       []uint64 // per path, datagrams handed to QUIC during the run
	queueDrops          uint64   // datagrams dropped from send queues (full or expired)
	wireBytes, wirePkts uint64   // sums of pathTxBytes and pathTxPackets
}

// runOnBedAt builds a testbed from bo, waits for its paths, starts traffic
// at anchor plus o.settle (anchor zero: the bed's creation, when the
// emulated links start), lets it drain for o.drain after traffic returns
// and tears the bed down. traffic sends from this goroutine; deliver is
// called from the receiving goroutine, never at the same time as itself.
func runOnBedAt(ctx context.Context, o benchOptions, bo bedOptions, anchor time.Time, out io.Writer,
	traffic func(ctx context.Context, bed *demoBed, start time.Time) error,
	deliver func(payload []byte, now time.Time)) (benchRun, error) {
	bed, err := newBed(bo, o.inprocess, io.Discard)
	if err != nil {
		return benchRun{}, err
	}
	defer bed.close()
	if err := waitPaths(ctx, bed.edge, len(bo.sc.Paths)); err != nil {
		return benchRun{}, err
	}
	if anchor.IsZero() {
		anchor = bed.created
	}
	start := anchor.Add(o.settle)
	if late := time.Since(start); late > 0 {
		fmt.Fprintf(out, "  warning: paths came up %s after the planned start; traffic starts late and sees a later trace segment\n", late.Round(time.Millisecond))
		start = time.Now()
	}
	if err := sleepUntil(ctx, start, nil); err != nil {
		return benchRun{}, err
	}
	r := benchRun{mode: bed.mode, start: start, edge0: bed.edge.Stats(), conc0: bed.conc.Stats()}
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); bed.recv(rctx, deliver) }()
	terr := traffic(ctx, bed, start)
	if terr == nil {
		terr = sleepUntil(ctx, time.Now().Add(o.drain), nil)
	}
	rcancel()
	<-done
	if terr != nil {
		return benchRun{}, terr
	}
	r.edge1, r.conc1 = bed.edge.Stats(), bed.conc.Stats()
	for i, p := range r.edge1.Paths {
		var b pathCounterSet
		if i < len(r.edge0.Paths) {
			b = pathCounters(r.edge0.Paths[i])
		}
		a := pathCounters(p)
		r.pathNames = append(r.pathNames, p.Name)
		r.pathTxBytes = append(r.pathTxBytes, a.txBytes-b.txBytes)
		r.pathTxPackets = append(r.pathTxPackets, a.txPackets-b.txPackets)
		r.queueDrops += a.drops - b.drops
		r.wireBytes += a.txBytes - b.txBytes
		r.wirePkts += a.txPackets - b.txPackets
	}
	return r, nil
}

// pathCounterSet holds the path counters a bench run takes differences of.
type pathCounterSet struct{ txBytes, txPackets, drops uint64 }

// pathCounters takes the counters of p that a run differences.
func pathCounters(p tunnel.PathStats) pathCounterSet {
	return pathCounterSet{txBytes: p.TxBytes, txPackets: p.TxPackets, drops: p.Drops[tunnel.DropQueueFull] + p.Drops[tunnel.DropExpired] + p.Drops[tunnel.DropDeadline]}
}

// benchPath is one path's part of a configuration's traffic.
type benchPath struct {
	Name      string  `json:"name"`
	TxBytes   uint64  `json:"tx_bytes"`   // datagram bytes (bondd header + inner packet or parity) handed to QUIC
	TxPackets uint64  `json:"tx_packets"` // datagrams handed to QUIC
	Share     float64 `json:"share"`      // TxBytes over all paths' TxBytes
}

// paths returns r's per-path figures.
func (r *benchRun) paths() []benchPath {
	var ps []benchPath
	for i, n := range r.pathNames {
		p := benchPath{Name: n, TxBytes: r.pathTxBytes[i], TxPackets: r.pathTxPackets[i]}
		if r.wireBytes > 0 {
			p.Share = float64(p.TxBytes) / float64(r.wireBytes)
		}
		ps = append(ps, p)
	}
	return ps
}

// fecDelta returns the edge's coding rate k/(k+r) (data over data plus
// parity datagrams of the blocks sent during the run; 1 without FEC), the
// parity sent, and the data packets the concentrator recovered.
func (r *benchRun) fecDelta() (rate float64, parity, recovered uint64) {
	rate = 1
	if a, b := r.edge1.FEC, r.edge0.FEC; a != nil && b != nil {
		data := a.DataProtected - b.DataProtected
		parity = a.ParitySent - b.ParitySent
		if data+parity > 0 {
			rate = float64(data) / float64(data+parity)
		}
	}
	if a, b := r.conc1.FEC, r.conc0.FEC; a != nil && b != nil {
		recovered = a.Recovered - b.Recovered
	}
	return rate, parity, recovered
}

// sleepUntil waits until t or ctx is done (then it returns ctx.Err()).
// timer is a stopped, drained timer to reuse, or nil for a new one.
func sleepUntil(ctx context.Context, t time.Time, timer *time.Timer) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	if timer == nil {
		timer = time.NewTimer(d)
		defer timer.Stop()
	} else {
		timer.Reset(d)
	}
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		timer.Stop()
		return ctx.Err()
	}
}

// writeResults prints md on out and writes it to dir/results.md, and rep
// as indented JSON to dir/results.json.
func writeResults(dir string, rep any, md string, out io.Writer) error {
	fmt.Fprint(out, "\n"+md)
	if err := writeJSON(dir, rep); err != nil {
		return err
	}
	return writeMarkdown(dir, md)
}

// writeJSON writes v as indented JSON to dir/results.json.
func writeJSON(dir string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644)
}

// writeMarkdown writes md to dir/results.md.
func writeMarkdown(dir, md string) error {
	return os.WriteFile(filepath.Join(dir, "results.md"), []byte(md), 0o644)
}
