package classify

import (
	"testing"
)

func mustNew(t testing.TB, opts Options) *Classifier {
	t.Helper()
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNewOptions(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts Options
		ok   bool
	}{
		{"zero", Options{}, true},
		{"ports and types", Options{RTPPorts: []PortRange{{5004, 5005}}, PayloadTypes: map[uint8]Codec{96: CodecH264, 97: CodecUnknown}}, true},
		{"empty range", Options{RTPPorts: []PortRange{{6000, 5000}}}, false},
		{"too many ranges", Options{RTPPorts: make([]PortRange, MaxRTPPortRanges+1)}, false},
		{"pt 128", Options{PayloadTypes: map[uint8]Codec{128: CodecH264}}, false},
		{"pt 72 (RTCP)", Options{PayloadTypes: map[uint8]Codec{72: CodecH264}}, false},
		{"bad codec", Options{PayloadTypes: map[uint8]Codec{96: numCodecs}}, false},
	} {
		if _, err := New(tt.opts); (err == nil) != tt.ok {
			t.Errorf("%s: err %v", tt.name, err)
		}
	}
}

// TestRTPDetection covers the ways a UDP payload becomes RTP, and the guards.
func TestRTPDetection(t *testing.T) {
	idr := stapA(nalSPS, nalPPS, nalIDR) // a signature
	plain := nalNonIDR                   // no signature
	pkt := func(pt byte, seq uint16, ssrc uint32, payload []byte) []byte {
		return rtpUDP(rtpPkt{pt: pt, seq: seq, ts: 3000, ssrc: ssrc, payload: payload})
	}
	rtcp := ipv4(0, 17, 1, 0, udp(40000, 5004, []byte{0x80, 200, 0, 6, 0, 0, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8}))
	tests := []struct {
		name string
		opts Options
		pkts [][]byte
		want []bool // RTP found, per packet
	}{
		{"heuristic: probation then in sequence", Options{}, [][]byte{pkt(96, 10, 1, plain), pkt(96, 11, 1, plain), pkt(96, 12, 1, plain)}, []bool{false, true, true}},
		{"heuristic: out of sequence restarts", Options{}, [][]byte{pkt(96, 10, 1, plain), pkt(96, 20, 1, plain), pkt(96, 21, 1, plain)}, []bool{false, false, true}},
		{"heuristic: signature confirms at once", Options{}, [][]byte{pkt(96, 10, 1, idr), pkt(96, 11, 1, plain)}, []bool{true, true}},
		{"heuristic: static type, no signature", Options{}, [][]byte{pkt(0, 10, 1, make([]byte, 160)), pkt(0, 11, 1, make([]byte, 160))}, []bool{false, true}},
		{"heuristic: PT 64-95 never", Options{}, [][]byte{pkt(80, 10, 1, idr), pkt(80, 11, 1, plain)}, []bool{false, false}},
		{"RTCP sender report", Options{}, [][]byte{rtcp, rtcp}, []bool{false, false}},
		{"no heuristic", Options{NoHeuristic: true}, [][]byte{pkt(96, 10, 1, idr), pkt(96, 11, 1, plain)}, []bool{false, false}},
		{"configured port", Options{NoHeuristic: true, RTPPorts: []PortRange{{5000, 5010}}}, [][]byte{pkt(96, 10, 1, plain)}, []bool{true}},
		{"configured payload type", Options{NoHeuristic: true, PayloadTypes: map[uint8]Codec{96: CodecH264}}, [][]byte{pkt(96, 10, 1, plain), pkt(97, 11, 2, plain)}, []bool{true, false}},
		{"configured PT 80 allowed", Options{PayloadTypes: map[uint8]Codec{80: CodecUnknown}}, [][]byte{pkt(80, 10, 1, plain)}, []bool{true}},
		{"version 1", Options{RTPPorts: []PortRange{{5004, 5004}}}, [][]byte{ipv4(0, 17, 1, 0, udp(1, 5004, append([]byte{0x40, 96}, make([]byte, 20)...)))}, []bool{false}},
		{"too short", Options{RTPPorts: []PortRange{{5004, 5004}}}, [][]byte{ipv4(0, 17, 1, 0, udp(1, 5004, []byte{0x80, 96, 0, 1}))}, []bool{false}},
		{"bad padding", Options{RTPPorts: []PortRange{{5004, 5004}}}, [][]byte{ipv4(0, 17, 1, 0, udp(1, 5004, append([]byte{0xa0, 96}, make([]byte, 14)...)))}, []bool{false}},
		{"extension past end", Options{RTPPorts: []PortRange{{5004, 5004}}}, [][]byte{ipv4(0, 17, 1, 0, udp(1, 5004, append([]byte{0x90, 96}, append(make([]byte, 12), 0xbe, 0xde, 0, 9)...)))}, []bool{false}},
		{"TCP is never RTP", Options{RTPPorts: []PortRange{{5004, 5004}}}, [][]byte{ipv4(0, 6, 1, 0, tcp(1, 5004, rtpPkt{pt: 96, payload: idr}.bytes()))}, []bool{false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustNew(t, tt.opts)
			var md Metadata
			for i, p := range tt.pkts {
				c.Parse(p, &md)
				if got := md.Has(KeyRTPSSRC); got != tt.want[i] {
					t.Errorf("packet %d: RTP %v, want %v", i, got, tt.want[i])
				}
				if md.Has(KeyRTPSSRC) != md.Has(KeyFrameID) {
					t.Errorf("packet %d: rtp_ssrc and frame_id disagree", i)
				}
			}
		})
	}
}

