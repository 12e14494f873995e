package classify

// VP9 over RTP, RFC 9628. The payload descriptor (§4.2):
//
//	I P L F B E V Z
//	[M PictureID(7 or 15)]          if I
//	[TID(3) U SID(3) D]             if L
//	[TL0PICIDX]                     if L and not F (non-flexible mode)
//	[P_DIFF(7) N] × 1–3             if F and P
//	[scalability structure]         if V (§4.2.1)
//
// P = 0 says the frame uses no inter-picture prediction; on the base
// spatial layer that is a keyframe. P is in every packet of the frame. The VP9
// frame that follows B = 1 opens with the uncompressed header (VP9 bitstream
// spec §6.2): frame_marker = 2, and for a key frame of profile 0–2 the sync
// code 49 83 42 in bytes 1–3.

func parseVP9(p []byte, partial bool) (ev evidence) {
	if len(p) < 1 {
		return ev
	}
	b0 := p[0]
	pBit, fBit := b0&0x40 != 0, b0&0x10 != 0
	off := 1
	if b0&0x80 != 0 { // I
		var ok bool
		if off, ok = skipPictureID(p, off); !ok {
			return ev
		}
	}
	sid := uint8(0)
	if b0&0x20 != 0 { // L
		if off >= len(p) {
			return ev
		}
		ev.hasTL, ev.tl = true, p[off]>>5
		sid = p[off] >> 1 & 0x07
		ev.hasSL, ev.sl = true, sid
		off++
		if !fBit {
			off++ // TL0PICIDX
		}
	}
	if fBit && pBit {
		for i := 0; ; i++ {
			if i == 3 || off >= len(p) {
				return ev // more than 3 reference indices, or cut short
			}
			n := p[off]&0x01 != 0
			off++
			if !n {
				break
			}
		}
	}
	if b0&0x02 != 0 { // V: scalability structure
		if off >= len(p) {
			return ev
		}
		ss := p[off]
		ns := int(ss>>5) + 1
		off++
		if ss&0x10 != 0 { // Y: width and height per spatial layer
			off += 4 * ns
		}
		if ss&0x08 != 0 { // G: picture group description
			if off >= len(p) {
				return ev
			}
			ng := int(p[off])
			off++
			for i := 0; i < ng; i++ {
				if off >= len(p) {
					return ev
				}
				off += 1 + int(p[off]>>2&0x03)
			}
		}
	}
	if off > len(p) {
		return ev
	}
	ev.valid = true
	// P is in every packet's descriptor, so any packet of a frame tells
	// its type, not only the first.
	switch {
	case pBit:
		ev.frame = FrameDelta
	case sid == 0:
		ev.frame = FrameKey
	}
	if b0&0x08 == 0 { // not B: the frame started in an earlier packet
		return ev
	}
	if off == len(p) {
		ev.valid = partial
		return ev
	}
	h := p[off]
	if h>>6 != 2 {
		ev.valid, ev.frame = false, FrameUnknown // no frame_marker
		return ev
	}
	profile := h>>5&1 | h>>3&2
	if !pBit && profile < 3 && h&0x0c == 0 && off+4 <= len(p) &&
		p[off+1] == 0x49 && p[off+2] == 0x83 && p[off+3] == 0x42 {
		ev.strong = true
	}
	return ev
}
