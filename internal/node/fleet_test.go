package node

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"

	"github.com/bondd/bondd/internal/config"
	"github.com/bondd/bondd/internal/fleet"
	"github.com/bondd/bondd/tunnel"
)

func TestEdgeNodes(t *testing.T) {
	lookup := func(_ context.Context, host string) ([]string, error) {
		switch host {
		case "fleet.example.net":
			return []string{"192.0.2.1", "2001:db8::1", "192.0.2.2"}, nil
		case "dual.example.net":
			return []string{"2001:db8::9", "192.0.2.9"}, nil
		case "one.example.net":
			return []string{"192.0.2.9"}, nil
		}
		return nil, errors.New("no such host")
	}
	tests := []struct {
		name string
		ec   config.EdgeConfig
		want []string
	}{
		{"list", config.EdgeConfig{Concentrator: "a:1", Concentrators: []string{"a:1", "b:1"}}, []string{"a:1", "b:1"}},
		{"one address", config.EdgeConfig{Concentrator: "192.0.2.1:4433"}, []string{"192.0.2.1:4433"}},
		{"name with several addresses", config.EdgeConfig{Concentrator: "fleet.example.net:4433"}, []string{"192.0.2.1:4433", "192.0.2.2:4433"}},
		{"dual-stack name is one node", config.EdgeConfig{Concentrator: "dual.example.net:4433"}, []string{"dual.example.net:4433"}},
		{"name with one address", config.EdgeConfig{Concentrator: "one.example.net:4433"}, []string{"one.example.net:4433"}},
		{"name not resolving yet", config.EdgeConfig{Concentrator: "down.example.net:4433"}, []string{"down.example.net:4433"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := edgeNodes(context.Background(), &tc.ec, lookup)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("edgeNodes = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestEdgeFleetRefusals checks which refusals reach the failover machine:
// only those of the node the edge is on.
func TestEdgeFleetRefusals(t *testing.T) {
	f := newEdgeFleet([]string{"a:1", "b:1"}, config.FailoverConfig{}, slog.New(slog.DiscardHandler))
	f.onPathEnd("up0", "a:1", tunnel.ErrDraining)
	f.onPathEnd("up0", "a:1", errors.New("timeout")) // an outage is not a refusal
	if len(f.ev) != 1 {
		t.Fatalf("%d events queued, want 1 (the refusal)", len(f.ev))
	}
	if x := <-f.ev; x.node != "a:1" || x.ev != fleet.Refused {
		t.Fatalf("event %+v", x)
	}
}
