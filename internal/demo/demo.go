// Package demo builds the testbeds that bondd demo, bondd bench and the
// integration tests run the bond on: an edge and a concentrator joined by
// emulated uplinks (package emu), either in network namespaces with real TUN
// devices (as root) or in one process with in-memory TUN devices
// (tun/tuntest). Run is bondd demo's whole run: one constant-rate UDP flow
// through the bond, and a report.
package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bondd/bondd/classify"
	"github.com/bondd/bondd/emu"
	"github.com/bondd/bondd/internal/testbed"
	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/tunnel"
)

// Options are the settings of one demo run (the flags of bondd demo).
type Options struct {
	Duration time.Duration // how long the flow runs
	RateMbps float64       // flow rate, Mbit/s
	Traces   string        // traces folder (emu.CellularScenario); empty: built-in models
	// BuiltinAsked says that Traces is empty because the user asked for
	// the built-in models (bondd demo --traces ""), not because no trace
	// folder was found: the report says which.
	BuiltinAsked bool
	JSONPath     string  // optional: also write the report as JSON here
	Seed         uint64  // seed of the link emulator
	Inprocess    bool    // in one process even as root
	FEC          string  // tunnel.FECAdaptive or tunnel.FECOff
	Scheduler    string  // a policy.Schedulers name
	LossPct      float64 // extra random loss on every emulated path, each direction, %
	// RateControl is RateControlBondd (empty: the default) or
	// RateControlQUIC, on both ends.
	RateControl string
	// RetransmitOff turns off the retransmission of lost datagrams on
	// both ends (tunnel.PathOptions.RetransmitOff).
	RetransmitOff bool
	// Started, if set, is called once the testbed is built, before the
	// paths come up (bondd demo --web starts its page there); an error
	// ends the run.
	Started func(*Bed) error
}

// demoReport is what bondd demo prints, and writes with --json.
type demoReport struct {
	Mode            string       `json:"mode"` // "netns" or "inprocess"
	Scheduler       string       `json:"scheduler"`
	Seed            uint64       `json:"seed"`
	Traces          []string     `json:"traces"` // files replayed, or ["builtin"]
	DurationS       float64      `json:"duration_s"`
	RateMbps        float64      `json:"rate_mbps"`
	Paths           []demoPath   `json:"paths"`
	OWDms           owdSummary   `json:"owd_ms"`
	LossRate        float64      `json:"loss_rate"`
	GoodputMbps     float64      `json:"goodput_mbps"`
	PacketsSent     uint64       `json:"packets_sent"`
	PacketsReceived uint64       `json:"packets_received"`
	FEC             string       `json:"fec"`         // adaptive or off
	CodingRate      float64      `json:"coding_rate"` // k/(k+r) of the blocks the edge sent; 1 without FEC
	ParitySent      uint64       `json:"parity_sent"`
	Recovered       uint64       `json:"recovered"` // data packets the concentrator reconstructed
	ExtraLossPct    float64      `json:"extra_loss_pct"`
	RateControl     string       `json:"rate_control"` // bondd or quic
	Bond            *bondSummary `json:"bond"`
}

type demoPath struct {
	Name     string  `json:"name"`
	Share    float64 `json:"share"`     // of the bond's data packets sent on this path
	RTTms    float64 `json:"rtt_ms"`    // smoothed RTT at the end
	LossRate float64 `json:"loss_rate"` // QUIC packets declared lost / sent
	State    string  `json:"state"`
	Packets  uint64  `json:"packets"`
	// Rate control (zero without it): the target and the rate the
	// receiver got at the end, Mbit/s; the queueing delay the receiver
	// measured, ms; the receiver-seen loss at the end (0–1); and the
	// bytes that waited for the pacer during the run.
	TargetMbps    float64 `json:"target_mbps"`
	DeliveryMbps  float64 `json:"delivery_mbps"`
	QueueDelayMs  float64 `json:"queue_delay_ms"`
	ReceiverLoss  float64 `json:"receiver_loss"`
	HeldBackBytes uint64  `json:"held_back_bytes"`
	// Moved counts the queued packets moved from this path to another:
	// when it failed, or when they had waited half their time while it
	// slowed (tunnel.PathStats.Rescued).
	Moved uint64 `json:"moved"`
}

