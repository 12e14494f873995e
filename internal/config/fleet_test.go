package config

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// bgpOK is concentratorOK with a BGP speaker.
var bgpOK = concentratorOK + snippet(`
  bgp:
    local_as: 65001
    router_id: 192.0.2.11
    next_hop4: 192.0.2.11
    neighbors:
      - {address: 192.0.2.1, as: 65000, hold_time: 9s, password_file: bgp.pw}
`)

func TestConfigFleet(t *testing.T) {
	dir := configDir(t)
	multi := strings.Replace(edgeOK, "concentrator: concentrator.example.net:4433",
		"concentrator: [a.example.net:4433, 198.51.100.2:4433]\n  failover: {unreachable_after: 3s, home_hold_down: 30s}", 1)
	tests := []struct {
		name, in, want string // want: substring of the error; "" means none
	}{
		{"bgp ok", bgpOK, ""},
		{"edge list ok", multi, ""},
		{"edge list item bad", strings.Replace(multi, "198.51.100.2:4433", "198.51.100.2", 1), "bondd.yaml:5: edge.concentrator[1]: expected host:port"},
		{"edge list duplicate", strings.Replace(multi, "198.51.100.2:4433", "a.example.net:4433", 1), "edge.concentrator[1]: node a.example.net:4433 is also edge.concentrator[0]"},
		{"edge list empty", strings.Replace(multi, "[a.example.net:4433, 198.51.100.2:4433]", "[]", 1), "edge.concentrator: required"},
		{"failover bad duration", strings.Replace(multi, "3s", "3", 1), "bondd.yaml:6: edge.failover.unreachable_after: expected a duration"},
		{"failover unknown key", strings.Replace(multi, "home_hold_down", "home_hold", 1), `edge.failover.home_hold: unknown field`},
		{"bgp no local_as", strings.Replace(bgpOK, "    local_as: 65001\n", "", 1), "concentrator.bgp.local_as: required"},
		{"bgp as_trans", strings.Replace(bgpOK, "local_as: 65001", "local_as: 23456", 1), "bondd.yaml:10: concentrator.bgp.local_as: 23456 is AS_TRANS"},
		{"bgp as not a number", strings.Replace(bgpOK, "local_as: 65001", "local_as: sixty", 1), `bondd.yaml:10: concentrator.bgp.local_as: expected an AS number, 1 to 4294967295, got "sixty"`},
		{"bgp router id v6", strings.Replace(bgpOK, "router_id: 192.0.2.11", "router_id: 2001:db8::1", 1), "bondd.yaml:11: concentrator.bgp.router_id: 2001:db8::1 is not an IPv4 address"},
		{"bgp router id bad", strings.Replace(bgpOK, "router_id: 192.0.2.11", "router_id: r1", 1), `bondd.yaml:11: concentrator.bgp.router_id: expected an IPv4 address, like 192.0.2.11, got "r1"`},
		{"bgp no neighbours", strings.Replace(bgpOK, "      - {address: 192.0.2.1, as: 65000, hold_time: 9s, password_file: bgp.pw}\n", "", 1), "concentrator.bgp.neighbors: at least one is required"},
		{"bgp hold time short", strings.Replace(bgpOK, "hold_time: 9s", "hold_time: 2s", 1), "bondd.yaml:14: concentrator.bgp.neighbors[0].hold_time: 2s; 0 (= 1m30s) or whole seconds from 3s to 65535s"},
		{"bgp neighbour key", strings.Replace(bgpOK, "hold_time:", "holdtime:", 1), "concentrator.bgp.neighbors[0].holdtime: unknown field"},
		{"bgp on an edge", edgeOK + "  bgp: {}\n", `edge.bgp: unknown field "bgp"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseWith("bondd.yaml", []byte(tc.in), Options{Dir: dir})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error:\n%v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error:\n%v\nwant it to contain:\n%s", err, tc.want)
			}
			if c != nil {
				t.Error("non-nil Config with an error")
			}
		})
	}
}

func TestConfigFleetValues(t *testing.T) {
	dir := configDir(t)
	pwFile := filepath.Join(dir, "bgp.pw")
	if err := os.WriteFile(pwFile, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := ParseWith("bondd.yaml", []byte(bgpOK), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	b := c.Concentrator.BGP
	if b.LocalAS != 65001 || b.RouterID != netip.MustParseAddr("192.0.2.11") || len(b.Neighbors) != 1 ||
		b.Neighbors[0].HoldTime != 9*time.Second || b.Neighbors[0].AS != 65000 {
		t.Fatalf("decoded %+v", b)
	}
	pw, err := c.LoadBGPPasswords()
	if err != nil || len(pw) != 1 || pw[0] != testToken {
		t.Fatalf("passwords %q, %v", pw, err)
	}
	fc := b.Fleet(pw)
	if err := fc.Validate(); err != nil || fc.Neighbors[0].Password != testToken {
		t.Fatalf("fleet config %+v: %v", fc, err)
	}
	// A password file readable by others is refused, like a token file.
	if err := os.Chmod(pwFile, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.LoadBGPPasswords(); err == nil || !strings.Contains(err.Error(), "neighbors[0].password_file") {
		t.Fatalf("mode 0644 password file: %v", err)
	}
	e, err := ParseWith("bondd.yaml", []byte(strings.Replace(edgeOK, "concentrator.example.net:4433",
		"[a.example.net:4433, b.example.net:4433]", 1)), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if e.Edge.Concentrator != "a.example.net:4433" || len(e.Edge.Concentrators) != 2 || e.Edge.ServerName != "a.example.net" {
		t.Fatalf("edge %+v", e.Edge)
	}
}
