// Package bench is the evaluation harness of docs/evaluation.md (bondd
// bench). It re-runs the experiments of both papers over the link emulator
// with the public traces:
//
//   - S1, vehicular (paper 1, "scheduler-agnostic adaptive FEC", §5): three
//     cellular uplinks, a 4 Mbit/s constant-rate UDP flow; no FEC, adaptive
//     FEC, fixed FEC at the same coding rate, duplication (s1.go);
//   - S2, LEO plus terrestrial (paper 2, MoMQ, §5): a Starlink path and a
//     metered terrestrial path, SVC video over RTP H.264; single path, the
//     four transport schedulers, and the MoMQ rules, also added one at a
//     time (s2.go, video.go); s2 in the paper's setting, s2-isl over the
//     trace's inter-satellite link;
//   - lanes: one lossy link, quic-go's own congestion control against
//     bondd's rate control on its one connection (lanes.go);
//   - capacity: the bond against the sum of its links, UDP at Σ capacity
//     and one TCP flow against each path alone, over the traces
//     (capacity.go) and over three constant links (capacity_steady.go);
//   - scale: how many bonds one concentrator holds, with the edges in a
//     child process (scale.go, scale_edges.go).
//
// With Options.Runs every configuration runs several times and the
// results are medians with 95 % bootstrap intervals (runs.go).
//
// Every configuration of a scenario gets a new testbed built from the same
// scenario, seed and trace offset, and its traffic starts the same time
// after the emulated links start, so the configurations see the same trace
// segment and the comparisons are paired. Results go to --out as
// results.json, results.md and the data of the CDF plots (plots.go), which
// cmd/bondd-plot draws.
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bondd/bondd/emu"
	"github.com/bondd/bondd/internal/demo"
	"github.com/bondd/bondd/tunnel"
)

// Bench scenario names (the SCENARIO argument).
const (
	S1       = "s1"
	S2       = "s2"     // paper 2's setting (emu.LEOPaperScenario)
	S2ISL    = "s2-isl" // the inter-satellite-link case (emu.LEOScenario)
	Lanes    = "lanes"
	Capacity = "capacity"
)

// Bench timing defaults.
const (
	// DefaultDuration is how long each configuration's traffic runs
	// in a full run, as documented in docs/evaluation.md.
	DefaultDuration = 60 * time.Second
	// benchSettle is how long after the emulated links start (relay
	// creation) the traffic starts: time for every path's handshake, so
	// that all configurations start at the same point of the traces.
	benchSettle = 3 * time.Second
	// benchDrain is how long the receiver keeps listening after the last
	// packet was sent: more than the longest queueing (200 ms send queue,
	// 240 ms cellular queue) plus base delay and FEC block timeout.
	benchDrain = 2 * time.Second
)

