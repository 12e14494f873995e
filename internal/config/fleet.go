package config

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/bondd/bondd/internal/fleet"
)

// Fleet configuration (docs/config.md "Fleet"): the concentrator's BGP
// speaker and the edge's failover between several nodes.

// BGPConfig is a concentrator node's BGP speaker (key concentrator.bgp);
// see fleet.Config for each field's meaning and defaults.
type BGPConfig struct {
	// LocalAS is this node's AS number. Required.
	LocalAS uint32
	// RouterID is the node's BGP identifier, an IPv4 address. Required.
	RouterID netip.Addr
	// ListenPort is the TCP port to accept neighbours on; 0: dial only.
	ListenPort int
	// NextHop4 and NextHop6 are the node's addresses on the routers'
	// network, the next hop of the IPv4 and IPv6 prefixes it announces.
	NextHop4, NextHop6 netip.Addr
	// Neighbors are the routers the node peers with, at least one.
	Neighbors []BGPNeighbor
}

// BGPNeighbor is one router (an item of concentrator.bgp.neighbors).
type BGPNeighbor struct {
	Address netip.Addr // required
	AS      uint32     // required
	Port    int        // TCP port; 0 means 179
	// PasswordFile holds the TCP MD5 password (RFC 2385), 16 to 80
	// bytes, mode 0600 or stricter like a token file. Optional.
	PasswordFile string
	HoldTime     time.Duration // 0 means 90 s; else whole seconds 3s..65535s
	ConnectRetry time.Duration // 0 means 5 s; else whole seconds ≥ 1s
}

// FailoverConfig is the edge's failover hysteresis (key edge.failover);
// see fleet.FailoverConfig.
type FailoverConfig struct {
	// UnreachableAfter is how long the current node may have no path up
	// before the edge moves on. 0 means 5 s.
	UnreachableAfter time.Duration
	// HomeHoldDown is how long home must answer probes before an edge
	// away from home goes back. 0 means 60 s.
	HomeHoldDown time.Duration
}

var (
	bgpKeys         = []string{"local_as", "router_id", "listen_port", "next_hop4", "next_hop6", "neighbors"}
	bgpNeighborKeys = []string{"address", "as", "port", "password_file", "hold_time", "connect_retry"}
	failoverKeys    = []string{"unreachable_after", "home_hold_down"}
)

// concentratorList decodes edge.concentrator: one host:port, or a list of
// them. It returns the first, and the whole list when n is a list (nil for
// one address).
func (d *configDecoder) concentratorList(n *yaml.Node) (string, []string) {
	const want = "host:port, or a list of them"
	if n == nil {
		return "", nil
	}
	if n.Kind != yaml.SequenceNode {
		return d.str(n, "edge.concentrator", want), nil
	}
	var all []string
	for i, it := range d.list(n, "edge.concentrator", "host:port") {
		all = append(all, d.str(it, indexField("edge.concentrator", i), "host:port"))
	}
	if len(all) == 0 {
		return "", nil
	}
	return all[0], all
}

func (d *configDecoder) failover(n *yaml.Node) FailoverConfig {
	var c FailoverConfig
	if f := d.fields(n, "edge.failover", failoverKeys); f != nil {
		c.UnreachableAfter = d.duration(f["unreachable_after"], "edge.failover.unreachable_after")
		c.HomeHoldDown = d.duration(f["home_hold_down"], "edge.failover.home_hold_down")
	}
	return c
}

func (d *configDecoder) addr(n *yaml.Node, field, want string) netip.Addr {
	s, ok := d.scalar(n, field, want)
	if !ok || s == "" {
		return netip.Addr{}
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		d.errorf(n, field, "expected %s, got %q", want, s)
	}
	return a
}

func (d *configDecoder) asn(n *yaml.Node, field string) uint32 {
	const want = "an AS number, 1 to 4294967295"
	s, ok := d.scalar(n, field, want)
	if !ok || s == "" {
		return 0
	}
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		d.errorf(n, field, "expected %s, got %q", want, s)
	}
	return uint32(v)
}

