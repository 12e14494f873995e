package tuntest

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// AppendUDP4 appends an IPv4/UDP packet (no IP options, DF set, TTL 64)
// carrying payload from src to dst, with valid header and UDP checksums
// (RFC 791, RFC 768, the sums of RFC 1071), to b and returns it: the
// packet tests and the in-process demo inject. It does not allocate when b
// has room for 28 + len(payload) bytes. It returns an error when an
// address is not IPv4 or the packet would exceed 65535 bytes.
func AppendUDP4(b []byte, src, dst netip.AddrPort, payload []byte) ([]byte, error) {
	if !src.Addr().Is4() || !dst.Addr().Is4() {
		return b, fmt.Errorf("tuntest: UDP %s → %s is not IPv4", src, dst)
	}
	total := 28 + len(payload)
	if total > 0xffff {
		return b, fmt.Errorf("tuntest: %d-byte UDP packet is too long", total)
	}
	start := len(b)
	s4, d4 := src.Addr().As4(), dst.Addr().As4()
	b = append(b, 0x45, 0, byte(total>>8), byte(total), 0, 0, 0x40, 0, 64, 17, 0, 0)
	b = append(b, s4[:]...)
	b = append(b, d4[:]...)
	ulen := 8 + len(payload)
	b = append(b, byte(src.Port()>>8), byte(src.Port()), byte(dst.Port()>>8), byte(dst.Port()), byte(ulen>>8), byte(ulen), 0, 0)
	b = append(b, payload...)
	ip, udp := b[start:start+20], b[start+20:]
	binary.BigEndian.PutUint16(ip[10:], ^foldSum(sum16(ip, 0)))
	// UDP checksum over the pseudo-header (addresses, protocol, length)
	// and the datagram; 0 is sent as 0xffff (RFC 768).
	ps := sum16(s4[:], 0)
	ps = sum16(d4[:], ps)
	ps += 17 + uint32(ulen)
	c := ^foldSum(sum16(udp, ps))
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(udp[6:], c)
	return b, nil
}

// sum16 adds b as big-endian 16-bit words (the last byte padded with zero)
// to acc: the one's-complement sum of RFC 1071 before folding.
func sum16(b []byte, acc uint32) uint32 {
	for ; len(b) >= 2; b = b[2:] {
		acc += uint32(b[0])<<8 | uint32(b[1])
	}
	if len(b) == 1 {
		acc += uint32(b[0]) << 8
	}
	return acc
}

// foldSum folds a 32-bit one's-complement sum into 16 bits.
func foldSum(acc uint32) uint16 {
	for acc > 0xffff {
		acc = acc&0xffff + acc>>16
	}
	return uint16(acc)
}
