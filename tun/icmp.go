package tun

import (
	"encoding/binary"
	"math"
	"net/netip"
	"slices"
)

const (
	// MaxPacketTooBigLen is the most bytes [AppendPacketTooBig] appends: an
	// ICMPv6 error never exceeds the IPv6 minimum MTU (RFC 4443 §2.4(c)),
	// and an IPv4 one stays within 576 bytes (RFC 1812 §4.3.2.3). A dst
	// with this much spare capacity makes AppendPacketTooBig allocation-free.
	MaxPacketTooBigLen = 1280

	maxICMPv4ErrorLen = 576
	replyTTL          = 64

	icmpv4DestUnreachable = 3
	icmpv4FragNeeded      = 4
	icmpv6PacketTooBig    = 2
	icmpv6Redirect        = 137
	icmpv6FirstInfo       = 128
)

// AppendPacketTooBig appends to dst an ICMP error telling the sender of pkt
// that pkt does not fit a link of mtu bytes, and returns the extended slice
// and true. The appended bytes are one complete IP packet, ready to be
// written into the TUN device, addressed to pkt's source, from src (pkt's
// destination when src is the zero Addr):
//
//   - IPv4 pkt: ICMP destination unreachable, code 4 "fragmentation needed
//     and DF set", with the next-hop MTU field set to mtu (RFC 792, RFC 1191
//     §4). It quotes pkt's header and as much of its data as keeps the reply
//     within 576 bytes (RFC 1812 §4.3.2.3).
//   - IPv6 pkt: ICMPv6 packet too big, MTU field mtu (RFC 4443 §3.2), with
//     the checksum over the RFC 8200 §8.1 pseudo-header. It quotes as much of
//     pkt as keeps the reply within 1280 bytes (RFC 4443 §2.4(c)).
//
// pkt is one complete IP packet starting at its IP header; mtu is in bytes.
// It returns dst unchanged and false when no error may or need be sent:
// pkt fits in mtu; mtu is below the family minimum (68 for IPv4, 1280 for
// IPv6) or does not fit the MTU field; pkt is a non-first fragment, an ICMP
// error or ICMPv6 redirect (RFC 1122 §3.2.2, RFC 4443 §2.4(e)), or
// malformed; its source is unspecified, loopback, multicast, broadcast or
// otherwise not a single host; an IPv4 pkt is addressed to a multicast or
// the limited broadcast address; src (or, when src is zero, pkt's
// destination) is not a unicast address of pkt's family. Note that an IPv4
// packet without DF set also returns false: the sender allowed
// fragmentation, so the caller should fragment it (or drop it) instead of
// answering.
//
// dst must not overlap pkt. AppendPacketTooBig never panics, does not keep
// pkt or dst, allocates only when dst has less than [MaxPacketTooBigLen]
// bytes of spare capacity, and is safe for concurrent use on distinct
// buffers.
func AppendPacketTooBig(dst []byte, pkt []byte, mtu int, src netip.Addr) ([]byte, bool) {
	if len(pkt) == 0 {
		return dst, false
	}
	switch pkt[0] >> 4 {
	case 4:
		return appendFragNeeded4(dst, pkt, mtu, src)
	case 6:
		return appendPacketTooBig6(dst, pkt, mtu, src)
	}
	return dst, false
}

// appendFragNeeded4 is AppendPacketTooBig for IPv4.
func appendFragNeeded4(dst, pkt []byte, mtu int, src netip.Addr) ([]byte, bool) {
	ihl, total, ok := ipv4Packet(pkt)
	if !ok || total <= mtu || mtu < MinMTU || mtu > math.MaxUint16 {
		return dst, false
	}
	frag := binary.BigEndian.Uint16(pkt[6:8])
	if frag&0x1fff != 0 || frag&0x4000 == 0 { // later fragment, or DF clear
		return dst, false
	}
	pktSrc := netip.AddrFrom4([4]byte(pkt[12:16]))
	pktDst := netip.AddrFrom4([4]byte(pkt[16:20]))
	if !unicast4(pktSrc) || pktDst.IsMulticast() || pktDst == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return dst, false
	}
	if pkt[9] == protoICMPv4 && (ihl >= total || !icmpv4Query(pkt[ihl])) {
		return dst, false
	}
	from := src.Unmap()
	if !src.IsValid() {
		from = pktDst
	}
	if !from.Is4() || !unicast4(from) {
		return dst, false
	}

	quote := min(total, maxICMPv4ErrorLen-ipv4HeaderLen-icmpHeaderLen)
	n := ipv4HeaderLen + icmpHeaderLen + quote
	dst, b := grow(dst, n)

	b[0] = 0x45 // version 4, IHL 5
	b[1] = 0xc0 // precedence internetwork control, as Linux sends errors
	binary.BigEndian.PutUint16(b[2:4], uint16(n))
	binary.BigEndian.PutUint16(b[4:6], 0)      // ID: unused with DF
	binary.BigEndian.PutUint16(b[6:8], 0x4000) // DF
	b[8] = replyTTL
	b[9] = protoICMPv4
	b[10], b[11] = 0, 0
	f4 := from.As4()
	copy(b[12:16], f4[:])
	copy(b[16:20], pkt[12:16])
	binary.BigEndian.PutUint16(b[10:12], checksumFold(checksumAdd(0, b[:ipv4HeaderLen])))

	m := b[ipv4HeaderLen:]
	m[0] = icmpv4DestUnreachable
	m[1] = icmpv4FragNeeded
	m[2], m[3] = 0, 0
	binary.BigEndian.PutUint16(m[4:6], 0) // unused
	binary.BigEndian.PutUint16(m[6:8], uint16(mtu))
	copy(m[icmpHeaderLen:], pkt[:quote])
	binary.BigEndian.PutUint16(m[2:4], checksumFold(checksumAdd(0, m)))
	return dst, true
}

