package classify

// MPEG-2 transport stream (ISO/IEC 13818-1 §2.4.3) in UDP datagrams, either
// raw (usually 7 × 188 bytes) or in RTP with payload type 33 (RFC 2250 §2).
// Each 188-byte packet: sync 0x47; TEI(1) PUSI(1) priority(1) PID(13);
// scrambling(2) adaptation_field_control(2) continuity(4); then, when the
// adaptation field is present, its length and flags, whose 0x40 bit is the
// random_access_indicator (RAI).
//
// A keyframe starts where a TS packet has both RAI and PUSI and its payload
// starts a video PES (start code 00 00 01, stream_id 0xE0–0xEF). The video
// PID is the first PID seen starting a video PES. Every datagram that carries
// a part of that PES, up to the next PES start on the PID, is a keyframe
// packet; a datagram whose video data belongs to another PES is a delta.

const tsPacketSize = 188

// isTS reports whether p is a whole number of TS packets, each with its sync
// byte. With partial, a cut-short tail is allowed.
func isTS(p []byte, partial bool) bool {
	if len(p) < tsPacketSize || (!partial && len(p)%tsPacketSize != 0) {
		return false
	}
	for off := 0; off < len(p); off += tsPacketSize {
		if p[off] != 0x47 {
			return false
		}
	}
	return true
}

// tsState is the per-stream state of the keyframe tracker.
type tsState struct {
	videoPID uint16
	havePID  bool
	keyPES   bool // the video PES in progress started at a random access point
	inPES    bool // a video PES start was seen
}

// scanTS updates st from the TS packets in p and returns the frame type of
// the video data p carries (FrameUnknown when it carries none).
func scanTS(p []byte, st *tsState) FrameType {
	ft := FrameUnknown
	for off := 0; off+4 <= len(p); off += tsPacketSize {
		ts := p[off:min(off+tsPacketSize, len(p))]
		if ts[0] != 0x47 || ts[1]&0x80 != 0 { // lost sync, transport error
			continue
		}
		pusi := ts[1]&0x40 != 0
		pid := uint16(ts[1]&0x1f)<<8 | uint16(ts[2])
		afc := ts[3] >> 4 & 0x03
		pos, rai := 4, false
		if afc&0x02 != 0 && len(ts) > 4 {
			afl := int(ts[4])
			if afl > 0 && len(ts) > 5 {
				rai = ts[5]&0x40 != 0
			}
			pos = 5 + afl
		}
		videoStart := false
		if pusi && afc&0x01 != 0 && pos+4 <= len(ts) {
			pl := ts[pos:]
			videoStart = pl[0] == 0 && pl[1] == 0 && pl[2] == 1 && pl[3]&0xf0 == 0xe0
		}
		if videoStart && !st.havePID {
			st.videoPID, st.havePID = pid, true
		}
		if !st.havePID || pid != st.videoPID {
			continue
		}
		if pusi {
			st.inPES = videoStart
			st.keyPES = videoStart && rai
		}
		switch {
		case !st.inPES:
		case st.keyPES:
			ft = FrameKey
		case ft == FrameUnknown:
			ft = FrameDelta
		}
	}
	return ft
}
