package tun_test

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/bondd/bondd/tun"
	"github.com/gopacket/gopacket/layers"
)

type ptbCase struct {
	name string
	pkt  []byte
	mtu  int
	src  netip.Addr
	ok   bool
	from netip.Addr // expected reply source when ok
}

func udp4(tb testing.TB, src, dst netip.Addr, size int, flags layers.IPv4Flag, fragOff uint16) []byte {
	ip := ip4(src, dst, layers.IPProtocolUDP)
	ip.Flags, ip.FragOffset = flags, fragOff
	return serialize(tb, ip, &layers.UDP{SrcPort: 5004, DstPort: 5004}, gopayload(size-28))
}

func udp6(tb testing.TB, src, dst netip.Addr, size int) []byte {
	return serialize(tb, ip6(src, dst, layers.IPProtocolUDP), &layers.UDP{SrcPort: 5004, DstPort: 5004}, gopayload(size-48))
}

func icmp4(tb testing.TB, typ uint8, size int) []byte {
	return serialize(tb, ip4(v4A, v4B, layers.IPProtocolICMPv4),
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(typ, 0), Id: 1, Seq: 1}, gopayload(size-28))
}

func icmp6(tb testing.TB, typ uint8, size int) []byte {
	return serialize(tb, ip6(v6A, v6B, layers.IPProtocolICMPv6),
		&layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(typ, 0)}, gopayload(size-44))
}