// Options are the settings of one bench run (the flags of bondd bench).
type Options struct {
	Scenario  string        // S1, S1Vary, S2, S2ISL, Lanes, Capacity, Video, Scale or All
	Out       string        // output folder (created)
	Duration  time.Duration // traffic time of each configuration
	Seed      uint64        // emulator seed, the same for every configuration
	Traces    string        // folder laid out like shared/data/traces
	Inprocess bool          // in-process testbed even as root
	Configs   []string      // configuration names to run; empty: all
	// Align (S2 only) starts every configuration's links right after a
	// 15-s boundary of the UTC clock (waiting up to 15 s), so that the
	// Starlink trace's reconfigurations fall at the same time of every
	// configuration's run (see alignLEO). Without it the run replays the
	// same part of the trace (anchorLEO) within the bed's start-up time,
	// and the reconfigurations fall where the UTC clock puts them.
	Align bool
	// Settle and Drain override benchSettle and benchDrain when non-zero
	// (tests shorten them).
	Settle, Drain time.Duration
	// NoPlots skips plots.json (results.json and results.md only).
	NoPlots bool
	// Sweep (S1 only) runs the sensitivity grid of adaptive FEC, α × k,
	// instead of the S1 configurations (s1sweep.go).
	Sweep bool
	// Runs is how many times each configuration runs, run r with seed
	// Seed + r; results are medians over the runs with 95 % bootstrap
	// intervals (runs.go). 0 means 1.
	Runs int
	// RateControl is who decides each path's rate in every configuration
	// that does not set its own (S1's no-fec-quic-cc does): "" (the bond's
	// default), demo.RateControlBondd or demo.RateControlQUIC. Validated
	// by Run, passed to the testbed as demo.BedOptions.RateControl.
	RateControl string
	// RetransmitOff turns off the retransmission of lost datagrams in every
	// configuration (demo.BedOptions.RetransmitOff): the behaviour before
	// it, for comparison.
	RetransmitOff bool
	// ScaleBonds is the scale scenario's ramp of bond counts; empty:
	// ScaleDefaultBonds.
	ScaleBonds []int
	// ScalePPS is the scale scenario's total packet rate of the active
	// bonds, packets per second; 0: ScaleDefaultPPS.
	ScalePPS float64
	// ScaleActive is the fraction of bonds that send in the scale
	// scenario, (0, 1]; 0: ScaleDefaultActive.
	ScaleActive float64
	// ScaleDialing bounds the edges connecting at once in the scale
	// scenario; 0: ScaleDefaultDialing; negative: all at once.
	ScaleDialing int
	// ScaleEdgeProcs is the number of child processes the scale
	// scenario's edges run in; 0: one per ScaleEdgesPerProc edges.
	ScaleEdgeProcs int
	// ScaleFlood, when positive, adds a flood step at the largest bond
	// count: spoofed QUIC Initial packets at this rate, packets per
	// second, while the active bonds send (scale_flood.go).
	ScaleFlood float64
	// ScaleRestart adds a restart step at the largest bond count: the
	// concentrator in a child process is killed (SIGKILL) with every
	// bond up and started again (scale_restart.go).
	ScaleRestart bool
	// JSON, when set, is a second file the scale and faults scenarios
	// write their results.json to (--json FILE).
	JSON string
	// Bin is the bondd binary the faults scenario runs as edge and
	// concentrator; "": this executable.
	Bin string
	// Short runs the faults scenario's short version (shorter faults,
	// the prefer rule set for the path faults only): the integration
	// test's.
	Short bool
	// LinkScale (capacity only) scales every emulated link's capacity by
	// this factor, 0 < LinkScale ≤ 1 (emu.Scenario.ScaleCapacity); 0
	// means 1. On a host whose CPU cannot forward the links' real packet
	// rate, a scaled bed measures the bond rather than the host.
	LinkScale float64
	// Profile, when set, is the prefix of the profiles (runtime/pprof)
	// the scale scenario writes for each step of N bonds with every bond
	// up and idle: the heap as Profile.heap.N and the CPU over the idle
	// window as Profile.cpu-idle.N; and the CPU over the fresh handshakes
	// as Profile.cpu-handshake.N.
	Profile string
}

// benchHeader is what results.json says about the run as a whole.
type benchHeader struct {
	Scenario  string    `json:"scenario"`   // "s1", "s2", "s2-isl", "lanes", "capacity" or "video"
	Mode      string    `json:"mode"`       // "netns" or "inprocess"
	Seed      uint64    `json:"seed"`       // run r used Seed + r
	Runs      int       `json:"runs"`       // runs per configuration
	DurationS float64   `json:"duration_s"` // traffic time per configuration, s
	Traces    []string  `json:"traces"`     // trace files replayed, relative to the traces folder, or ["builtin"]
	Started   time.Time `json:"started"`    // wall clock at the start of the run
	Command   string    `json:"command"`    // the command line that reproduces the run
	Commit    string    `json:"commit"`     // the commit bondd was built from (buildCommit), "" when unknown
}

