package fleet

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"
)

// Defaults applied by [Config.withDefaults] to zero fields.
const (
	// DefaultHoldTime is a neighbour's proposed hold time when
	// [Neighbor.HoldTime] is zero: the value RFC 4271 §10 suggests.
	DefaultHoldTime = 90 * time.Second
	// MinHoldTime is the smallest non-zero hold time BGP allows
	// (RFC 4271 §4.2: zero or at least three seconds).
	MinHoldTime = 3 * time.Second
	// MaxHoldTime is the largest hold time the OPEN message can carry
	// (a 16-bit count of seconds, RFC 4271 §4.2).
	MaxHoldTime = 65535 * time.Second
	// DefaultConnectRetry is the wait between outbound connection attempts
	// to a neighbour when [Neighbor.ConnectRetry] is zero. RFC 4271 §10
	// suggests 120 s; a node that has just come back should be announcing
	// again within seconds, so bondd waits less.
	DefaultConnectRetry = 5 * time.Second
	// DefaultBGPPort is the neighbour's TCP port when [Neighbor.Port] is
	// zero (RFC 4271 §8.2.1).
	DefaultBGPPort = 179
	// MaxPasswordBytes is the longest TCP MD5 key Linux accepts
	// (TCP_MD5SIG_MAXKEYLEN, RFC 2385).
	MaxPasswordBytes = 80
)

// Config is a concentrator node's BGP speaker configuration. LocalAS,
// RouterID and at least one neighbour are required; everything else has a
// usable zero value. [Config.Validate] names every problem.
type Config struct {
	// LocalAS is this node's autonomous system number (RFC 6793 four-octet
	// ASNs allowed). Required; 0 and AS_TRANS (23456) are refused.
	LocalAS uint32
	// RouterID is the BGP identifier (RFC 4271 §4.2), an IPv4 address
	// unique among the routers' peers, usually the node's own IPv4 address.
	// Required, also on an IPv6-only node.
	RouterID netip.Addr
	// ListenPort is the TCP port on which the speaker accepts connections
	// from its neighbours. 0 (the default) listens on nothing: the speaker
	// only dials out, so no outsider can reach its BGP stack at all.
	ListenPort int
	// NextHop4 is the address the routers should send the edges' IPv4
	// traffic to: this node's address on the routers' network. Required
	// to announce an IPv4 prefix.
	NextHop4 netip.Addr
	// NextHop6 is the same for IPv6 prefixes. Required to announce an
	// IPv6 prefix; a global or unique-local address.
	NextHop6 netip.Addr
	// Neighbors are the routers this node peers with. At least one.
	Neighbors []Neighbor
	// Logger receives the speaker's lifecycle events and GoBGP's own log
	// (peer state changes, refused connections, malformed messages).
	// Nil discards them.
	Logger *slog.Logger
}

// Neighbor is one BGP peer of the node: a router of the site.
type Neighbor struct {
	// Address is the router's address; the speaker dials it. Required.
	Address netip.Addr
	// AS is the router's autonomous system number. Required. An OPEN from
	// this address with another AS is refused with a NOTIFICATION (Bad
	// Peer AS, RFC 4271 §6.2). Equal to LocalAS makes the session iBGP.
	AS uint32
	// Port is the router's TCP port; 0 means 179.
	Port uint16
	// Password, when set, signs every TCP segment of the session with
	// TCP MD5 (RFC 2385); at most 80 bytes. A router with another password
	// (or none) never completes the TCP handshake.
	Password string
	// HoldTime is the hold time this node proposes (RFC 4271 §4.2); the
	// session uses the smaller of both proposals, and a neighbour silent for
	// that long is dropped along with every route learned from it. 0 means
	// 90 s; otherwise between 3 s and 65535 s, in whole seconds. Keepalives
	// go out every third of it.
	HoldTime time.Duration
	// ConnectRetry is the wait between outbound connection attempts; 0
	// means 5 s. Whole seconds, at least 1 s.
	ConnectRetry time.Duration
}

