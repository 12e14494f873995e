package classify

import (
	"encoding/binary"
	"net/netip"
)

// MaxExtHeaders bounds the IPv6 extension headers Parse walks (RFC 8200
// §4.1 recommends an order with at most one of each, seven in all, plus the
// destination options header that may appear twice).
const MaxExtHeaders = 8

// ipInfo is what the IP layer tells the layers above it.
type ipInfo struct {
	end     int    // end of the IP packet within pkt (≤ len(pkt))
	l4      int    // offset of the transport header; valid unless nonFirst
	fragID  uint32 // IPv4 identification or IPv6 fragment identification
	frag    bool   // the packet is a fragment
	partial bool   // the transport payload is cut short (fragment, truncation)
	addrKey uint64 // hash of the source and destination addresses
}

// ParseIP fills md with the IP and transport keys of pkt (ip_version,
// proto, addresses, ports, dscp, ecn, length, fragment, icmp_type/code)
// without any state: no RTP, codec or class keys, and a non-first fragment
// has no ports. It allocates nothing and keeps no reference to pkt. Safe for
// concurrent use.
func ParseIP(pkt []byte, md *Metadata) Reason {
	*md = Metadata{}
	var ip ipInfo
	return parseHeaders(pkt, md, &ip)
}

// parseHeaders reads the IP header and, unless the packet is a non-first
// fragment or its IP header is bad, the transport header. The Reason is the
// first problem met.
func parseHeaders(pkt []byte, md *Metadata, ip *ipInfo) Reason {
	r := parseIP(pkt, md, ip)
	if md.IPVersion == 0 || md.Fragment > FragmentFirst || (r != ReasonNone && r != ReasonTruncated) {
		return r
	}
	if r2 := parseTransport(pkt, md, ip); r == ReasonNone {
		r = r2
	}
	return r
}

// parseIP reads the IPv4 or IPv6 header and, for IPv6, the extension header
// chain.
func parseIP(pkt []byte, md *Metadata, ip *ipInfo) Reason {
	if len(pkt) == 0 {
		return ReasonShort
	}
	switch pkt[0] >> 4 {
	case 4:
		return parseIPv4(pkt, md, ip)
	case 6:
		return parseIPv6(pkt, md, ip)
	}
	return ReasonVersion
}

