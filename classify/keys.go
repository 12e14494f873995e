package classify

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Key names one metadata key. Builtin keys are the constants below; label
// keys (from traffic classes) are numbered from keyLabelBase by the ClassSet
// that defines them (ClassSet.KeyByName). The zero Key is invalid.
type Key uint8

// Builtin keys. The names in comments are the names rules use.
const (
	KeyInvalid        Key = iota
	KeyIPVersion          // ip_version: 4 or 6
	KeyProto              // proto: transport protocol (udp, tcp, …)
	KeySrcIP              // src_ip: source address
	KeyDstIP              // dst_ip: destination address
	KeySrcPort            // src_port: source port
	KeyDstPort            // dst_port: destination port
	KeyDSCP               // dscp: DSCP, 0–63
	KeyECN                // ecn: ECN field, 0–3
	KeyLength             // length: IP packet length, bytes
	KeyFragment           // fragment: first, middle or last
	KeyICMPType           // icmp_type: ICMP/ICMPv6 type
	KeyICMPCode           // icmp_code: ICMP/ICMPv6 code
	KeyRTPSSRC            // rtp_ssrc: RTP SSRC
	KeyRTPPayloadType     // rtp_pt: RTP payload type, 0–127
	KeyRTPSeq             // rtp_seq: RTP sequence number
	KeyRTPTimestamp       // rtp_ts: RTP timestamp, media clock ticks
	KeyRTPMarker          // rtp_marker: RTP marker bit, true or false
	KeyCodec              // codec: h264, h265, vp8, vp9, av1, mp2t, …
	KeyFrameType          // frame_type: IDR (keyframe) or P (delta)
	KeyFrameID            // frame_id: SSRC and RTP timestamp, 16 hex digits
	KeyTemporalLayer      // temporal_layer: 0 = base
	KeySpatialLayer       // spatial_layer: 0 = base
	KeyClass              // class: traffic class name from config

	numBuiltinKeys
)

// keyLabelBase is the first label key; label keys run up to
// keyLabelBase+MaxLabelKeys-1.
const keyLabelBase Key = 128

var keyNames = [numBuiltinKeys]string{
	KeyIPVersion:      "ip_version",
	KeyProto:          "proto",
	KeySrcIP:          "src_ip",
	KeyDstIP:          "dst_ip",
	KeySrcPort:        "src_port",
	KeyDstPort:        "dst_port",
	KeyDSCP:           "dscp",
	KeyECN:            "ecn",
	KeyLength:         "length",
	KeyFragment:       "fragment",
	KeyICMPType:       "icmp_type",
	KeyICMPCode:       "icmp_code",
	KeyRTPSSRC:        "rtp_ssrc",
	KeyRTPPayloadType: "rtp_pt",
	KeyRTPSeq:         "rtp_seq",
	KeyRTPTimestamp:   "rtp_ts",
	KeyRTPMarker:      "rtp_marker",
	KeyCodec:          "codec",
	KeyFrameType:      "frame_type",
	KeyFrameID:        "frame_id",
	KeyTemporalLayer:  "temporal_layer",
	KeySpatialLayer:   "spatial_layer",
	KeyClass:          "class",
}

var keyByName = func() map[string]Key {
	m := make(map[string]Key, numBuiltinKeys)
	for k := KeyInvalid + 1; k < numBuiltinKeys; k++ {
		m[keyNames[k]] = k
	}
	return m
}()

// KeyByName returns the builtin key with the given name. Label keys are
// found with ClassSet.KeyByName.
func KeyByName(name string) (Key, bool) {
	k, ok := keyByName[name]
	return k, ok
}

// BuiltinKeys returns the builtin keys in their documented order (a new
// slice on each call).
func BuiltinKeys() []Key {
	ks := make([]Key, 0, numBuiltinKeys-1)
	for k := KeyInvalid + 1; k < numBuiltinKeys; k++ {
		ks = append(ks, k)
	}
	return ks
}

// IsLabel reports whether k is a label key defined by a ClassSet.
func (k Key) IsLabel() bool { return k >= keyLabelBase && k < keyLabelBase+MaxLabelKeys }

// IsNumeric reports whether k's canonical value (Metadata.AppendValue) is
// always a decimal integer.
func (k Key) IsNumeric() bool {
	switch k {
	case KeyIPVersion, KeySrcPort, KeyDstPort, KeyDSCP, KeyECN, KeyLength, KeyICMPType,
		KeyICMPCode, KeyRTPSSRC, KeyRTPPayloadType, KeyRTPSeq, KeyRTPTimestamp,
		KeyTemporalLayer, KeySpatialLayer:
		return true
	}
	return false
}

