// Package status is the status report of a running bondd: the document
// (Report), its control socket (a Unix socket serving GET /status as JSON:
// Serve, Fetch, SocketFree), and its text form (Print, Watch) for
// `bondd status`. The daemon fills a Report from the tunnel's counters;
// docs/operations.md explains the columns.
package status

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
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bondd/bondd/internal/config"
	"github.com/bondd/bondd/tunnel"
)

// Report is the JSON document a running bondd serves on its control
// socket (GET /status), and what its Prometheus collector exports.
type Report struct {
	Role         string        `json:"role"` // edge or concentrator
	Version      string        `json:"version"`
	Uptime       time.Duration `json:"uptime_ns"`               // since the daemon started
	Rules        *Rules        `json:"rules,omitempty"`         // the rule file; nil without one
	Bonds        []Bond        `json:"bonds"`                   // one on an edge, one per configured edge on a concentrator
	NoRoute      uint64        `json:"no_route,omitempty"`      // concentrator: downlink packets with no edge
	LinkLocal    uint64        `json:"link_local,omitempty"`    // concentrator: TUN packets to link-scope destinations, not routed
	AuthFailures uint64        `json:"auth_failures,omitempty"` // concentrator: refused path connections
	// BGP is the node's BGP speaker (concentrator.bgp); nil without one.
	BGP *BGP `json:"bgp,omitempty"`
	// Fleet is the edge's place among several nodes; nil with one node.
	Fleet *EdgeNodes `json:"fleet,omitempty"`
	// TransportDrops are what the concentrator's QUIC transport dropped
	// before any bond saw it, by reason (tunnel.TransportDrops): packets,
	// or connections for handshake_failed and refused.
	TransportDrops map[string]uint64 `json:"transport_drops,omitempty"`
	// Usage is the wire-byte accounting of every path (usage.go); nil
	// when the daemon keeps none.
	Usage *Usage `json:"usage,omitempty"`
}

// Bond is one bond's counters and the inner addresses it carries.
type Bond struct {
	tunnel.BondStats
	// Addresses are the edge's inner addresses: its TUN addresses on the
	// edge, its allowed prefixes on the concentrator.
	Addresses []netip.Prefix `json:"addresses,omitempty"`
}

// Rules describes the rule set in force.
type Rules struct {
	File string `json:"file"`
	// Version counts the sets installed since the daemon started: 1 is the
	// one loaded at start, and each successful reload adds one. Rule hit
	// counters restart from zero with each version.
	Version        uint64    `json:"version"`
	Loaded         time.Time `json:"loaded"` // when this version was installed
	Rules          int       `json:"rules"`
	Reloads        uint64    `json:"reloads"`         // reloads tried after the first load
	ReloadFailures uint64    `json:"reload_failures"` // reloads that kept the running set
	// LastError is why the last failed reload was rejected (file:line and
	// message), empty before any failure.
	LastError string `json:"last_error,omitempty"`
}

// Serve serves GET /status, the report of src, as JSON on a Unix
// socket at path, mode 0600 (root only), and POST /drain (bondd drain),
// which calls drain (nil: nothing to drain, answered 409). A stale socket
// file from a dead process is replaced.
//
// Each of extra is served too (GET /usage, usage.go).
func Serve(path string, src func() Report, drain func() error, extra ...Handler) (io.Closer, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	if err := SocketFree(path); err != nil {
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
	mux.HandleFunc("POST /drain", func(w http.ResponseWriter, _ *http.Request) { // bondd drain
		if drain == nil {
			http.Error(w, "nothing to drain", http.StatusConflict)
			return
		}
		if err := drain(); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
		}
	})
	for _, h := range extra {
		mux.Handle(h.Pattern, h.Handler)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return srv, nil
}

// SocketFree returns an error when another bondd answers on path.
// bondd run checks it before it touches the TUN or the routes, so a second
// daemon started by mistake cannot disturb the running one.
func SocketFree(path string) error {
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		return fmt.Errorf("control socket %s is in use by another bondd", path)
	}
	return nil
}

// Fetch reads the status document from the control socket at path.
func Fetch(ctx context.Context, path string) (*Report, error) {
	var r Report
	if err := Get(ctx, path, "/status", &r); err != nil {
		return nil, err
	}
	return &r, nil
}

const (
	// Timeout bounds one request to the control socket in [Watch].
	Timeout = 5 * time.Second
	// clearScreen moves the cursor home and clears a VT100 terminal.
	clearScreen = "\x1b[H\x1b[2J"
)

