package classify

import "testing"

// evWant is the expected evidence of one payload.
type evWant struct {
	valid, strong bool
	frame         FrameType
	tl, sl        int // -1: no layer signalled
}

func checkEvidence(t *testing.T, ev evidence, w evWant) {
	t.Helper()
	// A hint (VP9's P bit) gives the type of a frame no other packet told.
	frame := ev.frame
	if frame == FrameUnknown {
		frame = ev.hint
	}
	if ev.valid != w.valid || ev.strong != w.strong || frame != w.frame {
		t.Errorf("valid %v strong %v frame %v, want %v %v %v", ev.valid, ev.strong, frame, w.valid, w.strong, w.frame)
	}
	if got := layer(ev.hasTL, ev.tl); got != w.tl {
		t.Errorf("temporal layer %d, want %d", got, w.tl)
	}
	if got := layer(ev.hasSL, ev.sl); got != w.sl {
		t.Errorf("spatial layer %d, want %d", got, w.sl)
	}
}

func layer(has bool, v uint8) int {
	if !has {
		return -1
	}
	return int(v)
}

func TestH264(t *testing.T) {
	stap := stapA(nalSPS, nalPPS, nalIDR)
	badLen := append([]byte(nil), stap...)
	badLen[len(nalSPS)+len(nalPPS)+5] = 0x40 // the IDR unit claims 64 bytes
	stapB := append([]byte{0x79, 0x00, 0x07}, stap[1:]...)
	mtap16 := []byte{0x7a, 0x00, 0x01, // MTAP16, DONB
		0x00, byte(3 + len(nalIDR)), 0x00, 0x00, 0x10} // size, DOND, TS offset
	mtap16 = append(mtap16, nalIDR...)
	fuB := []byte{0x7d, 0x85, 0x00, 0x09, 0x88, 0x84}
	svcPrefix := []byte{0x6e, 0x80, 0x00, 0x40} // prefix NAL, svc_extension_flag, temporal_id 2
	tests := []struct {
		name string
		p    []byte
		want evWant
	}{
		{"single IDR", nalIDR, evWant{true, true, FrameKey, -1, -1}},
		{"single SPS", nalSPS, evWant{true, true, FrameKey, -1, -1}},
		{"single PPS", nalPPS, evWant{true, false, FrameKey, -1, -1}},
		{"single non-IDR", nalNonIDR, evWant{true, false, FrameDelta, -1, -1}},
		{"single SEI", nalSEI, evWant{true, false, FrameUnknown, -1, -1}},
		{"STAP-A SPS PPS IDR", stap, evWant{true, true, FrameKey, -1, -1}},
		{"STAP-A SPS PPS", stapA(nalSPS, nalPPS), evWant{true, true, FrameKey, -1, -1}},
		{"STAP-A one unit", stapA(nalNonIDR), evWant{true, false, FrameDelta, -1, -1}},
		{"STAP-A bad NAL length keeps SPS evidence", badLen, evWant{false, false, FrameKey, -1, -1}},
		{"STAP-A zero size", []byte{0x78, 0, 0, 0x65}, evWant{false, false, FrameUnknown, -1, -1}},
		{"STAP-A inner F bit", stapA([]byte{0xe5, 1}, nalIDR), evWant{false, false, FrameUnknown, -1, -1}},
		{"STAP-B", stapB, evWant{true, true, FrameKey, -1, -1}},
		{"MTAP16 IDR", mtap16, evWant{true, false, FrameKey, -1, -1}},
		{"FU-A start IDR", fuA(5, true, false, []byte{0x88, 0x84}), evWant{true, true, FrameKey, -1, -1}},
		{"FU-A start non-IDR", fuA(1, true, false, []byte{0x9a}), evWant{true, true, FrameDelta, -1, -1}},
		{"FU-A middle", fuA(5, false, false, []byte{1, 2, 3}), evWant{true, false, FrameUnknown, -1, -1}},
		{"FU-A end", fuA(5, false, true, []byte{1, 2, 3}), evWant{true, false, FrameUnknown, -1, -1}},
		{"FU-A start and end", fuA(5, true, true, []byte{1}), evWant{false, false, FrameUnknown, -1, -1}},
		{"FU-A inner type 24", fuA(24, true, false, []byte{1}), evWant{false, false, FrameUnknown, -1, -1}},
		{"FU-A cut", []byte{0x7c}, evWant{false, false, FrameUnknown, -1, -1}},
		{"FU-B start IDR", fuB, evWant{true, true, FrameKey, -1, -1}},
		{"AUD primary_pic_type I", []byte{0x09, 0x10}, evWant{true, true, FrameKey, -1, -1}},
		{"AUD primary_pic_type I, P", []byte{0x09, 0x30}, evWant{true, true, FrameDelta, -1, -1}},
		{"SEI recovery point", []byte{0x06, 0x06, 0x01, 0xc4, 0x80}, evWant{true, true, FrameKey, -1, -1}},
		{"SEI cut short", []byte{0x06, 0x06, 0x05, 0xc4, 0x80}, evWant{true, false, FrameKey, -1, -1}},
		{"FU-A start SEI", []byte{0x1c, 0x86, 0x05, 0xff, 0x10}, evWant{true, true, FrameUnknown, -1, -1}},
		{"FU-A start IDR with a P slice type", fuA(5, true, false, []byte{0x9a}), evWant{true, false, FrameKey, -1, -1}},
		{"SVC prefix temporal id", svcPrefix, evWant{true, false, FrameUnknown, 2, -1}},
		{"F bit", []byte{0xe5, 0x88}, evWant{false, false, FrameUnknown, -1, -1}},
		{"type 0", []byte{0x60, 0x88}, evWant{false, false, FrameUnknown, -1, -1}},
		{"empty", nil, evWant{false, false, FrameUnknown, -1, -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkEvidence(t, parseH264(tt.p, false), tt.want) })
	}
	// A first IP fragment cuts an aggregation packet short: no contradiction.
	if ev := parseH264(stap[:len(stap)-3], true); !ev.valid || ev.frame != FrameKey || ev.strong {
		t.Errorf("partial STAP-A: %+v", ev)
	}
}

