package classify

// AV1 over RTP, AOMedia "RTP Payload Format for AV1" v1.0 §4.4. The
// aggregation header is Z Y W(2) N reserved(3): Z = the first OBU element
// continues a fragment, W = element count (0: each element has a LEB128
// length; 1–3: all but the last have one), N = the packet is the first of a
// new coded video sequence, i.e. a keyframe. Each element that is not a
// continuation opens with an OBU header (AV1 spec §5.3.2): forbidden(1)
// type(4) extension(1) has_size(1) reserved(1), and with extension set a
// byte temporal_id(3) spatial_id(2) reserved(3). A keyframe is N = 1, or a
// frame header that says KEY_FRAME; INTER and SWITCH frame headers are
// delta frames. Packets that carry no frame header inherit the type of
// their frame (same RTP timestamp).

const (
	av1OBUSequenceHeader = 1
	av1OBUFrameHeader    = 3
	av1OBUFrame          = 6
	av1OBUTileList       = 8
	av1OBUPadding        = 15
)

// av1OBU checks the OBU header at the start of obu (an element, possibly
// cut short), takes the layer ids from its extension, and for a frame header
// or frame OBU adds the frame type (AV1 spec §5.9.2, uncompressed_header
// with reduced_still_picture_header = 0, as real-time streams use):
// show_existing_frame(1) frame_type(2), KEY_FRAME = 0, INTER_FRAME = 1,
// INTRA_ONLY_FRAME = 2, SWITCH_FRAME = 3.
func av1OBU(obu []byte, ev *evidence) (obuType byte, ok bool) {
	h := obu[0]
	t := h >> 3 & 0x0f
	if h&0x81 != 0 || t == 0 || (t > av1OBUTileList && t != av1OBUPadding) {
		return t, false
	}
	off := 1
	if h&0x04 != 0 { // extension
		if len(obu) < 2 {
			return t, true
		}
		ev.hasTL, ev.tl = true, obu[1]>>5
		ev.hasSL, ev.sl = true, obu[1]>>3&0x03
		off = 2
	}
	if t != av1OBUFrameHeader && t != av1OBUFrame {
		return t, true
	}
	if h&0x02 != 0 { // has_size: skip obu_size
		_, n, ok := leb128(obu[min(off, len(obu)):])
		if !ok {
			return t, true
		}
		off += n
	}
	if off >= len(obu) || obu[off]&0x80 != 0 { // show_existing_frame
		return t, true
	}
	switch obu[off] >> 5 & 0x03 {
	case 0:
		ev.frame = FrameKey
	case 1, 3:
		if ev.frame == FrameUnknown {
			ev.frame = FrameDelta
		}
	}
	return t, true
}

// leb128 reads an unsigned LEB128 of at most 8 bytes (AV1 spec §4.10.5).
func leb128(p []byte) (v uint64, n int, ok bool) {
	for n < len(p) && n < 8 {
		b := p[n]
		v |= uint64(b&0x7f) << (7 * uint(n))
		n++
		if b&0x80 == 0 {
			return v, n, true
		}
	}
	return 0, n, false
}

func parseAV1(p []byte, partial bool) (ev evidence) {
	if len(p) < 2 || p[0]&0x07 != 0 {
		return ev
	}
	z, w, n := p[0]&0x80 != 0, int(p[0]>>4&0x03), p[0]&0x08 != 0
	if z && n {
		return ev // a new sequence cannot start inside a fragment
	}
	off, elems := 1, 0
	first := byte(0)
	for off < len(p) && elems < MaxAggregationUnits {
		size := len(p) - off
		if w == 0 || elems < w-1 {
			v, m, ok := leb128(p[off:])
			if !ok {
				ev.valid = partial
				return ev
			}
			off += m
			if v == 0 || v > uint64(len(p)-off) {
				ev.valid = partial && v != 0
				return ev
			}
			size = int(v)
		}
		if !(elems == 0 && z) {
			t, ok := av1OBU(p[off:off+size], &ev)
			if !ok {
				return ev
			}
			if elems == 0 {
				first = t
			}
		}
		elems++
		off += size
		if w != 0 && elems == w {
			break
		}
	}
	if w != 0 && elems < w && !partial {
		return ev
	}
	ev.valid = elems > 0
	if n {
		ev.frame = FrameKey
		ev.strong = first == av1OBUSequenceHeader && off == len(p)
	}
	return ev
}
