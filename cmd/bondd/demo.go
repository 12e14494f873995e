package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/bondd/bondd/emu"
	"github.com/bondd/bondd/internal/config"
	"github.com/bondd/bondd/internal/demo"
	"github.com/bondd/bondd/internal/status"
	"github.com/bondd/bondd/internal/web"
	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/tunnel"
)

func newDemoCmd() *cobra.Command {
	var (
		o          demo.Options
		retransmit bool
		webAddr    string
		ctlPath    string
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the bond over three emulated cellular uplinks and print a report",
		Long: `Demo builds an edge and a concentrator joined by three uplinks that replay
real cellular driving traces through the link emulator, sends a constant-rate
UDP flow of 1200-byte packets through the bond, and prints per-path and
end-to-end figures.

As root it builds a network-namespace testbed (edge, link emulator,
concentrator) with real TUN devices. Otherwise, or with --inprocess, it runs
the same data path in one process with in-memory TUN devices.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("traces") && o.Traces != "" && !emu.HasCellularTraces(o.Traces) {
				return fmt.Errorf("--traces %s: expected a folder laid out like shared/data/traces, with cellular/mahimahi and cellular/5gophers", o.Traces)
			}
			o.RetransmitOff = !retransmit
			o.BuiltinAsked = cmd.Flags().Changed("traces") && o.Traces == ""
			var stops []func()
			defer func() {
				for _, stop := range stops {
					stop()
				}
			}()
			o.Started = func(bed *demo.Bed) error {
				if ctlPath != "" {
					stops = append(stops, startDemoStatus(ctlPath, bed, cmd.OutOrStdout()))
				}
				if webAddr != "" {
					stop, err := startDemoWeb(webAddr, bed, cmd.OutOrStdout())
					if err != nil {
						return err
					}
					stops = append(stops, stop)
				}
				return nil
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			err := demo.Run(ctx, o, cmd.OutOrStdout())
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				return errors.New("demo interrupted; the testbed was removed")
			}
			return err
		},
	}
	f := cmd.Flags()
	f.DurationVar(&o.Duration, "duration", 30*time.Second, "how long the flow runs")
	f.Float64Var(&o.RateMbps, "rate", 4, "flow rate, Mbit/s")
	f.StringVar(&o.Traces, "traces", emu.DefaultTracesDir(), "folder laid out like shared/data/traces (cellular/, leo/); empty, or the default folder missing: built-in models")
	f.StringVar(&o.JSONPath, "json", "", "also write the report as JSON to this file")
	f.Uint64Var(&o.Seed, "seed", 1, "seed of the link emulator: the same seed replays the same trace offsets and random draws (results still vary with the machine's timing)")
	f.BoolVar(&o.Inprocess, "inprocess", false, "run in one process without TUN devices even as root")
	f.StringVar(&o.FEC, "fec", tunnel.FECAdaptive, "forward error correction: adaptive or off")
	f.StringVar(&o.Scheduler, "scheduler", policy.SchedulerDefault, "path scheduler: "+strings.Join(policy.Schedulers, ", "))
	f.Float64Var(&o.LossPct, "loss", 0, "extra random loss on every emulated path, each direction, percent")
	f.StringVar(&o.RateControl, "rate-control", tunnel.RateControlBondd, "who decides each path's rate: bondd (bondd's controller inside quic-go, the daemon's default) or quic (quic-go's own NewReno, the baseline)")
	f.StringVar(&ctlPath, "control-socket", demoControlSocket, "serve the demo edge's status on this Unix socket while the demo runs, for bondd status --socket; skipped with a note when another bondd holds it or it cannot be made; empty: none")
	f.StringVar(&webAddr, "web", "", "serve the live web page on this address while the demo runs, like 127.0.0.1:8740 (docs/operations.md, \"The web page\")")
	f.BoolVar(&retransmit, "retransmit", true, "retransmit lost data datagrams (the daemon's default); false: FEC alone repairs loss, as before")
	return cmd
}

// demoControlSocket is where the demo serves its edge's status: beside
// the daemon's socket, not on it, so that a bondd run started while a
// demo runs (a service restart) is not refused its socket, and bondd drain
// never reaches the demo.
const demoControlSocket = "/run/bondd/demo.sock"

// demoReport returns the status source of one of the demo's nodes, as
// bondd run's would be: role, its one bond, the edge's inner address.
func demoReport(role string, b *tunnel.Bond, started time.Time) func() status.Report {
	prefix := []netip.Prefix{netip.PrefixFrom(demo.EdgeAddr, 32)}
	return func() status.Report {
		return status.Report{Role: role, Version: versionString() + " (demo)", Uptime: time.Since(started),
			Bonds: []status.Bond{{BondStats: b.Stats(), Addresses: prefix}}}
	}
}

// startDemoStatus serves the demo edge's status on the control socket
// path, so that bondd status --socket path (and --watch) shows the demo's
// paths live, and returns a func that stops it: it removes the socket, and
// its folder (the last level only) if the demo made it and nothing else
// has been put there. A socket another bondd serves, or one that cannot
// be made (a user without write access to its folder), is skipped with a
// note: the demo runs without it.
func startDemoStatus(path string, bed *demo.Bed, out io.Writer) func() {
	dir := filepath.Dir(path)
	_, err := os.Stat(dir)
	made := errors.Is(err, fs.ErrNotExist)
	ctl, err := status.Serve(path, demoReport(config.RoleEdge, bed.Edge, time.Now()), nil)
	if err != nil {
		if made {
			os.Remove(dir) // Serve may have made it before it failed
		}
		fmt.Fprintf(out, "status: not served (%v)\n", err)
		return func() {}
	}
	hint := "bondd status --socket " + path
	fmt.Fprintf(out, "status: %s (add --watch to follow) shows the demo's edge while it runs\n", hint)
	return func() {
		ctl.Close()
		os.Remove(path)
		if made {
			os.Remove(dir) // fails, and keeps it, when something else is in it
		}
	}
}

// startDemoWeb serves the web page of the demo's edge on addr, and the
// concentrator's page on the next port (its table of edges, and the edge's
// page as the concentrator sees it: what arrived, loss after FEC): their
// status reports hold the edge's and the concentrator's bond, as bondd
// run's would. It returns a func that stops both. The concentrator's page
// is skipped, with a note, when its port is taken.
func startDemoWeb(addr string, bed *demo.Bed, out io.Writer) (func(), error) {
	started := time.Now()
	edge, err := web.Start(web.Options{Listen: addr, Source: demoReport(config.RoleEdge, bed.Edge, started)})
	if err != nil {
		return nil, fmt.Errorf("--web: %w", err)
	}
	fmt.Fprintf(out, "web page: open %s in a browser; it is served while the demo runs (--duration 5m to watch longer)\n", edge.URL())
	stop := func() { edge.Close() }
	a := edge.Addr().(*net.TCPAddr)
	concAddr := net.JoinHostPort(a.IP.String(), strconv.Itoa(a.Port+1))
	conc, err := web.Start(web.Options{Listen: concAddr, Source: demoReport(config.RoleConcentrator, bed.Conc, started)})
	if err != nil {
		fmt.Fprintf(out, "the concentrator's page is not served: %v\n", err)
		return stop, nil
	}
	fmt.Fprintf(out, "the concentrator's page (what arrives, loss after FEC): %s\n", conc.URL())
	return func() { conc.Close(); edge.Close() }, nil
}
