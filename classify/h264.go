package classify

// H.264 over RTP, RFC 6184. The payload starts with a one-byte NAL unit
// header (§5.3): F(1) NRI(2) Type(5). Types 1–23 are single NAL units,
// 24/25 STAP-A/B, 26/27 MTAP16/24, 28/29 FU-A/B (§5.4, Table 1).

const (
	h264SliceNonIDR = 1
	h264SliceDPC    = 4 // partitions A–C are 2–4
	h264IDR         = 5
	h264SEI         = 6
	h264SPS         = 7
	h264PPS         = 8
	h264AUD         = 9
	h264Prefix      = 14 // SVC prefix NAL unit (RFC 6190 §1.1.3)
	h264SliceExt    = 20 // SVC coded slice extension
	h264STAPA       = 24
	h264STAPB       = 25
	h264MTAP16      = 26
	h264MTAP24      = 27
	h264FUA         = 28
	h264FUB         = 29
	h264PACSI       = 30 // RFC 6190 §4.9
)

// MaxAggregationUnits bounds the NAL units Parse reads from one H.264 or
// H.265 aggregation packet; units beyond it are not inspected.
const MaxAggregationUnits = 64

// h264NAL adds the evidence of one NAL unit (header at nal[0]) to ev.
func h264NAL(nal []byte, ev *evidence) {
	switch t := nal[0] & 0x1f; {
	case t == h264IDR || t == h264SPS || t == h264PPS:
		// IDR slice; SPS and PPS announce an IDR (the rule, and
		// what encoders send in front of one).
		ev.frame = FrameKey
	case t >= h264SliceNonIDR && t <= h264SliceDPC:
		if ev.frame == FrameUnknown {
			ev.frame = FrameDelta
		}
		if t > h264SliceNonIDR {
			ev.unlikely = true // data partitioning: Extended profile only
		}
	case t == h264AUD:
		// primary_pic_type (H.264 §7.4.2.4): 0 (I), 3 (SI) and 5 (I, SI)
		// are intra-only pictures, as an IDR is; the slices that follow
		// decide.
		if len(nal) >= 2 && ev.hint == FrameUnknown {
			if ppt := nal[1] >> 5; ppt == 0 || ppt == 3 || ppt == 5 {
				ev.hint = FrameKey
			} else {
				ev.hint = FrameDelta
			}
		}
	case t == h264SEI:
		h264SEIHints(nal, ev)
	case t == h264Prefix || t == h264SliceExt:
		// nal_unit_header_svc_extension (H.264 G.7.3.1.1): byte 1 bit 7 is
		// svc_extension_flag, byte 3 bits 7–5 temporal_id.
		if len(nal) >= 4 && nal[1]&0x80 != 0 {
			ev.hasTL, ev.tl = true, nal[3]>>5
		}
	}
}

// SEI payload types (H.264 Annex D).
const (
	seiUserDataUnregistered = 5
	seiRecoveryPoint        = 6
)

// h264SEIHints walks the SEI messages of an SEI NAL unit (H.264 §7.3.2.3):
// a recovery point (a random access point, D.2.8) hints a keyframe, and
// unregistered user data (encoders' version strings, sent before the first
// IDR of a stream) hints one for a stream's first frame. SEI that tiles the
// NAL unit exactly up to its rbsp_trailing_bits is a signature.
func h264SEIHints(nal []byte, ev *evidence) {
	r := rbspReader{b: nal[1:]}
	for msgs := 0; msgs < MaxAggregationUnits; msgs++ {
		if r.trailing() {
			ev.strong = msgs > 0
			return
		}
		typ, ok := r.seiValue()
		if !ok {
			return
		}
		switch typ {
		case seiRecoveryPoint:
			ev.hint = FrameKey
		case seiUserDataUnregistered:
			ev.startKey = true
		}
		size, ok := r.seiValue()
		if !ok || !r.skip(size) {
			return
		}
	}
}

