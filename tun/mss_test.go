package tun_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/bondd/bondd/tun"
	"github.com/gopacket/gopacket/layers"
)

type mssCase struct {
	name    string
	pkt     []byte
	maxMSS  int
	changed bool
	wantMSS uint16 // MSS option after the call when changed
}

func mssCases(tb testing.TB) []mssCase {
	v4 := func(tcp *layers.TCP) []byte {
		return serialize(tb, ip4(v4A, v4B, layers.IPProtocolTCP), tcp)
	}
	v6 := func(tcp *layers.TCP) []byte {
		return serialize(tb, ip6(v6A, v6B, layers.IPProtocolTCP), tcp)
	}
	linuxOpts := []layers.TCPOption{
		mssOpt(1460),
		{OptionType: layers.TCPOptionKindSACKPermitted, OptionLength: 2},
		{OptionType: layers.TCPOptionKindTimestamps, OptionLength: 10, OptionData: make([]byte, 8)},
		nop,
		{OptionType: layers.TCPOptionKindWindowScale, OptionLength: 3, OptionData: []byte{7}},
	}
	ipOpts := ip4(v4A, v4B, layers.IPProtocolTCP)
	ipOpts.Options = []layers.IPv4Option{{OptionType: 1, OptionLength: 1}, {OptionType: 1, OptionLength: 1},
		{OptionType: 1, OptionLength: 1}, {OptionType: 0, OptionLength: 1}}
	later4 := ip4(v4A, v4B, layers.IPProtocolTCP)
	later4.FragOffset = 100
	first4 := ip4(v4A, v4B, layers.IPProtocolTCP)
	first4.Flags = layers.IPv4MoreFragments

	// An MSS option whose length byte runs past the TCP header.
	badLen := v4(tcpSYN(false, mssOpt(1460), nop, nop, nop, nop))
	badLen[20+20+1] = 40
	// A SYN whose data offset points past the packet.
	badOff := v4(tcpSYN(false, mssOpt(1460)))
	badOff[20+12] = 0xf0
	// A total length longer than the buffer.
	badTotal := v4(tcpSYN(false, mssOpt(1460)))
	binary.BigEndian.PutUint16(badTotal[2:4], uint16(len(badTotal)+1))
	// Option length 0 (would loop forever without the olen < 2 check).
	zeroLen := v4(tcpSYN(false, layers.TCPOption{OptionType: 30, OptionLength: 2}, mssOpt(1460)))
	zeroLen[20+20+1] = 0
	// MSS option with a wrong length: leave it alone.
	weird := v4(tcpSYN(false, layers.TCPOption{OptionType: layers.TCPOptionKindMSS, OptionLength: 6, OptionData: []byte{0xff, 0xff, 0, 0}}))

	return []mssCase{
		{"v4_syn_clamped", v4(tcpSYN(false, mssOpt(1460))), 1240, true, 1240},
		{"v4_synack_clamped", v4(tcpSYN(true, mssOpt(1460))), 1240, true, 1240},
		{"v4_linux_options", v4(tcpSYN(false, linuxOpts...)), 1200, true, 1200},
		{"v4_mss_after_1_nop_unaligned", v4(tcpSYN(false, nop, mssOpt(1460), nop, nop, nop)), 1000, true, 1000},
		{"v4_mss_after_3_nops_unaligned", v4(tcpSYN(false, nop, nop, nop, mssOpt(65535), nop)), 1, true, 1},
		{"v4_ip_options", serialize(tb, ipOpts, tcpSYN(false, mssOpt(1460))), 1240, true, 1240},
		{"v4_first_fragment", serialize(tb, first4, tcpSYN(false, mssOpt(1460))), 1240, true, 1240},
		{"v4_mss_below", v4(tcpSYN(false, mssOpt(1200))), 1240, false, 0},
		{"v4_mss_equal", v4(tcpSYN(false, mssOpt(1240))), 1240, false, 0},
		{"v4_not_syn", v4(&layers.TCP{SrcPort: 1, DstPort: 2, ACK: true, Options: []layers.TCPOption{mssOpt(1460)}}), 1240, false, 0},
		{"v4_no_mss_option", v4(tcpSYN(false, nop, nop, nop, layers.TCPOption{OptionType: layers.TCPOptionKindWindowScale, OptionLength: 3, OptionData: []byte{7}})), 1240, false, 0},
		{"v4_end_of_options_first", v4(tcpSYN(false, layers.TCPOption{OptionType: layers.TCPOptionKindEndList, OptionLength: 1}, nop, nop, nop, mssOpt(1460))), 1240, false, 0},
		{"v4_later_fragment", serialize(tb, later4, tcpSYN(false, mssOpt(1460))), 1240, false, 0},
		{"v4_udp", serialize(tb, ip4(v4A, v4B, layers.IPProtocolUDP), &layers.UDP{SrcPort: 1, DstPort: 2}, gopayload(8)), 1240, false, 0},
		{"v4_bad_option_length", badLen, 1240, false, 0},
		{"v4_bad_data_offset", badOff, 1240, false, 0},
		{"v4_bad_total_length", badTotal, 1240, false, 0},
		{"v4_zero_option_length", zeroLen, 1240, false, 0},
		{"v4_mss_wrong_length", weird, 1240, false, 0},
		{"v4_max_mss_zero", v4(tcpSYN(false, mssOpt(1460))), 0, false, 0},
		{"v4_max_mss_too_big", v4(tcpSYN(false, mssOpt(1460))), 70000, false, 0},
		{"v4_truncated_header", v4(tcpSYN(false, mssOpt(1460)))[:19], 1240, false, 0},
		{"v6_syn_clamped", v6(tcpSYN(false, mssOpt(1440))), 1220, true, 1220},
		{"v6_synack_linux_options", v6(tcpSYN(true, linuxOpts...)), 1220, true, 1220},
		{"v6_hopbyhop_destopts", insertIPv6Ext(v6(tcpSYN(false, mssOpt(1440))), extHopByHop, extDestOpts), 1220, true, 1220},
		{"v6_first_fragment", insertIPv6Ext(v6(tcpSYN(false, mssOpt(1440))), extFragment(0, true)), 1220, true, 1220},
		{"v6_later_fragment", insertIPv6Ext(v6(tcpSYN(false, mssOpt(1440))), extFragment(10, false)), 1220, false, 0},
		{"v6_mss_below", v6(tcpSYN(false, mssOpt(1200))), 1220, false, 0},
		{"v6_truncated_ext", insertIPv6Ext(v6(tcpSYN(false, mssOpt(1440))), extHopByHop)[:42], 1220, false, 0},
		{"empty", nil, 1220, false, 0},
		{"version_5", []byte{0x50, 0, 0, 0}, 1220, false, 0},
	}
}

