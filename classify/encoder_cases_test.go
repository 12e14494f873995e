package classify

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// rtpCase is one generated RTP capture: how it is encoded and payloaded.
type rtpCase struct {
	name  string
	codec Codec
	// ffmpeg: the encoder arguments (ffmpeg then sends RTP itself);
	// GStreamer: gstEnc encodes, gstParse and gstPay payload.
	ffmpeg                   []string
	gstEnc, gstParse, gstPay string
	pktSize                  int // ffmpeg's RTP packet size in bytes
}

var rtpCases = []rtpCase{
	{name: "ffmpeg-x264-g30-bf0", codec: CodecH264, pktSize: 1200,
		ffmpeg: []string{"-c:v", "libx264", "-g", "30", "-bf", "0"}},
	{name: "ffmpeg-x264-g30-bframes", codec: CodecH264, pktSize: 1200,
		ffmpeg: []string{"-c:v", "libx264", "-g", "30", "-bf", "3"}},
	{name: "ffmpeg-x264-g60-slices4-inband", codec: CodecH264, pktSize: 1200,
		ffmpeg: []string{"-c:v", "libx264", "-g", "60", "-slices", "4", "-x264-params", "repeat-headers=1"}},
	{name: "ffmpeg-x264-g15-pkt500", codec: CodecH264, pktSize: 500,
		ffmpeg: []string{"-c:v", "libx264", "-g", "15", "-bf", "0", "-b:v", "2M"}},
	{name: "ffmpeg-x265-g30-bframes", codec: CodecH265, pktSize: 1200,
		ffmpeg: []string{"-c:v", "libx265", "-x265-params", "keyint=30:log-level=error"}},
	{name: "ffmpeg-x265-g60-bf0-slices4", codec: CodecH265, pktSize: 1200,
		ffmpeg: []string{"-c:v", "libx265", "-bf", "0", "-x265-params", "keyint=60:slices=4:log-level=error"}},
	{name: "ffmpeg-vpx-vp8-g30", codec: CodecVP8, pktSize: 1200,
		ffmpeg: []string{"-c:v", "libvpx", "-g", "30", "-b:v", "1M", "-deadline", "realtime", "-cpu-used", "8"}},
	{name: "ffmpeg-vpx-vp9-g30-realtime", codec: CodecVP9, pktSize: 1200,
		ffmpeg: []string{"-c:v", "libvpx-vp9", "-g", "30", "-b:v", "1M", "-deadline", "realtime", "-cpu-used", "8"}},
	{name: "ffmpeg-vpx-vp9-g60-altref", codec: CodecVP9, pktSize: 1200,
		ffmpeg: []string{"-c:v", "libvpx-vp9", "-g", "60", "-b:v", "1M", "-deadline", "good", "-cpu-used", "5", "-auto-alt-ref", "1", "-lag-in-frames", "16"}},
	{name: "gst-x264enc-bf0-rtph264pay", codec: CodecH264,
		gstEnc: "x264enc key-int-max=30 bframes=0 speed-preset=ultrafast ! h264parse", gstParse: "h264parse", gstPay: "rtph264pay mtu=1200"},
	{name: "gst-x264enc-bframes-rtph264pay-config-interval", codec: CodecH264,
		gstEnc: "x264enc key-int-max=30 bframes=2 speed-preset=ultrafast ! h264parse", gstParse: "h264parse", gstPay: "rtph264pay mtu=1200 config-interval=-1"},
	{name: "gst-x265enc-rtph265pay", codec: CodecH265,
		gstEnc: "x265enc key-int-max=30 speed-preset=ultrafast ! h265parse", gstParse: "h265parse", gstPay: "rtph265pay mtu=1200"},
	{name: "gst-vp8enc-rtpvp8pay", codec: CodecVP8,
		gstEnc: "vp8enc keyframe-max-dist=30 deadline=1", gstParse: "identity", gstPay: "rtpvp8pay mtu=1200"},
	{name: "gst-vp9enc-rtpvp9pay", codec: CodecVP9,
		gstEnc: "vp9enc keyframe-max-dist=30 deadline=1 cpu-used=8", gstParse: "identity", gstPay: "rtpvp9pay mtu=1200"},
}