func ptbCases(tb testing.TB) []ptbCase {
	df := layers.IPv4DontFragment
	noDF := udp4(tb, v4A, v4B, 1400, 0, 0)
	badTotal := udp4(tb, v4A, v4B, 1400, df, 0)
	binary.BigEndian.PutUint16(badTotal[2:4], 1401)
	bad6 := udp6(tb, v6A, v6B, 1400)
	binary.BigEndian.PutUint16(bad6[4:6], 1400)
	jumbo := udp6(tb, v6A, v6B, 1400)
	binary.BigEndian.PutUint16(jumbo[4:6], 0)
	icmpNoType := serialize(tb, ip4(v4A, v4B, layers.IPProtocolICMPv4), gopayload(0))
	srcV4 := netip.MustParseAddr("10.2.0.1")
	srcV6 := netip.MustParseAddr("fd00:2::1")
	return []ptbCase{
		{"v4_udp_df", udp4(tb, v4A, v4B, 1400, df, 0), 1300, netip.Addr{}, true, v4B},
		{"v4_small_packet_whole_quote", udp4(tb, v4A, v4B, 100, df, 0), 68, netip.Addr{}, true, v4B},
		{"v4_first_fragment", udp4(tb, v4A, v4B, 1400, df|layers.IPv4MoreFragments, 0), 1300, netip.Addr{}, true, v4B},
		{"v4_explicit_src", udp4(tb, v4A, v4B, 1400, df, 0), 1300, srcV4, true, srcV4},
		{"v4_mapped_src", udp4(tb, v4A, v4B, 1400, df, 0), 1300, netip.AddrFrom16(srcV4.As16()), true, srcV4},
		{"v4_echo_request", icmp4(tb, 8, 1400), 1300, netip.Addr{}, true, v4B},
		{"v4_dest_unreachable", icmp4(tb, 3, 1400), 1300, netip.Addr{}, false, netip.Addr{}},
		{"v4_time_exceeded", icmp4(tb, 11, 1400), 1300, netip.Addr{}, false, netip.Addr{}},
		{"v4_icmp_without_header", icmpNoType, 10, netip.Addr{}, false, netip.Addr{}},
		{"v4_no_df", noDF, 1300, netip.Addr{}, false, netip.Addr{}},
		{"v4_later_fragment", udp4(tb, v4A, v4B, 1400, df, 100), 1300, netip.Addr{}, false, netip.Addr{}},
		{"v4_fits", udp4(tb, v4A, v4B, 1300, df, 0), 1300, netip.Addr{}, false, netip.Addr{}},
		{"v4_mtu_below_68", udp4(tb, v4A, v4B, 1400, df, 0), 67, netip.Addr{}, false, netip.Addr{}},
		{"v4_multicast_dst", udp4(tb, v4A, netip.MustParseAddr("239.1.2.3"), 1400, df, 0), 1300, srcV4, false, netip.Addr{}},
		{"v4_broadcast_dst", udp4(tb, v4A, netip.MustParseAddr("255.255.255.255"), 1400, df, 0), 1300, srcV4, false, netip.Addr{}},
		{"v4_zero_src", udp4(tb, netip.MustParseAddr("0.0.0.0"), v4B, 1400, df, 0), 1300, netip.Addr{}, false, netip.Addr{}},
		{"v4_loopback_src", udp4(tb, netip.MustParseAddr("127.0.0.1"), v4B, 1400, df, 0), 1300, netip.Addr{}, false, netip.Addr{}},
		{"v4_class_e_src", udp4(tb, netip.MustParseAddr("250.0.0.1"), v4B, 1400, df, 0), 1300, netip.Addr{}, false, netip.Addr{}},
		{"v4_v6_src", udp4(tb, v4A, v4B, 1400, df, 0), 1300, srcV6, false, netip.Addr{}},
		{"v4_multicast_reply_src", udp4(tb, v4A, v4B, 1400, df, 0), 1300, netip.MustParseAddr("224.0.0.1"), false, netip.Addr{}},
		{"v4_bad_total_length", badTotal, 1300, netip.Addr{}, false, netip.Addr{}},
		{"v4_truncated", udp4(tb, v4A, v4B, 1400, df, 0)[:19], 10, netip.Addr{}, false, netip.Addr{}},
		{"v6_udp", udp6(tb, v6A, v6B, 1400), 1280, netip.Addr{}, true, v6B},
		{"v6_udp_mtu_1300", udp6(tb, v6A, v6B, 1500), 1300, netip.Addr{}, true, v6B},
		{"v6_explicit_src", udp6(tb, v6A, v6B, 1400), 1280, srcV6, true, srcV6},
		{"v6_echo_request", icmp6(tb, 128, 1400), 1280, netip.Addr{}, true, v6B},
		{"v6_hopbyhop_udp", insertIPv6Ext(udp6(tb, v6A, v6B, 1400), extHopByHop), 1280, netip.Addr{}, true, v6B},
		{"v6_first_fragment", insertIPv6Ext(udp6(tb, v6A, v6B, 1400), extFragment(0, true)), 1280, netip.Addr{}, true, v6B},
		{"v6_multicast_dst_with_src", udp6(tb, v6A, netip.MustParseAddr("ff0e::1"), 1400), 1280, srcV6, true, srcV6},
		{"v6_multicast_dst_no_src", udp6(tb, v6A, netip.MustParseAddr("ff0e::1"), 1400), 1280, netip.Addr{}, false, netip.Addr{}},
		{"v6_dest_unreachable", icmp6(tb, 1, 1400), 1280, netip.Addr{}, false, netip.Addr{}},
		{"v6_packet_too_big", icmp6(tb, 2, 1400), 1280, netip.Addr{}, false, netip.Addr{}},
		{"v6_redirect", icmp6(tb, 137, 1400), 1280, netip.Addr{}, false, netip.Addr{}},
		{"v6_hopbyhop_icmp_error", insertIPv6Ext(icmp6(tb, 3, 1400), extHopByHop, extDestOpts), 1280, netip.Addr{}, false, netip.Addr{}},
		{"v6_later_fragment", insertIPv6Ext(udp6(tb, v6A, v6B, 1400), extFragment(100, false)), 1280, netip.Addr{}, false, netip.Addr{}},
		{"v6_mtu_below_1280", udp6(tb, v6A, v6B, 1400), 1279, netip.Addr{}, false, netip.Addr{}},
		{"v6_fits", udp6(tb, v6A, v6B, 1400), 1400, netip.Addr{}, false, netip.Addr{}},
		{"v6_unspecified_src", udp6(tb, netip.IPv6Unspecified(), v6B, 1400), 1280, netip.Addr{}, false, netip.Addr{}},
		{"v6_multicast_src", udp6(tb, netip.MustParseAddr("ff02::1"), v6B, 1400), 1280, netip.Addr{}, false, netip.Addr{}},
		{"v6_v4_reply_src", udp6(tb, v6A, v6B, 1400), 1280, srcV4, false, netip.Addr{}},
		{"v6_bad_payload_length", bad6, 1280, netip.Addr{}, false, netip.Addr{}},
		{"v6_jumbo", jumbo, 1280, netip.Addr{}, false, netip.Addr{}},
		{"empty", nil, 1280, netip.Addr{}, false, netip.Addr{}},
		{"version_0", make([]byte, 1400), 1280, netip.Addr{}, false, netip.Addr{}},
	}
}

