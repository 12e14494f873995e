package main

// bondd bench: the cobra command of the evaluation harness, which lives in
// internal/bench (docs/evaluation.md). Plots are drawn by cmd/bondd-plot
// from the plots.json that bench writes, so that the daemon's binary links
// no plotting library.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/bondd/bondd/emu"
	"github.com/bondd/bondd/internal/bench"
	"github.com/bondd/bondd/tunnel"
)

// newBenchCmd returns the bench command.
func newBenchCmd() *cobra.Command {
	var (
		o          bench.Options
		retransmit bool
	)
	cmd := &cobra.Command{
		Use:   "bench SCENARIO",
		Short: "Re-run the papers' experiments (s1: vehicular FEC, s1-vary: FEC under bursts and outages, s2/s2-isl: LEO + terrestrial video; lanes: one lossy link, quic against bondd rate control; capacity: the bond against the sum of its links; video: legacy encoders; scale: bonds per concentrator; faults: the fault matrix; all: every one of them) and write tables and plot data",
		Long: `Bench runs one evaluation scenario over link-emulator paths that replay
public real traces, once per configuration, and writes results.md (tables,
with the papers' figures beside ours), results.json and the data of the CDF
plots (plots.json) into --out; bondd-plot draws the plots (PNG and SVG).

  s1  vehicular (adaptive FEC paper, section 5): three cellular uplinks
      replaying Mahimahi driving traces with 5Gophers base RTTs; a 4 Mbit/s
      constant-rate flow of 1200-byte UDP packets; configurations
      no-fec-quic-cc, no-fec, adaptive-fec, fixed-fec (same coding rate as
      adaptive-fec), dup2, and adaptive FEC with a block placement
      (adaptive-fec-rate, adaptive-fec-earliest, adaptive-fec-rate-earliest);
      the concentrator counts packets rebuilt before their original
      arrived (delay masking). --sweep runs adaptive FEC's α × k grid
      instead (loss against coding rate, a Pareto plot).
  s1-vary  S1 with Gilbert-Elliott burst loss on one path and a
      handover-like outage on another: no-fec, adaptive-fec, and fixed-fec
      at adaptive-fec's coding rate (matched overhead).
  s2  LEO + terrestrial (MoMQ paper, section 5), in the paper's setting:
      the Starlink 100-ms trace's capacity and loss with its 15-s
      reconfigurations and a bent-pipe delay (20-40 ms one way), and a
      metered path replaying a Mahimahi LTE trace at 15 ms; SVC video
      (50 fps, 1 s GOP) as RTP H.264; configurations single-starlink,
      single-metered, roundrobin, minrtt, blest, redundant, rules (the four
      MoMQ rules) and the rules added one at a time (rules-r4, rules-r4-r1,
      rules-r4-r1-r2).
  s2-isl  the same over the Starlink trace's own inter-satellite-link
      delay (88 ms one way) and an ideal 15 ms, 20 Mbit/s metered link.
  lanes  one 50 ms path whose losses are not congestion (0, 0.5, 1, 3 %
      random loss, Gilbert-Elliott bursts, the Starlink trace) and a
      20 Mbit/s flow on its one QUIC connection: quic-go's own congestion
      control (quic) against bondd's rate control (bondd); goodput,
      one-way delay percentiles and loss.
  capacity  S1's three cellular paths and S2's Starlink path: UDP offered
      at the sum of the links' capacity over the run (bond-udp), and one
      TCP flow (iperf3) over the bond (bond-tcp) and over each path alone
      (single-PATH-tcp). The TCP configurations need root (network
      namespaces) and iperf3; without them they are skipped. Each
      configuration reports the CPU the bench process used; --link-scale
      F runs every link at F times its capacity, for a host too slow to
      forward the links' real packet rate.
  video  legacy video (root, ffmpeg): an H.264 file of --duration sent by
      ffmpeg with -c copy as RTP and as MPEG-TS over UDP, through the bond
      and over the best single path, on three 1.5 %-loss paths (loss), the
      cellular paths (cellular) and the S2 paths (s2); frames bit-exact and
      decodable, TS continuity errors, RTP packets missed.
  scale  how many bonds one concentrator holds: a ramp of N edges of 2
      paths each (--bonds), run in a child process against one
      concentrator in this process over loopback; handshakes per second,
      memory per idle and per active bond, CPU per forwarded packet with
      10 % of the bonds sending (--active, --pps), the single bond's
      figures beside; handshakes per second fresh and resumed (TLS session
      tickets) and the node's CPU per handshake; --json FILE writes the
      results there too. --duration is each step's traffic time (default
      5s for scale). The edges run in --edge-procs child processes.
      --flood PPS adds a step at the largest N: spoofed QUIC Initials from
      a hostile source on loopback (256 addresses that never answer) while
      the active bonds send: their delivered share, a new edge's connect
      time, the node's memory growth. --restart adds a step: the
      concentrator as a child process, SIGKILLed with every bond up and
      restarted; time until every bond is back and handshakes per second.
  faults  the fault matrix (root, network namespaces): the bondd binary
      as edge (three uplinks, one IPv6-only) and concentrator, a 1 kHz UDP
      probe through the tunnel, and each fault (blackhole, ipv6-blackhole,
      mtu-blackhole, link-down, address-change, all-down, conc-kill,
      conc-term, garbage) under the default rules and under a rule that
      prefers the faulted uplink: longest gap, loss, time to detect and to
      recover, and the counters that explain the loss, with each row's
      target (docs/operations.md). --configs selects faults, --short runs
      the integration test's short version, --json FILE writes faults[].
  all  every run docs/evaluation.md shows (s1 with 5 runs, the s1 sweep,
      s1-vary, s2, s2-isl, lanes, capacity, video, scale, faults), each into
      --out/NAME, with an index all.md giving per folder the command that
      reproduces it and the commit; --duration and --runs, when given,
      replace every step's; --configs picks steps by folder name.

Every configuration runs over the same trace segment with the same seed.
With --runs N each configuration runs N times (run r with seed --seed + r)
and the results are medians with 95 % bootstrap confidence intervals. As
root the testbed is built from network namespaces with real TUN devices;
otherwise, or with --inprocess, in one process. See docs/evaluation.md.`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{bench.S1, bench.S1Vary, bench.S2, bench.S2ISL, bench.Lanes, bench.Capacity, bench.Video, bench.Scale, bench.Faults, bench.All},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Scenario = strings.ToLower(args[0])
			o.RetransmitOff = !retransmit
			if o.Scenario == bench.Video && !cmd.Flags().Changed("duration") {
				o.Duration = 10 * time.Second // the video's length: 250 frames
			}
			if o.Scenario == bench.Lanes && cmd.Flags().Changed("rate-control") {
				return errors.New("--rate-control does not apply to the lanes scenario: it runs each loss model with quic and with bondd")
			}
			if cmd.Flags().Changed("traces") && o.Traces != "" && !emu.HasCellularTraces(o.Traces) {
				return fmt.Errorf("--traces %s: expected a folder laid out like shared/data/traces, with cellular/ and leo/", o.Traces)
			}
			if o.Scenario == bench.Scale && !cmd.Flags().Changed("duration") {
				o.Duration = bench.ScaleDefaultDuration
			}
			if o.Scenario == bench.All {
				if !cmd.Flags().Changed("duration") {
					o.Duration = 0 // each step's own
				}
				if !cmd.Flags().Changed("runs") {
					o.Runs = 0
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			err := bench.Run(ctx, o, cmd.OutOrStdout())
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				return errors.New("bench interrupted; the testbed was removed")
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Out, "out", "bench-out", "folder for results.md, results.json and plots.json")
	f.DurationVar(&o.Duration, "duration", bench.DefaultDuration, "traffic time of each configuration (shorten for CI)")
	f.Uint64Var(&o.Seed, "seed", 1, "seed of the link emulator, the same for every configuration")
	f.StringVar(&o.Traces, "traces", emu.DefaultTracesDir(), "folder laid out like shared/data/traces (cellular/, leo/); empty, or the default folder missing: built-in models")
	f.BoolVar(&o.Inprocess, "inprocess", false, "run in one process without TUN devices even as root")
	f.StringSliceVar(&o.Configs, "configs", nil, "run only these configurations (comma-separated names)")
	f.BoolVar(&o.Sweep, "sweep", false, "s1: run adaptive FEC's sensitivity grid (α 1, 1.5, 2, 3 × k 10, 20, 40) and no-fec instead of the S1 configurations")
	f.IntVar(&o.Runs, "runs", 1, "runs per configuration (seeds --seed, --seed+1, ...); results are medians with 95 % bootstrap intervals")
	f.StringVar(&o.RateControl, "rate-control", tunnel.RateControlBondd, "who decides each path's rate on both bonds: bondd (bondd's controller inside quic-go, the daemon's default) or quic (quic-go's own NewReno, the baseline)")
	f.BoolVar(&retransmit, "retransmit", true, "retransmit lost data datagrams on both bonds (the daemon's default); false: the behaviour before, for comparison")
	f.Float64Var(&o.LinkScale, "link-scale", 1, "capacity: every emulated link's capacity × this, in (0, 1] (a host too slow for the links' packet rate measures the bond on scaled links)")
	f.BoolVar(&o.Align, "align", true, "s2, s2-isl: start each configuration at the same phase of the UTC minute's 15-s reconfiguration cycle (waits up to 15 s each)")
	f.IntSliceVar(&o.ScaleBonds, "bonds", nil, "scale: the ramp of bond counts (default 1,10,100,250,500,1000)")
	f.Float64Var(&o.ScalePPS, "pps", 0, fmt.Sprintf("scale: total packets per second of the active bonds (default %d)", bench.ScaleDefaultPPS))
	f.Float64Var(&o.ScaleActive, "active", 0, "scale: fraction of the bonds that send (default 0.1)")
	f.IntVar(&o.ScaleDialing, "dialing", 0, fmt.Sprintf("scale: edges connecting at once (default %d; -1: all at once)", bench.ScaleDefaultDialing))
	f.IntVar(&o.ScaleEdgeProcs, "edge-procs", 0, fmt.Sprintf("scale: child processes the edges run in (default one per %d edges)", bench.ScaleEdgesPerProc))
	f.Float64Var(&o.ScaleFlood, "flood", 0, "scale: at the largest step, send this many spoofed QUIC Initial packets per second at the concentrator while the active bonds send (0: no flood step)")
	f.BoolVar(&o.ScaleRestart, "restart", false, "scale: at the largest step, SIGKILL the concentrator (run as a child process) with every bond up, start it again and time until every bond is back")
	f.StringVar(&o.JSON, "json", "", "scale, faults: also write results.json to this file")
	f.BoolVar(&o.Short, "short", false, "faults: the short version (shorter faults; the prefer rule for the path faults only)")
	f.StringVar(&o.Profile, "profile", "", "scale: write heap, idle-CPU and fresh-handshake CPU profiles of each step of N bonds to PREFIX.heap.N, PREFIX.cpu-idle.N and PREFIX.cpu-handshake.N")
	return cmd
}
