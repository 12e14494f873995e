package classify

import (
	"net/netip"
	"strconv"
)

// Metadata is what Parse learned about one IP packet. It is a fixed-size
// value (104 bytes on 64-bit platforms) that the caller owns and reuses:
// Parse overwrites every field. It holds no pointer into the packet, so the
// packet buffer may be reused as soon as Parse returns. Its only pointers
// are netip.Addr's internal zone handle and one to the immutable *ClassSet
// whose class matched (for the values of label keys).
//
// A field is meaningful only when Has reports its key present (for example
// SrcPort only for TCP, UDP, SCTP, DCCP and UDP-Lite, and never for a
// non-first fragment whose first fragment was not seen).
type Metadata struct {
	// Src and Dst are the IP source and destination addresses (keys src_ip,
	// dst_ip).
	Src, Dst netip.Addr

	present uint64 // bit k set: builtin key k present

	// IPVersion is 4 or 6 (key ip_version).
	IPVersion uint8
	// Proto is the IANA protocol number of the transport: the IPv4 protocol
	// field or the last IPv6 next header after the extension headers (key
	// proto).
	Proto uint8
	// DSCP is the Differentiated Services code point, 0–63 (RFC 2474; key
	// dscp).
	DSCP uint8
	// ECN is the ECN field, 0–3 (RFC 3168; key ecn).
	ECN uint8
	// Length is the IP packet's length in bytes as its header states it: the
	// IPv4 total length, or 40 plus the IPv6 payload length, saturating at
	// 65535 (key length).
	Length uint16
	// SrcPort and DstPort are the transport ports (keys src_port, dst_port).
	SrcPort, DstPort uint16
	// ICMPType and ICMPCode are the ICMP or ICMPv6 type and code (keys
	// icmp_type, icmp_code).
	ICMPType, ICMPCode uint8
	// Fragment is the packet's place in a fragmented datagram (key fragment).
	Fragment FragmentPos

	// RTP is the RTP fixed header (RFC 3550 §5.1; keys rtp_ssrc, rtp_pt,
	// rtp_seq, rtp_ts, rtp_marker).
	RTP RTPHeader
	// Codec is the payload's codec (key codec).
	Codec Codec
	// FrameType tells a keyframe from a delta frame (key frame_type).
	FrameType FrameType
	// TemporalLayer and SpatialLayer are the scalability layer indices the
	// payload signals, 0 = base (keys temporal_layer, spatial_layer).
	TemporalLayer, SpatialLayer uint8

	// L4Offset is the offset in bytes of the transport header in the packet
	// (0 for a non-first fragment). PayloadOffset is the offset of the
	// transport payload (for RTP: of the RTP header), 0 when unknown. They
	// are not keys.
	L4Offset, PayloadOffset uint16

	class   uint8     // index+1 into classes.classes; 0 = no class
	classes *ClassSet // set that matched; nil when class == 0
}

// RTPHeader holds the RTP fixed header fields (RFC 3550 §5.1).
type RTPHeader struct {
	SSRC        uint32 // synchronization source
	Timestamp   uint32 // media clock ticks (90 kHz for video)
	Seq         uint16 // sequence number
	PayloadType uint8  // 0–127
	Marker      bool   // M bit; for video, the last packet of a frame
}

// FrameID identifies the video frame (the object rules keep
// together, docs/rules.md) the packet belongs to: the SSRC in the high 32 bits and the RTP
// timestamp in the low 32 bits. Valid when Has(KeyFrameID).
func (m *Metadata) FrameID() uint64 {
	return uint64(m.RTP.SSRC)<<32 | uint64(m.RTP.Timestamp)
}

// Has reports whether key k has a value in m.
func (m *Metadata) Has(k Key) bool {
	if k < numBuiltinKeys {
		return k != KeyInvalid && m.present&(1<<k) != 0
	}
	if m.class == 0 || k < keyLabelBase {
		return false
	}
	_, ok := m.classes.labelValue(m.class-1, k)
	return ok
}

func (m *Metadata) set(k Key) { m.present |= 1 << k }

// Class returns the name of the traffic class that matched, or "" (key
// class).
func (m *Metadata) Class() string {
	if m.class == 0 {
		return ""
	}
	return m.classes.classes[m.class-1].name
}

// Uint returns the fast, integer form of key k's value, as rules compare it
// after Key.ParseValue compiled the rule's value: numbers as themselves,
// proto as its protocol number, fragment, codec and frame_type as their enum
// values, rtp_marker as 0 or 1, frame_id as FrameID, src_ip/dst_ip as the
// IPv4 address in network order (IPv6 has no integer form), class as the
// class's index in its ClassSet. Label keys have no integer form. ok is false
// when the key is absent or has no integer form.
func (m *Metadata) Uint(k Key) (v uint64, ok bool) {
	if !m.Has(k) {
		return 0, false
	}
	switch k {
	case KeyIPVersion:
		return uint64(m.IPVersion), true
	case KeyProto:
		return uint64(m.Proto), true
	case KeySrcIP, KeyDstIP:
		a := m.Src
		if k == KeyDstIP {
			a = m.Dst
		}
		if !a.Is4() {
			return 0, false
		}
		b := a.As4()
		return uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3]), true
	case KeySrcPort:
		return uint64(m.SrcPort), true
	case KeyDstPort:
		return uint64(m.DstPort), true
	case KeyDSCP:
		return uint64(m.DSCP), true
	case KeyECN:
		return uint64(m.ECN), true
	case KeyLength:
		return uint64(m.Length), true
	case KeyFragment:
		return uint64(m.Fragment), true
	case KeyICMPType:
		return uint64(m.ICMPType), true
	case KeyICMPCode:
		return uint64(m.ICMPCode), true
	case KeyRTPSSRC:
		return uint64(m.RTP.SSRC), true
	case KeyRTPPayloadType:
		return uint64(m.RTP.PayloadType), true
	case KeyRTPSeq:
		return uint64(m.RTP.Seq), true
	case KeyRTPTimestamp:
		return uint64(m.RTP.Timestamp), true
	case KeyRTPMarker:
		if m.RTP.Marker {
			return 1, true
		}
		return 0, true
	case KeyCodec:
		return uint64(m.Codec), true
	case KeyFrameType:
		return uint64(m.FrameType), true
	case KeyFrameID:
		return m.FrameID(), true
	case KeyTemporalLayer:
		return uint64(m.TemporalLayer), true
	case KeySpatialLayer:
		return uint64(m.SpatialLayer), true
	case KeyClass:
		return uint64(m.class - 1), true
	}
	return 0, false
}

