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
// spatial layer that is a keyframe. P is in every packet of the frame, but
// ffmpeg's packetizer never sets it, so P is a hint only. The VP9 frame that
// follows B = 1 opens with the uncompressed header (VP9 bitstream spec
// §6.2), whose frame_type decides the frame's type; a key frame carries the
// sync code 49 83 42 (bytes 1–3 for profiles 0–2).

func parseVP9(p []byte, partial bool) (ev evidence) {
	if len(p) < 1 {
		return ev
	}
	b0 := p[0]
	pBit, fBit := b0&0x40 != 0, b0&0x10 != 0
	off := 1
	if b0&0x80 != 0 { // I
		if off >= len(p) {
			return ev
		}
		if p[off]&0x80 != 0 {
			off += 2
		} else {
			off++
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
	// P is in every packet's descriptor, but not every packetizer sets it
	// (ffmpeg's leaves it 0), so it is only a hint: the frame's type is
	// taken from it when no packet of the frame carried the VP9 header.
	switch {
	case pBit:
		ev.hint = FrameDelta
	case sid == 0:
		ev.hint = FrameKey
	}
	if b0&0x08 == 0 { // not B: the frame started in an earlier packet
		return ev
	}
	if off == len(p) {
		ev.valid = partial
		return ev
	}
	key, known, ok := vp9FrameType(p[off:])
	if !ok {
		ev.valid, ev.hint = false, FrameUnknown // no frame_marker
		return ev
	}
	if !known {
		return ev // header cut short
	}
	// The uncompressed header is the frame's own word. On a spatial layer
	// above the base, even a keyframe's picture is coded as a non-key
	// frame predicted from the layer below.
	switch {
	case key && sid == 0:
		ev.frame = FrameKey
		ev.strong = true
	case key:
		ev.strong = true
	default:
		ev.frame = FrameDelta
		if sid == 0 && !pBit {
			ev.hintWrong = true
		}
	}
	return ev
}

// vp9FrameType reads the start of a VP9 uncompressed header (VP9 bitstream
// spec §6.2): frame_marker(2) = 2, profile_low_bit, profile_high_bit,
// reserved_zero (profile 3 only), show_existing_frame, frame_type (0 =
// KEY_FRAME), show_frame, error_resilient_mode, and for a key frame the sync
// code 0x49 0x83 0x42. ok is false when h cannot be a VP9 frame (no frame
// marker, or a key frame without its sync code); known is false when h is
// too short to tell. A shown existing frame is not a key frame.
func vp9FrameType(h []byte) (key, known, ok bool) {
	if len(h) == 0 {
		return false, false, true
	}
	var b uint64 // the first 5 bytes, from the top bit
	for i := 0; i < 5 && i < len(h); i++ {
		b |= uint64(h[i]) << (56 - 8*i)
	}
	n := min(len(h), 5) * 8 // bits read into b
	if b>>62 != 2 {
		return false, false, false
	}
	pos := 4          // bits consumed
	if b>>60&3 == 3 { // profile 3 (low and high bits set)
		pos++
	}
	if b<<pos>>63 != 0 { // show_existing_frame
		return false, true, true
	}
	if b<<(pos+1)>>63 != 0 { // NON_KEY_FRAME
		return false, true, true
	}
	pos += 4 // show_existing_frame, frame_type, show_frame, error_resilient_mode
	if pos+24 > n {
		return true, true, true // sync code cut short
	}
	if b<<pos>>40 != 0x498342 {
		return false, false, false
	}
	return true, true, true
}
