package status

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/bondd/bondd/internal/usage"
)

// Usage is the wire-byte accounting of a running daemon (internal/usage):
// each path's current period and the accountant's counters.
type Usage struct {
	File  string            `json:"file"`           // the store
	Since time.Time         `json:"since,omitzero"` // when the store was created: the start of the totals
	Paths []usage.PathUsage `json:"paths"`          // by bond and path
	Stats usage.Stats       `json:"stats"`          // alerts and flushes
}

// Handler is an extra route of the control socket (Serve).
type Handler struct {
	Pattern string // http.ServeMux pattern, like "GET /usage"
	Handler http.Handler
}

// Get sends GET path?query to the daemon's control socket sock and decodes
// its JSON answer into out. A non-200 answer is an error with its body.
func Get(ctx context.Context, sock, path string, out any) error {
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://bondd"+path, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("no bondd answering on %s: %w", sock, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("bondd on %s: %s: %s", sock, resp.Status, msg)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// printUsage prints each path's period use, budget and projection.
func printUsage(w io.Writer, r *Report) {
	u := r.Usage
	if u == nil || len(u.Paths) == 0 {
		return
	}
	fmt.Fprintf(w, "usage (wire bytes, %s):\n", u.File)
	for _, p := range u.Paths {
		fmt.Fprintf(w, "  %s/%s: period %s to %s: up %s, down %s", p.Bond, p.Path, p.PeriodStart.Format(time.DateOnly),
			p.PeriodEnd.Format(time.DateOnly), usage.FormatBytes(p.Period.UpBytes), usage.FormatBytes(p.Period.DownBytes))
		if p.BudgetBytes > 0 {
			fmt.Fprintf(w, "; budget %s (%s): %s used, %.1f %%, projected %s (%.0f %%) at the period's end",
				p.Budget, p.Direction, usage.FormatBytes(p.UsedBytes), 100*p.Share, usage.FormatBytes(p.ProjectedBytes), 100*p.ProjectedShare)
		}
		fmt.Fprintln(w)
	}
	if e := u.Stats.LastError; e != "" {
		fmt.Fprintf(w, "  writing the store fails (counts kept in memory): %s\n", e)
	}
}