// TestRTPHeader checks the header fields and that CSRCs, the header
// extension and padding are skipped to find the payload.
func TestRTPHeader(t *testing.T) {
	c := mustNew(t, Options{RTPPorts: []PortRange{{5004, 5004}}, PayloadTypes: map[uint8]Codec{96: CodecH264}})
	r := rtpPkt{pt: 96, marker: true, seq: 65535, ts: 0xfedcba98, ssrc: 0x01020304, csrcs: 2,
		ext: []byte{0x10, 0xff, 0, 0}, padding: 5, payload: nalIDR}
	var md Metadata
	if reason := c.Parse(rtpUDP(r), &md); reason != ReasonNone {
		t.Fatal(reason)
	}
	want := RTPHeader{SSRC: 0x01020304, Timestamp: 0xfedcba98, Seq: 65535, PayloadType: 96, Marker: true}
	if md.RTP != want {
		t.Errorf("header %+v, want %+v", md.RTP, want)
	}
	if md.FrameID() != 0x01020304fedcba98 || md.Codec != CodecH264 || md.FrameType != FrameKey {
		t.Errorf("frame id %x codec %v frame %v", md.FrameID(), md.Codec, md.FrameType)
	}
	if v, _ := md.AppendValue(nil, KeyFrameID); string(v) != "01020304fedcba98" {
		t.Errorf("frame_id %q", v)
	}
}

// TestKeyframeEveryPacket checks that the packets after a keyframe's first
// carry frame_type=IDR, also when a late packet of the previous frame comes
// in between, and that the next frame is a delta again.
func TestKeyframeEveryPacket(t *testing.T) {
	c := mustNew(t, Options{PayloadTypes: map[uint8]Codec{96: CodecH264}})
	p := func(seq uint16, ts uint32, payload []byte) []byte {
		return rtpUDP(rtpPkt{pt: 96, seq: seq, ts: ts, ssrc: 7, payload: payload})
	}
	steps := []struct {
		pkt  []byte
		want FrameType
	}{
		{p(1, 1000, fuA(1, true, false, []byte{1})), FrameDelta},
		{p(3, 4000, stapA(nalSPS, nalPPS)), FrameKey},
		{p(4, 4000, fuA(5, true, false, []byte{1})), FrameKey},
		{p(2, 1000, fuA(1, false, true, []byte{1})), FrameDelta}, // late packet of the frame before
		{p(5, 4000, fuA(5, false, false, []byte{1})), FrameKey},
		{p(6, 4000, fuA(5, false, true, []byte{1})), FrameKey},
		{p(7, 7000, fuA(1, true, false, []byte{1})), FrameDelta},
		{p(8, 7000, fuA(1, false, true, []byte{1})), FrameDelta},
		{p(9, 10000, fuA(1, false, true, []byte{1})), FrameUnknown}, // frame start lost
	}
	var md Metadata
	for i, s := range steps {
		c.Parse(s.pkt, &md)
		if md.FrameType != s.want || md.Has(KeyFrameType) != (s.want != FrameUnknown) {
			t.Errorf("step %d seq %d: frame %v, want %v", i, md.RTP.Seq, md.FrameType, s.want)
		}
	}
}