// TestEncoderRTP checks keyframe marking per packet on RTP captures made by
// ffmpeg and GStreamer, with and without a payload-type map (ffmpeg's own
// SDP file through LoadSDP; for GStreamer, PT 96 as its payloaders use).
// Ground truth: ffprobe's keyframe flag of each encoded frame, checked
// against the decoded bitstream, mapped to the RTP packets by frame order.
func TestEncoderRTP(t *testing.T) {
	if testing.Short() {
		t.Skip("encodes video: not in -short")
	}
	needTools(t, "ffmpeg", "ffprobe")
	for _, tc := range rtpCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var file string
			var rtp [][]byte
			ptMap := map[uint8]Codec{96: tc.codec}
			if tc.ffmpeg != nil {
				file = encodeFFmpeg(t, dir, "src.mkv", tc.ffmpeg...)
				var sdp string
				rtp, sdp = rtpFFmpeg(t, file, tc.pktSize)
				m, err := LoadSDP(sdp)
				if err != nil {
					t.Fatal(err)
				}
				if m[96] != tc.codec {
					t.Fatalf("SDP maps 96 to %v, want %v", m[96], tc.codec)
				}
				ptMap = m
			} else {
				needGstElements(t, strings.Fields(tc.gstEnc)[0], strings.Fields(tc.gstPay)[0], "rtpstreampay", "matroskamux", "matroskademux")
				file = encodeGst(t, dir, "src.mkv", tc.gstEnc)
				rtp = rtpGst(t, file, tc.gstParse, tc.gstPay)
			}
			frames := probePackets(t, file)
			checkBitstream(t, file, frames)
			truth := rtpTruth(t, rtp, frames)
			pcap := writePcap(t, filepath.Join(dir, "rtp.pcap"), rtp)
			for _, mode := range []string{"no map", "map"} {
				opts := Options{}
				if mode == "map" {
					opts.PayloadTypes = ptMap
				}
				mds := classifyPcap(t, pcap, opts)
				scoreRTP(t, mds, rtp, truth, tc.codec, false).check(t, tc.name+" | "+mode)
			}
			// Joined mid-stream: the capture starts with the sixth frame,
			// after the first keyframe. Packets before the codec is learned
			// (no keyframe among them) may have no codec.
			j := joinIndex(rtp, 5)
			pcap = writePcap(t, filepath.Join(dir, "rtp-joined.pcap"), rtp[j:])
			for _, mode := range []string{"no map", "map"} {
				opts := Options{}
				if mode == "map" {
					opts.PayloadTypes = ptMap
				}
				mds := classifyPcap(t, pcap, opts)
				scoreRTP(t, mds, rtp[j:], truth[j:], tc.codec, true).check(t, tc.name+" joined at frame 6 | "+mode)
			}
		})
	}
}

// joinIndex returns the index of the first packet of frame n (0-based, a
// new RTP timestamp starts a frame).
func joinIndex(rtp [][]byte, n int) int {
	k := 0
	for i := 1; i < len(rtp); i++ {
		if binary.BigEndian.Uint32(rtp[i][4:]) != binary.BigEndian.Uint32(rtp[i-1][4:]) {
			if k++; k == n {
				return i
			}
		}
	}
	return 0
}