// h265 builds an H.265 NAL unit header (layer 0) for type t and TID tid.
func h265(t byte, tid byte, body ...byte) []byte {
	return append([]byte{t << 1, tid + 1}, body...)
}

func buildH265AP(nals ...[]byte) []byte {
	p := []byte{h265AP << 1, 1}
	for _, n := range nals {
		p = append(p, byte(len(n)>>8), byte(len(n)))
		p = append(p, n...)
	}
	return p
}

func buildH265FU(t byte, start, end bool, body ...byte) []byte {
	fh := t
	if start {
		fh |= 0x80
	}
	if end {
		fh |= 0x40
	}
	return append([]byte{h265FU << 1, 1, fh}, body...)
}

func TestH265(t *testing.T) {
	tests := []struct {
		name string
		p    []byte
		want evWant
	}{
		{"IDR_W_RADL", h265(19, 0, 0xaf), evWant{true, true, FrameKey, 0, -1}},
		{"IDR_N_LP", h265(20, 0, 0xaf), evWant{true, true, FrameKey, 0, -1}},
		{"CRA", h265(21, 0, 0xaf), evWant{true, true, FrameKey, 0, -1}},
		{"BLA_W_LP", h265(16, 0, 0xaf), evWant{true, true, FrameKey, 0, -1}},
		{"VPS", h265(32, 0, 0x0c), evWant{true, false, FrameKey, 0, -1}},
		{"TRAIL_R tid 2", h265(1, 2, 0xd0), evWant{true, false, FrameDelta, 2, -1}},
		{"TSA_N", h265(2, 1, 0xd0), evWant{true, false, FrameDelta, 1, -1}},
		{"SEI", h265(39, 0, 0x01), evWant{true, false, FrameUnknown, 0, -1}},
		{"AP VPS SPS PPS SEI", buildH265AP(h265(32, 0, 1), h265(33, 0, 1), h265(34, 0, 1), h265(39, 0, 1)), evWant{true, true, FrameKey, 0, -1}},
		{"AP one unit", buildH265AP(h265(1, 0, 1)), evWant{true, false, FrameDelta, 0, -1}},
		{"AP bad length", append(buildH265AP(h265(32, 0, 1), h265(33, 0, 1)), 0), evWant{false, false, FrameKey, 0, -1}},
		{"AP inner TID 0", buildH265AP(h265(32, 0, 1), []byte{0x40, 0x00, 1}), evWant{false, false, FrameKey, 0, -1}},
		{"FU start IDR_N_LP", buildH265FU(20, true, false, 1, 2), evWant{true, true, FrameKey, 0, -1}},
		{"FU start TRAIL_R", buildH265FU(1, true, false, 1, 2), evWant{true, false, FrameDelta, 0, -1}},
		{"FU end", buildH265FU(20, false, true, 1, 2), evWant{true, false, FrameUnknown, 0, -1}},
		{"FU start and end", buildH265FU(20, true, true, 1), evWant{false, false, FrameUnknown, 0, -1}},
		{"FU type AP", buildH265FU(48, true, false, 1), evWant{false, false, FrameUnknown, 0, -1}},
		{"TID 0 forbidden", []byte{19 << 1, 0, 1}, evWant{false, false, FrameUnknown, -1, -1}},
		{"F bit", []byte{0x80 | 19<<1, 1}, evWant{false, false, FrameUnknown, -1, -1}},
		{"reserved type 45", h265(45, 0, 1), evWant{false, false, FrameUnknown, 0, -1}},
		{"short", []byte{0x26}, evWant{false, false, FrameUnknown, -1, -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkEvidence(t, parseH265(tt.p, false), tt.want) })
	}
}