// TestCodecSniffing checks that the codec of a dynamic payload type is
// learned from the payload, that a second dynamic type on the stream (RED,
// FEC, RTX) stays unknown, and that an encrypted-looking payload never gets a
// codec.
func TestCodecSniffing(t *testing.T) {
	t.Run("h264 from a STAP-A signature", func(t *testing.T) {
		c := mustNew(t, Options{})
		var md Metadata
		c.Parse(rtpUDP(rtpPkt{pt: 102, seq: 1, ts: 1, ssrc: 5, payload: stapA(nalSPS, nalPPS, nalIDR)}), &md)
		if md.Codec != CodecH264 || md.FrameType != FrameKey {
			t.Fatalf("codec %v frame %v", md.Codec, md.FrameType)
		}
		c.Parse(rtpUDP(rtpPkt{pt: 127, seq: 2, ts: 1, ssrc: 5, payload: []byte{0x66, 1, 2, 3}}), &md)
		if md.Has(KeyCodec) || !md.Has(KeyRTPSSRC) {
			t.Errorf("second payload type: codec %v", md.Codec)
		}
	})
	t.Run("vp8 by elimination without a signature", func(t *testing.T) {
		c := mustNew(t, Options{})
		var md Metadata
		// VP8 inter frames with a picture id: descriptor 0x90 0x80 + id.
		for i := 0; i < SniffLockPackets+2; i++ {
			pl := []byte{0x90, 0x80, byte(i) | 0x80, byte(i), 0x31, 0x02, 0x00, 0xaa}
			c.Parse(rtpUDP(rtpPkt{pt: 96, seq: uint16(i), ts: uint32(i) * 3000, ssrc: 9, payload: pl}), &md)
		}
		if md.Codec != CodecVP8 || md.FrameType != FrameDelta {
			t.Errorf("codec %v frame %v", md.Codec, md.FrameType)
		}
	})
	t.Run("random payload stays unknown", func(t *testing.T) {
		c := mustNew(t, Options{})
		var md Metadata
		x := uint32(12345)
		for i := 0; i < 2*MaxSniffPackets; i++ {
			pl := make([]byte, 100)
			for j := range pl {
				x = x*1664525 + 1013904223
				pl[j] = byte(x >> 24)
			}
			c.Parse(rtpUDP(rtpPkt{pt: 111, seq: uint16(i), ts: uint32(i) * 960, ssrc: 3, payload: pl}), &md)
			if md.Has(KeyCodec) || md.Has(KeyFrameType) {
				t.Fatalf("packet %d: codec %v frame %v", i, md.Codec, md.FrameType)
			}
		}
	})
	t.Run("mp2t over dynamic payload type", func(t *testing.T) {
		c := mustNew(t, Options{})
		var md Metadata
		c.Parse(rtpUDP(rtpPkt{pt: 98, seq: 1, ts: 1, ssrc: 4, payload: cat(tsPacket(0x100, true, true, 0xe0), tsPacket(0x100, false, false, 0))}), &md)
		if md.Codec != CodecMP2T || md.FrameType != FrameKey {
			t.Errorf("codec %v frame %v", md.Codec, md.FrameType)
		}
	})
	t.Run("relearn after contradictions", func(t *testing.T) {
		c := mustNew(t, Options{})
		var md Metadata
		seq := uint16(0)
		send := func(ts uint32, pl []byte) {
			seq++
			c.Parse(rtpUDP(rtpPkt{pt: 100, seq: seq, ts: ts, ssrc: 8, payload: pl}), &md)
		}
		send(1, stapA(nalSPS, nalPPS, nalIDR))
		if md.Codec != CodecH264 {
			t.Fatalf("codec %v", md.Codec)
		}
		vp8Key := []byte{0x10, 0x50, 0x01, 0x00, 0x9d, 0x01, 0x2a, 0x80, 0x02}
		for i := 0; i < sniffBadPackets+1; i++ {
			send(2, []byte{0x80, 0x00, 0x12}) // invalid as H.264 (F bit), a VP8 continuation
		}
		send(3, vp8Key)
		if md.Codec != CodecVP8 || md.FrameType != FrameKey {
			t.Errorf("after relearning: codec %v frame %v", md.Codec, md.FrameType)
		}
	})
}

// TestRawMPEGTS checks keyframe tracking on raw TS over UDP across datagrams.
func TestRawMPEGTS(t *testing.T) {
	c := mustNew(t, Options{})
	dg := func(pkts ...[]byte) []byte { return ipv4(0, 17, 1, 0, udp(1234, 1234, cat(pkts...))) }
	var md Metadata
	for i, s := range []struct {
		pkt  []byte
		want FrameType
	}{
		{dg(tsPacket(0x100, true, true, 0xe0), tsPacket(0x100, false, false, 0)), FrameKey},
		{dg(tsPacket(0x100, false, false, 0), tsPacket(0x101, false, false, 0)), FrameKey},
		{dg(tsPacket(0x100, true, false, 0xe0)), FrameDelta},
		{dg(tsPacket(0x101, false, false, 0)), FrameUnknown},
	} {
		c.Parse(s.pkt, &md)
		if md.Codec != CodecMP2T || md.FrameType != s.want || md.Has(KeyRTPSSRC) {
			t.Errorf("datagram %d: codec %v frame %v, want mp2t %v", i, md.Codec, md.FrameType, s.want)
		}
	}
}