type bondSummary struct {
	Duplicates uint64 `json:"duplicates_dropped"` // the concentrator's, over the run; the other fields are the edge's
	QueueDrops uint64 `json:"queue_drops"`        // QueueFull + Expired + Deadline
	QueueFull  uint64 `json:"queue_full_drops"`
	Expired    uint64 `json:"expired_drops"`  // older than max_queue_delay
	Deadline   uint64 `json:"deadline_drops"` // past a rule's deadline_ms
	NoPath     uint64 `json:"no_path_drops"`
	// Resent counts the edge's data datagrams lost on a path and sent
	// again; ResendLate those lost too late to arrive in time.
	Resent     uint64 `json:"resent"`
	ResendLate uint64 `json:"resend_late"`
}

// Bed is a running testbed: the edge's bond, a way to send one flow
// payload into the edge, and a way to receive the payloads out of the
// concentrator. bondd demo and bondd bench share it.
type Bed struct {
	Mode string       // "netns" or "inprocess"
	Edge *tunnel.Bond // sends the flow
	Conc *tunnel.Bond // the concentrator's bond of the edge: receives it
	// Created is when the emu relays were created, that is when the
	// emulated links' traces started (see emu.Relay).
	Created time.Time
	// Relays are the emulated links, one per path in the scenario's
	// order: their counters say what each link dropped and why.
	Relays emu.Relays
	// Send sends one UDP payload from the edge's inner address to the
	// concentrator side's (Port to Port). Not safe for concurrent use;
	// payload is not retained.
	Send func(payload []byte) error
	// Recv calls deliver with each UDP payload that reaches the
	// concentrator side, and the time it arrived, until ctx is done. The
	// payload is valid only during the call.
	Recv func(ctx context.Context, deliver func(payload []byte, now time.Time))
	// Close removes the testbed.
	Close func()
	// EdgeNS and ConcNS name the edge's and the concentrator's network
	// namespaces of a netns testbed (for ip netns exec: the flow's inner
	// addresses EdgeAddr and ConcAddr live there); empty in process.
	EdgeNS, ConcNS string
}

// Inner addresses of the testbeds' flow: the edge side's and the
// concentrator side's, both IPv4.
var (
	EdgeAddr = demoEdgeInner.Addr()
	ConcAddr = demoServerInner.Addr()
)

// BedOptions are what a testbed is built from (newInprocessBed,
// newNetnsBed).
type BedOptions struct {
	Scenario emu.Scenario      // the emulated paths, with their labels
	Seed     uint64            // seed of the relays (path i gets Seed + i)
	FEC      tunnel.FECOptions // FEC of the edge and the concentrator
	Picker   policy.Picker     // scheduler of both bonds
	Rules    tunnel.RuleSource // optional: rules of the edge's send path
	Classify classify.Options  // how the edge's classifier reads packets for the rules
	// LEO gives the uplinks, by path name, that have a LEO
	// reconfiguration schedule (tunnel.UplinkOptions.LEOReconf). Optional.
	LEO map[string]*policy.LEOReconf
	// RateControl is who decides each path's rate on both bonds: "" (the
	// bond's default), RateControlBondd or RateControlQUIC. Optional;
	// applied by applyRateControl.
	RateControl string
	// RetransmitOff turns off the retransmission of lost datagrams on both
	// bonds (tunnel.PathOptions.RetransmitOff). Optional.
	RetransmitOff bool
}

