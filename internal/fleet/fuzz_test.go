package fleet

import (
	"encoding/hex"
	"net/netip"
	"testing"

	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// FuzzPeerMessage feeds arbitrary bytes through the steps GoBGP's session
// code (pkg/server/fsm.go, recvMessageWithError) applies to every message a
// neighbour sends: header decode and length check, body parse, then OPEN or
// UPDATE validation. GoBGP recovers no panic, so one here would take the
// whole concentrator down: the speaker's safety against a malformed peer is
// exactly this parser's. Errors are fine; a panic or hang fails.
func FuzzPeerMessage(f *testing.F) {
	for _, s := range []string{
		// KEEPALIVE
		"ffffffffffffffffffffffffffffffff001304",
		// OPEN, AS 65000, hold 90, id 10.0.0.1, MP IPv4+IPv6 unicast, 4-octet AS
		"ffffffffffffffffffffffffffffffff003501" + "04fde8005a0a000001" + "18" +
			"0206010400010001" + "0206010400020001" + "02064104" + "0000fde8",
		// UPDATE 10.77.17.0/24 next hop 10.91.1.2, ORIGIN IGP, AS_PATH 65001
		"ffffffffffffffffffffffffffffffff003202" + "0000" + "0016" +
			"40010100" + "4002060201" + "0000fde9" + "4003040a5b0102" + "184d4d11",
		// NOTIFICATION Cease
		"ffffffffffffffffffffffffffffffff00150306",
	} {
		b, err := hex.DecodeString(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
	}
	rfs := map[bgp.Family]bgp.BGPAddPathMode{bgp.RF_IPv4_UC: bgp.BGP_ADD_PATH_NONE, bgp.RF_IPv6_UC: bgp.BGP_ADD_PATH_NONE}
	id := netip.MustParseAddr("10.91.1.2")
	f.Fuzz(func(t *testing.T, b []byte, twoByteAS bool) {
		if len(b) < bgp.BGP_HEADER_LENGTH {
			return
		}
		var h bgp.BGPHeader
		if err := h.DecodeFromBytes(b[:bgp.BGP_HEADER_LENGTH]); err != nil || h.Len > bgp.BGP_MAX_MESSAGE_LENGTH {
			return
		}
		n := int(h.Len)
		if n < bgp.BGP_HEADER_LENGTH || n > len(b) {
			return
		}
		m, err := bgp.ParseBGPBody(&h, b[bgp.BGP_HEADER_LENGTH:n], &bgp.MarshallingOption{AddPath: rfs, Use2ByteAS: twoByteAS})
		if err != nil || m == nil {
			return
		}
		switch body := m.Body.(type) {
		case *bgp.BGPOpen:
			bgp.ValidateOpenMsg(body, 65000, 65001, id)
		case *bgp.BGPUpdate:
			bgp.ValidateUpdateMsg(body, rfs, true, false, false)
		}
	})
}
