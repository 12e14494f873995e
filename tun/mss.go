package tun

import "encoding/binary"

const (
	tcpFlagSYN   = 0x02
	tcpOptEnd    = 0
	tcpOptNOP    = 1
	tcpOptMSS    = 2
	tcpOptMSSLen = 4
)

// MSSForMTU returns the largest TCP maximum segment size, in bytes, whose
// segments fit a link of mtu bytes: mtu minus the fixed IP header (20 bytes
// for IPv4, 40 for IPv6) and the fixed TCP header (20 bytes). TCP options are
// not subtracted; RFC 6691 §2 has senders account for them. It returns 0 when
// mtu is too small to carry any payload.
func MSSForMTU(mtu int, ipv6 bool) int {
	hdr := ipv4HeaderLen + tcpHeaderLen
	if ipv6 {
		hdr = ipv6HeaderLen + tcpHeaderLen
	}
	return max(mtu-hdr, 0)
}

// ClampMSS lowers, in place, the MSS option (RFC 9293 §3.7.1) of an IPv4 or
// IPv6 TCP segment with the SYN flag set (a SYN or a SYN-ACK) to maxMSS bytes
// when it advertises more, and updates the TCP checksum incrementally (RFC
// 1624), so a valid checksum stays valid. It reports whether it changed pkt.
//
// pkt is one complete IP packet starting at its IP header; ClampMSS does not
// keep it. Anything else is left untouched and reported as unchanged:
// segments without SYN or without an MSS option (their implied MSS, 536 for
// IPv4 and 1220 for IPv6, is already small), non-first fragments, IPv6
// packets whose TCP header sits behind more than 8 extension headers or
// behind ESP, malformed packets or options, and maxMSS outside [1, 65535].
// It never panics and allocates nothing; it is safe for concurrent use on
// distinct packets.
func ClampMSS(pkt []byte, maxMSS int) bool {
	if maxMSS < 1 || maxMSS > 0xffff || len(pkt) == 0 {
		return false
	}
	var off, total int
	switch pkt[0] >> 4 {
	case 4:
		ihl, t, ok := ipv4Packet(pkt)
		if !ok || pkt[9] != protoTCP || binary.BigEndian.Uint16(pkt[6:8])&0x1fff != 0 {
			return false
		}
		off, total = ihl, t
	case 6:
		t, ok := ipv6Packet(pkt)
		if !ok {
			return false
		}
		proto, o, laterFrag, ok := ipv6Upper(pkt, t)
		if !ok || laterFrag || proto != protoTCP {
			return false
		}
		off, total = o, t
	default:
		return false
	}
	return clampTCP(pkt[off:total], uint16(maxMSS))
}

// clampTCP rewrites the MSS option of the TCP segment seg (TCP header first)
// as described in ClampMSS.
func clampTCP(seg []byte, maxMSS uint16) bool {
	if len(seg) < tcpHeaderLen || seg[13]&tcpFlagSYN == 0 {
		return false
	}
	hlen := int(seg[12]>>4) * 4
	if hlen < tcpHeaderLen || hlen > len(seg) {
		return false
	}
	for i := tcpHeaderLen; i < hlen; {
		switch kind := seg[i]; kind {
		case tcpOptEnd:
			return false
		case tcpOptNOP:
			i++
			continue
		}
		if i+1 >= hlen {
			return false
		}
		olen := int(seg[i+1])
		if olen < 2 || i+olen > hlen {
			return false
		}
		if seg[i] == tcpOptMSS && olen == tcpOptMSSLen {
			if binary.BigEndian.Uint16(seg[i+2:i+4]) <= maxMSS {
				return false
			}
			// The checksum sums 16-bit words aligned to the segment start.
			// An option after an odd number of NOPs straddles two words;
			// sum the aligned words covering it before and after. The
			// header length is a multiple of 4, so an odd i leaves room
			// for the extra byte before hlen.
			lo, hi := i+2, i+4
			if lo&1 == 1 {
				lo, hi = lo-1, hi+1
			}
			oldSum := checksumAdd(0, seg[lo:hi])
			binary.BigEndian.PutUint16(seg[i+2:i+4], maxMSS)
			newSum := checksumAdd(0, seg[lo:hi])
			hc := binary.BigEndian.Uint16(seg[16:18])
			binary.BigEndian.PutUint16(seg[16:18], checksumUpdate(hc, oldSum, newSum))
			return true
		}
		i += olen
	}
	return false
}
