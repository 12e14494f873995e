package tun_test

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// Test addresses.
var (
	v4A = netip.MustParseAddr("10.1.0.2")
	v4B = netip.MustParseAddr("10.2.0.9")
	v6A = netip.MustParseAddr("fd00:1::2")
	v6B = netip.MustParseAddr("fd00:2::9")
)

// serialize builds a packet from layers with lengths and checksums computed
// by gopacket. A TCP, UDP or ICMPv6 layer takes its pseudo-header from the
// first IP layer.
func serialize(tb testing.TB, ls ...gopacket.SerializableLayer) []byte {
	tb.Helper()
	var netLayer gopacket.NetworkLayer
	for _, l := range ls {
		switch l := l.(type) {
		case *layers.IPv4:
			if netLayer == nil {
				netLayer = l
			}
		case *layers.IPv6:
			if netLayer == nil {
				netLayer = l
			}
		case *layers.TCP:
			l.SetNetworkLayerForChecksum(netLayer)
		case *layers.UDP:
			l.SetNetworkLayerForChecksum(netLayer)
		case *layers.ICMPv6:
			l.SetNetworkLayerForChecksum(netLayer)
		}
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		tb.Fatalf("serialize: %v", err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

func ip4(src, dst netip.Addr, proto layers.IPProtocol) *layers.IPv4 {
	return &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: proto, Flags: layers.IPv4DontFragment,
		SrcIP: net.IP(src.AsSlice()), DstIP: net.IP(dst.AsSlice())}
}

func ip6(src, dst netip.Addr, next layers.IPProtocol) *layers.IPv6 {
	return &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: next,
		SrcIP: net.IP(src.AsSlice()), DstIP: net.IP(dst.AsSlice())}
}

func mssOpt(mss uint16) layers.TCPOption {
	return layers.TCPOption{OptionType: layers.TCPOptionKindMSS, OptionLength: 4,
		OptionData: binary.BigEndian.AppendUint16(nil, mss)}
}

var nop = layers.TCPOption{OptionType: layers.TCPOptionKindNop, OptionLength: 1}

// tcpSYN returns a TCP layer with SYN set and the given options.
func tcpSYN(ack bool, opts ...layers.TCPOption) *layers.TCP {
	return &layers.TCP{SrcPort: 40000, DstPort: 443, Seq: 1000, SYN: true, ACK: ack, Window: 64240, Options: opts}
}

// insertIPv6Ext inserts raw extension headers (each with its next-header
// byte left to fill) between the fixed IPv6 header of pkt and its payload,
// chaining next-header fields and fixing the payload length.
func insertIPv6Ext(pkt []byte, exts ...[]byte) []byte {
	upper := pkt[6]
	out := append([]byte(nil), pkt[:40]...)
	prev := 6 // offset of the next-header field to patch
	for _, e := range exts {
		out[prev] = e[0] // e[0] holds this header's protocol number
		prev = len(out)
		out = append(out, e[1:]...)
	}
	out[prev] = upper
	out = append(out, pkt[40:]...)
	binary.BigEndian.PutUint16(out[4:6], uint16(len(out)-40))
	return out
}

// Raw extension headers for insertIPv6Ext: the first byte is the header's
// own protocol number, followed by the header with a placeholder next
// header byte.
var (
	extHopByHop = []byte{0, 0xff, 0, 1, 4, 0, 0, 0, 0} // PadN
	extDestOpts = []byte{60, 0xff, 0, 1, 4, 0, 0, 0, 0}
)

func extFragment(offset uint16, more bool) []byte {
	v := offset << 3
	if more {
		v |= 1
	}
	return []byte{44, 0xff, 0, byte(v >> 8), byte(v), 0, 0, 0x12, 0x34}
}

// decode parses pkt as an IP packet with gopacket, failing the test on a
// decode error.
func decode(tb testing.TB, pkt []byte) gopacket.Packet {
	tb.Helper()
	first := layers.LayerTypeIPv4
	if len(pkt) > 0 && pkt[0]>>4 == 6 {
		first = layers.LayerTypeIPv6
	}
	p := gopacket.NewPacket(pkt, first, gopacket.DecodeOptions{NoCopy: true})
	if el := p.ErrorLayer(); el != nil {
		tb.Fatalf("decode %x: %v", pkt, el.Error())
	}
	return p
}

// transportChecksumOK recomputes, from scratch, the one's complement sum
// over the IP pseudo-header and the upper-layer data of a TCP, UDP, ICMP or
// ICMPv6 packet at off (up to total), and reports whether it verifies. It is
// the slow truth the incremental and builder code is checked against.
func transportChecksumOK(pkt []byte, off, total int, proto byte) bool {
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(b[i])<<8 | uint32(b[i+1])
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	ulen := total - off
	if proto != 1 { // ICMPv4 has no pseudo-header
		if pkt[0]>>4 == 4 {
			add(pkt[12:20])
		} else {
			add(pkt[8:40])
		}
		sum += uint32(proto) + uint32(ulen)
	}
	add(pkt[off:total])
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return sum == 0xffff
}

// ipv4HeaderChecksumOK reports whether the IPv4 header checksum verifies.
func ipv4HeaderChecksumOK(pkt []byte) bool {
	ihl := int(pkt[0]&0xf) * 4
	return transportChecksumOK(pkt[:ihl], 0, ihl, 1)
}

// gopayloadLayer is a raw payload that gopacket can serialize.
type gopayloadLayer struct{ b []byte }

func (p *gopayloadLayer) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	buf, err := b.PrependBytes(len(p.b))
	if err != nil {
		return err
	}
	copy(buf, p.b)
	return nil
}

func (p *gopayloadLayer) LayerType() gopacket.LayerType { return gopacket.LayerTypePayload }
