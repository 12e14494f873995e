package classify

// VP8 over RTP, RFC 7741. The payload descriptor (§4.2):
//
//	X R N S R PID(3)           R bits are zero
//	[I L T K RSV(4)]           if X
//	[M PictureID(7 or 15)]     if I
//	[TL0PICIDX]                if L
//	[TID(2) Y KEYIDX(5)]       if T or K
//
// At the start of partition 0 (S = 1, PID = 0) the VP8 payload header
// follows (§4.3): its first byte's low bit is P, the inverse key frame flag,
// and a key frame carries the start code 9d 01 2a at bytes 3–5 (RFC 6386
// §9.1).

func parseVP8(p []byte, partial bool) (ev evidence) {
	if len(p) < 1 || p[0]&0x48 != 0 {
		return ev
	}
	b0 := p[0]
	off := 1
	if b0&0x80 != 0 { // X
		if len(p) < 2 || p[1]&0x0f != 0 {
			return ev
		}
		x := p[1]
		off = 2
		if x&0x80 != 0 { // I
			var ok bool
			if off, ok = skipPictureID(p, off); !ok {
				return ev
			}
		}
		if x&0x40 != 0 { // L
			off++
		}
		if x&0x30 != 0 { // T or K
			if off >= len(p) {
				return ev
			}
			if x&0x20 != 0 {
				ev.hasTL, ev.tl = true, p[off]>>6
			}
			off++
		}
	}
	if off > len(p) {
		return ev
	}
	ev.valid = true
	if b0&0x10 == 0 || b0&0x07 != 0 || off == len(p) {
		return ev // not the start of partition 0: no frame header here
	}
	h := p[off]
	if h>>1&0x07 > 3 {
		ev.valid = false // version 0–3 only (RFC 6386 §9.1)
		return ev
	}
	if h&0x01 != 0 {
		ev.frame = FrameDelta
		return ev
	}
	switch {
	case off+6 <= len(p) && p[off+3] == 0x9d && p[off+4] == 0x01 && p[off+5] == 0x2a:
		ev.frame, ev.strong = FrameKey, true
	case off+6 > len(p) && partial:
		ev.frame = FrameKey
	default:
		ev.valid = false // a key frame without its start code
	}
	return ev
}

// skipPictureID returns the offset past the PictureID at p[off] of a VP8
// (RFC 7741 §4.2) or VP9 (RFC 9628 §4.2) payload descriptor: two bytes
// when its M bit is set (15 bits), one otherwise. ok is false when
// p[off] is missing.
func skipPictureID(p []byte, off int) (next int, ok bool) {
	if off >= len(p) {
		return off, false
	}
	if p[off]&0x80 != 0 {
		return off + 2, true
	}
	return off + 1, true
}