func (d *configDecoder) bgp(n *yaml.Node) *BGPConfig {
	const p = "concentrator.bgp"
	f := d.fields(n, p, bgpKeys)
	if f == nil {
		return nil
	}
	b := &BGPConfig{
		LocalAS:    d.asn(f["local_as"], p+".local_as"),
		RouterID:   d.addr(f["router_id"], p+".router_id", "an IPv4 address, like 192.0.2.11"),
		ListenPort: d.integer(f["listen_port"], p+".listen_port", "a TCP port, or 0 to only dial out"),
		NextHop4:   d.addr(f["next_hop4"], p+".next_hop4", "an IPv4 address"),
		NextHop6:   d.addr(f["next_hop6"], p+".next_hop6", "an IPv6 address"),
	}
	for i, it := range d.list(f["neighbors"], p+".neighbors", "neighbours") {
		np := indexField(p+".neighbors", i)
		var nb BGPNeighbor
		if nf := d.fields(it, np, bgpNeighborKeys); nf != nil {
			nb.Address = d.addr(nf["address"], np+".address", "the router's IP address")
			nb.AS = d.asn(nf["as"], np+".as")
			nb.Port = d.integer(nf["port"], np+".port", "a TCP port")
			nb.PasswordFile = d.str(nf["password_file"], np+".password_file", "a file path")
			nb.HoldTime = d.duration(nf["hold_time"], np+".hold_time")
			nb.ConnectRetry = d.duration(nf["connect_retry"], np+".connect_retry")
		}
		b.Neighbors = append(b.Neighbors, nb)
	}
	return b
}

// validateFleet checks the nodes of edge.concentrator after the first
// (checked as edge.concentrator), and edge.failover.
func (e *EdgeConfig) validateFleet(v *configValidator) {
	seen := map[string]int{}
	for i, c := range e.Concentrators {
		f := indexField("edge.concentrator", i)
		if _, ok := checkHostPort(c, true, false); !ok && i > 0 {
			v.errorf(f, "expected host:port, like concentrator-b.example.net:4433, got %q", c)
		}
		if j, dup := seen[c]; dup {
			v.errorf(f, "node %s is also %s", c, v.where(indexField("edge.concentrator", j)))
		}
		seen[c] = i
	}
	if fo := e.Failover; fo.UnreachableAfter < 0 || fo.HomeHoldDown < 0 {
		v.errorf("edge.failover", "durations must not be negative")
	}
}

// validate checks the speaker's configuration with fleet.Config.Validate
// and reports each problem at its field's line.
func (b *BGPConfig) validate(v *configValidator) {
	fc := b.Fleet(nil)
	err := fc.Validate()
	if err == nil {
		return
	}
	for line := range strings.SplitSeq(err.Error(), "\n") {
		field, msg, ok := strings.Cut(line, ": ")
		if !ok {
			field, msg = "", line
		}
		f := "concentrator.bgp"
		if field != "" {
			f += "." + field
		}
		if strings.HasSuffix(field, ".password") {
			f = strings.TrimSuffix(f, ".password") + ".password_file"
		}
		v.errorf(f, "%s", msg)
	}
}

// Fleet returns the fleet.Config of b, with each neighbour's password
// taken from passwords (by neighbour index; nil: none). Use
// [Config.LoadBGPPasswords] to read the files.
func (b *BGPConfig) Fleet(passwords []string) fleet.Config {
	c := fleet.Config{LocalAS: b.LocalAS, RouterID: b.RouterID, ListenPort: b.ListenPort, NextHop4: b.NextHop4, NextHop6: b.NextHop6}
	for i, n := range b.Neighbors {
		fn := fleet.Neighbor{Address: n.Address, AS: n.AS, Port: uint16(n.Port), HoldTime: n.HoldTime, ConnectRetry: n.ConnectRetry}
		if i < len(passwords) {
			fn.Password = passwords[i]
		}
		c.Neighbors = append(c.Neighbors, fn)
	}
	return c
}

// LoadBGPPasswords reads the password file of each BGP neighbour, with the
// checks of [Config.LoadToken] (mode 0600 or stricter, relative to the
// config file); "" for a neighbour without one. It returns nil, nil
// without concentrator.bgp.
func (c *Config) LoadBGPPasswords() ([]string, error) {
	if c.Concentrator == nil || c.Concentrator.BGP == nil {
		return nil, nil
	}
	var out []string
	for i, n := range c.Concentrator.BGP.Neighbors {
		if n.PasswordFile == "" {
			out = append(out, "")
			continue
		}
		tok, err := c.LoadToken(n.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("concentrator.bgp.neighbors[%d].password_file: %w", i, err)
		}
		out = append(out, string(tok))
	}
	return out, nil
}

// File is the name of the file c was loaded from, as given to [Load]; ""
// for a Config built in Go. A reload (SIGHUP) reads it again.
func (c *Config) File() string {
	if c.src == nil {
		return ""
	}
	return c.src.file
}