// TestStateBounds floods the classifier with streams and probation sources
// and checks the bounds, the counters, and that probation never evicts a
// confirmed stream.
func TestStateBounds(t *testing.T) {
	c := mustNew(t, Options{})
	var md Metadata
	idr := stapA(nalSPS, nalPPS, nalIDR)
	for ssrc := uint32(1); ssrc <= 2*MaxStreams; ssrc++ {
		c.Parse(rtpUDP(rtpPkt{pt: 96, seq: 1, ts: 1, ssrc: ssrc, payload: idr}), &md)
	}
	st := c.Stats()
	if st.Streams > MaxStreams || st.StreamEvictions == 0 {
		t.Errorf("streams %d (bound %d), evictions %d", st.Streams, MaxStreams, st.StreamEvictions)
	}
	// A confirmed stream survives a flood of would-be RTP sources.
	c.Reset()
	c.Parse(rtpUDP(rtpPkt{pt: 96, seq: 1, ts: 1, ssrc: 42, payload: idr}), &md)
	for ssrc := uint32(1000); ssrc < 1000+4*MaxProbation; ssrc++ {
		c.Parse(rtpUDP(rtpPkt{pt: 96, seq: 1, ts: 1, ssrc: ssrc, payload: nalNonIDR}), &md)
	}
	st = c.Stats()
	if st.Probation > MaxProbation || st.ProbationEvictions == 0 || st.Streams != 1 {
		t.Errorf("probation %d (bound %d), evictions %d, streams %d", st.Probation, MaxProbation, st.ProbationEvictions, st.Streams)
	}
	c.Parse(rtpUDP(rtpPkt{pt: 96, seq: 2, ts: 1, ssrc: 42, payload: fuA(5, false, true, []byte{1})}), &md)
	if md.FrameType != FrameKey {
		t.Errorf("confirmed stream lost its keyframe state: %v", md.FrameType)
	}
	if st.Packets != uint64(1+4*MaxProbation) {
		t.Errorf("packets %d", st.Packets)
	}
}

// TestSetClasses checks that classes installed later apply from the next
// packet, and that nil removes them.
func TestSetClasses(t *testing.T) {
	c := mustNew(t, Options{})
	var md Metadata
	pkt := ipv4(46<<2, 17, 1, 0, udp(1, 2, nil))
	c.Parse(pkt, &md)
	if md.Has(KeyClass) {
		t.Fatal("class without a set")
	}
	cs, err := NewClassSet([]Class{{Name: "voice", Match: ClassMatch{DSCP: []uint8{46}}}})
	if err != nil {
		t.Fatal(err)
	}
	c.SetClasses(cs)
	c.Parse(pkt, &md)
	if md.Class() != "voice" {
		t.Errorf("class %q", md.Class())
	}
	c.SetClasses(nil)
	c.Parse(pkt, &md)
	if md.Has(KeyClass) {
		t.Error("class after SetClasses(nil)")
	}
}

// TestVP9PacketizerWithoutPBit checks a stream from a packetizer that never
// sets the descriptor's P bit (ffmpeg: descriptor 0x08, 0x00, 0x04): the
// frame type comes from the uncompressed header of each frame's first
// packet; once a header contradicted P = 0, a frame whose first packet was
// lost gets no type instead of a false keyframe.
func TestVP9PacketizerWithoutPBit(t *testing.T) {
	key := []byte{0x08, 0x82, 0x49, 0x83, 0x42, 0x00}
	inter := []byte{0x08, 0x86, 0x00, 0x12}
	mid, end := []byte{0x00, 0xaa, 0xbb}, []byte{0x04, 0xcc}
	c := mustNew(t, Options{})
	var md Metadata
	seq := uint16(0)
	send := func(ts uint32, payload []byte) FrameType {
		seq++
		c.Parse(rtpUDP(rtpPkt{pt: 96, seq: seq, ts: ts, ssrc: 7, payload: payload}), &md)
		if md.Codec != CodecVP9 {
			t.Fatalf("seq %d: codec %v, want vp9", seq, md.Codec)
		}
		return md.FrameType
	}
	for _, tt := range []struct {
		ts      uint32
		payload []byte
		want    FrameType
	}{
		{1, key, FrameKey}, {1, mid, FrameKey}, {1, end, FrameKey},
		{2, inter, FrameDelta}, {2, mid, FrameDelta}, {2, end, FrameDelta},
		{3, mid, FrameUnknown}, {3, end, FrameUnknown}, // first packet lost
		{4, key, FrameKey}, {4, end, FrameKey},
	} {
		if got := send(tt.ts, tt.payload); got != tt.want {
			t.Errorf("ts %d payload % x: frame type %v, want %v", tt.ts, tt.payload, got, tt.want)
		}
	}
}