// appendPacketTooBig6 is AppendPacketTooBig for IPv6.
func appendPacketTooBig6(dst, pkt []byte, mtu int, src netip.Addr) ([]byte, bool) {
	total, ok := ipv6Packet(pkt)
	if !ok || total <= mtu || mtu < DefaultMTU || uint64(mtu) > math.MaxUint32 {
		return dst, false
	}
	pktSrc := netip.AddrFrom16([16]byte(pkt[8:24]))
	if !unicast6(pktSrc) {
		return dst, false
	}
	proto, off, laterFrag, ok := ipv6Upper(pkt, total)
	if !ok || laterFrag {
		return dst, false
	}
	if proto == protoICMPv6 && (off >= total || pkt[off] < icmpv6FirstInfo || pkt[off] == icmpv6Redirect) {
		return dst, false
	}
	from := src
	if !src.IsValid() {
		// May be multicast: PTB answers multicast too (RFC 4443
		// §2.4(e.3)), but then the caller must pass src.
		from = netip.AddrFrom16([16]byte(pkt[24:40]))
	}
	if !from.Is6() || !unicast6(from) {
		return dst, false
	}

	quote := min(total, MaxPacketTooBigLen-ipv6HeaderLen-icmpHeaderLen)
	mlen := icmpHeaderLen + quote
	dst, b := grow(dst, ipv6HeaderLen+mlen)

	binary.BigEndian.PutUint32(b[0:4], 6<<28) // version 6, class 0, flow 0
	binary.BigEndian.PutUint16(b[4:6], uint16(mlen))
	b[6] = protoICMPv6
	b[7] = replyTTL
	f16 := from.As16()
	copy(b[8:24], f16[:])
	copy(b[24:40], pkt[8:24])

	m := b[ipv6HeaderLen:]
	m[0] = icmpv6PacketTooBig
	m[1] = 0
	m[2], m[3] = 0, 0
	binary.BigEndian.PutUint32(m[4:8], uint32(mtu))
	copy(m[icmpHeaderLen:], pkt[:quote])
	// Pseudo-header: source, destination, upper-layer length, next header.
	sum := checksumAdd(0, b[8:40]) + uint64(mlen) + protoICMPv6
	binary.BigEndian.PutUint16(m[2:4], checksumFold(checksumAdd(sum, m)))
	return dst, true
}

// grow extends dst by n bytes, reallocating only when its spare capacity is
// short, and returns the extended slice and the n new bytes (not zeroed).
func grow(dst []byte, n int) (all, tail []byte) {
	start := len(dst)
	dst = slices.Grow(dst, n)[:start+n]
	return dst, dst[start:]
}

// unicast4 reports whether a may be the address of a single IPv4 host as an
// ICMP error's source or destination (RFC 1812 §4.3.2.7, §5.3.7): not in
// 0/8, 127/8, 224/4 (multicast) or 240/4 (reserved and broadcast).
func unicast4(a netip.Addr) bool {
	b := a.As4()[0]
	return b != 0 && b != 127 && b < 224
}

// unicast6 reports whether a may be the address of a single IPv6 node as an
// ICMPv6 error's source or destination (RFC 4443 §2.4(e.6)).
func unicast6(a netip.Addr) bool {
	return !a.IsUnspecified() && !a.IsLoopback() && !a.IsMulticast() && !a.Is4In6()
}

// icmpv4Query reports whether an ICMP message of type t is a query (echo,
// router discovery, timestamp, information, address mask) that may be
// answered with an ICMP error; errors and unknown types may not (RFC 1122
// §3.2.2, RFC 1812 §4.3.2.7).
func icmpv4Query(t byte) bool {
	switch t {
	case 0, 8, 9, 10, 13, 14, 15, 16, 17, 18:
		return true
	}
	return false
}
