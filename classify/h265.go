package classify

// H.265 over RTP, RFC 7798. The payload header is the two-byte NAL unit
// header (§1.1.4): F(1) Type(6) LayerId(6) TID(3), TID = TemporalId+1 ≠ 0.
// Types 0–40 are single NAL units, 48 an aggregation packet (AP, §4.4.2),
// 49 a fragmentation unit (FU, §4.4.3), 50 PACI (§4.4.4).

const (
	h265TrailN    = 0
	h265RASLR     = 9 // 0–9: TRAIL, TSA, STSA, RADL, RASL (non-IRAP VCL)
	h265BLAWLP    = 16
	h265CRANUT    = 21 // 16–21: IRAP (BLA, IDR, CRA)
	h265VPS       = 32
	h265SPS       = 33
	h265PPS       = 34
	h265LastValid = 40
	h265AP        = 48
	h265FU        = 49
	h265PACI      = 50
)

// h265Type evidence: IRAP pictures and the parameter sets that announce
// them are keyframes, other VCL NAL units are delta frames.
func h265Type(t byte, ev *evidence) {
	switch {
	case t >= h265BLAWLP && t <= h265CRANUT, t >= h265VPS && t <= h265PPS:
		ev.frame = FrameKey
	case t <= h265RASLR:
		if ev.frame == FrameUnknown {
			ev.frame = FrameDelta
		}
	}
}

// h265Header checks a two-byte NAL unit header: F = 0 and TID ≠ 0.
// LayerId is not checked (layered HEVC sets it).
func h265Header(b0, b1 byte) bool { return b0&0x80 == 0 && b1&0x07 != 0 }

// h265Unlikely reports NAL unit types real encoders do not send (the
// reserved 10–15, 22–31 and 41–47, H.265 Table 7-1) and a layer above 0
// (layered HEVC), which codec sniffing takes as a contradiction.
func h265Unlikely(b0, b1 byte) bool {
	t := b0 >> 1 & 0x3f
	return t >= 10 && t <= 15 || t >= 22 && t <= 31 || t >= 41 && t <= 47 || (b0&1)<<5|b1>>3 != 0
}

// h265Signature reports a single NAL unit, or the start of a fragmented one
// (its type t), that random bytes almost never are: an IRAP picture with
// LayerId 0 and TemporalId 0 (header 2t 01, as an IRAP must have), or a
// VPS whose vps_reserved_0xffff_16bits are there (H.265 §7.3.2.1).
func h265Signature(p []byte, t byte) bool {
	switch {
	case t >= h265BLAWLP && t <= h265CRANUT:
		return p[1] == 0x01 && p[0]&1 == 0
	case t == h265VPS:
		return p[1] == 0x01 && p[0]&1 == 0 && len(p) >= 6 && p[4] == 0xff && p[5] == 0xff
	}
	return false
}

func parseH265(p []byte, partial bool) (ev evidence) {
	if len(p) < 2 || !h265Header(p[0], p[1]) {
		return ev
	}
	t := p[0] >> 1 & 0x3f
	// The payload header's TID is the lowest TID of the NAL units it
	// carries (§4.4.2), so it is the packet's temporal layer.
	ev.hasTL, ev.tl = true, p[1]&0x07-1
	ev.unlikely = h265Unlikely(p[0], p[1])
	switch {
	case t <= h265LastValid:
		ev.valid = true
		h265Type(t, &ev)
		ev.strong = h265Signature(p, t)
	case t == h265AP:
		// Units: size(2) + NAL unit; DONL/DOND are absent unless
		// sprop-max-don-diff > 0 in SDP, which bondd cannot see.
		off, units := 2, 0
		for off < len(p) && units < MaxAggregationUnits {
			if off+2 > len(p) {
				ev.valid = partial
				return ev
			}
			size := int(p[off])<<8 | int(p[off+1])
			off += 2
			if size < 2 || off+2 > len(p) {
				ev.valid = partial && size >= 2
				return ev
			}
			if !h265Header(p[off], p[off+1]) {
				return ev
			}
			h265Type(p[off]>>1&0x3f, &ev)
			units++
			off += size
		}
		if off > len(p) && !partial {
			return ev // the units read so far keep their evidence
		}
		ev.valid = units > 0
		ev.strong = units >= 2 && off == len(p)
	case t == h265FU:
		// FU header: S(1) E(1) FuType(6).
		if len(p) < 3 {
			return ev
		}
		fh := p[2]
		ft := fh & 0x3f
		if fh&0xc0 == 0xc0 || ft > h265LastValid {
			return ev
		}
		ev.valid = true
		if fh&0x80 != 0 {
			h265Type(ft, &ev)
			ev.strong = ft >= h265BLAWLP && ft <= h265CRANUT && h265Signature(p, ft)
		}
		if ft >= 10 && ft <= 15 || ft >= 22 && ft <= 31 {
			ev.unlikely = true
		}
	case t == h265PACI:
		ev.valid = len(p) >= 4
	}
	return ev
}
