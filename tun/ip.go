package tun

import "encoding/binary"

// IP protocol numbers and header sizes used by the per-packet helpers.
const (
	protoHopByHop = 0
	protoICMPv4   = 1
	protoTCP      = 6
	protoRouting  = 43
	protoFragment = 44
	protoAH       = 51
	protoICMPv6   = 58
	protoDestOpts = 60

	ipv4HeaderLen = 20
	ipv6HeaderLen = 40
	icmpHeaderLen = 8
	tcpHeaderLen  = 20

	// maxIPv6ExtHeaders bounds the extension-header walk: real packets
	// carry few, and the bound keeps crafted chains cheap.
	maxIPv6ExtHeaders = 8
)

// ipv4Packet validates the IPv4 header of pkt and returns the header length
// and the packet length from the total-length field (bytes after it are
// link padding and ignored). ok is false when pkt is not a well-formed IPv4
// packet: wrong version, IHL < 5, or lengths that do not fit pkt.
func ipv4Packet(pkt []byte) (ihl, total int, ok bool) {
	if len(pkt) < ipv4HeaderLen || pkt[0]>>4 != 4 {
		return 0, 0, false
	}
	ihl = int(pkt[0]&0x0f) * 4
	total = int(binary.BigEndian.Uint16(pkt[2:4]))
	if ihl < ipv4HeaderLen || total < ihl || total > len(pkt) {
		return 0, 0, false
	}
	return ihl, total, true
}

// ipv6Packet validates the fixed IPv6 header of pkt and returns the packet
// length (40 + payload length). ok is false for a wrong version, a payload
// length that does not fit pkt, or a zero payload length (jumbograms, RFC
// 2675, never cross a TUN with a 16-bit MTU).
func ipv6Packet(pkt []byte) (total int, ok bool) {
	if len(pkt) < ipv6HeaderLen || pkt[0]>>4 != 6 {
		return 0, false
	}
	plen := int(binary.BigEndian.Uint16(pkt[4:6]))
	total = ipv6HeaderLen + plen
	if plen == 0 || total > len(pkt) {
		return 0, false
	}
	return total, true
}

// ipv6Upper walks the extension headers of the IPv6 packet pkt[:total]
// (validated by ipv6Packet) and returns the upper-layer protocol number and
// its offset. laterFrag is true when a fragment header with a non-zero
// offset was found: then off points past the fragment header and the upper
// header is not in this packet. ok is false when a header runs past the
// packet or the chain is longer than maxIPv6ExtHeaders. ESP and unknown
// headers end the walk and are returned as the upper layer.
func ipv6Upper(pkt []byte, total int) (proto uint8, off int, laterFrag, ok bool) {
	proto = pkt[6]
	off = ipv6HeaderLen
	for range maxIPv6ExtHeaders + 1 { // up to 8 extension headers, then the upper layer
		switch proto {
		case protoHopByHop, protoRouting, protoDestOpts:
			if off+2 > total {
				return 0, 0, false, false
			}
			proto, off = pkt[off], off+(int(pkt[off+1])+1)*8
		case protoAH:
			if off+2 > total {
				return 0, 0, false, false
			}
			proto, off = pkt[off], off+(int(pkt[off+1])+2)*4
		case protoFragment:
			if off+8 > total {
				return 0, 0, false, false
			}
			fragOff := binary.BigEndian.Uint16(pkt[off+2:off+4]) &^ 7
			proto, off = pkt[off], off+8
			if fragOff != 0 {
				return proto, off, true, true
			}
		default:
			return proto, off, false, true
		}
		if off > total {
			return 0, 0, false, false
		}
	}
	return 0, 0, false, false
}