// String returns the key's name as rules write it; a label key, whose name
// only its ClassSet knows (ClassSet.KeyName), prints as label#N.
func (k Key) String() string {
	if k > KeyInvalid && k < numBuiltinKeys {
		return keyNames[k]
	}
	if k.IsLabel() {
		return "label#" + strconv.Itoa(int(k-keyLabelBase))
	}
	return "invalid"
}

// ParseValue turns a value as a rule writes it into the integer form that
// Metadata.Uint returns, so that a rule compiler can compare integers at run
// time. Numbers may be decimal or 0x-prefixed hex (a leading 0 is
// not octal). It also accepts names:
// proto udp/tcp/…; fragment first/middle/last; rtp_marker true/false/1/0;
// codec names; frame_type IDR, I, key (keyframe) or P, delta; frame_id as 16
// hex digits (with or without 0x); src_ip/dst_ip as an IPv4 address.
func (k Key) ParseValue(s string) (uint64, error) {
	bad := func(err error) (uint64, error) {
		return 0, fmt.Errorf("classify: bad value %q for %s: %w", s, k, err)
	}
	switch k {
	case KeyProto:
		if p, ok := protoByName[strings.ToLower(s)]; ok {
			return uint64(p), nil
		}
		v, err := parseUintMax(s, 255, bad)
		if err != nil {
			names := slices.Sorted(maps.Keys(protoByName))
			return bad(fmt.Errorf("want a protocol name (%s) or a number from 0 to 255", strings.Join(names, ", ")))
		}
		return v, nil
	case KeySrcIP, KeyDstIP:
		var b [4]byte
		parts := strings.Split(s, ".")
		if len(parts) != 4 {
			return bad(ErrNoIntegerForm)
		}
		for i, p := range parts {
			v, err := strconv.ParseUint(p, 10, 8)
			if err != nil {
				return bad(err)
			}
			b[i] = byte(v)
		}
		return uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3]), nil
	case KeyFragment:
		for i, n := range fragmentNames {
			if i > 0 && strings.EqualFold(n, s) {
				return uint64(i), nil
			}
		}
		return bad(errors.New("want first, middle or last"))
	case KeyRTPMarker:
		v, err := strconv.ParseBool(s)
		if err != nil {
			return bad(errors.New("want true or false"))
		}
		if v {
			return 1, nil
		}
		return 0, nil
	case KeyCodec:
		c, ok := CodecByName(s)
		if !ok {
			return bad(errors.New("unknown codec"))
		}
		return uint64(c), nil
	case KeyFrameType:
		switch strings.ToLower(s) {
		case "idr", "i", "key", "keyframe":
			return uint64(FrameKey), nil
		case "p", "delta":
			return uint64(FrameDelta), nil
		}
		return bad(errors.New("want IDR, I, key or keyframe (a keyframe), or P or delta"))
	case KeyFrameID:
		s = strings.TrimPrefix(strings.ToLower(s), "0x")
		v, err := strconv.ParseUint(s, 16, 64)
		if err != nil {
			return bad(err)
		}
		return v, nil
	case KeyIPVersion, KeyDSCP, KeyECN, KeyICMPType, KeyICMPCode, KeyRTPPayloadType,
		KeyTemporalLayer, KeySpatialLayer:
		max := map[Key]uint64{KeyIPVersion: 6, KeyDSCP: 63, KeyECN: 3, KeyRTPPayloadType: 127, KeyTemporalLayer: 7, KeySpatialLayer: 7}[k]
		if max == 0 {
			max = 255
		}
		return parseUintMax(s, max, bad)
	case KeySrcPort, KeyDstPort, KeyLength, KeyRTPSeq:
		return parseUintMax(s, 0xffff, bad)
	case KeyRTPSSRC, KeyRTPTimestamp:
		return parseUintMax(s, 0xffffffff, bad)
	}
	return bad(ErrNoIntegerForm)
}

func parseUintMax(s string, max uint64, bad func(error) (uint64, error)) (uint64, error) {
	base := 10
	if h, ok := strings.CutPrefix(strings.ToLower(s), "0x"); ok {
		s, base = h, 16
	}
	v, err := strconv.ParseUint(s, base, 64)
	if err != nil {
		return bad(fmt.Errorf("want a number from 0 to %d", max))
	}
	if v > max {
		return bad(fmt.Errorf("above %d", max))
	}
	return v, nil
}
