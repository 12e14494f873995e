package classify

import (
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

func TestParseIP(t *testing.T) {
	udp4 := ipv4(46<<2|1, 17, 7, 0, udp(5004, 6000, []byte("hello")))
	padded := append(append([]byte(nil), udp4...), 0, 0, 0, 0, 0, 0) // Ethernet padding
	badIHL := append([]byte(nil), udp4...)
	badIHL[0] = 0x44
	truncated := udp4[:len(udp4)-3]
	shortUDP := ipv4(0, 17, 1, 0, []byte{1, 2, 3, 4, 5})
	longExt := ipv6(0, 0, cat(ext6(60, 8), ext6(60, 8), ext6(60, 8), ext6(60, 8), ext6(60, 8),
		ext6(60, 8), ext6(60, 8), ext6(60, 8), ext6(17, 8), udp(1, 2, nil)))
	extPastEnd := ipv6(0, 0, ext6(17, 16))[:48]
	extPastEnd[5] = 8 // payload length says 8, the header claims 16

	tests := []struct {
		name   string
		pkt    []byte
		reason Reason
		want   Metadata // fields compared below; zero means "not checked/absent"
		keys   []Key    // keys that must be present
		absent []Key    // keys that must be absent
	}{
		{
			name: "ipv4 udp dscp ef ecn 1", pkt: udp4,
			want:   Metadata{IPVersion: 4, Proto: 17, DSCP: 46, ECN: 1, Length: 33, SrcPort: 5004, DstPort: 6000, L4Offset: 20, PayloadOffset: 28},
			keys:   []Key{KeyIPVersion, KeyProto, KeySrcIP, KeyDstIP, KeySrcPort, KeyDstPort, KeyDSCP, KeyECN, KeyLength},
			absent: []Key{KeyFragment, KeyICMPType, KeyRTPSSRC, KeyCodec, KeyClass},
		},
		{
			name: "ipv4 tcp", pkt: ipv4(24<<2, 6, 1, 0, tcp(443, 51000, []byte("x"))),
			want: Metadata{IPVersion: 4, Proto: 6, DSCP: 24, Length: 41, SrcPort: 443, DstPort: 51000, PayloadOffset: 40},
			keys: []Key{KeySrcPort, KeyDstPort},
		},
		{
			name: "ipv4 icmp echo", pkt: ipv4(0, 1, 1, 0, []byte{8, 0, 0, 0, 0, 1, 0, 1}),
			want: Metadata{IPVersion: 4, Proto: 1, ICMPType: 8},
			keys: []Key{KeyICMPType, KeyICMPCode}, absent: []Key{KeySrcPort},
		},
		{
			name: "ipv4 first fragment", pkt: ipv4(0, 17, 9, 0x2000, udp(1, 2, make([]byte, 32))),
			want: Metadata{Fragment: FragmentFirst, SrcPort: 1, DstPort: 2},
			keys: []Key{KeyFragment, KeySrcPort},
		},
		{
			name: "ipv4 middle fragment", pkt: ipv4(0, 17, 9, 0x2000|5, make([]byte, 40)),
			want: Metadata{Fragment: FragmentMiddle, Proto: 17},
			keys: []Key{KeyFragment}, absent: []Key{KeySrcPort, KeyDstPort},
		},
		{
			name: "ipv4 last fragment", pkt: ipv4(0, 17, 9, 10, make([]byte, 40)),
			want: Metadata{Fragment: FragmentLast}, keys: []Key{KeyFragment}, absent: []Key{KeySrcPort},
		},
		{
			name: "ipv4 ethernet padding ignored", pkt: padded,
			want: Metadata{Length: 33, SrcPort: 5004},
		},
		{name: "ipv4 truncated capture", pkt: truncated, reason: ReasonTruncated, want: Metadata{Length: 33, SrcPort: 5004}},
		{name: "ipv4 ihl 4", pkt: badIHL, reason: ReasonHeader, absent: []Key{KeyIPVersion}},
		{name: "ipv4 udp header cut", pkt: shortUDP, reason: ReasonTransport, want: Metadata{SrcPort: 0x102}},
		{name: "empty", pkt: nil, reason: ReasonShort},
		{name: "ipv4 short", pkt: udp4[:19], reason: ReasonShort},
		{name: "version 5", pkt: []byte{0x50, 0, 0, 20}, reason: ReasonVersion},
		{
			name: "ipv6 udp traffic class af21", pkt: ipv6(18<<2|2, 17, udp(1000, 2000, []byte("abc"))),
			want: Metadata{IPVersion: 6, Proto: 17, DSCP: 18, ECN: 2, Length: 51, SrcPort: 1000, DstPort: 2000, L4Offset: 40},
			keys: []Key{KeySrcPort},
		},
		{
			name: "ipv6 hop-by-hop routing destination", pkt: ipv6(0, 0, cat(ext6(43, 8), ext6(60, 16), ext6(17, 8), udp(7, 8, nil))),
			want: Metadata{Proto: 17, SrcPort: 7, DstPort: 8, L4Offset: 72},
		},
		{
			name: "ipv6 first fragment", pkt: ipv6(0, 44, cat(frag6(17, 0, true, 77), udp(7, 8, make([]byte, 16)))),
			want: Metadata{Proto: 17, Fragment: FragmentFirst, SrcPort: 7, L4Offset: 48},
		},
		{
			name: "ipv6 last fragment", pkt: ipv6(0, 44, cat(frag6(17, 3, false, 77), make([]byte, 16))),
			want: Metadata{Proto: 17, Fragment: FragmentLast}, absent: []Key{KeySrcPort},
		},
		{
			name: "ipv6 atomic fragment", pkt: ipv6(0, 44, cat(frag6(17, 0, false, 77), udp(7, 8, nil))),
			want: Metadata{Proto: 17, SrcPort: 7}, absent: []Key{KeyFragment},
		},
		{
			name: "ipv6 ah then tcp", pkt: ipv6(0, 51, cat([]byte{6, 4, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, tcp(22, 50000, nil))),
			want: Metadata{Proto: 6, SrcPort: 22, L4Offset: 64},
		},
		{
			name: "ipv6 esp stops", pkt: ipv6(0, 50, make([]byte, 24)),
			want: Metadata{Proto: 50}, absent: []Key{KeySrcPort},
		},
		{name: "ipv6 icmpv6", pkt: ipv6(0, 58, []byte{128, 0, 0, 0}), want: Metadata{Proto: 58, ICMPType: 128}},
		{name: "ipv6 too many ext headers", pkt: longExt, reason: ReasonExtHeader, absent: []Key{KeySrcPort}},
		{name: "ipv6 ext past end", pkt: extPastEnd, reason: ReasonExtHeader},
		{name: "ipv6 short", pkt: ipv6(0, 17, nil)[:39], reason: ReasonShort},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var md Metadata
			if r := ParseIP(tt.pkt, &md); r != tt.reason {
				t.Fatalf("reason %q, want %q", r, tt.reason)
			}
			checkFields(t, &md, &tt.want)
			for _, k := range tt.keys {
				if !md.Has(k) {
					t.Errorf("key %s absent", k)
				}
			}
			for _, k := range tt.absent {
				if md.Has(k) {
					t.Errorf("key %s present", k)
				}
			}
			// The stateful parser agrees on the IP layer.
			c, _ := New(Options{})
			var md2 Metadata
			if r := c.Parse(tt.pkt, &md2); r != tt.reason {
				t.Errorf("Classifier.Parse reason %q, want %q", r, tt.reason)
			}
			checkFields(t, &md2, &tt.want)
		})
	}
}

