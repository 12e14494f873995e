package tunnel

import (
	"encoding/binary"
	"net/netip"
)

// udp4 builds an IPv4/UDP packet from src to dst carrying payload, with
// valid IP and UDP checksums.
func udp4(src, dst netip.AddrPort, payload []byte) []byte {
	pkt := make([]byte, 28+len(payload))
	pkt[0] = 0x45
	binary.BigEndian.PutUint16(pkt[2:], uint16(len(pkt)))
	pkt[6] = 0x40 // DF
	pkt[8] = 64
	pkt[9] = 17
	s, d := src.Addr().As4(), dst.Addr().As4()
	copy(pkt[12:], s[:])
	copy(pkt[16:], d[:])
	binary.BigEndian.PutUint16(pkt[10:], ^fold(sum(0, pkt[:20])))
	u := pkt[20:]
	binary.BigEndian.PutUint16(u[0:], src.Port())
	binary.BigEndian.PutUint16(u[2:], dst.Port())
	binary.BigEndian.PutUint16(u[4:], uint16(8+len(payload)))
	copy(u[8:], payload)
	ps := sum(0, pkt[12:20])
	ps += 17 + uint64(len(u))
	binary.BigEndian.PutUint16(u[6:], ^fold(sum(ps, u)))
	return pkt
}

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
