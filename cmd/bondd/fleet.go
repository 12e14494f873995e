package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/bondd/bondd/internal/status"
)

// newDrainCmd is bondd drain: a concentrator moves its edges to other
// nodes and withdraws their prefixes, before maintenance.
func newDrainCmd() *cobra.Command {
	var sock string
	cmd := &cobra.Command{
		Use:   "drain",
		Short: "Move a concentrator's edges to other nodes before maintenance",
		Long: "Drain tells the running concentrator to close every edge's paths with a\n" +
			"draining code, so that each edge moves to its next node at once, to stop\n" +
			"accepting edges, and to withdraw its BGP announcements. The daemon keeps\n" +
			"running until it is stopped. See docs/operations.md \"Running a fleet\".",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), status.Timeout)
			defer cancel()
			client := &http.Client{Transport: &http.Transport{
				DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
					return (&net.Dialer{}).DialContext(ctx, "unix", sock)
				},
			}}
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://bondd/drain", nil)
			if err != nil {
				return err
			}
			resp, err := client.Do(req)
			if err != nil {
				return fmt.Errorf("no bondd answering on %s: %w", sock, err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
				return fmt.Errorf("drain refused: %s", strings.TrimSpace(string(msg)))
			}
			fmt.Fprintln(cmd.OutOrStdout(), "draining: the edges are moving to other nodes; stop the daemon when bondd status shows no path")
			return nil
		},
	}
	cmd.Flags().StringVar(&sock, "socket", defaultControlSocket, "control socket of the running bondd")
	// bondd run names the same socket --control-socket; both spellings work.
	cmd.Flags().StringVar(&sock, "control-socket", defaultControlSocket, "same as --socket, as bondd run spells it")
	return cmd
}

// Fleet metrics.
var (
	descBGPNeighborUp = desc("bgp_neighbor_up", "Concentrator: 1 while the BGP session with the neighbour is established.", "neighbor")
	descBGPPrefixes   = desc("bgp_prefixes", "Concentrator: prefixes this node announces over BGP now.")
	descBGPEdges      = desc("bgp_edges", "Concentrator: edges whose prefixes this node announces now.")
	descBGPAnnounced  = desc("bgp_announced_total", "Concentrator: prefixes handed to BGP (a re-announce counts again).")
	descBGPWithdrawn  = desc("bgp_withdrawn_total", "Concentrator: prefixes withdrawn from BGP.")
	descFleetMoves    = desc("fleet_moves_total", "Edge: moves to another node, by reason (unreachable, refused, home).", "reason")
	fleetDescs        = []*prometheus.Desc{descBGPNeighborUp, descBGPPrefixes, descBGPEdges, descBGPAnnounced, descBGPWithdrawn, descFleetMoves}
)

// collectFleet sends the fleet metrics of r.
func collectFleet(r *status.Report, gauge func(*prometheus.Desc, float64, ...string), counter func(*prometheus.Desc, uint64, ...string)) {
	if b := r.BGP; b != nil {
		gauge(descBGPPrefixes, float64(b.Prefixes))
		gauge(descBGPEdges, float64(b.Edges))
		counter(descBGPAnnounced, b.AnnouncedTotal)
		counter(descBGPWithdrawn, b.WithdrawnTotal)
		for _, n := range b.Neighbors {
			up := 0.0
			if n.State == "established" {
				up = 1
			}
			gauge(descBGPNeighborUp, up, n.Address.String())
		}
	}
	if f := r.Fleet; f != nil {
		for _, why := range []string{"unreachable", "refused", "home"} {
			counter(descFleetMoves, f.Moves[why], why)
		}
	}
}
