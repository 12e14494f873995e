package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/bondd/bondd/internal/config"
	"github.com/bondd/bondd/internal/node"
	"github.com/bondd/bondd/internal/status"
	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/rules"
)

func newRunCmd() *cobra.Command {
	var cfgPath, ctlPath string
	var check, resetState bool
	cmd := &cobra.Command{
		Use:   "run --config FILE",
		Short: "Run an edge or a concentrator from a config file",
		Long: "Run opens the TUN device and the uplinks described in the config file and\n" +
			"carries traffic until SIGINT or SIGTERM. See docs/config.md.\n\n" +
			"With --check it only loads the config file, the files it names and its rule\n" +
			"file, prints what it would run, and exits: non-zero, with every error found,\n" +
			"when something is wrong (before a restart or a reload, like nginx -t).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if check {
				cfg, err := config.LoadWith(cfgPath, config.Options{Partial: true})
				return checkConfig(cmd.OutOrStdout(), cfg, err)
			}
			cfg, err := config.Load(cfgPath)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			log := newLogger(cfg.LogLevel, cfg.LogFormat, os.Stderr)
			if resetState {
				if err := node.ResetUsage(cfg, log); err != nil {
					return err
				}
			}
			return runDaemon(ctx, cfg, ctlPath, log)
		},
	}
	cmd.Flags().StringVarP(&cfgPath, "config", "c", "", "config file (YAML)")
	cmd.MarkFlagRequired("config")
	cmd.Flags().StringVar(&ctlPath, "control-socket", defaultControlSocket, "Unix socket serving status to bondd status; empty: none")
	cmd.Flags().BoolVar(&check, "check", false, "check the config file and its rule files, print a summary and exit")
	cmd.Flags().BoolVar(&resetState, "reset-state", false, "move the usage store (state_dir/usage.db) aside with a timestamp and start an empty one")
	return cmd
}

