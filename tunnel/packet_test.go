package tunnel

import (
	"encoding/binary"
	"net/netip"

	"github.com/bondd/bondd/tun/tuntest"
)

// udp4 builds an IPv4/UDP packet from src to dst carrying payload, with
// valid IP and UDP checksums (tuntest.AppendUDP4).
func udp4(src, dst netip.AddrPort, payload []byte) []byte {
	pkt, err := tuntest.AppendUDP4(nil, src, dst, payload)
	if err != nil {
		panic(err) // a test's own addresses: IPv4 by construction
	}
	return pkt
}

// sum and fold compute the RFC 1071 checksums of the TCP packets the tests
// build and check.
func sum(s uint64, b []byte) uint64 {
	for len(b) >= 2 {
		s += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint64(b[0]) << 8
	}
	return s
}

func fold(s uint64) uint16 {
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}