// Watch prints the status every interval until ctx is done. On a
// terminal (clear) each report replaces the previous one; otherwise
// reports follow each other, separated by a blank line, or one JSON
// document per line. A failed request is printed and retried, so the
// watch outlives a daemon restart.
func Watch(ctx context.Context, w io.Writer, sock string, interval time.Duration, asJSON, clear bool) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var buf bytes.Buffer
	for first := true; ; first = false {
		rctx, cancel := context.WithTimeout(ctx, min(Timeout, max(interval, time.Second)))
		r, err := Fetch(rctx, sock)
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
				Print(&buf, r, now)
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

// Print prints r as text; now dates the rule set's load time.
func Print(w io.Writer, r *Report, now time.Time) {
	fmt.Fprintf(w, "%s, %s, up %s\n", r.Role, r.Version, r.Uptime.Round(time.Second))
	if rs := r.Rules; rs != nil {
		fmt.Fprintf(w, "rules %s: version %d, %d rules, loaded %s (%s ago); %d reloads, %d failed\n", rs.File, rs.Version, rs.Rules,
			rs.Loaded.Format(time.DateTime), now.Sub(rs.Loaded).Round(time.Second), rs.Reloads, rs.ReloadFailures)
		if rs.LastError != "" {
			fmt.Fprintf(w, "  last rejected reload: %s\n", rs.LastError)
		}
	}
	if r.Role == config.RoleConcentrator {
		fmt.Fprintf(w, "refused connections: %d, downlink packets without a bond: %d, link-local packets not routed: %d\n", r.AuthFailures, r.NoRoute, r.LinkLocal)
		if r.TransportDrops != nil {
			fmt.Fprintf(w, "QUIC transport drops:")
			for _, name := range tunnel.TransportDrops() {
				fmt.Fprintf(w, " %s %d", name, r.TransportDrops[name])
			}
			fmt.Fprintln(w)
		}
	}
	printFleet(w, r) // fleet.go
	printUsage(w, r) // usage.go
	for _, b := range r.Bonds {
		fmt.Fprintf(w, "\nbond %s (id %x), up %s, mtu %s, addresses %s: tx %d rx %d packets\n", b.EdgeID, b.BondID,
			b.Uptime.Round(time.Second), formatMTU(b.BondStats), formatPrefixes(b.Addresses), b.TxPackets, b.RxPackets)
		fmt.Fprintf(w, "  drops:")
		for _, r := range tunnel.BondDropReasons {
			fmt.Fprintf(w, " %s %d", r, b.Drops[r])
		}
		fmt.Fprintln(w)
		if f := b.FEC; f != nil {
			fmt.Fprintf(w, "  fec %s: coding rate %.3f, %d parity sent, %d skipped, %d blocks by k, %d by timer; received %d parity, recovered %d (%d before their original: lead p50 %.1f / p95 %.1f ms), lost %d (residual %.2f %%)\n",
				f.Mode, f.CodingRate, f.ParitySent, f.ParitySkipped, f.BlocksByK, f.BlocksByTimer, f.ParityReceived, f.Recovered,
				f.Masked, f.MaskedLead.Quantile(0.5), f.MaskedLead.Quantile(0.95), f.Lost, 100*f.ResidualLoss)
		}
		if r := b.Reseq; r != nil && (b.FlowTagged > 0 || r.InOrder+r.Held+r.Late+r.Overflow > 0) {
			fmt.Fprintf(w, "  flows: %d packets tagged, %d untagged (table full); reseq: %d in order, %d held (%d released in order, %d after timeout), %d skipped, %d late, %d overflow, %d held now, wait %.1f ms\n",
				b.FlowTagged, b.FlowUntagged, r.InOrder, r.Held, r.ReleasedInOrder, r.ReleasedTimeout, r.Skipped, r.Late, r.Overflow, r.HeldNow, r.WaitMs)
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
		if len(b.Paths) == 0 {
			continue
		}
		// Two tables, so that a line fits a terminal: the path's traffic,
		// then its drops, labels, peer and last error.
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  path\tstatus\tshare\tsrtt\tmin rtt\tcwnd\tcapacity\tlost/sent\ttx pkts\ttx bytes\trx pkts\trx bytes\tqueue")
		for _, p := range b.Paths {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%d\t%s\t%d/%d\t%d\t%s\t%d\t%s\t%d\n", p.Name, formatStatus(p),
				formatShare(p.TxPackets+p.RxPackets, total),
				p.SmoothedRTT.Round(10*time.Microsecond), p.MinRTT.Round(10*time.Microsecond), p.CongestionWindow,
				formatRate(p.CapacityBps), p.PacketsLost, p.PacketsSent, p.TxPackets, formatBytes(p.TxBytes), p.RxPackets, formatBytes(p.RxBytes), p.QueueLen)
		}
		tw.Flush()
		fmt.Fprintf(w, "  path drops, in this order: %s\n", pathDropsHeader)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  path\tdrops\tlabels\tpeer\tlast error")
		for _, p := range b.Paths {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", p.Name, formatPathDrops(p.Drops), formatLabels(p.Labels), formatPeer(p), p.LastError)
		}
		tw.Flush()
		writeResends(w, b.Paths)
		writePMTU(w, b.Paths)
		writeRateTable(w, b.Paths)
	}
}

// formatMTU is the bond's inner MTU, with the configured one and the
// reason when path MTU discovery lowered it ("1152 (configured 1280: no
// path carries ...)").
func formatMTU(b tunnel.BondStats) string {
	if b.MTUConfigured == 0 || b.MTU >= b.MTUConfigured {
		return fmt.Sprint(b.MTU)
	}
	return fmt.Sprintf("%d (configured %d: %s)", b.MTU, b.MTUConfigured, b.MTUReason)
}

// writeResends prints, for each path that ever lost a datagram it sent
// again or moved queued frames to other paths, those counts: datagrams
// resent (and those lost too late to resend), frames rescued when the
// path failed, and video frames its send queue dropped a packet of.
func writeResends(w io.Writer, paths []tunnel.PathStats) {
	for _, p := range paths {
		if p.Resent+p.ResendLate+p.Rescued == 0 {
			continue
		}
		fmt.Fprintf(w, "  path %s: %d datagrams resent, %d lost too late to resend, %d queued frames moved to other paths when it failed, %d video frames hit in its queue\n",
			p.Name, p.Resent, p.ResendLate, p.Rescued, p.ObjectsDropped)
	}
}

// writePMTU prints, for each path whose datagram budget path MTU
// discovery ever changed, the budget, its RFC 8899 state and why
// (tunnel.PathStats.PMTUReason).
func writePMTU(w io.Writer, paths []tunnel.PathStats) {
	for _, p := range paths {
		if p.PMTUReason == "" {
			continue
		}
		fmt.Fprintf(w, "  path %s datagram budget %d bytes (%s, %d black holes, %d probes, %d datagrams parked for a probe): %s\n",
			p.Name, p.DatagramBudget, p.PMTUState, p.BlackHoles, p.PMTUProbes, p.PMTUHeld, p.PMTUReason)
	}
}

// writeRateTable prints the paths' rate control (tunnel.RateStats), when
// any path has it: target and delivery rate, the peer-measured queueing
// delay, the receiver-seen loss, the bytes held back by pacing.
func writeRateTable(w io.Writer, paths []tunnel.PathStats) {
	any := false
	for _, p := range paths {
		any = any || p.Rate != nil
	}
	if !any {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  rate control\tmode\ttarget\tdelivery\tqueue delay\trx loss\theld back\treports\tfallbacks")
	for _, p := range paths {
		r := p.Rate
		if r == nil {
			fmt.Fprintf(tw, "  %s\t-\t\t\t\t\t\t\t\n", p.Name)
			continue
		}
		mode := r.Mode
		if !r.Active {
			mode += " (inactive)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%.2f %%\t%s\t%d\t%d\n", p.Name, mode, formatRate(r.TargetBps), formatRate(r.DeliveryBps),
			r.QueueDelay.Round(100*time.Microsecond), 100*r.Loss, formatBytes(r.HeldBackBytes), r.Reports, r.Fallbacks)
	}
	tw.Flush()
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

// formatStatus is the path's status with its reason when it has one
// ("DEGRADED (suspect)").
func formatStatus(p tunnel.PathStats) string {
	if p.StatusReason == "" || p.Status == "UNAVAILABLE" {
		return p.Status
	}
	return p.Status + " (" + p.StatusReason + ")"
}

// formatPeer is the path's peer address, with the number of times it
// changed under a live connection ("203.0.113.7:41000 (migrated 2×)"),
// or "-" while the path is down.
func formatPeer(p tunnel.PathStats) string {
	a := p.PeerAddr
	if a == "" {
		a = "-"
	}
	if p.Migrations > 0 {
		a += fmt.Sprintf(" (migrated %d×)", p.Migrations)
	}
	return a
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