// withDefaults returns a copy of n with zero fields set to their defaults.
func (n Neighbor) withDefaults() Neighbor {
	if n.Port == 0 {
		n.Port = DefaultBGPPort
	}
	if n.HoldTime == 0 {
		n.HoldTime = DefaultHoldTime
	}
	if n.ConnectRetry == 0 {
		n.ConnectRetry = DefaultConnectRetry
	}
	return n
}

// asTrans is the two-octet placeholder AS of RFC 6793 §9; no speaker may
// use it as its own AS.
const asTrans = 23456

// Validate returns nil for a usable configuration, or an error listing
// every problem, one per line, each naming the field (in the config file's
// spelling: local_as, router_id, neighbors[1].hold_time, ...).
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch c.LocalAS {
	case 0:
		bad("local_as: required")
	case asTrans:
		bad("local_as: 23456 is AS_TRANS (RFC 6793), not a usable AS")
	}
	switch {
	case !c.RouterID.IsValid():
		bad("router_id: required (an IPv4 address)")
	case !c.RouterID.Is4():
		bad("router_id: %s is not an IPv4 address", c.RouterID)
	case c.RouterID.IsUnspecified():
		bad("router_id: 0.0.0.0 is not a router id")
	}
	if c.ListenPort < 0 || c.ListenPort > 65535 {
		bad("listen_port: %d is not a TCP port (0 = do not listen)", c.ListenPort)
	}
	if c.NextHop4.IsValid() && (!c.NextHop4.Is4() || c.NextHop4.IsUnspecified() || c.NextHop4.IsMulticast()) {
		bad("next_hop4: %s is not a unicast IPv4 address", c.NextHop4)
	}
	if c.NextHop6.IsValid() && (!c.NextHop6.Is6() || c.NextHop6.Is4In6() || c.NextHop6.IsUnspecified() ||
		c.NextHop6.IsMulticast() || c.NextHop6.IsLinkLocalUnicast()) {
		bad("next_hop6: %s is not a global or unique-local IPv6 address", c.NextHop6)
	}
	if len(c.Neighbors) == 0 {
		bad("neighbors: at least one is required")
	}
	seen := make(map[netip.Addr]int, len(c.Neighbors))
	for i, n := range c.Neighbors {
		key := fmt.Sprintf("neighbors[%d]", i)
		a := n.Address.Unmap()
		switch {
		case !a.IsValid():
			bad("%s.address: required", key)
		case a.IsUnspecified() || a.IsMulticast():
			bad("%s.address: %s is not a unicast address", key, a)
		case a.Zone() != "":
			bad("%s.address: %s: zoned (link-local) neighbours are not supported", key, a)
		default:
			if j, dup := seen[a]; dup {
				bad("%s.address: %s is also neighbors[%d]", key, a, j)
			}
			seen[a] = i
		}
		switch n.AS {
		case 0:
			bad("%s.as: required", key)
		case asTrans:
			bad("%s.as: 23456 is AS_TRANS (RFC 6793), not a usable AS", key)
		}
		if len(n.Password) > MaxPasswordBytes {
			bad("%s.password: %d bytes, at most %d (TCP MD5, RFC 2385)", key, len(n.Password), MaxPasswordBytes)
		}
		if h := n.HoldTime; h != 0 && (h < MinHoldTime || h > MaxHoldTime || h%time.Second != 0) {
			bad("%s.hold_time: %v; 0 (= %v) or whole seconds from 3s to 65535s (RFC 4271 §4.2)", key, h, DefaultHoldTime)
		}
		if r := n.ConnectRetry; r != 0 && (r < time.Second || r%time.Second != 0) {
			bad("%s.connect_retry: %v; 0 (= %v) or whole seconds from 1s", key, r, DefaultConnectRetry)
		}
	}
	return errors.Join(errs...)
}
