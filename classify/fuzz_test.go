package classify

import (
	"testing"
)

// One fuzz target per parser. Each checks that no input panics and that
// the result keeps its invariants. Run one with, for example:
//
//	go test -run '^$' -fuzz '^FuzzParse$' -fuzztime 20s ./classify/

// checkMetadata asserts invariants every Parse result must keep.
func checkMetadata(t *testing.T, md *Metadata) {
	t.Helper()
	if md.Has(KeyRTPSSRC) != md.Has(KeyFrameID) {
		t.Fatal("rtp_ssrc and frame_id disagree")
	}
	if md.Has(KeySrcPort) != md.Has(KeyDstPort) {
		t.Fatal("src_port without dst_port")
	}
	if md.Has(KeyFrameType) && md.FrameType != FrameKey && md.FrameType != FrameDelta {
		t.Fatalf("frame_type %d", md.FrameType)
	}
	if md.Has(KeyCodec) && (md.Codec == CodecUnknown || md.Codec >= numCodecs) {
		t.Fatalf("codec %d", md.Codec)
	}
	if md.DSCP > 63 || md.ECN > 3 || (md.Has(KeyTemporalLayer) && md.TemporalLayer > 7) || (md.Has(KeySpatialLayer) && md.SpatialLayer > 7) {
		t.Fatalf("field out of range: %+v", md)
	}
	if md.IPVersion != 0 && md.IPVersion != 4 && md.IPVersion != 6 {
		t.Fatalf("ip_version %d", md.IPVersion)
	}
	for _, k := range BuiltinKeys() {
		v, ok := md.AppendValue(nil, k)
		if ok != md.Has(k) || (ok && len(v) == 0) {
			t.Fatalf("%s: AppendValue %q, %v; Has %v", k, v, ok, md.Has(k))
		}
		if u, ok := md.Uint(k); ok && k.IsNumeric() {
			if pv, err := k.ParseValue(string(v)); err != nil || pv != u {
				t.Fatalf("%s: ParseValue(%q) = %d, %v; Uint %d", k, v, pv, err, u)
			}
		}
	}
}

func addPacketSeeds(f *testing.F) {
	for _, p := range syntheticPackets() {
		f.Add(p)
	}
	for _, name := range []string{"video/str0m-h264.pcap", "video/str0m-vp9.pcap", "video/tau-wilson-h265.pcap", "mpegts/tsduck-test-176-ts-over-udp.pcapng"} {
		cps, _ := loadCapture(name)
		for i, p := range cps {
			if p.ip != nil && i < 8 {
				f.Add(p.ip)
			}
		}
	}
}

// FuzzParse feeds arbitrary IP packets to one long-lived Classifier, so
// that its tables see a long hostile sequence.
func FuzzParse(f *testing.F) {
	addPacketSeeds(f)
	cs, err := NewClassSet([]Class{{Name: "v", Match: ClassMatch{Protos: []uint8{17}, Ports: []PortRange{{5004, 5004}}}, Labels: []Label{{"tier", "x"}}}})
	if err != nil {
		f.Fatal(err)
	}
	c := mustNew(f, Options{Classes: cs})
	f.Fuzz(func(t *testing.T, pkt []byte) {
		var md Metadata
		c.Parse(pkt, &md)
		checkMetadata(t, &md)
		st := c.Stats()
		if st.Streams > MaxStreams || st.Probation > MaxProbation || st.Fragments > MaxFragments {
			t.Fatalf("state beyond its bounds: %+v", st)
		}
	})
}

// FuzzParseIP checks the stateless parser, and that the Classifier agrees
// with it on every IP-layer key (a differential check).
func FuzzParseIP(f *testing.F) {
	addPacketSeeds(f)
	f.Fuzz(func(t *testing.T, pkt []byte) {
		var a, b Metadata
		ra := ParseIP(pkt, &a)
		c := mustNew(t, Options{NoHeuristic: true})
		rb := c.Parse(pkt, &b)
		if ra != rb {
			t.Fatalf("reason %v vs %v", ra, rb)
		}
		checkMetadata(t, &a)
		for _, k := range []Key{KeyIPVersion, KeyProto, KeySrcIP, KeyDstIP, KeySrcPort, KeyDstPort, KeyDSCP, KeyECN, KeyLength, KeyFragment, KeyICMPType, KeyICMPCode} {
			va, oka := a.AppendValue(nil, k)
			vb, okb := b.AppendValue(nil, k)
			if oka != okb || string(va) != string(vb) {
				t.Fatalf("%s: %q %v vs %q %v", k, va, oka, vb, okb)
			}
		}
	})
}