// Run is bondd demo: it builds a testbed (NewBed) over the cellular
// scenario, sends a constant-rate flow of PacketBytes-byte UDP packets
// through the bond for o.Duration, and prints the report to out (and
// writes it as JSON to o.JSONPath). Errors: bad options, a testbed that
// cannot be built, paths that do not come up, ctx ending.
func Run(ctx context.Context, o Options, out io.Writer) error {
	if o.Duration <= 0 || o.RateMbps <= 0 {
		return fmt.Errorf("--duration and --rate must be positive")
	}
	if o.FEC == "" {
		o.FEC = tunnel.FECAdaptive
	}
	if o.FEC != tunnel.FECAdaptive && o.FEC != tunnel.FECOff {
		return fmt.Errorf("--fec must be adaptive or off, not %q", o.FEC)
	}
	fopts := tunnel.FECOptions{Mode: o.FEC}
	picker, err := policy.NewPicker(o.Scheduler)
	if err != nil {
		return err
	}
	if err := ValidateRateControl(o.RateControl); err != nil {
		return err
	}
	if o.LossPct < 0 || o.LossPct >= 100 {
		return fmt.Errorf("--loss %g: expected a percentage from 0 to below 100", o.LossPct)
	}
	sc, err := emu.CellularScenario(o.Traces, o.Seed)
	if err != nil {
		return err
	}
	addLoss(&sc, o.LossPct/100)
	if o.RateControl == "" {
		o.RateControl = RateControlBondd
	}
	bed, err := NewBed(BedOptions{Scenario: sc, Seed: o.Seed, FEC: fopts, Picker: picker, RateControl: o.RateControl, RetransmitOff: o.RetransmitOff}, o.Inprocess, out)
	if err != nil {
		return err
	}
	defer bed.Close()

	retransmit := "on"
	if o.RetransmitOff {
		retransmit = "off"
	}
	fmt.Fprintf(out, "bondd demo: %s, %.1f Mbit/s of %d-byte UDP packets for %s over %d uplinks, scheduler %s, FEC %s, rate control %s, retransmission %s\n",
		bed.Mode, o.RateMbps, PacketBytes, o.Duration, len(sc.Paths), o.Scheduler, o.FEC, o.RateControl, retransmit)
	if o.LossPct > 0 {
		fmt.Fprintf(out, "extra random loss: %g %% on every path, each direction\n", o.LossPct)
	}
	if sc.Source == "builtin" {
		where := "no trace folder found (looked for ../shared/data/traces from the working directory, the executable's directory and the module root; --traces DIR names one)"
		switch {
		case o.Traces != "":
			where = o.Traces + " holds no cellular/mahimahi and cellular/5gophers traces"
		case o.BuiltinAsked:
			where = `none (--traces "")`
		}
		fmt.Fprintf(out, "traces: %s; using the built-in models fitted to the public traces (see docs/emu.md)\n", where)
	} else {
		fmt.Fprintf(out, "traces: %s\n", sc.Source)
	}
	if o.Started != nil {
		if err := o.Started(bed); err != nil {
			return err
		}
	}
	if err := WaitPaths(ctx, bed.Edge, len(sc.Paths)); err != nil {
		return err
	}
	fs := newDemoFlow()
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); bed.Recv(rctx, fs.record) }()
	before, concBefore := bed.Edge.Stats(), bed.Conc.Stats()
	sendFlow(ctx, o.RateMbps, o.Duration, fs, bed.Send)
	// Let the last packets drain through the slowest path.
	select {
	case <-time.After(2 * time.Second):
	case <-ctx.Done():
	}
	rcancel()
	<-done
	if ctx.Err() != nil {
		return ctx.Err()
	}
	concAfter := bed.Conc.Stats()
	rep := buildReport(bed, sc, o, fs, before, bed.Edge.Stats())
	// Duplicates are filtered where the flow arrives, at the concentrator.
	rep.Bond.Duplicates = concAfter.Drops[tunnel.DropDuplicate] - concBefore.Drops[tunnel.DropDuplicate]
	tx, rx, rx0 := rep.fecAfter(before, bed.Edge.Stats()), concAfter.FEC, concBefore.FEC
	rep.Scheduler, rep.Seed, rep.ExtraLossPct, rep.RateControl = o.Scheduler, o.Seed, o.LossPct, o.RateControl
	if rep.RateControl == "" {
		rep.RateControl = RateControlBondd
	}
	rep.FEC, rep.CodingRate, rep.ParitySent, rep.Recovered = o.FEC, tx.rate, tx.parity, rx.Recovered-rx0.Recovered
	if os.Getenv("BONDD_DEMO_DEBUG") != "" {
		for _, p := range bed.Edge.Stats().Paths {
			fmt.Fprintf(out, "DEBUG %+v\n", p)
		}
	}
	printReport(out, rep)
	if o.JSONPath != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(o.JSONPath, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// NewBed builds the netns testbed as root, unless inprocess is set, and the
// in-process one otherwise, saying so on out when that is for want of root.
func NewBed(o BedOptions, inprocess bool, out io.Writer) (*Bed, error) {
	if err := applyRateControl(o.RateControl, nil, nil); err != nil {
		return nil, err
	}
	if testbed.IsRoot() && !inprocess {
		return newNetnsBed(o)
	}
	if !inprocess {
		fmt.Fprintln(out, "not root: running in one process with in-memory TUN devices (run as root for a network-namespace testbed)")
	}
	return newInprocessBed(o)
}

// WaitPaths waits up to 15 s for every path to come up.
func WaitPaths(ctx context.Context, b *tunnel.Bond, n int) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		up := 0
		for _, p := range b.Stats().Paths {
			if p.Status != "UNAVAILABLE" {
				up++
			}
		}
		if up == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d paths came up: %+v", up, n, b.Stats().Paths)
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func buildReport(bed *Bed, sc emu.Scenario, o Options, fs *demoFlow, before, after tunnel.BondStats) demoReport {
	sent, recvd, owd, goodput := fs.summary(o.Duration)
	rep := demoReport{
		Mode: bed.Mode, DurationS: o.Duration.Seconds(), RateMbps: o.RateMbps,
		OWDms: owd, GoodputMbps: goodput, PacketsSent: sent, PacketsReceived: recvd,
		Bond: &bondSummary{NoPath: after.Drops[tunnel.DropNoPath] - before.Drops[tunnel.DropNoPath]},
	}
	if sent > 0 {
		rep.LossRate = 1 - float64(recvd)/float64(sent)
	}
	if sc.Source == "builtin" {
		rep.Traces = []string{"builtin"}
	} else {
		for _, p := range sc.Paths {
			for _, f := range p.Files {
				if !slices.Contains(rep.Traces, f) {
					rep.Traces = append(rep.Traces, f)
				}
			}
		}
	}
	var total uint64
	for i, p := range after.Paths {
		total += p.TxPackets - before.Paths[i].TxPackets
	}
	for i, p := range after.Paths {
		b := before.Paths[i]
		dp := demoPath{Name: p.Name, State: p.Status, RTTms: float64(p.SmoothedRTT) / 1e6, Packets: p.TxPackets - b.TxPackets,
			Moved: p.Rescued - b.Rescued}
		if total > 0 {
			dp.Share = float64(dp.Packets) / float64(total)
		}
		if s := p.PacketsSent - b.PacketsSent; s > 0 {
			dp.LossRate = float64(p.PacketsLost-b.PacketsLost) / float64(s)
		}
		if r := p.Rate; r != nil {
			dp.TargetMbps, dp.DeliveryMbps = float64(r.TargetBps)/1e6, float64(r.DeliveryBps)/1e6
			dp.QueueDelayMs, dp.ReceiverLoss = float64(r.QueueDelay)/1e6, r.Loss
			dp.HeldBackBytes = r.HeldBackBytes
			if b.Rate != nil {
				dp.HeldBackBytes -= min(dp.HeldBackBytes, b.Rate.HeldBackBytes)
			}
		}
		rep.Bond.QueueFull += p.Drops[tunnel.DropQueueFull] - b.Drops[tunnel.DropQueueFull]
		rep.Bond.Expired += p.Drops[tunnel.DropExpired] - b.Drops[tunnel.DropExpired]
		rep.Bond.Deadline += p.Drops[tunnel.DropDeadline] - b.Drops[tunnel.DropDeadline]
		rep.Bond.Resent += p.Resent - b.Resent
		rep.Bond.ResendLate += p.ResendLate - b.ResendLate
		rep.Paths = append(rep.Paths, dp)
	}
	rep.Bond.QueueDrops = rep.Bond.QueueFull + rep.Bond.Expired + rep.Bond.Deadline
	return rep
}

func printReport(out io.Writer, r demoReport) {
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	if r.RateControl != RateControlBondd {
		// quic-go's congestion control decides the rates: no pacer figures.
		fmt.Fprintln(tw, "path\tstate\tshare\tpackets\tsrtt ms\tQUIC loss\t")
		for _, p := range r.Paths {
			fmt.Fprintf(tw, "%s\t%s\t%.1f %%\t%d\t%.1f\t%.2f %%\t\n", p.Name, p.State, 100*p.Share, p.Packets, p.RTTms, 100*p.LossRate)
		}
	} else {
		// Rate control: the target and delivery rate at the end of the run,
		// the queueing delay the receiver saw, its loss, and the bytes the
		// pacer held back over the flow.
		fmt.Fprintln(tw, "path\tstate\tshare\tpackets\tsrtt ms\tQUIC loss\ttarget Mbit/s\tdelivery Mbit/s\tqueue ms\trx loss\theld back KB\t")
		for _, p := range r.Paths {
			fmt.Fprintf(tw, "%s\t%s\t%.1f %%\t%d\t%.1f\t%.2f %%\t%.2f\t%.2f\t%.1f\t%.2f %%\t%d\t\n", p.Name, p.State, 100*p.Share, p.Packets, p.RTTms, 100*p.LossRate,
				p.TargetMbps, p.DeliveryMbps, p.QueueDelayMs, 100*p.ReceiverLoss, p.HeldBackBytes/1000)
		}
	}
	tw.Flush()
	fmt.Fprintln(out)
	fmt.Fprintf(out, "end to end: %d sent, %d received, loss %.2f %%, goodput %.2f Mbit/s\n",
		r.PacketsSent, r.PacketsReceived, 100*r.LossRate, r.GoodputMbps)
	fmt.Fprintf(out, "one-way delay: mean %.1f ms, p50 %.1f ms, p95 %.1f ms, p99 %.1f ms\n",
		r.OWDms.Mean, r.OWDms.P50, r.OWDms.P95, r.OWDms.P99)
	if r.FEC != tunnel.FECOff {
		fmt.Fprintf(out, "FEC: coding rate %.3f, %d parity packets sent, %d packets recovered\n", r.CodingRate, r.ParitySent, r.Recovered)
	}
	fmt.Fprintf(out, "bond drops: %d in send queues (%d full, %d older than %s, %d past a rule deadline), %d with no path; %d duplicates filtered\n",
		r.Bond.QueueDrops, r.Bond.QueueFull, r.Bond.Expired, tunnel.DefaultMaxQueueDelay, r.Bond.Deadline, r.Bond.NoPath, r.Bond.Duplicates)
	fmt.Fprintf(out, "retransmitted: %d lost datagrams sent again, %d lost too late to arrive in time\n", r.Bond.Resent, r.Bond.ResendLate)
	var moved []string
	for _, p := range r.Paths {
		if p.Moved > 0 {
			moved = append(moved, fmt.Sprintf("%d from %s", p.Moved, p.Name))
		}
	}
	if len(moved) > 0 {
		fmt.Fprintf(out, "moved to another path while queued: %s\n", strings.Join(moved, ", "))
	}
}

type fecDelta struct {
	rate   float64
	parity uint64
}

// fecAfter returns the edge's coding rate and parity count over the flow
// only (between the two snapshots).
func (demoReport) fecAfter(before, after tunnel.BondStats) fecDelta {
	b, a := before.FEC, after.FEC
	data, parity := a.DataProtected-b.DataProtected, a.ParitySent-b.ParitySent
	d := fecDelta{rate: 1, parity: parity}
	if data+parity > 0 {
		d.rate = float64(data) / float64(data+parity)
	}
	return d
}

// addLoss adds independent random loss p (0..1) to both directions of
// every path of sc, on top of what each path already loses.
func addLoss(sc *emu.Scenario, p float64) {
	if p <= 0 {
		return
	}
	for i := range sc.Paths {
		for _, l := range []*emu.LinkConfig{&sc.Paths[i].Up, &sc.Paths[i].Down} {
			l.Loss = 1 - (1-l.Loss)*(1-p)
		}
	}
}

// demoLogger returns the edge's logger for demo and bench testbeds: the
// edge's info-level log (paths up and down) on stderr when
// BONDD_DEMO_LOG is set, else nil (discarded).
func demoLogger() *slog.Logger {
	if os.Getenv("BONDD_DEMO_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}
