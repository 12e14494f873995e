package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/bondd/bondd/internal/config"
	"github.com/bondd/bondd/rules"
	"github.com/bondd/bondd/tunnel"
)

// defaultControlSocket is where bondd run serves its status, and where
// bondd status looks for it.
const defaultControlSocket = "/run/bondd/bondd.sock"

// statusReport is the JSON document served on the control socket, and
// what the Prometheus collector exports.
type statusReport struct {
	Role         string        `json:"role"` // edge or concentrator
	Version      string        `json:"version"`
	Uptime       time.Duration `json:"uptime_ns"`               // since the daemon started
	Rules        *rulesStatus  `json:"rules,omitempty"`         // the rule file; nil without one
	Bonds        []bondStatus  `json:"bonds"`                   // one on an edge, one per configured edge on a concentrator
	NoRoute      uint64        `json:"no_route,omitempty"`      // concentrator: downlink packets with no edge
	LinkLocal    uint64        `json:"link_local,omitempty"`    // concentrator: TUN packets to link-scope destinations, not routed
	AuthFailures uint64        `json:"auth_failures,omitempty"` // concentrator: refused path connections
	// BGP is the node's BGP speaker (concentrator.bgp); nil without one.
	BGP *bgpStatus `json:"bgp,omitempty"`
	// Fleet is the edge's place among several nodes; nil with one node.
	Fleet *edgeNodesStatus `json:"fleet,omitempty"`
}

// bondStatus is one bond's counters and the inner addresses it carries.
type bondStatus struct {
	tunnel.BondStats
	// Addresses are the edge's inner addresses: its TUN addresses on the
	// edge, its allowed prefixes on the concentrator.
	Addresses []netip.Prefix `json:"addresses,omitempty"`
}

// rulesStatus describes the rule set in force.
type rulesStatus struct {
	File string `json:"file"`
	// Version counts the sets installed since the daemon started: 1 is the
	// one loaded at start, and each successful reload adds one. Rule hit
	// counters restart from zero with each version.
	Version        uint64    `json:"version"`
	Loaded         time.Time `json:"loaded"` // when this version was installed
	Rules          int       `json:"rules"`
	Reloads        uint64    `json:"reloads"`         // reloads tried after the first load
	ReloadFailures uint64    `json:"reload_failures"` // reloads that kept the running set
}

// statusSource builds status reports of a running daemon; what it adds to
// the tunnel's counters comes from the config and the rule watcher.
type statusSource struct {
	d       daemon
	started time.Time
	addrs   map[string][]netip.Prefix // inner addresses by edge id
	rules   *ruleTracker              // nil without a rule file
}

// newStatusSource returns the status source of daemon d started from cfg.
func newStatusSource(d daemon, cfg *config.Config, rt *ruleTracker) *statusSource {
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
func (s *statusSource) report() statusReport {
	r := statusReport{Version: versionString(), Uptime: time.Since(s.started), Rules: s.rules.status()}
	var bonds []tunnel.BondStats
	switch d := s.d.(type) {
	case *tunnel.Edge:
		r.Role = config.RoleEdge
		bonds = []tunnel.BondStats{d.Bond().Stats()}
	case edgeWithDownlink:
		r.Role = config.RoleEdge
		bonds = []tunnel.BondStats{d.Bond().Stats()}
	case fleetEdge:
		r.Role = config.RoleEdge
		bonds = []tunnel.BondStats{d.Bond().Stats()}
		r.Fleet = d.f.status()
	case *tunnel.Concentrator:
		r.Role = config.RoleConcentrator
		bonds = d.Stats()
		r.NoRoute, r.AuthFailures, r.LinkLocal = d.NoRoute(), d.AuthFailures(), d.LinkLocal()
	case *fleetNode:
		r.Role = config.RoleConcentrator
		bonds = d.Stats()
		r.NoRoute, r.AuthFailures, r.LinkLocal = d.NoRoute(), d.AuthFailures(), d.LinkLocal()
		r.BGP = d.bgpStatus()
	}
	for _, b := range bonds {
		r.Bonds = append(r.Bonds, bondStatus{BondStats: b, Addresses: s.addrs[b.EdgeID]})
	}
	return r
}

// ruleTracker follows the rule watcher for the status report.
type ruleTracker struct {
	file    string
	w       *rules.Watcher // set once NewWatcher has returned
	version atomic.Uint64
	loaded  atomic.Int64 // Unix nanoseconds
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
	if err == nil {
		t.loaded.Store(time.Now().UnixNano())
		t.version.Add(1)
	}
}

func (t *ruleTracker) status() *rulesStatus {
	if t == nil || t.w == nil {
		return nil
	}
	st := &rulesStatus{File: t.file, Version: t.version.Load(), Loaded: time.Unix(0, t.loaded.Load()), Rules: t.w.Current().Len()}
	st.Reloads, st.ReloadFailures = t.w.Stats()
	return st
}

// serveControl serves GET /status, the report of src, as JSON on a Unix
// socket at path, mode 0600 (root only). A stale socket file from a dead
// process is replaced.
func serveControl(path string, src func() statusReport, drain func() error) (io.Closer, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	if err := controlSocketFree(path); err != nil {
		return nil, err
	}
	os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(src())
	})
	mux.HandleFunc("POST /drain", func(w http.ResponseWriter, _ *http.Request) { // bondd drain (fleet.go)
		if err := drain(); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
		}
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return srv, nil
}