// FuzzRTP fuzzes a UDP payload on a configured RTP port, and the same
// payload under the heuristic, reaching the RTP header and codec paths.
func FuzzRTP(f *testing.F) {
	f.Add(rtpPkt{pt: 96, seq: 1, ssrc: 1, payload: stapA(nalSPS, nalPPS, nalIDR)}.bytes())
	f.Add(rtpPkt{pt: 98, seq: 1, ssrc: 1, csrcs: 2, ext: []byte{1, 2, 3, 4}, padding: 3, payload: []byte{0x88, 0x82, 0x49, 0x83, 0x42}}.bytes())
	f.Add(rtpPkt{pt: 33, seq: 1, ssrc: 1, payload: tsPacket(0x100, true, true, 0xe0)}.bytes())
	f.Add(rtpPkt{pt: 45, seq: 1, ssrc: 1, payload: []byte{0x18, 0x08, 0, 0}}.bytes())
	configured := mustNew(f, Options{RTPPorts: []PortRange{{5004, 5004}}})
	heuristic := mustNew(f, Options{})
	f.Fuzz(func(t *testing.T, payload []byte) {
		for _, c := range []*Classifier{configured, heuristic} {
			var md Metadata
			for _, frag := range []bool{false, true} {
				pkt := ipv4(0, 17, 3, 0, udp(40000, 5004, payload))
				if frag {
					pkt = ipv4(0, 17, 3, 0x2000, udp(40000, 5004, payload))
				}
				c.Parse(pkt, &md)
				checkMetadata(t, &md)
			}
		}
	})
}

// checkEvidenceInvariants: a signature is always valid; layers fit their
// bit widths.
func checkEvidenceInvariants(t *testing.T, ev evidence) {
	t.Helper()
	if ev.strong && !ev.valid {
		t.Fatal("strong but not valid")
	}
	if ev.tl > 7 || ev.sl > 7 {
		t.Fatalf("layers %d/%d", ev.tl, ev.sl)
	}
	if ev.frame > FrameDelta {
		t.Fatalf("frame %d", ev.frame)
	}
}

func fuzzCodec(f *testing.F, parse func([]byte, bool) evidence, seeds ...[]byte) {
	for _, s := range seeds {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, p []byte, partial bool) {
		checkEvidenceInvariants(t, parse(p, partial))
	})
}

func FuzzH264(f *testing.F) {
	fuzzCodec(f, parseH264, stapA(nalSPS, nalPPS, nalIDR), fuA(5, true, false, []byte{1}), nalNonIDR,
		[]byte{0x7a, 0x00, 0x01, 0x00, 0x09, 0x00, 0x00, 0x10, 0x65, 0x88}, []byte{0x7d, 0x85, 0x00, 0x09, 0x88}, []byte{0x6e, 0x80, 0x00, 0x40})
}

func FuzzH265(f *testing.F) {
	fuzzCodec(f, parseH265, buildH265AP(h265(32, 0, 1), h265(33, 0, 1)), buildH265FU(20, true, false, 1), h265(1, 2, 0xd0))
}

func FuzzVP8(f *testing.F) {
	fuzzCodec(f, parseVP8, []byte{0x90, 0xe0, 0x81, 0x23, 0x07, 0x40, 0x50, 0x01, 0x00, 0x9d, 0x01, 0x2a}, []byte{0x10, 0x31, 0x02})
}

func FuzzVP9(f *testing.F) {
	fuzzCodec(f, parseVP9, []byte{0x8a, 0x01, 0x18, 0x02, 0x80, 0x01, 0x68, 0x01, 0x04, 0x01, 0x82, 0x49, 0x83, 0x42},
		[]byte{0xf8, 0x01, 0x40, 0x03, 0x04, 0x86}, []byte{0xa8, 0x01, 0x20, 0x05, 0x82, 0x49, 0x83, 0x42})
}

func FuzzAV1(f *testing.F) {
	fuzzCodec(f, parseAV1, []byte{0x28, 0x05, 0x08, 0, 0, 0, 0x42, 0x30, 0x10, 0}, []byte{0x10, 0x34, 0x48, 0x30}, []byte{0x10, 0x32, 0x02, 0x10, 0x00})
}

// FuzzMPEGTS feeds datagrams to one TS tracker.
func FuzzMPEGTS(f *testing.F) {
	f.Add(cat(tsPacket(0x100, true, true, 0xe0), tsPacket(0x100, false, false, 0)))
	f.Add(tsPacket(0x101, true, false, 0xc0))
	var st tsState
	f.Fuzz(func(t *testing.T, p []byte) {
		if ft := scanTS(p, &st); ft > FrameDelta {
			t.Fatalf("frame %d", ft)
		}
		isTS(p, false)
		isTS(p, true)
	})
}