// rbspReader reads the RBSP bytes of a NAL unit payload, removing the
// emulation prevention bytes (00 00 03 → 00 00, H.264 §7.4.1).
type rbspReader struct {
	b     []byte
	zeros int
}

func (r *rbspReader) byte() (byte, bool) {
	if len(r.b) == 0 {
		return 0, false
	}
	c := r.b[0]
	r.b = r.b[1:]
	if r.zeros >= 2 && c == 3 {
		r.zeros = 0
		return r.byte()
	}
	if c == 0 {
		r.zeros++
	} else {
		r.zeros = 0
	}
	return c, true
}

// seiValue reads an SEI payloadType or payloadSize: 0xff bytes adding 255
// each, then a last byte.
func (r *rbspReader) seiValue() (int, bool) {
	v := 0
	for i := 0; i < 8; i++ {
		c, ok := r.byte()
		if !ok {
			return 0, false
		}
		v += int(c)
		if c != 0xff {
			return v, true
		}
	}
	return 0, false
}

func (r *rbspReader) skip(n int) bool {
	for ; n > 0; n-- {
		if _, ok := r.byte(); !ok {
			return false
		}
	}
	return true
}

// trailing reports whether exactly the rbsp_trailing_bits byte 0x80 is left.
func (r *rbspReader) trailing() bool { return len(r.b) == 1 && r.b[0] == 0x80 }

// expGolomb reads ue(v) values (H.264 §9.1) from the first 8 bytes of b.
type expGolomb struct {
	v   uint64
	pos uint // bits consumed
	n   uint // bits available
}

func newExpGolomb(b []byte) expGolomb {
	var g expGolomb
	for i := 0; i < 8 && i < len(b); i++ {
		g.v |= uint64(b[i]) << (56 - 8*uint(i))
		g.n += 8
	}
	return g
}

func (g *expGolomb) ue() (uint64, bool) {
	lz := uint(0)
	for g.pos+lz < g.n && g.v<<(g.pos+lz)>>63 == 0 {
		lz++
		if lz > 16 {
			return 0, false
		}
	}
	if g.pos+2*lz+1 > g.n {
		return 0, false
	}
	x := g.v << (g.pos + lz + 1) >> 1 >> (63 - lz) // the lz bits after the 1
	if lz == 0 {
		x = 0
	}
	g.pos += 2*lz + 1
	return 1<<lz - 1 + x, true
}

// h264SliceStart reports whether b (a slice's RBSP after its NAL header)
// starts with a plausible slice header (H.264 §7.3.3): first_mb_in_slice,
// slice_type 0–9 (I, SI, 2/4/7/9, only for an IDR) and
// pic_parameter_set_id ≤ 255.
func h264SliceStart(b []byte, idr bool) bool {
	g := newExpGolomb(b)
	if _, ok := g.ue(); !ok {
		return false
	}
	st, ok := g.ue()
	if !ok || st > 9 || idr && st%5 != 2 && st%5 != 4 {
		return false
	}
	pps, ok := g.ue()
	return ok && pps <= 255
}

// h264Known reports whether an SPS (nal[1:] its RBSP) names a profile_idc
// of H.264 Annex A/G/H with the reserved_zero_2bits zero and a level_idc of
// Table A-1: a signature.
func h264KnownSPS(nal []byte) bool {
	if len(nal) < 4 || nal[2]&0x03 != 0 {
		return false
	}
	switch nal[1] {
	case 66, 77, 88, 100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135:
	default:
		return false
	}
	switch nal[3] {
	case 9, 10, 11, 12, 13, 20, 21, 22, 30, 31, 32, 40, 41, 42, 50, 51, 52, 60, 61, 62:
		return true
	}
	return false
}

