package classify

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// MaxSDPBytes bounds the SDP description ParseSDP reads (bytes); a longer
// one is an error.
const MaxSDPBytes = 64 << 10

// SDPError is a problem in an SDP description, at a line. ParseSDP and
// LoadSDP return it.
type SDPError struct {
	File string // the name given to ParseSDP, or LoadSDP's path
	Line int    // 1-based; 0 when the problem is not on one line
	Msg  string // what is wrong and what is expected
}

// Error formats e as file:line: msg.
func (e *SDPError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// LoadSDP reads the SDP file at path and returns its payload-type map (see
// ParseSDP). The error is an *SDPError.
func LoadSDP(path string) (map[uint8]Codec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &SDPError{File: path, Msg: fmt.Sprintf("cannot read the SDP file: %v", err)}
	}
	defer f.Close()
	return ParseSDP(path, f)
}

// ParseSDP reads an SDP session description (RFC 8866), as encoders write
// it (ffmpeg -sdp_file, GStreamer, a WebRTC offer), and returns the map from
// RTP payload type to codec that Options.PayloadTypes takes:
//
//   - every a=rtpmap:PT NAME/CLOCK[/PARAMS] attribute (RFC 8866 §6.6) whose
//     encoding name classify knows (CodecByName: H264, H265, VP8, VP9, AV1,
//     MP2T, opus, …) maps PT to that codec; other encoding names (audio
//     formats classify does not name, telephone-event) are left out;
//   - every static payload type (RFC 3551 §6) listed in an RTP m= line and
//     not redefined by an a=rtpmap maps to its static codec (ffmpeg's
//     MPEG-TS over RTP: m=video 5004 RTP/AVP 33).
//
// name is used in errors. Lines are TYPE=VALUE, LF or CRLF terminated;
// empty lines are skipped. A line that is not TYPE=VALUE, a malformed
// rtpmap, a payload type above 127 or in 72–76 (which RTCP aliases, RFC
// 5761 §4), one payload type given two different codecs, or more than
// MaxSDPBytes is an *SDPError with the line.
func ParseSDP(name string, r io.Reader) (map[uint8]Codec, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxSDPBytes+1))
	if err != nil {
		return nil, &SDPError{File: name, Msg: fmt.Sprintf("cannot read the SDP description: %v", err)}
	}
	if len(data) > MaxSDPBytes {
		return nil, &SDPError{File: name, Msg: fmt.Sprintf("larger than %d bytes; expected an SDP description", MaxSDPBytes)}
	}
	fail := func(line int, format string, args ...any) (map[uint8]Codec, error) {
		return nil, &SDPError{File: name, Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	m := map[uint8]Codec{}
	mapped := map[uint8]int{} // payload type → line of its rtpmap
	var static []uint8        // static payload types of RTP m= lines
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), MaxSDPBytes)
	for line := 1; sc.Scan(); line++ {
		l := strings.TrimSuffix(sc.Text(), "\r")
		if l == "" {
			continue
		}
		if len(l) < 2 || l[1] != '=' || l[0] < 'a' || l[0] > 'z' {
			return fail(line, "expected a line TYPE=VALUE with a lower-case letter as TYPE (RFC 8866 §5), got %q", clip(l))
		}
		switch v := l[2:]; l[0] {
		case 'm':
			// m=<media> <port> <proto> <fmt> ... (RFC 8866 §5.14)
			f := strings.Fields(v)
			if len(f) < 4 {
				return fail(line, "expected m=MEDIA PORT PROTO FMT..., got %q", clip(l))
			}
			if !strings.Contains(f[2], "RTP/") {
				continue
			}
			for _, s := range f[3:] {
				pt, err := strconv.ParseUint(s, 10, 8)
				if err != nil || pt > 127 {
					return fail(line, "expected RTP payload types 0-127 in the m= line, got %q", s)
				}
				if staticPT[pt] != CodecUnknown {
					static = append(static, uint8(pt))
				}
			}
		case 'a':
			attr, ok := strings.CutPrefix(v, "rtpmap:")
			if !ok {
				continue
			}
			ptStr, enc, ok := strings.Cut(attr, " ")
			pt, err := strconv.ParseUint(ptStr, 10, 8)
			if !ok || err != nil || pt > 127 {
				return fail(line, "expected a=rtpmap:PT NAME/CLOCK with PT 0-127 (RFC 8866 §6.6), got %q", clip(l))
			}
			if pt >= 72 && pt <= 76 {
				return fail(line, "payload type %d cannot be told from RTCP (RFC 5761 §4); expected 0-71 or 77-127", pt)
			}
			encName, clock, ok := strings.Cut(strings.TrimSpace(enc), "/")
			clock, _, _ = strings.Cut(clock, "/")
			if hz, err := strconv.ParseUint(clock, 10, 32); !ok || encName == "" || err != nil || hz == 0 {
				return fail(line, "expected a=rtpmap:PT NAME/CLOCK with a clock rate in Hz (RFC 8866 §6.6), got %q", clip(l))
			}
			codec, known := CodecByName(encName)
			if first, dup := mapped[uint8(pt)]; dup {
				if prev, had := m[uint8(pt)]; had != known || prev != codec {
					return fail(line, "payload type %d is mapped again to %s, differently from line %d; classify maps a payload type to one codec on every port", pt, encName, first)
				}
				continue
			}
			mapped[uint8(pt)] = line
			if known {
				m[uint8(pt)] = codec
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fail(0, "cannot read the SDP description: %v", err)
	}
	for _, pt := range static {
		if _, redefined := mapped[pt]; !redefined {
			m[pt] = staticPT[pt]
		}
	}
	return m, nil
}

// clip shortens a line quoted in an error.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
