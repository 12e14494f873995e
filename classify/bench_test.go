package classify

import (
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// benchCase is a benchmark over real packets from one capture: either one
// packet parsed again and again (pick), or the whole capture cycled in order
// (stream), so that per-stream state is exercised as in the daemon.
type benchCase struct {
	name    string
	file    string
	pick    func(md *Metadata) bool // the first packet it accepts; nil: all packets
	classes bool
}

var benchCases = []benchCase{
	// A plain UDP packet: SIP signalling, neither RTP nor MPEG-TS.
	{name: "udp_plain", file: "audio/ndpi-sip.pcap", pick: func(md *Metadata) bool { return md.DstPort == 5060 && !md.Has(KeyRTPSSRC) }},
	{name: "udp_plain_classes", file: "audio/ndpi-sip.pcap", classes: true, pick: func(md *Metadata) bool { return md.DstPort == 5060 && !md.Has(KeyRTPSSRC) }},
	{name: "tcp", file: "dscp-and-webrtc/ndpi-skinny.pcap", pick: func(md *Metadata) bool { return md.Proto == 6 }},
	{name: "ipv6_udp", file: "dscp-and-webrtc/ndpi-stun_google_meet.pcapng", pick: func(md *Metadata) bool { return md.IPVersion == 6 && md.Proto == 17 && !md.Has(KeyRTPSSRC) }},
	{name: "rtp_pcmu", file: "dscp-and-webrtc/ndpi-skinny.pcap", pick: func(md *Metadata) bool { return md.Codec == CodecPCMU }},
	{name: "rtp_h264_idr_stap_a", file: "video/str0m-h264.pcap", pick: func(md *Metadata) bool { return md.FrameType == FrameKey }},
	{name: "rtp_h264_fu_a", file: "video/str0m-h264.pcap", pick: func(md *Metadata) bool { return md.Length > 1000 && !md.RTP.Marker }},
	{name: "rtp_h264_single_nal", file: "video/str0m-h264.pcap", pick: func(md *Metadata) bool { return md.FrameType == FrameDelta && md.RTP.Marker }},
	{name: "rtp_h264_stream", file: "video/str0m-h264.pcap"},
	{name: "rtp_h265_stream", file: "video/tau-wilson-h265.pcap"},
	{name: "rtp_vp8_stream", file: "video/str0m-vp8.pcap"},
	{name: "rtp_vp9_stream", file: "video/str0m-vp9.pcap"},
	{name: "rtp_av1_stream", file: "video/str0m-av1.pcap"},
	{name: "mp2t_udp", file: "mpegts/tsduck-test-176-ts-over-udp.pcapng", pick: func(md *Metadata) bool { return md.Codec == CodecMP2T }},
	{name: "mp2t_rtp", file: "mpegts/tsduck-test-162-ts-over-rtp.pcap", pick: func(md *Metadata) bool { return md.Codec == CodecMP2T }},
	{name: "srtp_stream", file: "dscp-and-webrtc/ndpi-wa_video.pcap"},
}

func benchClasses(b *testing.B) *ClassSet {
	var cls []Class
	for i := 0; i < 7; i++ {
		cls = append(cls, Class{Name: "c" + string(rune('a'+i)), Match: ClassMatch{Protos: []uint8{6}, DSCP: []uint8{uint8(i)}}})
	}
	cls = append(cls, Class{Name: "signalling", Match: ClassMatch{Protos: []uint8{17}, Ports: []PortRange{{5060, 5061}}}, Labels: []Label{{"tier", "gold"}}})
	cs, err := NewClassSet(cls)
	if err != nil {
		b.Fatal(err)
	}
	return cs
}

// BenchmarkClassify measures Parse per packet on real packets.
func BenchmarkClassify(b *testing.B) {
	for _, bc := range benchCases {
		b.Run(bc.name, func(b *testing.B) {
			opts := Options{}
			if bc.classes {
				opts.Classes = benchClasses(b)
			}
			c := mustNew(b, opts)
			var md Metadata
			var pkts [][]byte
			for _, p := range readCapture(b, bc.file) {
				if p.ip == nil {
					continue
				}
				c.Parse(p.ip, &md) // warm up: streams confirmed, codecs learned
				if bc.pick == nil {
					pkts = append(pkts, p.ip)
				} else if pkts == nil && bc.pick(&md) {
					pkts = append(pkts, p.ip)
				}
			}
			if len(pkts) == 0 {
				b.Fatal("no packet picked")
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				c.Parse(pkts[i%len(pkts)], &md)
			}
		})
	}
}

// BenchmarkVP9 measures Parse on VP9 packets as ffmpeg's packetizer sends
// them (P never set, so the uncompressed header is read at each frame
// start): a frame start, then a packet inside the frame.
func BenchmarkVP9(b *testing.B) {
	for _, bc := range []struct {
		name    string
		payload []byte
	}{
		{"frame_start_inter", append([]byte{0x08, 0x86, 0x00, 0x12}, make([]byte, 1100)...)},
		{"frame_start_key", append([]byte{0x08, 0x82, 0x49, 0x83, 0x42, 0x00}, make([]byte, 1100)...)},
		{"frame_middle", append([]byte{0x00}, make([]byte, 1100)...)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := mustNew(b, Options{})
			pkts := [2][]byte{
				rtpUDP(rtpPkt{pt: 96, seq: 1, ts: 1, ssrc: 1, payload: bc.payload}),
				rtpUDP(rtpPkt{pt: 96, seq: 2, ts: 2, ssrc: 1, payload: bc.payload}),
			}
			var md Metadata
			c.Parse(rtpUDP(rtpPkt{pt: 96, seq: 0, ts: 0, ssrc: 1, payload: []byte{0x08, 0x82, 0x49, 0x83, 0x42, 0x00}}), &md)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				c.Parse(pkts[i&1], &md)
			}
			if md.Codec != CodecVP9 {
				b.Fatalf("codec %v, want vp9", md.Codec)
			}
		})
	}
}