// AppendValue appends the canonical string form of key k's value to dst, the
// form rules compare byte for byte (see Key.ParseValue for the forms a rule
// may write). It allocates only if dst must grow. ok is false, and dst is
// returned unchanged, when the key is absent.
//
// Forms: decimal for numbers; proto as a lower-case name (udp, tcp, icmp,
// icmpv6, …) or decimal when it has none; src_ip/dst_ip as netip.Addr prints
// them; fragment as first, middle or last; rtp_marker as true or false; codec
// as its name (h264, vp8, …); frame_type as IDR or P; frame_id as 16
// lower-case hex digits (SSRC then RTP timestamp); class and labels as
// configured.
func (m *Metadata) AppendValue(dst []byte, k Key) ([]byte, bool) {
	if !m.Has(k) {
		return dst, false
	}
	switch k {
	case KeyProto:
		return appendProto(dst, m.Proto), true
	case KeySrcIP:
		return m.Src.AppendTo(dst), true
	case KeyDstIP:
		return m.Dst.AppendTo(dst), true
	case KeyFragment:
		return append(dst, m.Fragment.String()...), true
	case KeyRTPMarker:
		return strconv.AppendBool(dst, m.RTP.Marker), true
	case KeyCodec:
		return append(dst, m.Codec.String()...), true
	case KeyFrameType:
		return append(dst, m.FrameType.String()...), true
	case KeyFrameID:
		return appendHex(dst, m.FrameID(), 16), true
	case KeyClass:
		return append(dst, m.classes.classes[m.class-1].name...), true
	}
	if k >= keyLabelBase {
		v, _ := m.classes.labelValue(m.class-1, k)
		return append(dst, v...), true
	}
	v, _ := m.Uint(k)
	return strconv.AppendUint(dst, v, 10), true
}

const hexDigits = "0123456789abcdef"

func appendHex(dst []byte, v uint64, digits int) []byte {
	for i := digits - 1; i >= 0; i-- {
		dst = append(dst, hexDigits[(v>>(4*uint(i)))&0xf])
	}
	return dst
}

// FragmentPos is a packet's place in a fragmented IP datagram (RFC 791 §3.2,
// RFC 8200 §4.5).
type FragmentPos uint8

// Fragment positions. FragmentNone is the zero value and means "not a
// fragment" (key fragment absent).
const (
	FragmentNone   FragmentPos = iota
	FragmentFirst              // offset 0, more fragments follow
	FragmentMiddle             // offset > 0, more fragments follow
	FragmentLast               // offset > 0, no more fragments
)

var fragmentNames = [...]string{"", "first", "middle", "last"}

// String returns first, middle, last or "".
func (f FragmentPos) String() string {
	if int(f) < len(fragmentNames) {
		return fragmentNames[f]
	}
	return ""
}

// FrameType tells whether a video packet belongs to a keyframe.
type FrameType uint8

// Frame types. FrameUnknown is the zero value (key frame_type absent).
const (
	FrameUnknown FrameType = iota
	// FrameKey is a frame that decodes on its own: an H.264 IDR access unit
	// or one announced by SPS/PPS, an H.265 IRAP (or VPS/SPS/PPS), a VP8 key
	// frame, a VP9 frame with P=0 on its base spatial layer, an AV1 packet
	// starting a new coded video sequence, an MPEG-TS random access point.
	// Its canonical value is IDR.
	FrameKey
	// FrameDelta is a frame predicted from earlier frames. Its canonical
	// value is P.
	FrameDelta
)

// String returns IDR, P or "".
func (f FrameType) String() string {
	switch f {
	case FrameKey:
		return "IDR"
	case FrameDelta:
		return "P"
	}
	return ""
}

var protoNames = map[uint8]string{
	1: "icmp", 2: "igmp", 4: "ipip", 6: "tcp", 17: "udp", 33: "dccp",
	41: "ipv6", 47: "gre", 50: "esp", 51: "ah", 58: "icmpv6", 89: "ospf",
	103: "pim", 112: "vrrp", 132: "sctp", 136: "udplite",
}

var protoByName = func() map[string]uint8 {
	m := make(map[string]uint8, len(protoNames))
	for n, s := range protoNames {
		m[s] = n
	}
	return m
}()

var protoNameTable = func() (t [256]string) {
	for n, s := range protoNames {
		t[n] = s
	}
	return t
}()

func appendProto(dst []byte, p uint8) []byte {
	if s := protoNameTable[p]; s != "" {
		return append(dst, s...)
	}
	return strconv.AppendUint(dst, uint64(p), 10)
}