func parseIPv4(pkt []byte, md *Metadata, ip *ipInfo) Reason {
	if len(pkt) < 20 {
		return ReasonShort
	}
	ihl := int(pkt[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(pkt[2:]))
	if ihl < 20 || ihl > len(pkt) || total < ihl {
		return ReasonHeader
	}
	md.IPVersion = 4
	md.DSCP, md.ECN = pkt[1]>>2, pkt[1]&0x03
	md.Length = uint16(total)
	md.Proto = pkt[9]
	src, dst := [4]byte(pkt[12:16]), [4]byte(pkt[16:20])
	md.Src, md.Dst = netip.AddrFrom4(src), netip.AddrFrom4(dst)
	md.present |= 1<<KeyIPVersion | 1<<KeyProto | 1<<KeySrcIP | 1<<KeyDstIP |
		1<<KeyDSCP | 1<<KeyECN | 1<<KeyLength
	ip.addrKey = uint64(binary.BigEndian.Uint32(pkt[12:]))<<32 | uint64(binary.BigEndian.Uint32(pkt[16:]))
	ip.l4 = ihl
	r := ReasonNone
	ip.end = total
	if total > len(pkt) {
		ip.end, ip.partial, r = len(pkt), true, ReasonTruncated
	}
	// Flags and fragment offset (RFC 791 §3.1): MF = 0x2000, offset in
	// 8-byte units in the low 13 bits.
	ff := binary.BigEndian.Uint16(pkt[6:])
	more, off := ff&0x2000 != 0, ff&0x1fff
	if more || off != 0 {
		ip.frag, ip.fragID = true, uint32(binary.BigEndian.Uint16(pkt[4:]))
		md.Fragment = fragPos(off, more)
		md.set(KeyFragment)
	}
	return r
}

func fragPos(off uint16, more bool) FragmentPos {
	switch {
	case off == 0:
		return FragmentFirst
	case more:
		return FragmentMiddle
	}
	return FragmentLast
}

func parseIPv6(pkt []byte, md *Metadata, ip *ipInfo) Reason {
	if len(pkt) < 40 {
		return ReasonShort
	}
	vtf := binary.BigEndian.Uint32(pkt)
	tc := uint8(vtf >> 20)
	md.IPVersion = 6
	md.DSCP, md.ECN = tc>>2, tc&0x03
	plen := int(binary.BigEndian.Uint16(pkt[4:]))
	md.Length = uint16(min(40+plen, 0xffff))
	md.Src = netip.AddrFrom16([16]byte(pkt[8:24]))
	md.Dst = netip.AddrFrom16([16]byte(pkt[24:40]))
	md.present |= 1<<KeyIPVersion | 1<<KeyProto | 1<<KeySrcIP | 1<<KeyDstIP |
		1<<KeyDSCP | 1<<KeyECN | 1<<KeyLength
	var h uint64
	for i := 8; i < 40; i += 8 {
		h = h*0x9e3779b97f4a7c15 ^ binary.BigEndian.Uint64(pkt[i:])
	}
	ip.addrKey = h
	r := ReasonNone
	ip.end = 40 + plen
	if plen == 0 {
		ip.end = len(pkt) // jumbogram (RFC 2675) or nothing after the header
	} else if ip.end > len(pkt) {
		ip.end, ip.partial, r = len(pkt), true, ReasonTruncated
	}
	nh, off := pkt[6], 40
	for i := 0; ; i++ {
		hdrLen := 0
		switch nh {
		case 0, 43, 60, 135, 139, 140, 253, 254:
			// Hop-by-hop, routing, destination options, mobility, HIP,
			// shim6, experiments: length in 8-byte units, not counting the
			// first 8 (RFC 8200 §4.3–4.6, RFC 7045 §2).
			if off+2 <= ip.end {
				hdrLen = (int(pkt[off+1]) + 1) * 8
			}
		case 51:
			// AH: length in 4-byte units, minus 2 (RFC 4302 §2.2).
			if off+2 <= ip.end {
				hdrLen = (int(pkt[off+1]) + 2) * 4
			}
		case 44:
			// Fragment header (RFC 8200 §4.5): next header, reserved,
			// offset(13) res(2) M(1), identification(32).
			if off+8 > ip.end {
				md.Proto = nh
				return ReasonExtHeader
			}
			ff := binary.BigEndian.Uint16(pkt[off+2:])
			fo, more := ff>>3, ff&1 != 0
			ip.frag, ip.fragID = true, binary.BigEndian.Uint32(pkt[off+4:])
			if fo != 0 || more { // an atomic fragment (RFC 6946) is not one
				md.Fragment = fragPos(fo, more)
				md.set(KeyFragment)
			} else {
				ip.frag = false
			}
			hdrLen = 8
		default:
			md.Proto = nh
			ip.l4 = off
			return r
		}
		if i == MaxExtHeaders || hdrLen == 0 || off+hdrLen > ip.end {
			md.Proto = nh
			return ReasonExtHeader
		}
		nh = pkt[off]
		off += hdrLen
		if md.Fragment > FragmentFirst {
			md.Proto = nh // the rest is fragment data, not headers
			return r
		}
	}
}

// parseTransport reads ports or ICMP type and code at ip.l4.
func parseTransport(pkt []byte, md *Metadata, ip *ipInfo) Reason {
	l4 := pkt[ip.l4:ip.end]
	md.L4Offset = uint16(ip.l4)
	switch md.Proto {
	case 6, 17, 33, 132, 136: // TCP, UDP, DCCP, SCTP, UDP-Lite
		if len(l4) < 4 {
			return ReasonTransport
		}
		md.SrcPort = binary.BigEndian.Uint16(l4)
		md.DstPort = binary.BigEndian.Uint16(l4[2:])
		md.present |= 1<<KeySrcPort | 1<<KeyDstPort
		switch md.Proto {
		case 17, 136:
			if len(l4) < 8 {
				return ReasonTransport
			}
			md.PayloadOffset = uint16(ip.l4 + 8)
		case 6:
			if len(l4) < 20 || int(l4[12]>>4)*4 > len(l4) {
				return ReasonTransport
			}
			md.PayloadOffset = uint16(ip.l4 + int(l4[12]>>4)*4)
		}
	case 1, 58: // ICMP, ICMPv6
		if len(l4) < 2 {
			return ReasonTransport
		}
		md.ICMPType, md.ICMPCode = l4[0], l4[1]
		md.present |= 1<<KeyICMPType | 1<<KeyICMPCode
	}
	return ReasonNone
}

// udpPayload returns the UDP payload of a parsed packet: up to the UDP
// length when it fits (it strips link-layer padding), else to the IP end.
func udpPayload(pkt []byte, md *Metadata, ip *ipInfo) []byte {
	if md.PayloadOffset == 0 || (md.Proto != 17 && md.Proto != 136) {
		return nil
	}
	l4 := int(md.L4Offset)
	end := ip.end
	if md.Proto == 17 && !ip.frag {
		if ulen := int(binary.BigEndian.Uint16(pkt[l4+4:])); ulen >= 8 && l4+ulen < end {
			end = l4 + ulen
		}
	}
	return pkt[md.PayloadOffset:end]
}
