package classify

import (
	"errors"
	"maps"
	"strings"
	"testing"
)

func TestParseSDP(t *testing.T) {
	tests := []struct {
		name string
		sdp  string
		want map[uint8]Codec
		err  string // substring of the error; "" for none
	}{
		{name: "ffmpeg H.264", sdp: "v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=No Name\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\na=tool:libavformat 59.27.100\r\nm=video 5004 RTP/AVP 96\r\na=rtpmap:96 H264/90000\r\na=fmtp:96 packetization-mode=1\r\n",
			want: map[uint8]Codec{96: CodecH264}},
		{name: "ffmpeg MPEG-TS over RTP (static PT 33)", sdp: "v=0\nm=video 5004 RTP/AVP 33\n", want: map[uint8]Codec{33: CodecMP2T}},
		{name: "video and audio, unknown audio name left out", sdp: "v=0\nm=video 5004 RTP/AVP 96 97\na=rtpmap:96 H265/90000\na=rtpmap:97 VP9/90000\nm=audio 5006 RTP/AVP 98 0\na=rtpmap:98 MPEG4-GENERIC/48000/2\n\n",
			want: map[uint8]Codec{96: CodecH265, 97: CodecVP9, 0: CodecPCMU}},
		{name: "static PT redefined", sdp: "v=0\nm=video 5004 RTP/AVP 33\na=rtpmap:33 H264/90000\n", want: map[uint8]Codec{33: CodecH264}},
		{name: "same mapping twice (bundle)", sdp: "v=0\na=rtpmap:96 VP8/90000\na=rtpmap:96 VP8/90000\n", want: map[uint8]Codec{96: CodecVP8}},
		{name: "non-RTP m= line ignored", sdp: "v=0\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\n", want: map[uint8]Codec{}},
		{name: "empty", sdp: "", want: map[uint8]Codec{}},
		{name: "not TYPE=VALUE", sdp: "v=0\nhello\n", err: "s.sdp:2: expected a line TYPE=VALUE"},
		{name: "rtpmap without clock", sdp: "v=0\n\na=rtpmap:96 H264\n", err: "s.sdp:3: expected a=rtpmap:PT NAME/CLOCK"},
		{name: "rtpmap PT 200", sdp: "a=rtpmap:200 H264/90000\n", err: "s.sdp:1: expected a=rtpmap:PT NAME/CLOCK with PT 0-127"},
		{name: "rtpmap PT 72", sdp: "a=rtpmap:72 H264/90000\n", err: "s.sdp:1: payload type 72 cannot be told from RTCP"},
		{name: "conflict", sdp: "a=rtpmap:96 H264/90000\na=rtpmap:96 opus/48000/2\n", err: "s.sdp:2: payload type 96 is mapped again to opus, differently from line 1"},
		{name: "bad m= format", sdp: "m=video 5004 RTP/AVP x\n", err: `s.sdp:1: expected RTP payload types 0-127 in the m= line, got "x"`},
		{name: "short m= line", sdp: "m=video 5004\n", err: "s.sdp:1: expected m=MEDIA PORT PROTO FMT"},
		{name: "too large", sdp: strings.Repeat("a=x\n", MaxSDPBytes/4+1), err: "s.sdp: larger than 65536 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSDP("s.sdp", strings.NewReader(tt.sdp))
			if tt.err != "" {
				var se *SDPError
				if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.As(err, &se) {
					t.Fatalf("error %v, want an *SDPError containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
			// What ParseSDP returns, New accepts.
			if _, err := New(Options{PayloadTypes: got}); err != nil {
				t.Errorf("New refuses the map: %v", err)
			}
		})
	}
	if _, err := LoadSDP("/nonexistent/x.sdp"); err == nil || !strings.Contains(err.Error(), "/nonexistent/x.sdp: cannot read the SDP file") {
		t.Errorf("LoadSDP of a missing file: %v", err)
	}
}

// FuzzParseSDP: any input gives a map New accepts or an *SDPError, never a
// panic.
func FuzzParseSDP(f *testing.F) {
	f.Add("v=0\nm=video 5004 RTP/AVP 96 33\na=rtpmap:96 H264/90000\n")
	f.Add("a=rtpmap:97 opus/48000/2\r\na=rtpmap:97 opus/48000/2\r\n")
	f.Add("m=video 0 RTP/SAVPF 45\na=rtpmap:45 AV1/90000\n")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseSDP("fuzz.sdp", strings.NewReader(s))
		if err != nil {
			var se *SDPError
			if !errors.As(err, &se) {
				t.Fatalf("error %T, want *SDPError", err)
			}
			return
		}
		if _, err := New(Options{PayloadTypes: m}); err != nil {
			t.Fatalf("New refuses %v: %v", m, err)
		}
	})
}
