package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/bondd/bondd/internal/config"
	"github.com/bondd/bondd/internal/node"
	"github.com/bondd/bondd/internal/status"
	"github.com/bondd/bondd/internal/usage"
	"github.com/bondd/bondd/rules"
)

// defaultControlSocket is where bondd run serves its status, and where
// bondd status looks for it.
const defaultControlSocket = "/run/bondd/bondd.sock"

// statusSource builds status reports of a running daemon; what it adds to
// the tunnel's counters comes from the config and the rule watcher.
type statusSource struct {
	d       node.Daemon
	started time.Time
	addrs   map[string][]netip.Prefix // inner addresses by edge id
	rules   *ruleTracker              // nil without a rule file
	usage   *usage.Accountant         // nil without usage accounting
}

// newStatusSource returns the status source of daemon d started from cfg.
func newStatusSource(d node.Daemon, cfg *config.Config, rt *ruleTracker) *statusSource {
	s := &statusSource{d: d, started: time.Now(), addrs: make(map[string][]netip.Prefix), rules: rt}
	if e := cfg.Edge; e != nil {
		s.addrs[e.ID] = cfg.TUN.Addresses
	}
	if k := cfg.Concentrator; k != nil {
		for _, e := range k.Edges {
			s.addrs[e.ID] = e.AllowedPrefixes
		}
	}
	return s
}

// report snapshots the daemon. It is safe for concurrent use and cheap
// enough for every scrape and every status request: it reads counters.
func (s *statusSource) report() status.Report {
	r := status.Report{Version: versionString(), Uptime: time.Since(s.started), Rules: s.rules.status(), Usage: usageStatus(s.usage)}
	bonds := node.Report(s.d, &r)
	for _, b := range bonds {
		r.Bonds = append(r.Bonds, status.Bond{BondStats: b, Addresses: s.addrs[b.EdgeID]})
	}
	return r
}

// ruleTracker follows the rule watcher for the status report.
type ruleTracker struct {
	file    string
	w       *rules.Watcher // set once NewWatcher has returned
	version atomic.Uint64
	loaded  atomic.Int64 // Unix nanoseconds
	lastErr atomic.Pointer[string]
}

// newRuleTracker records the set loaded at start as version 1.
func newRuleTracker(file string) *ruleTracker {
	t := &ruleTracker{file: file}
	t.onReload(nil, nil)
	return t
}

// onReload is the watcher's OnReload hook: a reload that installed a set
// is a new version.
func (t *ruleTracker) onReload(_ *rules.Set, err error) {
	if err != nil {
		msg := err.Error()
		t.lastErr.Store(&msg)
	}
	if err == nil {
		t.loaded.Store(time.Now().UnixNano())
		t.version.Add(1)
	}
}

func (t *ruleTracker) status() *status.Rules {
	if t == nil || t.w == nil {
		return nil
	}
	st := &status.Rules{File: t.file, Version: t.version.Load(), Loaded: time.Unix(0, t.loaded.Load()), Rules: t.w.Current().Len()}
	st.Reloads, st.ReloadFailures = t.w.Stats()
	if e := t.lastErr.Load(); e != nil {
		st.LastError = *e
	}
	return st
}

func newStatusCmd() *cobra.Command {
	var (
		sock     string
		asJSON   bool
		watch    bool
		interval time.Duration
	)
	cmd := &cobra.Command{
		Use:   "status [--json] [--watch [--interval 1s]]",
		Short: "Show the bonds and paths of a running bondd",
		Long: "Status reads the control socket of a running bondd and prints each bond\n" +
			"and path as a table, or as JSON with --json. --watch refreshes it every\n" +
			"--interval until interrupted; with --json it prints one JSON document per\n" +
			"line. See docs/operations.md for what the columns mean.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if watch {
				if interval < minWatchInterval {
					return fmt.Errorf("--interval %s is too short; expected at least %s", interval, minWatchInterval)
				}
				ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				return status.Watch(ctx, out, sock, interval, asJSON, isTerminal(out))
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), status.Timeout)
			defer cancel()
			r, err := status.Fetch(ctx, sock)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(r)
			}
			status.Print(out, r, time.Now())
			return nil
		},
	}
	cmd.Flags().StringVar(&sock, "socket", defaultControlSocket, "control socket of the running bondd")
	// bondd run names the same socket --control-socket; both spellings work.
	cmd.Flags().StringVar(&sock, "control-socket", defaultControlSocket, "same as --socket, as bondd run spells it")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "refresh until interrupted")
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "refresh period with --watch")
	return cmd
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// minWatchInterval is the shortest --interval accepted.
const minWatchInterval = 100 * time.Millisecond