// BenchmarkParseIP measures the stateless IP/transport parse alone.
func BenchmarkParseIP(b *testing.B) {
	pkt := ipv4(0, 17, 1, 0, udp(5060, 5060, make([]byte, 400)))
	var md Metadata
	b.ReportAllocs()
	for b.Loop() {
		ParseIP(pkt, &md)
	}
}

// BenchmarkParseIPGopacket is the measurement behind hand-parsing: the same
// packet through gopacket's zero-allocation DecodingLayerParser, which
// decodes IPv4 and UDP into preallocated layers but yields none of the keys
// by itself (no netip.Addr, DSCP split, or RTP).
func BenchmarkParseIPGopacket(b *testing.B) {
	pkt := ipv4(0, 17, 1, 0, udp(5060, 5060, make([]byte, 400)))
	var (
		ip4     layers.IPv4
		ip6     layers.IPv6
		u       layers.UDP
		t       layers.TCP
		payload gopacket.Payload
	)
	p := gopacket.NewDecodingLayerParser(layers.LayerTypeIPv4, &ip4, &ip6, &u, &t, &payload)
	p.IgnoreUnsupported = true // the UDP payload (SIP) has no decoder here
	decoded := make([]gopacket.LayerType, 0, 4)
	b.ReportAllocs()
	for b.Loop() {
		if err := p.DecodeLayers(pkt, &decoded); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendValue measures producing the string form of every present
// builtin key of an RTP H.264 packet.
func BenchmarkAppendValue(b *testing.B) {
	c := mustNew(b, Options{})
	var md Metadata
	c.Parse(rtpUDP(rtpPkt{pt: 96, seq: 1, ts: 1, ssrc: 1, payload: stapA(nalSPS, nalPPS, nalIDR)}), &md)
	keys := BuiltinKeys()
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		for _, k := range keys {
			buf, _ = md.AppendValue(buf[:0], k)
		}
	}
}