func TestVP8(t *testing.T) {
	keyHdr := []byte{0x50, 0x01, 0x00, 0x9d, 0x01, 0x2a, 0x80, 0x02}
	tests := []struct {
		name string
		p    []byte
		want evWant
	}{
		{"key frame", append([]byte{0x10}, keyHdr...), evWant{true, true, FrameKey, -1, -1}},
		{"key frame without start code", []byte{0x10, 0x50, 0x01, 0x00, 0x11, 0x22, 0x33}, evWant{false, false, FrameUnknown, -1, -1}},
		{"inter frame", []byte{0x10, 0x31, 0x02, 0x00, 0xaa}, evWant{true, false, FrameDelta, -1, -1}},
		{"continuation", []byte{0x00, 0x12, 0x34}, evWant{true, false, FrameUnknown, -1, -1}},
		{"partition 1 start", []byte{0x11, 0x12, 0x34}, evWant{true, false, FrameUnknown, -1, -1}},
		{"extended: 15-bit picture id, tl0picidx, tid 1", append([]byte{0x90, 0xe0, 0x81, 0x23, 0x07, 0x40}, keyHdr...), evWant{true, true, FrameKey, 1, -1}},
		{"extended: 7-bit picture id, tid 2 delta", []byte{0x90, 0xa0, 0x05, 0x80, 0x31, 0, 0}, evWant{true, false, FrameDelta, 2, -1}},
		{"reserved bit", []byte{0x50, 0x31}, evWant{false, false, FrameUnknown, -1, -1}},
		{"extension reserved bits", []byte{0x90, 0x01, 0x31}, evWant{false, false, FrameUnknown, -1, -1}},
		{"version 5", []byte{0x10, 0x0b, 0, 0}, evWant{false, false, FrameUnknown, -1, -1}},
		{"descriptor cut", []byte{0x90, 0x80}, evWant{false, false, FrameUnknown, -1, -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkEvidence(t, parseVP8(tt.p, false), tt.want) })
	}
}

