package status

import (
	"fmt"
	"io"
	"net/netip"
	"strings"
	"text/tabwriter"
	"time"
)

// BGP is the node's BGP speaker (fleet.Stats).
type BGP struct {
	Running        bool          `json:"running"`
	Draining       bool          `json:"draining,omitempty"`
	Uptime         time.Duration `json:"uptime_ns"`
	Edges          int           `json:"edges"`
	Prefixes       int           `json:"prefixes"`
	AnnouncedTotal uint64        `json:"announced_total"`
	WithdrawnTotal uint64        `json:"withdrawn_total"`
	Errors         uint64        `json:"errors"`
	Neighbors      []Neighbor    `json:"neighbors"`
}

// Neighbor is one BGP session (fleet.NeighborStats).
type Neighbor struct {
	Address               netip.Addr    `json:"address"`
	AS                    uint32        `json:"as"`
	State                 string        `json:"state"` // RFC 4271 §8.2.2, lower case
	Uptime                time.Duration `json:"uptime_ns"`
	Established           uint64        `json:"established"`
	Drops                 uint64        `json:"drops"`
	NotificationsSent     uint64        `json:"notifications_sent"`
	NotificationsReceived uint64        `json:"notifications_received"`
	LastError             string        `json:"last_error,omitempty"`
}

// EdgeNodes is an edge's place in the fleet.
type EdgeNodes struct {
	Nodes   []string          `json:"nodes"` // the edge's order, home first
	Current string            `json:"current"`
	AtHome  bool              `json:"at_home"`
	Moves   map[string]uint64 `json:"moves,omitempty"` // by reason: unreachable, refused, home
	MovedAt time.Time         `json:"moved_at,omitzero"`
}

// printFleet prints the bgp: and fleet: sections of bondd status.
func printFleet(w io.Writer, r *Report) {
	if b := r.BGP; b != nil {
		state := "stopped"
		switch {
		case b.Draining:
			state = "draining"
		case b.Running:
			state = "running"
		}
		fmt.Fprintf(w, "bgp: %s, up %s, %d edges, %d prefixes announced; %d announced, %d withdrawn, %d errors in total\n", state,
			b.Uptime.Round(time.Second), b.Edges, b.Prefixes, b.AnnouncedTotal, b.WithdrawnTotal, b.Errors)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  neighbour	as	state	up	established	drops	notifications sent/received	last error")
		for _, n := range b.Neighbors {
			fmt.Fprintf(tw, "  %s	%d	%s	%s	%d	%d	%d/%d	%s\n", n.Address, n.AS, n.State, n.Uptime.Round(time.Second),
				n.Established, n.Drops, n.NotificationsSent, n.NotificationsReceived, n.LastError)
		}
		tw.Flush()
	}
	if f := r.Fleet; f != nil {
		where := "away from home"
		if f.AtHome {
			where = "home"
		}
		fmt.Fprintf(w, "fleet: on %s (%s); order %s; moves", f.Current, where, strings.Join(f.Nodes, " "))
		for _, why := range []string{"unreachable", "refused", "home"} {
			fmt.Fprintf(w, " %s %d", why, f.Moves[why])
		}
		if !f.MovedAt.IsZero() {
			fmt.Fprintf(w, ", last at %s", f.MovedAt.Format(time.DateTime))
		}
		fmt.Fprintln(w)
	}
}