func gopayload(n int) *gopayloadLayer { return &gopayloadLayer{make([]byte, n)} }

func TestClampMSS(t *testing.T) {
	for _, tc := range mssCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			before := append([]byte(nil), tc.pkt...)
			got := tun.ClampMSS(tc.pkt, tc.maxMSS)
			if got != tc.changed {
				t.Fatalf("ClampMSS = %v, want %v", got, tc.changed)
			}
			if !got {
				if !bytes.Equal(before, tc.pkt) {
					t.Fatalf("packet modified although ClampMSS returned false")
				}
				return
			}
			diff := 0
			for i := range before {
				if before[i] != tc.pkt[i] {
					diff++
				}
			}
			if diff > 4 {
				t.Errorf("%d bytes changed, want at most 4 (MSS and checksum)", diff)
			}
			p := decode(t, tc.pkt)
			off, total, ok := tcpOffset(tc.pkt)
			if !ok {
				t.Fatalf("no TCP header in result")
			}
			if mss := readMSS(tc.pkt[off:total]); mss != tc.wantMSS {
				t.Errorf("MSS = %d, want %d", mss, tc.wantMSS)
			}
			if !transportChecksumOK(tc.pkt, off, total, 6) {
				t.Errorf("TCP checksum invalid after rewrite")
			}
			// gopacket decodes TCP only when the packet is not a fragment.
			if tcp, ok := p.Layer(layers.LayerTypeTCP).(*layers.TCP); ok && (off == 20 || off == 40) {
				if err := tcp.SetNetworkLayerForChecksum(p.NetworkLayer()); err != nil {
					t.Fatal(err)
				}
				if err, res := tcp.VerifyChecksum(); err != nil || !res.Valid {
					t.Errorf("gopacket: TCP checksum %+v, %v", res, err)
				}
				for _, o := range tcp.Options {
					if o.OptionType == layers.TCPOptionKindMSS && binary.BigEndian.Uint16(o.OptionData) != tc.wantMSS {
						t.Errorf("gopacket: MSS option %x, want %d", o.OptionData, tc.wantMSS)
					}
				}
			}
		})
	}
}

func TestMSSForMTU(t *testing.T) {
	for _, tc := range []struct {
		mtu  int
		ipv6 bool
		want int
	}{
		{1500, false, 1460},
		{1500, true, 1440},
		{1280, false, 1240},
		{1280, true, 1220},
		{40, false, 0},
		{30, true, 0},
		{0, false, 0},
	} {
		if got := tun.MSSForMTU(tc.mtu, tc.ipv6); got != tc.want {
			t.Errorf("MSSForMTU(%d, %v) = %d, want %d", tc.mtu, tc.ipv6, got, tc.want)
		}
	}
}