// controlSocketFree returns an error when another bondd answers on path.
// bondd run checks it before it touches the TUN or the routes, so a second
// daemon started by mistake cannot disturb the running one.
func controlSocketFree(path string) error {
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		return fmt.Errorf("control socket %s is in use by another bondd", path)
	}
	return nil
}

// fetchStatus reads the status document from the control socket at path.
func fetchStatus(ctx context.Context, path string) (*statusReport, error) {
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		},
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://bondd/status", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("no bondd answering on %s: %w", path, err)
	}
	defer resp.Body.Close()
	var r statusReport
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, err
	}
	return &r, nil
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
				return watchStatus(ctx, out, sock, interval, asJSON, isTerminal(out))
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), statusTimeout)
			defer cancel()
			r, err := fetchStatus(ctx, sock)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(r)
			}
			printStatus(out, r, time.Now())
			return nil
		},
	}
	cmd.Flags().StringVar(&sock, "socket", defaultControlSocket, "control socket of the running bondd")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "refresh until interrupted")
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "refresh period with --watch")
	return cmd
}

const (
	// statusTimeout bounds one request to the control socket.
	statusTimeout = 5 * time.Second
	// minWatchInterval is the shortest --interval accepted.
	minWatchInterval = 100 * time.Millisecond
	// clearScreen moves the cursor home and clears a VT100 terminal.
	clearScreen = "\x1b[H\x1b[2J"
)