// checkFields compares the non-zero fields of want.
func checkFields(t *testing.T, got, want *Metadata) {
	t.Helper()
	type f struct {
		name      string
		got, want uint64
	}
	for _, c := range []f{
		{"IPVersion", uint64(got.IPVersion), uint64(want.IPVersion)},
		{"Proto", uint64(got.Proto), uint64(want.Proto)},
		{"DSCP", uint64(got.DSCP), uint64(want.DSCP)},
		{"ECN", uint64(got.ECN), uint64(want.ECN)},
		{"Length", uint64(got.Length), uint64(want.Length)},
		{"SrcPort", uint64(got.SrcPort), uint64(want.SrcPort)},
		{"DstPort", uint64(got.DstPort), uint64(want.DstPort)},
		{"ICMPType", uint64(got.ICMPType), uint64(want.ICMPType)},
		{"Fragment", uint64(got.Fragment), uint64(want.Fragment)},
		{"L4Offset", uint64(got.L4Offset), uint64(want.L4Offset)},
		{"PayloadOffset", uint64(got.PayloadOffset), uint64(want.PayloadOffset)},
		{"SSRC", uint64(got.RTP.SSRC), uint64(want.RTP.SSRC)},
		{"Codec", uint64(got.Codec), uint64(want.Codec)},
		{"FrameType", uint64(got.FrameType), uint64(want.FrameType)},
	} {
		if c.want != 0 && c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
}

func TestParseIPAddresses(t *testing.T) {
	var md Metadata
	ParseIP(ipv4(0, 17, 1, 0, udp(1, 2, nil)), &md)
	if md.Src != netip.AddrFrom4(addrA) || md.Dst != netip.AddrFrom4(addrB) {
		t.Errorf("v4 addresses %v → %v", md.Src, md.Dst)
	}
	ParseIP(ipv6(0, 17, udp(1, 2, nil)), &md)
	if md.Src != netip.AddrFrom16(addr6A) || md.Dst != netip.AddrFrom16(addr6B) {
		t.Errorf("v6 addresses %v → %v", md.Src, md.Dst)
	}
}

// TestFragmentsInherit checks that the fragments after the first carry its
// ports and video keys, and that a fragment whose first was never seen gets
// none.
func TestFragmentsInherit(t *testing.T) {
	c, _ := New(Options{RTPPorts: []PortRange{{Lo: 5004, Hi: 5004}}, PayloadTypes: map[uint8]Codec{96: CodecH264}})
	r := rtpPkt{pt: 96, seq: 1, ts: 9000, ssrc: 0xabc, payload: stapA(nalSPS, nalPPS, append(nalIDR, make([]byte, 64)...))}
	dgram := udp(40000, 5004, r.bytes())
	first, rest := dgram[:48], dgram[48:]
	for _, v6 := range []bool{false, true} {
		var f1, f2 []byte
		if v6 {
			f1 = ipv6(0, 44, cat(frag6(17, 0, true, 99), first))
			f2 = ipv6(0, 44, cat(frag6(17, 6, false, 99), rest))
		} else {
			f1 = ipv4(0, 17, 99, 0x2000, first)
			f2 = ipv4(0, 17, 99, 6, rest)
		}
		var md Metadata
		c.Parse(f1, &md)
		if md.Fragment != FragmentFirst || md.FrameType != FrameKey || md.Codec != CodecH264 {
			t.Fatalf("v6=%v first fragment: fragment %v frame %v codec %v", v6, md.Fragment, md.FrameType, md.Codec)
		}
		c.Parse(f2, &md)
		if md.Fragment != FragmentLast || !md.Has(KeyDstPort) || md.DstPort != 5004 ||
			md.RTP.SSRC != 0xabc || md.FrameType != FrameKey || md.Codec != CodecH264 || !md.Has(KeyFrameID) {
			t.Errorf("v6=%v last fragment: %+v", v6, md)
		}
	}
	var md Metadata
	c.Parse(ipv4(0, 17, 1234, 6, rest), &md)
	if md.Has(KeySrcPort) || md.Has(KeyRTPSSRC) {
		t.Errorf("orphan fragment got carried keys: %+v", md)
	}
}

// TestFragmentTableBound fills the fragment table beyond MaxFragments and
// checks the bound and the eviction counter.
func TestFragmentTableBound(t *testing.T) {
	c, _ := New(Options{})
	var md Metadata
	for id := 0; id < 4*MaxFragments; id++ {
		c.Parse(ipv4(0, 17, uint16(id), 0x2000, udp(1, 2, make([]byte, 16))), &md)
	}
	st := c.Stats()
	if st.Fragments > MaxFragments || st.Fragments < MaxFragments/2 {
		t.Errorf("fragments %d, bound %d", st.Fragments, MaxFragments)
	}
	if st.FragmentEvictions == 0 {
		t.Error("no evictions counted")
	}
}

// TestParseIPMatchesGopacket is a differential test: on every IP packet of
// every real capture, ParseIP must agree with gopacket's full decoder on the
// version, protocol, addresses, DSCP/ECN, length and ports.
func TestParseIPMatchesGopacket(t *testing.T) {
	n := 0
	for _, name := range allCaptures {
		for _, p := range readCapture(t, name) {
			if p.ip == nil {
				continue
			}
			n++
			var md Metadata
			ParseIP(p.ip, &md)
			var first gopacket.LayerType = layers.LayerTypeIPv4
			if p.ip[0]>>4 == 6 {
				first = layers.LayerTypeIPv6
			}
			pk := gopacket.NewPacket(p.ip, first, gopacket.Default)
			var wantSrc, wantDst netip.Addr
			var tos uint8
			var proto layers.IPProtocol
			switch l := pk.NetworkLayer().(type) {
			case *layers.IPv4:
				wantSrc, _ = netip.AddrFromSlice(l.SrcIP.To4())
				wantDst, _ = netip.AddrFromSlice(l.DstIP.To4())
				tos, proto = l.TOS, l.Protocol
				if md.Length != l.Length {
					t.Errorf("%s #%d: length %d, gopacket %d", name, p.index, md.Length, l.Length)
				}
			case *layers.IPv6:
				wantSrc, _ = netip.AddrFromSlice(l.SrcIP)
				wantDst, _ = netip.AddrFromSlice(l.DstIP)
				tos, proto = l.TrafficClass, l.NextHeader
				for _, ly := range pk.Layers() {
					if ly.LayerType() == layers.LayerTypeIPv6HopByHop || ly.LayerType() == layers.LayerTypeIPv6Destination {
						proto = 0 // compared below through the transport layer
					}
				}
			default:
				t.Errorf("%s #%d: gopacket found no IP layer", name, p.index)
				continue
			}
			if md.Src != wantSrc || md.Dst != wantDst || md.DSCP != tos>>2 || md.ECN != tos&3 {
				t.Errorf("%s #%d: %v→%v dscp %d ecn %d, gopacket %v→%v tos %#x", name, p.index, md.Src, md.Dst, md.DSCP, md.ECN, wantSrc, wantDst, tos)
			}
			if proto != 0 && md.Proto != uint8(proto) {
				t.Errorf("%s #%d: proto %d, gopacket %d", name, p.index, md.Proto, proto)
			}
			switch l := pk.TransportLayer().(type) {
			case *layers.UDP:
				if md.Proto != 17 || md.SrcPort != uint16(l.SrcPort) || md.DstPort != uint16(l.DstPort) {
					t.Errorf("%s #%d: udp %d→%d, gopacket %d→%d", name, p.index, md.SrcPort, md.DstPort, l.SrcPort, l.DstPort)
				}
			case *layers.TCP:
				if md.Proto != 6 || md.SrcPort != uint16(l.SrcPort) || md.DstPort != uint16(l.DstPort) {
					t.Errorf("%s #%d: tcp %d→%d, gopacket %d→%d", name, p.index, md.SrcPort, md.DstPort, l.SrcPort, l.DstPort)
				}
			}
		}
	}
	t.Logf("%d packets compared", n)
}