func TestVP9(t *testing.T) {
	// VP9 key frame uncompressed header: frame_marker 2, profile 0,
	// show_existing 0, frame_type 0, show_frame 1 → 0x82; sync code.
	key := []byte{0x82, 0x49, 0x83, 0x42, 0x00}
	inter := []byte{0x86, 0x00, 0x12}
	tests := []struct {
		name string
		p    []byte
		want evWant
	}{
		{"key frame B", append([]byte{0x08 | 0x80, 0x01}, key...), evWant{true, true, FrameKey, -1, -1}},
		{"key frame middle packet", []byte{0x80, 0x01, 0x11, 0x22}, evWant{true, false, FrameKey, -1, -1}},
		{"inter frame B", append([]byte{0x48 | 0x80, 0x02}, inter...), evWant{true, false, FrameDelta, -1, -1}},
		{"inter frame end", []byte{0x44 | 0x80, 0x02, 0x11}, evWant{true, false, FrameDelta, -1, -1}},
		{"no frame marker", []byte{0x48, 0x06}, evWant{false, false, FrameUnknown, -1, -1}},
		{"layers non-flexible tid 1 sid 0", append([]byte{0xa8, 0x01, 0x20, 0x05}, key...), evWant{true, true, FrameKey, 1, 0}},
		{"spatial layer 1 without inter-picture prediction", append([]byte{0xa8, 0x01, 0x02, 0x05}, inter...), evWant{true, false, FrameDelta, 0, 1}},
		// ffmpeg's packetizer: descriptor 0x08/0x00/0x04, P never set.
		{"ffmpeg inter frame start, P unset", append([]byte{0x08}, inter...), evWant{true, false, FrameDelta, -1, -1}},
		{"ffmpeg key frame start", append([]byte{0x08}, key...), evWant{true, true, FrameKey, -1, -1}},
		{"key frame without its sync code", []byte{0x08, 0x82, 0x49, 0x00, 0x42}, evWant{false, false, FrameUnknown, -1, -1}},
		{"profile 3 key frame", []byte{0x08, 0xb1, 0x24, 0xc1, 0xa1, 0x00}, evWant{true, true, FrameKey, -1, -1}},
		{"show existing frame", []byte{0x08, 0x88}, evWant{true, false, FrameDelta, -1, -1}},
		{"flexible with two P_DIFFs", append([]byte{0xf8, 0x01, 0x40, 0x03, 0x04}, inter...), evWant{true, false, FrameDelta, 2, 0}},
		{"flexible with four P_DIFFs", []byte{0x58, 0x03, 0x05, 0x07, 0x09, 0x86}, evWant{false, false, FrameUnknown, -1, -1}},
		{"scalability structure", append([]byte{0x8a, 0x01, 0x18, 0x02, 0x80, 0x01, 0x68, 0x01, 0x04, 0x01}, key...), evWant{true, true, FrameKey, -1, -1}},
		{"scalability structure cut", []byte{0x8a, 0x01, 0x18, 0x02}, evWant{false, false, FrameUnknown, -1, -1}},
		{"empty", nil, evWant{false, false, FrameUnknown, -1, -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkEvidence(t, parseVP9(tt.p, false), tt.want) })
	}
}

func TestAV1(t *testing.T) {
	seqHdr := []byte{0x08, 0x00, 0x00, 0x00, 0x42} // OBU_SEQUENCE_HEADER, no size
	frameKey := []byte{0x30, 0x10, 0x00}           // OBU_FRAME, show_existing 0, KEY_FRAME
	frameInter := []byte{0x30, 0x30, 0x00}         // INTER_FRAME
	frameExt := []byte{0x34, 0x48, 0x30, 0x00}     // OBU_FRAME with extension: tid 2, sid 1; INTER
	frameSized := []byte{0x32, 0x02, 0x10, 0x00}   // OBU_FRAME with obu_size 2, KEY_FRAME
	tests := []struct {
		name string
		p    []byte
		want evWant
	}{
		{"new sequence W=2", cat([]byte{0x28, byte(len(seqHdr))}, seqHdr, frameKey), evWant{true, true, FrameKey, -1, -1}},
		{"new sequence W=0", cat([]byte{0x08, byte(len(seqHdr))}, seqHdr, []byte{byte(len(frameKey))}, frameKey), evWant{true, true, FrameKey, -1, -1}},
		{"new sequence W=1", cat([]byte{0x18}, seqHdr), evWant{true, true, FrameKey, -1, -1}},
		{"key frame header without N", cat([]byte{0x10}, frameKey), evWant{true, false, FrameKey, -1, -1}},
		{"has_size key frame", cat([]byte{0x10}, frameSized), evWant{true, false, FrameKey, -1, -1}},
		{"inter frame", cat([]byte{0x10}, frameInter), evWant{true, false, FrameDelta, -1, -1}},
		{"inter frame with layers", cat([]byte{0x10}, frameExt), evWant{true, false, FrameDelta, 2, 1}},
		{"continuation", []byte{0x90, 0x12, 0x34}, evWant{true, false, FrameUnknown, -1, -1}},
		{"tile group only", []byte{0x10, 0x20, 0x12}, evWant{true, false, FrameUnknown, -1, -1}},
		{"reserved bits", []byte{0x11, 0x30, 0x10}, evWant{false, false, FrameUnknown, -1, -1}},
		{"N with Z", []byte{0x98, 0x30, 0x10}, evWant{false, false, FrameUnknown, -1, -1}},
		{"forbidden bit", []byte{0x10, 0xb0, 0x10}, evWant{false, false, FrameUnknown, -1, -1}},
		{"OBU type 0", []byte{0x10, 0x00, 0x10}, evWant{false, false, FrameUnknown, -1, -1}},
		{"length past end", []byte{0x00, 0x09, 0x30}, evWant{false, false, FrameUnknown, -1, -1}},
		{"W=3 but 2 elements", cat([]byte{0x30, 0x01, 0x20, 0x01}, []byte{0x20}), evWant{false, false, FrameUnknown, -1, -1}},
		{"short", []byte{0x10}, evWant{false, false, FrameUnknown, -1, -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkEvidence(t, parseAV1(tt.p, false), tt.want) })
	}
}

