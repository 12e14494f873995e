package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/bondd/bondd/tunnel"
)

// defaultControlSocket is where bondd run serves its status, and where
// bondd status looks for it.
const defaultControlSocket = "/run/bondd/bondd.sock"

// statusReport is the JSON document served on the control socket.
type statusReport struct {
	Role         string             `json:"role"` // edge or concentrator
	Version      string             `json:"version"`
	Bonds        []tunnel.BondStats `json:"bonds"`
	NoRoute      uint64             `json:"no_route,omitempty"`      // concentrator: downlink packets with no edge
	AuthFailures uint64             `json:"auth_failures,omitempty"` // concentrator: refused path connections
}

// statusOf snapshots a running daemon.
func statusOf(d daemon) statusReport {
	r := statusReport{Version: versionString()}
	switch d := d.(type) {
	case *tunnel.Edge:
		r.Role = "edge"
		r.Bonds = []tunnel.BondStats{d.Bond().Stats()}
	case *tunnel.Concentrator:
		r.Role = "concentrator"
		r.Bonds = d.Stats()
		r.NoRoute, r.AuthFailures = d.NoRoute(), d.AuthFailures()
	}
	return r
}

// serveControl serves GET /status as JSON on a Unix socket at path, mode
// 0600 (root only). A stale socket file from a dead process is replaced.
func serveControl(path string, d daemon) (io.Closer, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		return nil, fmt.Errorf("control socket %s is in use by another bondd", path)
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
		json.NewEncoder(w).Encode(statusOf(d))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return srv, nil
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
	var sock string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the bonds and paths of a running bondd",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
			defer cancel()
			r, err := fetchStatus(ctx, sock)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(r)
			}
			printStatus(cmd.OutOrStdout(), r)
			return nil
		},
	}
	cmd.Flags().StringVar(&sock, "socket", defaultControlSocket, "control socket of the running bondd")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printStatus(w io.Writer, r *statusReport) {
	fmt.Fprintf(w, "%s, %s\n", r.Role, r.Version)
	if r.Role == "concentrator" {
		fmt.Fprintf(w, "refused connections: %d, downlink packets without a bond: %d\n", r.AuthFailures, r.NoRoute)
	}
	for _, b := range r.Bonds {
		d := b.Drops
		fmt.Fprintf(w, "\nbond %s (id %x), up %s, mtu %d: tx %d rx %d packets\n", b.EdgeID, b.BondID,
			b.Uptime.Round(time.Second), b.MTU, b.TxPackets, b.RxPackets)
		fmt.Fprintf(w, "  drops: no_path %d oversize %d bad_header %d duplicate %d too_old %d spoofed %d malformed %d tun_write %d\n",
			d.NoPath, d.Oversize, d.BadHeader, d.Duplicate, d.TooOld, d.Spoofed, d.Malformed, d.TUNWrite)
		if f := b.FEC; f != nil {
			fmt.Fprintf(w, "  fec %s: coding rate %.3f, %d parity sent, %d blocks by k, %d by timer; received %d parity, recovered %d, lost %d (residual %.2f %%)\n",
				f.Mode, f.CodingRate, f.ParitySent, f.BlocksByK, f.BlocksByTimer, f.ParityReceived, f.Recovered, f.Lost, 100*f.ResidualLoss)
		}
		if r := b.Rules; r != nil {
			fmt.Fprintf(w, "  rules %s:", r.Set)
			for _, h := range r.Rules {
				fmt.Fprintf(w, " %s=%d", h.ID, h.Hits)
			}
			fmt.Fprintln(w)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  path\tstatus\tsrtt\tmin rtt\tcwnd\tlost/sent\ttx pkts\trx pkts\tqueue\tdrops full/expired/large\tlast error")
		for _, p := range b.Paths {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t%d/%d\t%d\t%d\t%d\t%d/%d/%d\t%s\n", p.Name, p.Status,
				p.SmoothedRTT.Round(10*time.Microsecond), p.MinRTT.Round(10*time.Microsecond), p.CongestionWindow,
				p.PacketsLost, p.PacketsSent, p.TxPackets, p.RxPackets, p.QueueLen,
				p.Drops.QueueFull, p.Drops.Expired, p.Drops.TooLarge, p.LastError)
		}
		tw.Flush()
	}
}