func TestClampMSSAllocs(t *testing.T) {
	pkt := serialize(t, ip6(v6A, v6B, layers.IPProtocolTCP), tcpSYN(false, mssOpt(1440)))
	orig := append([]byte(nil), pkt...)
	allocs := testing.AllocsPerRun(1000, func() {
		copy(pkt, orig)
		if !tun.ClampMSS(pkt, 1220) {
			t.Fatal("not clamped")
		}
	})
	if allocs != 0 {
		t.Errorf("ClampMSS allocates %v times per packet, want 0", allocs)
	}
}

// FuzzClampMSS checks that ClampMSS never panics, changes at most the MSS
// option and the checksum, leaves an MSS <= maxMSS, and keeps a valid TCP
// checksum valid (against a from-scratch recomputation).
func FuzzClampMSS(f *testing.F) {
	for _, tc := range mssCases(f) {
		f.Add(tc.pkt, uint16(tc.maxMSS))
	}
	f.Fuzz(func(t *testing.T, pkt []byte, maxMSS uint16) {
		before := append([]byte(nil), pkt...)
		off, total, tcpOK := tcpOffset(before)
		validBefore := tcpOK && transportChecksumOK(before, off, total, 6)
		if !tun.ClampMSS(pkt, int(maxMSS)) {
			if !bytes.Equal(before, pkt) {
				t.Fatal("modified without reporting it")
			}
			return
		}
		if !tcpOK {
			t.Fatalf("changed a packet that is not TCP: %x", before)
		}
		diff := 0
		for i := range pkt {
			if pkt[i] != before[i] {
				diff++
				if i < off || i >= off+60 {
					t.Fatalf("byte %d changed outside the TCP header", i)
				}
			}
		}
		if diff > 4 {
			t.Fatalf("%d bytes changed", diff)
		}
		if validBefore && !transportChecksumOK(pkt, off, total, 6) {
			t.Fatalf("valid checksum became invalid: %x -> %x", before, pkt)
		}
	})
}

// tcpOffset finds the TCP header of an IPv4 or IPv6 packet (IPv6: only
// directly after the fixed header, or after the extension headers the
// library walks), independently of the code under test.
func tcpOffset(pkt []byte) (off, total int, ok bool) {
	if len(pkt) < 20 {
		return 0, 0, false
	}
	switch pkt[0] >> 4 {
	case 4:
		ihl, total := int(pkt[0]&0xf)*4, int(binary.BigEndian.Uint16(pkt[2:4]))
		if ihl < 20 || total < ihl || total > len(pkt) || pkt[9] != 6 {
			return 0, 0, false
		}
		return ihl, total, true
	case 6:
		if len(pkt) < 40 {
			return 0, 0, false
		}
		total := 40 + int(binary.BigEndian.Uint16(pkt[4:6]))
		if total > len(pkt) {
			return 0, 0, false
		}
		nh, off := pkt[6], 40
		for range 9 {
			if nh == 6 {
				return off, total, off <= total
			}
			if off+8 > total {
				return 0, 0, false
			}
			switch nh {
			case 0, 43, 60:
				nh, off = pkt[off], off+(int(pkt[off+1])+1)*8
			case 51:
				nh, off = pkt[off], off+(int(pkt[off+1])+2)*4
			case 44:
				nh, off = pkt[off], off+8
			default:
				return 0, 0, false
			}
		}
	}
	return 0, 0, false
}

func BenchmarkClampMSS(b *testing.B) {
	for _, bc := range []struct {
		name string
		pkt  []byte
	}{
		{"ipv4_syn_clamp", serialize(b, ip4(v4A, v4B, layers.IPProtocolTCP), tcpSYN(false, mssOpt(1460), nop, nop, nop, nop))},
		{"ipv6_syn_clamp", serialize(b, ip6(v6A, v6B, layers.IPProtocolTCP), tcpSYN(false, mssOpt(1440)))},
		{"ipv4_ack_1200B", serialize(b, ip4(v4A, v4B, layers.IPProtocolTCP), &layers.TCP{SrcPort: 1, DstPort: 2, ACK: true}, gopayload(1200))},
		{"ipv4_udp_1200B", serialize(b, ip4(v4A, v4B, layers.IPProtocolUDP), &layers.UDP{SrcPort: 1, DstPort: 2}, gopayload(1200))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			orig := append([]byte(nil), bc.pkt...)
			b.ReportAllocs()
			for b.Loop() {
				copy(bc.pkt, orig[:min(len(orig), 60)]) // restore the headers
				tun.ClampMSS(bc.pkt, 1200)
			}
		})
	}
}

// readMSS returns the MSS option of the TCP segment seg, or 0.
func readMSS(seg []byte) uint16 {
	hlen := int(seg[12]>>4) * 4
	for i := 20; i+1 < hlen; {
		switch seg[i] {
		case 0:
			return 0
		case 1:
			i++
			continue
		case 2:
			return binary.BigEndian.Uint16(seg[i+2:])
		}
		i += max(int(seg[i+1]), 1)
	}
	return 0
}