// TestEncoderMPEGTS checks H.264 in MPEG-TS from ffmpeg, raw over UDP and
// over RTP (PT 33): every random access point found, and every datagram
// carrying a part of a keyframe's PES marked, nothing else. Ground truth:
// ffprobe's PES positions in the transport stream and the keyframe flags of
// the source frames.
func TestEncoderMPEGTS(t *testing.T) {
	if testing.Short() {
		t.Skip("encodes video: not in -short")
	}
	needTools(t, "ffmpeg", "ffprobe")
	for _, tc := range []struct {
		name string
		rtp  bool
		enc  []string
	}{
		{"ffmpeg-x264-g30-bframes-ts-udp", false, []string{"-c:v", "libx264", "-g", "30"}},
		{"ffmpeg-x264-g15-bf0-ts-udp", false, []string{"-c:v", "libx264", "-g", "15", "-bf", "0", "-b:v", "2M"}},
		{"ffmpeg-x264-g30-bframes-ts-rtp", true, []string{"-c:v", "libx264", "-g", "30"}},
		{"ffmpeg-x264-g60-slices4-ts-rtp", true, []string{"-c:v", "libx264", "-g", "60", "-slices", "4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file := encodeFFmpeg(t, dir, "src.mkv", tc.enc...)
			src := probePackets(t, file)
			checkBitstream(t, file, src)
			dgrams := tsFFmpeg(t, file, tc.rtp)
			truth, rapDgram := tsTruth(t, dir, dgrams, tc.rtp, src)
			pcap := writePcap(t, filepath.Join(dir, "ts.pcap"), dgrams)
			for _, mode := range []string{"no map", "map"} {
				opts := Options{}
				if mode == "map" {
					opts.PayloadTypes = map[uint8]Codec{33: CodecMP2T}
				}
				mds := classifyPcap(t, pcap, opts)
				var s score
				for i, md := range mds {
					if md.Codec != CodecMP2T {
						t.Errorf("datagram %d: codec %v, want mp2t", i, md.Codec)
					}
					s.packets++
					got := md.FrameType == FrameKey
					if truth[i] {
						s.keyPkts++
					}
					switch {
					case truth[i] && !got:
						s.missed++
					case !truth[i] && got:
						s.falseKey++
					}
				}
				s.keyFrames = len(rapDgram)
				for _, d := range rapDgram {
					if mds[d].FrameType == FrameKey {
						s.foundKeyFrames++
					}
				}
				s.check(t, tc.name+" | "+mode)
			}
		})
	}
}

// tsTruth finds, for each datagram, whether it carries a TS packet of a
// keyframe's PES on the video PID, and the datagram where each keyframe's
// PES starts. The datagrams' TS bytes are written to a file that ffprobe
// reads for the video PID and each PES's byte position; the k-th PES is the
// k-th source frame (ffmpeg -c copy), whose flag says keyframe.
func tsTruth(t *testing.T, dir string, dgrams [][]byte, overRTP bool, src []probePkt) (key []bool, rapDgram []int) {
	var ts []byte
	var owner []int // datagram of each TS packet
	for i, d := range dgrams {
		if overRTP {
			if len(d) < 12 || d[1]&0x7f != 33 {
				t.Fatalf("datagram %d: not RTP PT 33", i)
			}
			d = d[12+4*int(d[0]&0x0f):]
		}
		if len(d)%tsPacketSize != 0 {
			t.Fatalf("datagram %d: %d bytes, not whole TS packets", i, len(d))
		}
		ts = append(ts, d...)
		for range len(d) / tsPacketSize {
			owner = append(owner, i)
		}
	}
	path := filepath.Join(dir, "capture.ts")
	if err := os.WriteFile(path, ts, 0o644); err != nil {
		t.Fatal(err)
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(run(t, "ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=id", "-of", "csv=p=0", path))), "\n")
	pid64, err := strconv.ParseUint(strings.TrimPrefix(id, "0x"), 16, 13)
	if err != nil {
		t.Fatalf("video PID %q: %v", id, err)
	}
	pid := uint16(pid64)
	pes := probePackets(t, path)
	if len(pes) != len(src) {
		t.Fatalf("%d PES in the transport stream, %d source frames", len(pes), len(src))
	}
	key = make([]bool, len(dgrams))
	k := -1
	for n := 0; n < len(owner); n++ {
		off := int64(n * tsPacketSize)
		p := ts[off:]
		if binary.BigEndian.Uint16(p[1:])&0x1fff != pid {
			continue
		}
		for k+1 < len(pes) && pes[k+1].pos <= off {
			k++
			if pes[k].pos != off || p[1]&0x40 == 0 {
				t.Fatalf("PES %d at byte %d is not a PUSI packet of PID %d", k, pes[k].pos, pid)
			}
			if src[k].key {
				rapDgram = append(rapDgram, owner[n])
			}
		}
		if k >= 0 && src[k].key {
			key[owner[n]] = true
		}
	}
	return key, rapDgram
}
