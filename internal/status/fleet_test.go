package status

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestPrintFleet checks the bgp: and fleet: sections of bondd status.
func TestPrintFleet(t *testing.T) {
	r := &Report{
		BGP: &BGP{Running: true, Uptime: 90 * time.Second, Edges: 1, Prefixes: 2, AnnouncedTotal: 3, WithdrawnTotal: 1,
			Neighbors: []Neighbor{{Address: netip.MustParseAddr("192.0.2.1"), AS: 65000, State: "established", Uptime: time.Minute,
				Established: 1, NotificationsReceived: 2, LastError: "hold-timer-expired"}}},
		Fleet: &EdgeNodes{Nodes: []string{"a:1", "b:1"}, Current: "b:1", Moves: map[string]uint64{"refused": 1}},
	}
	var buf bytes.Buffer
	printFleet(&buf, r)
	for _, want := range []string{
		"bgp: running, up 1m30s, 1 edges, 2 prefixes announced; 3 announced, 1 withdrawn, 0 errors",
		"192.0.2.1  65000  established  1m0s",
		"0/2",
		"hold-timer-expired",
		"fleet: on b:1 (away from home); order a:1 b:1; moves unreachable 0 refused 1 home 0",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, buf.String())
		}
	}
}