func TestAppendPacketTooBig(t *testing.T) {
	prefix := []byte("headroom")
	for _, tc := range ptbCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			pktCopy := append([]byte(nil), tc.pkt...)
			out, ok := tun.AppendPacketTooBig(append([]byte(nil), prefix...), tc.pkt, tc.mtu, tc.src)
			if !bytes.Equal(pktCopy, tc.pkt) {
				t.Fatal("pkt modified")
			}
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if !bytes.Equal(out[:len(prefix)], prefix) {
				t.Fatalf("dst prefix clobbered: %q", out[:len(prefix)])
			}
			if !ok {
				if len(out) != len(prefix) {
					t.Fatalf("appended %d bytes although ok is false", len(out)-len(prefix))
				}
				return
			}
			checkPTB(t, out[len(prefix):], tc.pkt, tc.mtu, tc.from)
		})
	}
}

// checkPTB verifies that reply is a well-formed ICMP error for pkt.
func checkPTB(t testing.TB, reply, pkt []byte, mtu int, from netip.Addr) {
	t.Helper()
	p := decode(t, reply)
	if len(reply) > tun.MaxPacketTooBigLen {
		t.Fatalf("reply is %d bytes, more than %d", len(reply), tun.MaxPacketTooBigLen)
	}
	var quote []byte
	switch pkt[0] >> 4 {
	case 4:
		ip, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		if !ok {
			t.Fatal("reply is not IPv4")
		}
		if len(reply) > 576 {
			t.Errorf("IPv4 reply is %d bytes, more than 576", len(reply))
		}
		if !ipv4HeaderChecksumOK(reply) {
			t.Error("IPv4 header checksum invalid")
		}
		if got, want := netip.AddrFrom4([4]byte(ip.DstIP.To4())), netip.AddrFrom4([4]byte(pkt[12:16])); got != want {
			t.Errorf("reply to %v, want %v", got, want)
		}
		if got := netip.AddrFrom4([4]byte(ip.SrcIP.To4())); from.IsValid() && got != from {
			t.Errorf("reply from %v, want %v", got, from)
		}
		if int(ip.Length) != len(reply) || ip.Protocol != layers.IPProtocolICMPv4 || ip.TTL == 0 {
			t.Errorf("IPv4 header: length %d (have %d), protocol %v, TTL %d", ip.Length, len(reply), ip.Protocol, ip.TTL)
		}
		icmp, ok := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
		if !ok {
			t.Fatal("no ICMPv4 layer")
		}
		if icmp.TypeCode != layers.CreateICMPv4TypeCode(layers.ICMPv4TypeDestinationUnreachable, layers.ICMPv4CodeFragmentationNeeded) {
			t.Errorf("type/code %v", icmp.TypeCode)
		}
		if err, res := icmp.VerifyChecksum(); err != nil || !res.Valid {
			t.Errorf("gopacket: ICMPv4 checksum %+v %v", res, err)
		}
		if !transportChecksumOK(reply, 20, len(reply), 1) {
			t.Error("ICMPv4 checksum invalid")
		}
		if icmp.Id != 0 || int(icmp.Seq) != mtu {
			t.Errorf("unused %d, next-hop MTU %d, want 0 and %d", icmp.Id, icmp.Seq, mtu)
		}
		quote = icmp.Payload
	case 6:
		ip, ok := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
		if !ok {
			t.Fatal("reply is not IPv6")
		}
		if got, want := netip.AddrFrom16([16]byte(ip.DstIP)), netip.AddrFrom16([16]byte(pkt[8:24])); got != want {
			t.Errorf("reply to %v, want %v", got, want)
		}
		if got := netip.AddrFrom16([16]byte(ip.SrcIP)); got != from {
			t.Errorf("reply from %v, want %v", got, from)
		}
		if int(ip.Length)+40 != len(reply) || ip.NextHeader != layers.IPProtocolICMPv6 || ip.HopLimit == 0 {
			t.Errorf("IPv6 header: payload length %d (have %d), next header %v, hop limit %d", ip.Length, len(reply)-40, ip.NextHeader, ip.HopLimit)
		}
		icmp, ok := p.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6)
		if !ok {
			t.Fatal("no ICMPv6 layer")
		}
		if icmp.TypeCode != layers.CreateICMPv6TypeCode(layers.ICMPv6TypePacketTooBig, 0) {
			t.Errorf("type/code %v", icmp.TypeCode)
		}
		if err := icmp.SetNetworkLayerForChecksum(ip); err != nil {
			t.Fatal(err)
		}
		if err, res := icmp.VerifyChecksum(); err != nil || !res.Valid {
			t.Errorf("gopacket: ICMPv6 checksum %+v %v", res, err)
		}
		if !transportChecksumOK(reply, 40, len(reply), 58) {
			t.Error("ICMPv6 checksum invalid")
		}
		if got := binary.BigEndian.Uint32(reply[44:48]); int(got) != mtu {
			t.Errorf("MTU field %d, want %d", got, mtu)
		}
		quote = reply[48:]
		if len(reply) != 1280 && len(quote) != len(pkt) {
			t.Errorf("quoted %d of %d bytes in a %d-byte reply", len(quote), len(pkt), len(reply))
		}
	}
	if len(quote) == 0 || !bytes.HasPrefix(pkt, quote) {
		t.Errorf("quote (%d bytes) is not a prefix of the packet", len(quote))
	}
}

