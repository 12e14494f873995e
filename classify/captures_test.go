package classify

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Tests on the real captures described in the data README (section 3). They
// skip when the shared data folder is absent.

var allCaptures = []string{
	"video/str0m-h264.pcap",
	"video/str0m-vp8.pcap",
	"video/str0m-vp9.pcap",
	"video/str0m-av1.pcap",
	"video/tau-wilson-h265.pcap",
	"mpegts/tsduck-test-162-ts-over-rtp.pcap",
	"mpegts/tsduck-test-176-ts-over-udp.pcapng",
	"mpegts/ndpi-mpegts.pcap",
	"audio/ndpi-sip.pcap",
	"audio/ndpi-rtp.pcapng",
	"dscp-and-webrtc/ndpi-skinny.pcap",
	"dscp-and-webrtc/ndpi-stun_google_meet.pcapng",
	"dscp-and-webrtc/ndpi-stun_signal.pcapng",
	"dscp-and-webrtc/ndpi-wa_video.pcap",
}

// classified is one IP packet of a capture with its metadata.
type classified struct {
	index  int
	md     Metadata
	reason Reason
}

func classifyCapture(t *testing.T, name string, opts Options) []classified {
	t.Helper()
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	var out []classified
	for _, p := range readCapture(t, name) {
		if p.ip == nil {
			continue
		}
		var cl classified
		cl.index = p.index
		cl.reason = c.Parse(p.ip, &cl.md)
		out = append(out, cl)
	}
	return out
}

// wiresharkLine is one packet of a str0m *.wireshark.txt dissection.
type wiresharkLine struct {
	seq  uint16
	ts   uint32
	info string // the dissector's text after the timestamp
}

var wiresharkRE = regexp.MustCompile(`Seq=(\d+), Time=(\d+)(.*)$`)

