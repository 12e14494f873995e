package classify

// H.264 over RTP, RFC 6184. The payload starts with a one-byte NAL unit
// header (§5.3): F(1) NRI(2) Type(5). Types 1–23 are single NAL units,
// 24/25 STAP-A/B, 26/27 MTAP16/24, 28/29 FU-A/B (§5.4, Table 1).

const (
	h264SliceNonIDR = 1
	h264SliceDPC    = 4 // partitions A–C are 2–4
	h264IDR         = 5
	h264SPS         = 7
	h264PPS         = 8
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
	case t == h264Prefix || t == h264SliceExt:
		// nal_unit_header_svc_extension (H.264 G.7.3.1.1): byte 1 bit 7 is
		// svc_extension_flag, byte 3 bits 7–5 temporal_id.
		if len(nal) >= 4 && nal[1]&0x80 != 0 {
			ev.hasTL, ev.tl = true, nal[3]>>5
		}
	}
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
			var hdr [4]byte
			hdr[0] = p[0]&0xe0 | fh&0x1f
			n := 2
			if t == h264FUB {
				n = 4 // DON follows the FU header
			}
			copy(hdr[1:], p[min(n, len(p)):])
			h264NAL(hdr[:], &ev)
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
