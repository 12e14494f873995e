package node

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/bondd/bondd/internal/config"
)

func TestTunRoutes(t *testing.T) {
	pp := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	tests := []struct {
		name string
		cfg  config.Config
		want []netip.Prefix
	}{
		{"edge keeps its routes", config.Config{TUN: config.TUNConfig{Addresses: pp("10.77.0.2/24"), Routes: pp("10.78.0.0/16")}}, pp("10.78.0.0/16")},
		{"concentrator adds allowed prefixes", config.Config{
			TUN: config.TUNConfig{Addresses: pp("10.78.0.1/24", "10.77.17.1/24"), Routes: pp("10.79.0.0/16")},
			Concentrator: &config.ConcentratorConfig{Edges: []config.EdgeEntry{
				{ID: "a", AllowedPrefixes: pp("10.77.17.0/24", "fd77:17::/64")}, // the first is on-link already
				{ID: "b", AllowedPrefixes: pp("10.77.18.5/24", "10.79.0.0/16")}, // masked; the second is listed
			}},
		}, pp("10.79.0.0/16", "fd77:17::/64", "10.77.18.0/24")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tunRoutes(&tt.cfg); !slices.Equal(got, tt.want) {
				t.Fatalf("routes %v, want %v", got, tt.want)
			}
		})
	}
}
