package classify

import "strings"

// Codec is an RTP payload format, or MPEG-TS carried over UDP or RTP.
type Codec uint8

// Codecs. CodecUnknown is the zero value (key codec absent). Keyframe
// detection exists for H264, H265, VP8, VP9, AV1 and MP2T; the others are
// named from the static payload types of RFC 3551 §6 or from configuration.
const (
	CodecUnknown Codec = iota
	CodecH264          // RFC 6184
	CodecH265          // RFC 7798
	CodecVP8           // RFC 7741
	CodecVP9           // RFC 9628
	CodecAV1           // AOMedia "RTP Payload Format for AV1" v1.0
	CodecMP2T          // MPEG-2 transport stream, RFC 2250 (PT 33) or raw over UDP
	CodecH263          // RFC 2190/4629 (PT 34)
	CodecH261          // RFC 4587 (PT 31)
	CodecJPEG          // RFC 2435 (PT 26)
	CodecMPV           // MPEG-1/2 video, RFC 2250 (PT 32)
	CodecPCMU          // G.711 µ-law (PT 0)
	CodecGSM           // PT 3
	CodecG723          // PT 4
	CodecDVI4          // PT 5, 6, 16, 17
	CodecLPC           // PT 7
	CodecPCMA          // G.711 A-law (PT 8)
	CodecG722          // PT 9
	CodecL16           // PT 10, 11
	CodecQCELP         // PT 12
	CodecCN            // comfort noise (PT 13)
	CodecMPA           // MPEG audio (PT 14)
	CodecG728          // PT 15
	CodecG729          // PT 18
	CodecOpus          // RFC 7587, configuration only
	CodecRED           // RFC 2198, configuration only
	CodecFEC           // ULPFEC/FlexFEC, configuration only
	CodecRTX           // RFC 4588 retransmission, configuration only

	numCodecs
)

var codecNames = [numCodecs]string{
	"", "h264", "h265", "vp8", "vp9", "av1", "mp2t", "h263", "h261", "jpeg", "mpv",
	"pcmu", "gsm", "g723", "dvi4", "lpc", "pcma", "g722", "l16", "qcelp", "cn", "mpa",
	"g728", "g729", "opus", "red", "fec", "rtx",
}

// String returns the codec's lower-case name, as rules see it, or "".
func (c Codec) String() string {
	if c < numCodecs {
		return codecNames[c]
	}
	return ""
}

// IsVideo reports whether c carries video (MPEG-TS counts as video).
func (c Codec) IsVideo() bool { return c >= CodecH264 && c <= CodecMPV }

// CodecByName returns the codec with the given name (case-insensitive, also
// as SDP's a=rtpmap spells it: H264, H265/HEVC, VP8, VP9, AV1, MP2T, opus).
func CodecByName(name string) (Codec, bool) {
	n := strings.ToLower(name)
	switch n {
	case "hevc":
		n = "h265"
	case "avc":
		n = "h264"
	case "ulpfec", "flexfec", "flexfec-03":
		n = "fec"
	}
	for c := CodecUnknown + 1; c < numCodecs; c++ {
		if codecNames[c] == n {
			return c, true
		}
	}
	return CodecUnknown, false
}

// staticPT is the codec of each static RTP payload type (RFC 3551 §6,
// Tables 4 and 5); CodecUnknown for unassigned and dynamic ones.
var staticPT = [128]Codec{
	0: CodecPCMU, 3: CodecGSM, 4: CodecG723, 5: CodecDVI4, 6: CodecDVI4,
	7: CodecLPC, 8: CodecPCMA, 9: CodecG722, 10: CodecL16, 11: CodecL16,
	12: CodecQCELP, 13: CodecCN, 14: CodecMPA, 15: CodecG728, 16: CodecDVI4,
	17: CodecDVI4, 18: CodecG729, 26: CodecJPEG, 31: CodecH261, 32: CodecMPV,
	33: CodecMP2T, 34: CodecH263,
}

// sniffable reports whether the codec of payload type pt is learned from the
// payload: dynamic types (96–127, RFC 3551 §3) and the unassigned 35–63,
// which browsers use too (Chrome sends AV1 as 45).
func sniffable(pt uint8) bool { return pt >= 96 || (pt >= 35 && pt <= 63) }

// evidence is what one payload says about its codec and frame.
type evidence struct {
	valid  bool      // consistent with the codec's payload format
	strong bool      // a signature: structure that random bytes almost never have
	frame  FrameType // FrameKey/FrameDelta when the packet says so
	// hint is the frame type a field that packetizers may leave unset says
	// (VP9's P bit): used for a frame no packet said more about, unless
	// the stream showed the field wrong once (hintWrong).
	hint      FrameType
	hintWrong bool
	// startKey hints a keyframe for a stream's first frame only (H.264
	// unregistered user data SEI, which encoders send before their first
	// IDR).
	startKey bool
	// unlikely: allowed by the payload format but not sent by real
	// encoders (H.264 data partitions, H.265 reserved NAL unit types or a
	// layer above 0), so sniffing rules the codec out on it.
	unlikely bool
	hasTL    bool
	hasSL    bool
	tl, sl   uint8
}

// parsePayload runs codec c's payload parser. partial means the payload is
// cut short (first IP fragment, truncated capture), so a length that runs
// past its end is not a contradiction.
func parsePayload(c Codec, p []byte, partial bool) evidence {
	switch c {
	case CodecH264:
		return parseH264(p, partial)
	case CodecH265:
		return parseH265(p, partial)
	case CodecVP8:
		return parseVP8(p, partial)
	case CodecVP9:
		return parseVP9(p, partial)
	case CodecAV1:
		return parseAV1(p, partial)
	}
	return evidence{}
}

// sniffCodecs are the codecs whose payload formats sniffing tells apart, in
// the order of sniffState's candidate bits.
var sniffCodecs = [...]Codec{CodecH264, CodecH265, CodecVP8, CodecVP9, CodecAV1, CodecMP2T}

const allSniffCandidates = 1<<len(sniffCodecs) - 1