// Run runs o.Scenario and writes its results into o.Out.
func Run(ctx context.Context, o Options, out io.Writer) error {
	if o.Duration <= 0 && o.Scenario != All {
		return errors.New("--duration must be positive")
	}
	if o.Out == "" {
		o.Out = "bench-out"
	}
	if o.Settle == 0 {
		o.Settle = benchSettle
	}
	if o.Drain == 0 {
		o.Drain = benchDrain
	}
	if o.Runs < 0 {
		return errors.New("--runs must be at least 1")
	}
	if err := demo.ValidateRateControl(o.RateControl); err != nil {
		return err
	}
	var names []string
	switch o.Scenario {
	case S1:
		names = s1ConfigNames()
		if o.Sweep {
			names = s1SweepNames()
		}
	case S1Vary:
		names = s1VaryNames()
	case All:
		names = allStepNames()
	case S2, S2ISL:
		names = s2ConfigNames()
	case Lanes:
		names = lanesConfigNames()
	case Capacity:
		names = capConfigNames()
	case Video:
		names = videoConfigNames()
	case Scale:
	case Faults:
		names = FaultNames()
	default:
		return fmt.Errorf("unknown scenario %q; expected %s, %s, %s, %s, %s, %s, %s, %s, %s or %s", o.Scenario, S1, S1Vary, S2, S2ISL, Lanes, Capacity, Video, Scale, Faults, All)
	}
	for _, c := range o.Configs {
		if !slices.Contains(names, c) {
			return fmt.Errorf("scenario %s has no configuration %q; it has %s", o.Scenario, c, strings.Join(names, ", "))
		}
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return err
	}
	if o.LinkScale != 0 && o.LinkScale != 1 && o.Scenario != Capacity {
		return fmt.Errorf("--link-scale is for scenario %s only", Capacity)
	}
	if o.LinkScale < 0 || o.LinkScale > 1 {
		return fmt.Errorf("--link-scale %g must be in (0, 1]", o.LinkScale)
	}
	if o.Sweep && o.Scenario != S1 {
		return fmt.Errorf("--sweep is for scenario %s only", S1)
	}
	switch o.Scenario {
	case S1:
		if o.Sweep {
			return runS1Sweep(ctx, o, out)
		}
		return runS1(ctx, o, out)
	case S1Vary:
		return runS1(ctx, o, out)
	case All:
		return runAll(ctx, o, out)
	case Lanes:
		return runLanes(ctx, o, out)
	case Capacity:
		return runCapacity(ctx, o, out)
	case Video:
		return runVideo(ctx, o, out)
	case Scale:
		return runScale(ctx, o, out)
	case Faults:
		return runFaults(ctx, o, out)
	default:
		return runS2(ctx, o, out)
	}
}

// isRoot reports whether bench can build netns testbeds.
func isRoot() bool { return os.Geteuid() == 0 }

// selected reports whether configuration name is to run.
func (o *Options) selected(name string) bool {
	return len(o.Configs) == 0 || slices.Contains(o.Configs, name)
}