// watchStatus prints the status every interval until ctx is done. On a
// terminal (clear) each report replaces the previous one; otherwise
// reports follow each other, separated by a blank line, or one JSON
// document per line. A failed request is printed and retried, so the
// watch outlives a daemon restart.
func watchStatus(ctx context.Context, w io.Writer, sock string, interval time.Duration, asJSON, clear bool) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var buf bytes.Buffer
	for first := true; ; first = false {
		rctx, cancel := context.WithTimeout(ctx, min(statusTimeout, max(interval, time.Second)))
		r, err := fetchStatus(rctx, sock)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		now := time.Now()
		buf.Reset()
		switch {
		case asJSON && err == nil:
			json.NewEncoder(&buf).Encode(r)
		case asJSON:
			json.NewEncoder(&buf).Encode(struct {
				Time  time.Time `json:"time"`
				Error string    `json:"error"`
			}{now, err.Error()})
		default:
			if clear {
				buf.WriteString(clearScreen)
			} else if !first {
				buf.WriteString("\n")
			}
			fmt.Fprintf(&buf, "every %s, %s\n", interval, now.Format(time.DateTime))
			if err != nil {
				fmt.Fprintf(&buf, "%v\n", err)
			} else {
				printStatus(&buf, r, now)
			}
		}
		if _, err := w.Write(buf.Bytes()); err != nil {
			return err // a closed pipe: stop
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
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

// printStatus prints r as text; now dates the rule set's load time.
func printStatus(w io.Writer, r *statusReport, now time.Time) {
	fmt.Fprintf(w, "%s, %s, up %s\n", r.Role, r.Version, r.Uptime.Round(time.Second))
	if rs := r.Rules; rs != nil {
		fmt.Fprintf(w, "rules %s: version %d, %d rules, loaded %s (%s ago); %d reloads, %d failed\n", rs.File, rs.Version, rs.Rules,
			rs.Loaded.Format(time.DateTime), now.Sub(rs.Loaded).Round(time.Second), rs.Reloads, rs.ReloadFailures)
	}
	if r.Role == config.RoleConcentrator {
		fmt.Fprintf(w, "refused connections: %d, downlink packets without a bond: %d, link-local packets not routed: %d\n", r.AuthFailures, r.NoRoute, r.LinkLocal)
	}
	printFleet(w, r) // fleet.go
	for _, b := range r.Bonds {
		fmt.Fprintf(w, "\nbond %s (id %x), up %s, mtu %d, addresses %s: tx %d rx %d packets\n", b.EdgeID, b.BondID,
			b.Uptime.Round(time.Second), b.MTU, formatPrefixes(b.Addresses), b.TxPackets, b.RxPackets)
		fmt.Fprintf(w, "  drops:")
		for _, r := range tunnel.BondDropReasons {
			fmt.Fprintf(w, " %s %d", r, b.Drops[r])
		}
		fmt.Fprintln(w)
		if f := b.FEC; f != nil {
			fmt.Fprintf(w, "  fec %s: coding rate %.3f, %d parity sent, %d skipped, %d blocks by k, %d by timer; received %d parity, recovered %d, lost %d (residual %.2f %%)\n",
				f.Mode, f.CodingRate, f.ParitySent, f.ParitySkipped, f.BlocksByK, f.BlocksByTimer, f.ParityReceived, f.Recovered, f.Lost, 100*f.ResidualLoss)
		}
		if r := b.Rules; r != nil {
			fmt.Fprintf(w, "  rule hits:")
			for _, h := range r.Rules {
				fmt.Fprintf(w, " %s=%d", h.ID, h.Hits)
			}
			fmt.Fprintln(w)
		}
		var total uint64
		for _, p := range b.Paths {
			total += p.TxPackets + p.RxPackets
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  path\tstatus\tlanes\tshare\tsrtt\tmin rtt\tcwnd\tcapacity\tlost/sent\ttx pkts\ttx bytes\trx pkts\trx bytes\tqueue\tdrops "+pathDropsHeader+"\tlabels\tlast error")
		for _, p := range b.Paths {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%d/%d\t%d\t%s\t%d\t%s\t%d\t%s\t%s\t%s\n", p.Name, p.Status,
				formatLanes(p), formatShare(p.TxPackets+p.RxPackets, total),
				p.SmoothedRTT.Round(10*time.Microsecond), p.MinRTT.Round(10*time.Microsecond), p.CongestionWindow,
				formatRate(p.CapacityBps), p.PacketsLost, p.PacketsSent, p.TxPackets, formatBytes(p.TxBytes), p.RxPackets, formatBytes(p.RxBytes), p.QueueLen,
				formatPathDrops(p.Drops), formatLabels(p.Labels), p.LastError)
		}
		tw.Flush()
	}
}

// pathDropsHeader names the path drop reasons in the order formatPathDrops
// prints them.
var pathDropsHeader = func() string {
	var names []string
	for _, r := range tunnel.PathDropReasons {
		names = append(names, r.String())
	}
	return strings.Join(names, "/")
}()

// formatPathDrops is a path's drops in the order of pathDropsHeader,
// separated by slashes.
func formatPathDrops(d tunnel.DropCounts) string {
	var b strings.Builder
	for i, r := range tunnel.PathDropReasons {
		if i > 0 {
			b.WriteByte('/')
		}
		fmt.Fprint(&b, d[r])
	}
	return b.String()
}

// formatLanes is the number of live lanes, with the lane mode when the
// edge reports one ("3 auto").
func formatLanes(p tunnel.PathStats) string {
	if p.LaneMode == "" {
		return fmt.Sprint(len(p.Lanes))
	}
	return fmt.Sprintf("%d %s", len(p.Lanes), p.LaneMode)
}

// formatRate is a bit rate in Mbit/s, or "-" before the first RTT sample.
func formatRate(bps uint64) string {
	if bps == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f Mbit/s", float64(bps)/1e6)
}

// formatShare is part/total as a percentage, or "-" when total is zero.
func formatShare(part, total uint64) string {
	if total == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f %%", 100*float64(part)/float64(total))
}

// formatBytes is n in B, KiB, MiB, GiB or TiB, three significant digits.
func formatBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/unit, 0
	for v >= unit && i < 3 {
		v /= unit
		i++
	}
	prec := 2
	if v >= 100 {
		prec = 0
	} else if v >= 10 {
		prec = 1
	}
	return fmt.Sprintf("%.*f %ciB", prec, v, "KMGT"[i])
}

// formatLabels is k=v,... sorted by key, or "-".
func formatLabels(l map[string]string) string {
	if len(l) == 0 {
		return "-"
	}
	kv := make([]string, 0, len(l))
	for _, k := range slices.Sorted(maps.Keys(l)) {
		kv = append(kv, k+"="+l[k])
	}
	return strings.Join(kv, ",")
}

// formatPrefixes is a comma-separated list, or "-".
func formatPrefixes(ps []netip.Prefix) string {
	if len(ps) == 0 {
		return "-"
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}