func TestAppendPacketTooBigAllocs(t *testing.T) {
	v4 := udp4(t, v4A, v4B, 1400, layers.IPv4DontFragment, 0)
	v6 := udp6(t, v6A, v6B, 1400)
	buf := make([]byte, 0, tun.MaxPacketTooBigLen)
	allocs := testing.AllocsPerRun(1000, func() {
		if _, ok := tun.AppendPacketTooBig(buf, v4, 1300, netip.Addr{}); !ok {
			t.Fatal("no v4 reply")
		}
		if _, ok := tun.AppendPacketTooBig(buf, v6, 1280, netip.Addr{}); !ok {
			t.Fatal("no v6 reply")
		}
	})
	if allocs != 0 {
		t.Errorf("AppendPacketTooBig allocates %v times per call, want 0", allocs)
	}
}

// FuzzPacketTooBig checks that AppendPacketTooBig never panics, keeps dst's
// prefix, and that every reply decodes with valid checksums and goes back to
// the packet's source.
func FuzzPacketTooBig(f *testing.F) {
	for _, tc := range ptbCases(f) {
		f.Add(tc.pkt, uint32(tc.mtu), tc.src.IsValid())
	}
	f.Fuzz(func(t *testing.T, pkt []byte, mtu uint32, withSrc bool) {
		var src netip.Addr
		if withSrc && len(pkt) > 0 {
			src = v4B
			if pkt[0]>>4 == 6 {
				src = v6B
			}
		}
		before := append([]byte(nil), pkt...)
		out, ok := tun.AppendPacketTooBig([]byte{1, 2, 3}, pkt, int(mtu), src)
		if !bytes.Equal(before, pkt) {
			t.Fatal("pkt modified")
		}
		if !bytes.Equal(out[:3], []byte{1, 2, 3}) {
			t.Fatal("dst prefix clobbered")
		}
		if !ok {
			if len(out) != 3 {
				t.Fatal("appended although not ok")
			}
			return
		}
		from := src
		if !from.IsValid() {
			if pkt[0]>>4 == 4 {
				from = netip.AddrFrom4([4]byte(pkt[16:20]))
			} else {
				from = netip.AddrFrom16([16]byte(pkt[24:40]))
			}
		}
		checkPTB(t, out[3:], pkt, int(mtu), from)
	})
}

func BenchmarkAppendPacketTooBig(b *testing.B) {
	for _, bc := range []struct {
		name string
		pkt  []byte
		mtu  int
	}{
		{"ipv4_1400B_quote548", udp4(b, v4A, v4B, 1400, layers.IPv4DontFragment, 0), 1300},
		{"ipv6_1400B_quote1232", udp6(b, v6A, v6B, 1400), 1280},
		{"ipv4_no_df_refused", udp4(b, v4A, v4B, 1400, 0, 0), 1300},
	} {
		b.Run(bc.name, func(b *testing.B) {
			buf := make([]byte, 0, tun.MaxPacketTooBigLen)
			b.ReportAllocs()
			for b.Loop() {
				tun.AppendPacketTooBig(buf, bc.pkt, bc.mtu, netip.Addr{})
			}
		})
	}
}