// commandLine is the bondd bench invocation that reproduces o.
func (o *Options) commandLine() string {
	var b strings.Builder
	fmt.Fprintf(&b, "bondd bench %s --duration %s --seed %d", o.Scenario, o.Duration, o.Seed)
	if o.Inprocess {
		b.WriteString(" --inprocess")
	}
	if len(o.Configs) > 0 {
		fmt.Fprintf(&b, " --configs %s", strings.Join(o.Configs, ","))
	}
	if (o.Scenario == S2 || o.Scenario == S2ISL) && !o.Align {
		b.WriteString(" --align=false")
	}
	if o.Sweep {
		b.WriteString(" --sweep")
	}
	if o.runs() > 1 {
		fmt.Fprintf(&b, " --runs %d", o.runs())
	}
	if o.RateControl != "" && o.Scenario != Lanes { // the lanes scenario runs both
		fmt.Fprintf(&b, " --rate-control %s", o.RateControl)
	}
	if o.RetransmitOff {
		b.WriteString(" --retransmit=false")
	}
	if o.LinkScale != 0 && o.LinkScale != 1 {
		fmt.Fprintf(&b, " --link-scale %g", o.LinkScale)
	}
	if o.Scenario == Scale {
		if len(o.ScaleBonds) > 0 {
			var ns []string
			for _, n := range o.ScaleBonds {
				ns = append(ns, strconv.Itoa(n))
			}
			fmt.Fprintf(&b, " --bonds %s", strings.Join(ns, ","))
		}
		if o.ScalePPS != 0 {
			fmt.Fprintf(&b, " --pps %g", o.ScalePPS)
		}
		if o.ScaleActive != 0 {
			fmt.Fprintf(&b, " --active %g", o.ScaleActive)
		}
		if o.ScaleDialing != 0 {
			fmt.Fprintf(&b, " --dialing %d", o.ScaleDialing)
		}
		if o.ScaleEdgeProcs != 0 {
			fmt.Fprintf(&b, " --edge-procs %d", o.ScaleEdgeProcs)
		}
		if o.ScaleFlood != 0 {
			fmt.Fprintf(&b, " --flood %g", o.ScaleFlood)
		}
		if o.ScaleRestart {
			b.WriteString(" --restart")
		}
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
	created             time.Time // when the bed's relays started (their links' model time 0)
	start               time.Time // when the traffic started
	edge0, edge1        tunnel.BondStats
	conc0, conc1        tunnel.BondStats
	pathNames           []string
	pathTxBytes         []uint64 // per path, datagram bytes handed to QUIC during the run
	pathTxPackets       []uint64 // per path, datagrams handed to QUIC during the run
	queueDrops          uint64   // datagrams dropped from send queues (full or expired)
	objDrops            uint64   // video frames that lost a packet in the edge's send queues, per path summed (tunnel.PathStats.ObjectsDropped)
	resent, resendLate  uint64   // the edge's retransmissions, and losses found too late to retransmit (tunnel.PathStats)
	wireBytes, wirePkts uint64   // sums of pathTxBytes and pathTxPackets
	// cpuCores is the bench process's CPU time while the traffic ran over
	// that wall time: cores busy with the sender, both bonds and the
	// relays (in a netns bed too: they all run in this process).
	cpuCores float64
}

// runOnBedAt builds a testbed from bo, waits for its paths, starts traffic
// at anchor plus o.Settle (anchor zero: the bed's creation, when the
// emulated links start), lets it drain for o.Drain after traffic returns
// and tears the bed down. traffic sends from this goroutine; deliver is
// called from the receiving goroutine, never at the same time as itself.
func runOnBedAt(ctx context.Context, o Options, bo demo.BedOptions, anchor time.Time, out io.Writer,
	traffic func(ctx context.Context, bed *demo.Bed, start time.Time) error,
	deliver func(payload []byte, now time.Time)) (benchRun, error) {
	bed, err := demo.NewBed(bo, o.Inprocess, io.Discard)
	if err != nil {
		return benchRun{}, err
	}
	defer bed.Close()
	if err := demo.WaitPaths(ctx, bed.Edge, len(bo.Scenario.Paths)); err != nil {
		return benchRun{}, err
	}
	if anchor.IsZero() {
		anchor = bed.Created
	}
	start := anchor.Add(o.Settle)
	if late := time.Since(start); late > 0 {
		fmt.Fprintf(out, "  warning: paths came up %s after the planned start; traffic starts late and sees a later trace segment\n", late.Round(time.Millisecond))
		start = time.Now()
	}
	if err := sleepUntil(ctx, start, nil); err != nil {
		return benchRun{}, err
	}
	r := benchRun{mode: bed.Mode, created: bed.Created, start: start, edge0: bed.Edge.Stats(), conc0: bed.Conc.Stats()}
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); bed.Recv(rctx, deliver) }()
	cpu0, wall0 := cpuTime(), time.Now()
	terr := traffic(ctx, bed, start)
	if wall := time.Since(wall0); wall > 0 {
		r.cpuCores = float64(cpuTime()-cpu0) / float64(wall)
	}
	if terr == nil {
		terr = sleepUntil(ctx, time.Now().Add(o.Drain), nil)
	}
	rcancel()
	<-done
	if terr != nil {
		return benchRun{}, terr
	}
	r.edge1, r.conc1 = bed.Edge.Stats(), bed.Conc.Stats()
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
		r.objDrops += a.objDrops - b.objDrops
		r.resent += a.resent - b.resent
		r.resendLate += a.resendLate - b.resendLate
		r.wireBytes += a.txBytes - b.txBytes
		r.wirePkts += a.txPackets - b.txPackets
	}
	return r, nil
}

// pathCounterSet holds the path counters a bench run takes differences of.
type pathCounterSet struct{ txBytes, txPackets, drops, objDrops, resent, resendLate uint64 }

// pathCounters takes the counters of p that a run differences.
func pathCounters(p tunnel.PathStats) pathCounterSet {
	return pathCounterSet{txBytes: p.TxBytes, txPackets: p.TxPackets, drops: queueDrops(&p), objDrops: p.ObjectsDropped,
		resent: p.Resent, resendLate: p.ResendLate}
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

// dropsDelta returns the drops of the run by side and reason, the bond's
// and its paths' together ("edge/suspect", "concentrator/stale"): where
// the datagrams that the links did not lose went. Reasons that did not
// occur are left out.
func (r *benchRun) dropsDelta() map[string]uint64 {
	out := map[string]uint64{}
	for _, side := range []struct {
		name          string
		before, after tunnel.BondStats
	}{{"edge", r.edge0, r.edge1}, {"concentrator", r.conc0, r.conc1}} {
		before, after := tunnel.DropCounts{}, tunnel.DropCounts{}
		addDrops(before, side.before)
		addDrops(after, side.after)
		for k, v := range after {
			if v > before[k] { // a counter of a path replaced in the run starts again
				out[side.name+"/"+k.String()] = v - before[k]
			}
		}
	}
	return out
}

// every calls f every d until ctx is done; f runs on the caller's
// goroutine, one call at a time.
func every(ctx context.Context, d time.Duration, f func()) {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			f()
		}
	}
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