// h264Signature reports whether a single NAL unit (or the start of a
// fragmented one, its header rebuilt in nal[0]) is a signature: an access
// unit delimiter of exactly its two bytes, an SPS of a known profile and
// level, SEI messages that tile the unit, or an IDR slice (NRI ≠ 0) whose
// header says I or SI.
func h264Signature(nal []byte, fragment bool) bool {
	switch nal[0] & 0x1f {
	case h264AUD:
		return !fragment && len(nal) == 2 && nal[1]&0x1f == 0x10
	case h264SPS:
		return h264KnownSPS(nal)
	case h264IDR:
		return nal[0]&0x60 != 0 && h264SliceStart(nal[1:], true)
	case h264SliceNonIDR:
		return fragment && h264SliceStart(nal[1:], false)
	case h264SEI:
		// The start of a fragmented SEI (a long version string): NRI 0,
		// as SEI must have, and a first message of a common type
		// (buffering period, picture timing, user data, recovery point).
		if !fragment || nal[0]&0x60 != 0 || len(nal) < 2 {
			return false
		}
		switch nal[1] {
		case 0, 1, 4, seiUserDataUnregistered, seiRecoveryPoint:
			return true
		}
	}
	return false
}

// h264Valid reports whether b is a plausible header of a NAL unit inside an
// aggregation or fragmentation unit: F = 0 and a type 1–23.
func h264Valid(b byte) bool { t := b & 0x1f; return b&0x80 == 0 && t >= 1 && t <= 23 }

func parseH264(p []byte, partial bool) (ev evidence) {
	if len(p) < 1 || p[0]&0x80 != 0 {
		return ev
	}
	t := p[0] & 0x1f
	switch {
	case t >= 1 && t <= 23:
		ev.valid = true
		h264NAL(p, &ev)
		if h264Signature(p, false) {
			ev.strong = true
		}
	case t == h264STAPA || t == h264STAPB || t == h264MTAP16 || t == h264MTAP24:
		parseH264Agg(p, t, partial, &ev)
	case t == h264FUA || t == h264FUB:
		// FU indicator, FU header S(1) E(1) R(1) Type(5) (§5.8).
		if len(p) < 2 {
			return ev
		}
		fh := p[1]
		if fh&0xc0 == 0xc0 || !h264Valid(fh&0x1f) {
			return ev // start and end at once, or an impossible type
		}
		ev.valid = true
		if fh&0x80 != 0 {
			var hdr [9]byte
			hdr[0] = p[0]&0xe0 | fh&0x1f
			n := 2
			if t == h264FUB {
				n = 4 // DON follows the FU header
			}
			m := copy(hdr[1:], p[min(n, len(p)):])
			h264NAL(hdr[:1+m], &ev)
			ev.strong = ev.strong || h264Signature(hdr[:1+m], true)
		}
	case t == h264PACSI:
		ev.valid = true
	}
	return ev
}

// parseH264Agg walks STAP-A/B and MTAP16/24 units (§5.7). Units tile the
// payload exactly; two or more valid units that do are a signature.
func parseH264Agg(p []byte, t byte, partial bool, ev *evidence) {
	off, extra := 1, 0
	switch t {
	case h264STAPB:
		off = 3 // DON
	case h264MTAP16:
		off, extra = 3, 3 // DONB; per unit DOND(1) + TS offset(2)
	case h264MTAP24:
		off, extra = 3, 4 // DONB; per unit DOND(1) + TS offset(3)
	}
	units := 0
	for off < len(p) && units < MaxAggregationUnits {
		if off+2 > len(p) {
			ev.valid = partial
			return
		}
		size := int(p[off])<<8 | int(p[off+1])
		off += 2
		if size <= extra || off+extra >= len(p) {
			ev.valid = partial && off+extra >= len(p)
			return
		}
		nal := p[off+extra:]
		if !h264Valid(nal[0]) {
			return
		}
		h264NAL(nal, ev)
		units++
		off += size
	}
	if off > len(p) && !partial {
		return
	}
	ev.valid = units > 0
	ev.strong = units >= 2 && off == len(p)
}