func TestMPEGTS(t *testing.T) {
	const video, audio = 0x100, 0x101
	keyStart := cat(tsPacket(0, true, false, 0), tsPacket(video, true, true, 0xe0), tsPacket(video, false, false, 0))
	keyCont := cat(tsPacket(video, false, false, 0), tsPacket(audio, true, true, 0xc0))
	deltaStart := cat(tsPacket(video, false, false, 0), tsPacket(video, true, false, 0xe0))
	audioOnly := tsPacket(audio, false, false, 0)
	noPUSIRAI := cat(tsPacket(video, false, true, 0)) // RAI without a PES start
	steps := []struct {
		name string
		p    []byte
		want FrameType
	}{
		{"before any video PES", cat(tsPacket(video, false, false, 0), audioOnly), FrameUnknown},
		{"keyframe PES start", keyStart, FrameKey},
		{"keyframe continues", keyCont, FrameKey},
		{"audio only", audioOnly, FrameUnknown},
		{"RAI without PES start changes nothing", noPUSIRAI, FrameKey},
		{"delta PES start after key data", deltaStart, FrameKey},
		{"delta continues", tsPacket(video, false, false, 0), FrameDelta},
		{"next keyframe", tsPacket(video, true, true, 0xe0), FrameKey},
	}
	var st tsState
	for _, s := range steps {
		if !isTS(s.p, false) {
			t.Fatalf("%s: not TS", s.name)
		}
		if got := scanTS(s.p, &st); got != s.want {
			t.Errorf("%s: %v, want %v", s.name, got, s.want)
		}
	}
	if st.videoPID != video {
		t.Errorf("video PID %#x, want %#x", st.videoPID, video)
	}
	for _, bad := range [][]byte{nil, make([]byte, 188), tsPacket(1, false, false, 0)[:187], cat(tsPacket(1, false, false, 0), make([]byte, 188))} {
		if isTS(bad, false) {
			t.Errorf("isTS(%d bytes) = true", len(bad))
		}
	}
	if !isTS(cat(tsPacket(1, false, false, 0), tsPacket(1, false, false, 0)[:100]), true) {
		t.Error("partial TS tail rejected")
	}
}

// TestCodecNames checks String/CodecByName round trips.
func TestCodecNames(t *testing.T) {
	for c := CodecUnknown + 1; c < numCodecs; c++ {
		if got, ok := CodecByName(c.String()); !ok || got != c {
			t.Errorf("CodecByName(%q) = %v, %v", c.String(), got, ok)
		}
	}
	for name, want := range map[string]Codec{"H264": CodecH264, "HEVC": CodecH265, "VP9": CodecVP9, "MP2T": CodecMP2T, "opus": CodecOpus, "ulpfec": CodecFEC} {
		if got, ok := CodecByName(name); !ok || got != want {
			t.Errorf("CodecByName(%q) = %v, want %v", name, got, want)
		}
	}
	if _, ok := CodecByName("nope"); ok {
		t.Error("unknown codec accepted")
	}
}
