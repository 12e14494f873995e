package classify

import (
	"testing"
)

// syntheticPackets covers every path of Parse without the real captures.
func syntheticPackets() [][]byte {
	vp8Key := []byte{0x90, 0x80, 0x81, 0x23, 0x10, 0x50, 0x01, 0x00, 0x9d, 0x01, 0x2a, 0x80, 0x02}
	return [][]byte{
		ipv4(0, 17, 1, 0, udp(5060, 5060, []byte("INVITE sip:bob@example.com SIP/2.0\r\n"))),
		ipv4(0, 6, 1, 0, tcp(443, 50000, []byte("x"))),
		ipv4(0, 1, 1, 0, []byte{8, 0, 0, 0}),
		ipv6(0, 0, cat(ext6(44, 8), frag6(17, 0, true, 5), udp(1, 5004, rtpPkt{pt: 96, ssrc: 9, payload: nalIDR}.bytes()))),
		ipv6(0, 44, cat(frag6(17, 4, false, 5), make([]byte, 32))),
		ipv4(0, 17, 9, 0x2000, udp(40000, 5004, rtpPkt{pt: 96, seq: 1, ts: 1, ssrc: 1, payload: stapA(nalSPS, nalPPS, nalIDR)}.bytes())),
		ipv4(0, 17, 9, 7, make([]byte, 40)),
		rtpUDP(rtpPkt{pt: 96, seq: 2, ts: 1, ssrc: 1, payload: fuA(5, true, false, make([]byte, 900))}),
		rtpUDP(rtpPkt{pt: 96, seq: 3, ts: 1, ssrc: 1, payload: fuA(5, false, true, make([]byte, 900))}),
		rtpUDP(rtpPkt{pt: 97, seq: 1, ts: 1, ssrc: 2, ext: []byte{0x10, 1, 0, 0}, payload: vp8Key}),
		rtpUDP(rtpPkt{pt: 98, seq: 1, ts: 1, ssrc: 3, payload: append([]byte{0x88, 0x49}, 0x82, 0x49, 0x83, 0x42, 0)}),
		rtpUDP(rtpPkt{pt: 45, seq: 1, ts: 1, ssrc: 4, payload: []byte{0x18, 0x08, 0, 0, 0}}),
		rtpUDP(rtpPkt{pt: 104, seq: 1, ts: 1, ssrc: 5, payload: buildH265AP(h265(32, 0, 1), h265(33, 0, 1))}),
		rtpUDP(rtpPkt{pt: 33, seq: 1, ts: 1, ssrc: 6, payload: cat(tsPacket(0x100, true, true, 0xe0), tsPacket(0x100, false, false, 0))}),
		rtpUDP(rtpPkt{pt: 111, seq: 1, ts: 1, ssrc: 7, padding: 4, payload: []byte{0x78, 0x12, 0x34}}),
		ipv4(0, 17, 1, 0, udp(1234, 1234, cat(tsPacket(0x100, true, true, 0xe0), tsPacket(0x101, false, false, 0)))),
		// ffmpeg's VP9 packetizer (P never set): a key frame start and an
		// inter frame start; H.264 AUD, SEI and a FU-A SEI start.
		rtpUDP(rtpPkt{pt: 100, seq: 1, ts: 1, ssrc: 8, payload: []byte{0x08, 0x82, 0x49, 0x83, 0x42, 0x00}}),
		rtpUDP(rtpPkt{pt: 100, seq: 2, ts: 2, ssrc: 8, payload: []byte{0x08, 0x86, 0x00, 0x12}}),
		rtpUDP(rtpPkt{pt: 101, seq: 1, ts: 1, ssrc: 10, payload: []byte{0x09, 0x10}}),
		rtpUDP(rtpPkt{pt: 101, seq: 2, ts: 1, ssrc: 10, payload: []byte{0x06, 0x06, 0x01, 0xc4, 0x80}}),
		rtpUDP(rtpPkt{pt: 101, seq: 3, ts: 1, ssrc: 10, payload: []byte{0x1c, 0x86, 0x05, 0xff, 0x10}}),
		{0x45, 0, 0, 10},
	}
}

// TestParseAllocs proves Parse, ParseIP and AppendValue allocate nothing per
// packet, on synthetic packets and on every packet of the real captures.
func TestParseAllocs(t *testing.T) {
	cs, err := NewClassSet([]Class{
		{Name: "video", Match: ClassMatch{Protos: []uint8{17}, Ports: []PortRange{{5004, 5010}}}, Labels: []Label{{"tier", "gold"}}},
		{Name: "other"},
	})
	if err != nil {
		t.Fatal(err)
	}
	pkts := syntheticPackets()
	for _, name := range allCaptures {
		if testing.Short() {
			break
		}
		cps, _ := loadCapture(name)
		for _, p := range cps {
			if p.ip != nil {
				pkts = append(pkts, p.ip)
			}
		}
	}
	c := mustNew(t, Options{Classes: cs})
	var md Metadata
	buf := make([]byte, 0, 2048)
	keys := append(BuiltinKeys(), cs.LabelKeys()...)
	run := func() {
		for _, p := range pkts {
			c.Parse(p, &md)
			for _, k := range keys {
				buf, _ = md.AppendValue(buf[:0], k)
				md.Uint(k)
			}
			ParseIP(p, &md)
		}
	}
	run() // warm the tables
	if n := testing.AllocsPerRun(20, run); n != 0 {
		t.Errorf("%v allocations per run over %d packets, want 0", n, len(pkts))
	}
	t.Logf("%d packets", len(pkts))
}
