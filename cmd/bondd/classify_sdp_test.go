package main

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// opaqueRTPCapture writes a pcap of 200 RTP packets on payload type 96
// whose payloads are random bytes (as SRTP's are): no codec can be told.
func opaqueRTPCapture(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "opaque.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := pcapgo.NewWriter(f)
	if err := w.WriteFileHeader(65536, layers.LinkTypeRaw); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		rtp := make([]byte, 12+400)
		rtp[0], rtp[1] = 0x80, 96
		binary.BigEndian.PutUint16(rtp[2:], uint16(i))
		binary.BigEndian.PutUint32(rtp[4:], uint32(i/4*3000))
		binary.BigEndian.PutUint32(rtp[8:], 0x1234)
		for j := 12; j < len(rtp); j++ {
			rtp[j] = byte(rng.Uint32())
		}
		pkt := make([]byte, 28, 28+len(rtp))
		pkt[0], pkt[8], pkt[9] = 0x45, 64, 17
		binary.BigEndian.PutUint16(pkt[2:], uint16(28+len(rtp)))
		copy(pkt[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
		binary.BigEndian.PutUint16(pkt[20:], 40000)
		binary.BigEndian.PutUint16(pkt[22:], 50000)
		binary.BigEndian.PutUint16(pkt[24:], uint16(8+len(rtp)))
		pkt = append(pkt, rtp...)
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(1_700_000_000, int64(i)*1e6), CaptureLength: len(pkt), Length: len(pkt)}
		if err := w.WritePacket(ci, pkt); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const ffmpegSDP = "v=0\no=- 0 0 IN IP4 127.0.0.1\ns=No Name\nc=IN IP4 127.0.0.1\nt=0 0\na=tool:libavformat\nm=video 50000 RTP/AVP 96\na=rtpmap:96 H265/90000\n"

// TestClassifySummaryUnrecognised checks that --summary names an RTP flow
// on a dynamic payload type whose codec is unknown, and how to fix it, and
// that --sdp (and --rtp-pt) give the codec.
func TestClassifySummaryUnrecognised(t *testing.T) {
	pcap := opaqueRTPCapture(t)
	dir := t.TempDir()
	sdp := writeFile(t, dir, "stream.sdp", ffmpegSDP)
	tests := []struct {
		name      string
		args      []string
		codec     string
		wantNote  bool
		wantInOut string
	}{
		{"no map", nil, "unrecognised", true, "--rtp-pt 96=CODEC or --sdp FILE"},
		{"sdp", []string{"--sdp", sdp}, "h265", false, ""},
		{"rtp-pt wins over sdp", []string{"--sdp", sdp, "--rtp-pt", "96=vp8"}, "vp8", false, ""},
		{"json", []string{"--json"}, "unrecognised", true, `"note":"RTP on dynamic payload type 96`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runClassifyCmd(t, append([]string{"--pcap", pcap, "--summary"}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, " "+tc.codec+" ") && !strings.Contains(out, `"codec":"`+tc.codec+`"`) {
				t.Errorf("codec %s not shown:\n%s", tc.codec, out)
			}
			if got := strings.Contains(out, "unrecognised"); got != tc.wantNote {
				t.Errorf("unrecognised shown %v, want %v:\n%s", got, tc.wantNote, out)
			}
			if !strings.Contains(out, tc.wantInOut) {
				t.Errorf("output lacks %q:\n%s", tc.wantInOut, out)
			}
		})
	}
}

// TestClassifySDPErrors checks that a bad SDP file is reported with its
// line, from --sdp (internal/config tests the config's classify.sdp).
func TestClassifySDPErrors(t *testing.T) {
	dir := t.TempDir()
	bad := writeFile(t, dir, "bad.sdp", "v=0\nm=video 5004 RTP/AVP 96\na=rtpmap:96 H264\n")
	pcap := opaqueRTPCapture(t)
	if _, err := runClassifyCmd(t, "--pcap", pcap, "--sdp", bad); err == nil || !strings.Contains(err.Error(), "bad.sdp:3: expected a=rtpmap:PT NAME/CLOCK") {
		t.Errorf("--sdp: error %v, want bad.sdp:3", err)
	}
}
