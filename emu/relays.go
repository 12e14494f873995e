package emu

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// RelayLink is one emulated uplink for StartRelays: the models of its two
// directions (Options.Up, Options.Down).
type RelayLink struct {
	Up, Down LinkConfig
}

// Relays are the relays StartRelays started, one per link, in the order of
// the links.
type Relays []*Relay

// StartRelays starts one Relay per link, each listening on its own
// loopback UDP socket and relaying to upstream, the one before a bond's
// uplinks in tests and the in-process demo. Relay i is seeded with seed+i.
// On error it closes the relays it started and returns the error, naming
// the link.
func StartRelays(upstream netip.AddrPort, links []RelayLink, seed uint64) (Relays, error) {
	var rs Relays
	for i, l := range links {
		lc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			rs.Close()
			return nil, fmt.Errorf("emu: relay %d: %w", i, err)
		}
		r, err := NewRelay(Options{Listen: lc, Upstream: upstream, Up: l.Up, Down: l.Down, Seed: seed + uint64(i)})
		if err != nil {
			lc.Close()
			rs.Close()
			return nil, fmt.Errorf("emu: relay %d: %w", i, err)
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// Addrs returns the address ("127.0.0.1:port") clients send to, one per
// relay, for UplinkOptions.Remote.
func (rs Relays) Addrs() []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Addr().String()
	}
	return out
}

// Close closes every relay and returns their errors joined.
func (rs Relays) Close() error {
	var errs []error
	for _, r := range rs {
		errs = append(errs, r.Close())
	}
	return errors.Join(errs...)
}