// checkConfig compiles cfg's rule files, if any (rules, and an edge's
// downlink_rules), and writes a summary of what cfg runs to w. cfgErr is
// what loading cfg found (cfg partial, or nil when the file is not YAML):
// the rule files are still checked, except one whose path, or whose
// classes (classify), the config's errors already name. It returns
// cfgErr and the errors of every rule file, joined, and then writes
// nothing.
func checkConfig(w io.Writer, cfg *config.Config, cfgErr error) error {
	if cfg == nil {
		return cfgErr
	}
	var bad []string // fields cfgErr names
	var ces config.Errors
	if errors.As(cfgErr, &ces) {
		for _, e := range ces {
			bad = append(bad, e.Field)
		}
	}
	named := func(prefix string) bool {
		return slices.ContainsFunc(bad, func(f string) bool { return strings.HasPrefix(f, prefix) })
	}
	type ruleFile struct {
		what, file string
		set        *rules.Set
	}
	var files []ruleFile
	errs := []error{cfgErr}
	if cfg.Rules != "" && !named("rules") && !named("classify") {
		copts, err := cfg.Classify.Options()
		var set *rules.Set
		if err == nil {
			set, err = rules.Load(cfg.Rules, rules.Options{Classes: copts.Classes})
		}
		files, errs = append(files, ruleFile{"rules", cfg.Rules, set}), append(errs, err)
	}
	if cfg.Edge != nil && cfg.Edge.DownlinkRules != "" && !named("edge.downlink_rules") {
		set, err := rules.Load(cfg.Edge.DownlinkRules, rules.Options{}) // as the edge loads it (internal/node)
		files, errs = append(files, ruleFile{"downlink rules", cfg.Edge.DownlinkRules, set}), append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Fprintf(w, "%s: OK, role %s\n", cfg.File(), cfg.Role)
	for _, e := range cfg.Warnings() {
		fmt.Fprintf(w, "  warning: %v\n", e)
	}
	switch {
	case cfg.Edge != nil:
		e := cfg.Edge
		fmt.Fprintf(w, "edge %s to concentrator %s, %d uplink(s):\n", e.ID, e.Concentrator, len(e.Uplinks))
		for _, u := range e.Uplinks {
			fmt.Fprintf(w, "  %s", u.Name)
			if u.Interface != "" {
				fmt.Fprintf(w, " on %s", u.Interface)
			}
			if l := u.LEOReconf; l != nil {
				secs, win, hold := l.Seconds, l.Window, l.Hold
				if len(secs) == 0 {
					secs = policy.DefaultLEOSeconds()
				}
				if win == 0 {
					win = policy.DefaultLEOWindow
				}
				holdText := "no hold"
				switch {
				case hold == 0:
					holdText = "hold " + policy.DefaultLEOHold.String()
				case hold > 0:
					holdText = "hold " + hold.String()
				}
				list := make([]string, len(secs))
				for i, s := range secs {
					list[i] = strconv.Itoa(s)
				}
				fmt.Fprintf(w, ", LEO reconfiguration schedule (seconds %s of each UTC minute, window ±%v, %s)",
					strings.Join(list, ","), win, holdText)
			}
			if len(u.Labels) > 0 {
				keys := slices.Sorted(maps.Keys(u.Labels))
				fmt.Fprint(w, ", labels")
				for _, k := range keys {
					fmt.Fprintf(w, " %s=%s", k, u.Labels[k])
				}
			}
			fmt.Fprintln(w)
		}
	case cfg.Concentrator != nil:
		fmt.Fprintf(w, "concentrator on %s, %d edge(s)\n", cfg.Concentrator.Listen, len(cfg.Concentrator.Edges))
	}
	if cfg.Web.Listen != "" {
		fmt.Fprintf(w, "web page on %s (read-only; docs/operations.md, \"The web page\")\n", cfg.Web.Listen)
	}
	for _, f := range files {
		fmt.Fprintf(w, "%s: %s, %d rule(s)\n", f.what, f.file, f.set.Len())
		for _, e := range f.set.Warnings() {
			fmt.Fprintf(w, "  warning: %v\n", e)
		}
	}
	return nil
}

// runDaemon starts the configured role, its control socket and metrics
// endpoint, and blocks until ctx is done.
func runDaemon(ctx context.Context, cfg *config.Config, ctlPath string, log *slog.Logger) error {
	for _, e := range cfg.Warnings() { // retired keys: the config runs without them
		log.Warn("config: "+e.Msg, "file", e.File, "line", e.Line, "field", e.Field)
	}
	if ctlPath != "" {
		if err := status.SocketFree(ctlPath); err != nil {
			return err
		}
	}
	st, err := node.OpenUsage(cfg, log) // a store it refuses stops bondd here
	if err != nil {
		return err
	}
	defer st.Close()
	var (
		rw *rules.Watcher
		rt *ruleTracker
	)
	if cfg.Rules != "" {
		rt = newRuleTracker(cfg.Rules)
		if rw, err = startRules(cfg, log, rt.onReload); err != nil {
			return err
		}
		rt.w = rw
		defer rw.Close()
	}
	// SIGHUP reloads the rules (systemctl reload). Without a rule file it
	// is logged and ignored rather than ending the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer func() { signal.Stop(hup); close(hup) }() // no send after Stop returns
	var reload atomic.Pointer[func()]               // the concentrator's edge list (node.EdgeReloader), once started
	go func() {
		for range hup {
			if f := reload.Load(); f != nil {
				(*f)()
			}
			if rw == nil {
				log.Info("SIGHUP: no rule file configured; nothing to reload")
				continue
			}
			log.Info("SIGHUP: reloading the rules", "file", cfg.Rules)
			rw.Reload() // a failure is logged by the watcher; the old rules stay
		}
	}()
	d, err := node.Start(cfg, rw, log)
	if err != nil {
		return err
	}
	if f := node.EdgeReloader(d, cfg.File(), cfg.TUN.Name); f != nil && cfg.File() != "" {
		reload.Store(&f)
	}
	acct, err := node.StartUsage(cfg, d, st, log)
	if err != nil {
		d.Close()
		return err
	}
	defer func() { // after d.Close: the paths' last packets count
		if err := acct.Close(); err != nil {
			log.Error("usage: the last flush failed", "err", err)
		}
	}()
	src := newStatusSource(d, cfg, rt)
	src.usage = acct
	if ctlPath != "" {
		ctl, err := status.Serve(ctlPath, src.report, func() error { return node.Drain(d) }, usageHandler(acct))
		if err != nil {
			d.Close()
			return err
		}
		defer ctl.Close()
		defer os.Remove(ctlPath)
	}
	if ws, err := startWeb(cfg, src.report, log); err != nil {
		d.Close()
		return err
	} else if ws != nil {
		defer ws.Close()
	}
	if cfg.MetricsListen != "" {
		srv, addr, err := serveMetrics(cfg.MetricsListen, src.report, log)
		if err != nil {
			d.Close()
			return err
		}
		defer srv.Close()
		log.Info("metrics listening", "url", "http://"+addr.String()+"/metrics")
	}
	<-ctx.Done()
	log.Info("shutting down")
	return d.Close()
}

// startRules loads the rule file and watches it for changes; onReload is
// the watcher's OnReload hook.
func startRules(cfg *config.Config, log *slog.Logger, onReload func(*rules.Set, error)) (*rules.Watcher, error) {
	copts, err := cfg.Classify.Options()
	if err != nil {
		return nil, err
	}
	return rules.NewWatcher(rules.WatcherOptions{Path: cfg.Rules, Compile: rules.Options{Classes: copts.Classes}, Logger: log, OnReload: onReload})
}

// newLogger returns a slog logger at level ("debug", "info", "warn",
// "error") in format "text" or "json".
func newLogger(level, format string, w *os.File) *slog.Logger {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		lv = slog.LevelInfo
	}
	ho := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, ho))
	}
	return slog.New(slog.NewTextHandler(w, ho))
}
