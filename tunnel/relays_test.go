package tunnel

import (
	"net/netip"
	"testing"
	"time"

	"github.com/bondd/bondd/emu"
)

// viaRelays puts one emu relay in front of each of o's uplinks, uplink i
// over links[i] (relay i seeded with seed+i), so that the edge reaches the
// concentrator through emulated links. Call it from the edit hook of
// newTestBondWith: its cleanup is then registered before the bond's, and
// the relays close after the bond. It returns the relays, for a test that
// changes a link while the bond runs.
func viaRelays(t testing.TB, o *EdgeOptions, links []emu.RelayLink, seed uint64) emu.Relays {
	t.Helper()
	rs, err := emu.StartRelays(netip.MustParseAddrPort(o.Concentrator), links, seed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	for i, a := range rs.Addrs() {
		o.Uplinks[i].Remote = a
	}
	return rs
}

// symmetric is a link with the same delay and rate both ways and loss
// (a fraction) on the way up only.
func symmetric(delay time.Duration, rate emu.BitRate, upLoss float64) emu.RelayLink {
	l := emu.LinkConfig{Delay: delay, Rate: rate}
	up := l
	up.Loss = upLoss
	return emu.RelayLink{Up: up, Down: l}
}