func readWireshark(t *testing.T, name string) []wiresharkLine {
	t.Helper()
	f, err := os.Open(captureFile(t, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []wiresharkLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := wiresharkRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		seq, _ := strconv.ParseUint(m[1], 10, 16)
		ts, _ := strconv.ParseUint(m[2], 10, 32)
		out = append(out, wiresharkLine{seq: uint16(seq), ts: uint32(ts), info: m[3]})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// keyframeTruth derives the expected keyframe packets from a dissection:
// every packet whose RTP timestamp is that of a packet isKey says is one.
func keyframeTruth(lines []wiresharkLine, isKey func(info string) bool) (keySeqs map[uint16]bool, keyFrames int) {
	keyTS := map[uint32]bool{}
	for _, l := range lines {
		if isKey(l.info) {
			keyTS[l.ts] = true
		}
	}
	keySeqs = map[uint16]bool{}
	for _, l := range lines {
		if keyTS[l.ts] {
			keySeqs[l.seq] = true
		}
	}
	return keySeqs, len(keyTS)
}

// h264Key: an IDR slice, or SPS/PPS (which announce one).
func h264Key(info string) bool {
	return strings.Contains(info, "SPS") || strings.Contains(strings.ReplaceAll(info, "non-IDR", ""), "IDR")
}

func vp8Key(info string) bool { return strings.Contains(info, "Keyframe") }

// TestCaptureKeyframes checks keyframe marking on the real video captures
// against the ground truth: the str0m Wireshark dissections for H.264 and
// VP8, the data README for VP9 (1 keyframe), AV1 (1 packet with N=1) and
// H.265 (an AP with VPS/SPS/PPS/SEI and an IDR_N_LP in 4 FUs, one frame).
// Every packet of a keyframe must be marked, and nothing else. It runs
// twice: with no configuration (the heuristic finds RTP and the codec from
// the payload) and with the payload type configured as SDP would give it.
func TestCaptureKeyframes(t *testing.T) {
	tests := []struct {
		file      string
		truth     string // *.wireshark.txt beside the capture, or ""
		isKey     func(string) bool
		pt        uint8
		codec     Codec
		packets   int
		keyFrames int
		keyPkts   int // expected packets in keyframes (when no truth file)
		typed     int // packets that must have frame_type
	}{
		{file: "video/str0m-h264.pcap", truth: "video/str0m-h264.wireshark.txt", isKey: h264Key, pt: 126, codec: CodecH264, packets: 298, keyFrames: 8, typed: 298},
		{file: "video/str0m-vp8.pcap", truth: "video/str0m-vp8.wireshark.txt", isKey: vp8Key, pt: 96, codec: CodecVP8, packets: 104, keyFrames: 3, typed: 104},
		{file: "video/str0m-vp9.pcap", pt: 98, codec: CodecVP9, packets: 316, keyFrames: 1, keyPkts: 1, typed: 316},
		{file: "video/str0m-av1.pcap", pt: 45, codec: CodecAV1, packets: 201, keyFrames: 1, keyPkts: 2, typed: 201},
		{file: "video/tau-wilson-h265.pcap", pt: 104, codec: CodecH265, packets: 407, keyFrames: 1, keyPkts: 5, typed: 407},
	}
	for _, tt := range tests {
		for _, mode := range []string{"heuristic", "configured"} {
			t.Run(filepath.Base(tt.file)+"/"+mode, func(t *testing.T) {
				opts := Options{}
				if mode == "configured" {
					opts = Options{PayloadTypes: map[uint8]Codec{tt.pt: tt.codec}, NoHeuristic: true}
				}
				pkts := classifyCapture(t, tt.file, opts)
				var keySeqs map[uint16]bool
				if tt.truth != "" {
					lines := readWireshark(t, tt.truth)
					if len(lines) != tt.packets {
						t.Fatalf("%d lines in %s, want %d", len(lines), tt.truth, tt.packets)
					}
					var frames int
					keySeqs, frames = keyframeTruth(lines, tt.isKey)
					if frames != tt.keyFrames {
						t.Fatalf("ground truth has %d keyframes, the data README %d", frames, tt.keyFrames)
					}
				}
				rtp, typed, keyPkts := 0, 0, 0
				keyTS := map[uint32]bool{}
				for _, p := range pkts {
					md := &p.md
					if p.reason != ReasonNone {
						t.Errorf("#%d: reason %s", p.index, p.reason)
					}
					if !md.Has(KeyRTPSSRC) {
						continue
					}
					rtp++
					if md.Codec != tt.codec || md.RTP.PayloadType != tt.pt {
						t.Errorf("#%d seq %d: codec %v pt %d, want %v %d", p.index, md.RTP.Seq, md.Codec, md.RTP.PayloadType, tt.codec, tt.pt)
					}
					if md.Has(KeyFrameType) {
						typed++
					}
					isKey := md.FrameType == FrameKey
					if isKey {
						keyPkts++
						keyTS[md.RTP.Timestamp] = true
					}
					if keySeqs != nil && isKey != keySeqs[md.RTP.Seq] {
						t.Errorf("#%d seq %d ts %d: keyframe %v, ground truth %v", p.index, md.RTP.Seq, md.RTP.Timestamp, isKey, keySeqs[md.RTP.Seq])
					}
				}
				if rtp != tt.packets {
					t.Errorf("%d RTP packets, want %d", rtp, tt.packets)
				}
				if typed != tt.typed {
					t.Errorf("%d packets with frame_type, want %d", typed, tt.typed)
				}
				if len(keyTS) != tt.keyFrames {
					t.Errorf("%d keyframes, want %d", len(keyTS), tt.keyFrames)
				}
				want := tt.keyPkts
				if keySeqs != nil {
					want = len(keySeqs)
				}
				if keyPkts != want {
					t.Errorf("%d keyframe packets, want %d", keyPkts, want)
				}
				// Every packet of a keyframe: all packets sharing a
				// keyframe's timestamp are marked.
				for _, p := range pkts {
					if p.md.Has(KeyRTPSSRC) && keyTS[p.md.RTP.Timestamp] && p.md.FrameType != FrameKey {
						t.Errorf("#%d seq %d: in keyframe %d but not marked", p.index, p.md.RTP.Seq, p.md.RTP.Timestamp)
					}
				}
				t.Logf("%d RTP packets, %d keyframes, %d keyframe packets", rtp, len(keyTS), keyPkts)
			})
		}
	}
}

// TestCaptureTemporalLayers checks the layer keys the real streams signal:
// VP8 with the T bit (two temporal layers), H.265's TID (one layer).
func TestCaptureTemporalLayers(t *testing.T) {
	for _, tt := range []struct {
		file   string
		layers map[uint8]bool
	}{
		{"video/str0m-vp8.pcap", map[uint8]bool{0: true, 1: true}},
		{"video/tau-wilson-h265.pcap", map[uint8]bool{0: true}},
	} {
		seen := map[uint8]bool{}
		for _, p := range classifyCapture(t, tt.file, Options{}) {
			if !p.md.Has(KeyTemporalLayer) {
				t.Errorf("%s #%d: no temporal_layer", tt.file, p.index)
				continue
			}
			seen[p.md.TemporalLayer] = true
		}
		if len(seen) != len(tt.layers) {
			t.Errorf("%s: temporal layers %v, want %v", tt.file, seen, tt.layers)
		}
		for l := range tt.layers {
			if !seen[l] {
				t.Errorf("%s: temporal layer %d not seen", tt.file, l)
			}
		}
	}
}

// TestCaptureDSCP checks DSCP against the markings the data README lists.
func TestCaptureDSCP(t *testing.T) {
	count := func(pkts []classified, keep func(*Metadata) bool) map[uint8]int {
		m := map[uint8]int{}
		for i := range pkts {
			if keep(&pkts[i].md) {
				m[pkts[i].md.DSCP]++
			}
		}
		return m
	}
	t.Run("skinny EF on RTP, CS3 on signalling", func(t *testing.T) {
		pkts := classifyCapture(t, "dscp-and-webrtc/ndpi-skinny.pcap", Options{})
		rtp := count(pkts, func(md *Metadata) bool { return md.Has(KeyRTPSSRC) })
		if len(rtp) != 1 || rtp[46] == 0 {
			t.Errorf("RTP DSCP %v, want all 46 (EF)", rtp)
		}
		udp := count(pkts, func(md *Metadata) bool { return md.Proto == 17 })
		if len(udp) != 1 || udp[46] == 0 {
			t.Errorf("UDP (media) DSCP %v, want all 46", udp)
		}
		sig := count(pkts, func(md *Metadata) bool { return md.Proto == 6 })
		if len(sig) != 1 || sig[24] == 0 {
			t.Errorf("TCP (SCCP signalling) DSCP %v, want all 24 (CS3)", sig)
		}
		for i := range pkts {
			if md := &pkts[i].md; md.Has(KeyRTPSSRC) && md.Codec != CodecPCMU {
				t.Errorf("#%d: codec %v, want pcmu (PT 0)", pkts[i].index, md.Codec)
			}
		}
		t.Logf("RTP %v, TCP %v", rtp, sig)
	})
	t.Run("google meet CS4 on PT 97 SFU to client", func(t *testing.T) {
		pkts := classifyCapture(t, "dscp-and-webrtc/ndpi-stun_google_meet.pcapng", Options{})
		// The SFU sends from port 19305; the client's own PT 97 packets
		// (to the TURN port 3478) are unmarked.
		pt97 := count(pkts, func(md *Metadata) bool {
			return md.Has(KeyRTPSSRC) && md.RTP.PayloadType == 97 && md.SrcPort == 19305
		})
		if len(pt97) != 1 || pt97[32] == 0 {
			t.Errorf("PT 97 DSCP %v, want all 32 (CS4)", pt97)
		}
		all := count(pkts, func(*Metadata) bool { return true })
		if all[24] == 0 {
			t.Errorf("DSCP %v, want some 24 (CS3)", all)
		}
		t.Logf("PT 97 %v, all %v", pt97, all)
	})
	t.Run("signal AF21 and a few CS4/CS6/CS1", func(t *testing.T) {
		all := count(classifyCapture(t, "dscp-and-webrtc/ndpi-stun_signal.pcapng", Options{}), func(*Metadata) bool { return true })
		for _, d := range []uint8{18, 32, 48, 8} {
			if all[d] == 0 {
				t.Errorf("DSCP %v, want some %d", all, d)
			}
		}
		t.Logf("all %v", all)
	})
	for _, name := range []string{"video/str0m-h264.pcap", "video/tau-wilson-h265.pcap", "dscp-and-webrtc/ndpi-wa_video.pcap",
		"mpegts/tsduck-test-162-ts-over-rtp.pcap", "audio/ndpi-sip.pcap"} {
		t.Run(filepath.Base(name)+" all 0", func(t *testing.T) {
			all := count(classifyCapture(t, name, Options{}), func(*Metadata) bool { return true })
			if len(all) != 1 || all[0] == 0 {
				t.Errorf("DSCP %v, want all 0", all)
			}
		})
	}
}

// TestCaptureMPEGTS checks that TS over RTP (PT 33) and raw TS over UDP,
// IPv4 and IPv6, are found (README: 16 RTP packets; 12 + 10 UDP; 1).
func TestCaptureMPEGTS(t *testing.T) {
	for _, tt := range []struct {
		file     string
		ts, rtp  int
		ipv6     int
		noFrames bool
	}{
		{file: "mpegts/tsduck-test-162-ts-over-rtp.pcap", ts: 16, rtp: 16},
		{file: "mpegts/tsduck-test-176-ts-over-udp.pcapng", ts: 22, ipv6: 10},
		{file: "mpegts/ndpi-mpegts.pcap", ts: 1},
	} {
		ts, rtp, v6 := 0, 0, 0
		for _, p := range classifyCapture(t, tt.file, Options{}) {
			if p.md.Codec == CodecMP2T {
				ts++
				if p.md.IPVersion == 6 {
					v6++
				}
				// These test streams carry no video PES start with a
				// random access point (no keyframe, README "—").
				if p.md.FrameType == FrameKey {
					t.Errorf("%s #%d: unexpected keyframe", tt.file, p.index)
				}
			}
			if p.md.Has(KeyRTPSSRC) {
				rtp++
				if p.md.RTP.PayloadType != 33 {
					t.Errorf("%s #%d: PT %d", tt.file, p.index, p.md.RTP.PayloadType)
				}
			}
		}
		if ts != tt.ts || rtp != tt.rtp || v6 != tt.ipv6 {
			t.Errorf("%s: %d mp2t (%d IPv6), %d RTP; want %d (%d), %d", tt.file, ts, v6, rtp, tt.ts, tt.ipv6, tt.rtp)
		}
	}
}

// TestCaptureAudioAndEncrypted checks the audio captures (static payload
// types) and that encrypted WebRTC media (SRTP: header in clear, payload
// not) is RTP with a frame_id but no codec and no keyframe.
func TestCaptureAudioAndEncrypted(t *testing.T) {
	codecs := map[Codec]int{}
	for _, p := range classifyCapture(t, "audio/ndpi-sip.pcap", Options{}) {
		codecs[p.md.Codec]++
	}
	// 9 G.711 A-law packets; the first is under probation (MinSequential).
	if codecs[CodecPCMA] != 9-MinSequential+1 {
		t.Errorf("sip: codecs %v, want %d pcma", codecs, 9-MinSequential+1)
	}
	codecs = map[Codec]int{}
	for _, p := range classifyCapture(t, "audio/ndpi-rtp.pcapng", Options{}) {
		codecs[p.md.Codec]++
	}
	if codecs[CodecH263] == 0 {
		t.Errorf("rtp.pcapng: codecs %v, want h263 (PT 34)", codecs)
	}
	for _, name := range []string{"dscp-and-webrtc/ndpi-wa_video.pcap", "dscp-and-webrtc/ndpi-stun_signal.pcapng", "dscp-and-webrtc/ndpi-stun_google_meet.pcapng"} {
		rtp := 0
		for _, p := range classifyCapture(t, name, Options{}) {
			if !p.md.Has(KeyRTPSSRC) {
				continue
			}
			rtp++
			if !p.md.Has(KeyFrameID) || p.md.Has(KeyFrameType) || p.md.Codec.IsVideo() {
				t.Errorf("%s #%d: SRTP packet with codec %v frame_type %v", name, p.index, p.md.Codec, p.md.FrameType)
			}
		}
		if rtp == 0 {
			t.Errorf("%s: no RTP found", name)
		}
	}
}

// TestCapturesNoProblem parses every IP packet of every capture and checks
// that none is reported with a problem (they are all well-formed).
func TestCapturesNoProblem(t *testing.T) {
	for _, name := range allCaptures {
		n := 0
		for _, p := range classifyCapture(t, name, Options{}) {
			n++
			if p.reason != ReasonNone {
				t.Errorf("%s #%d: %s", name, p.index, p.reason)
			}
		}
		if n == 0 {
			t.Errorf("%s: no IP packets", name)
		}
	}
}
