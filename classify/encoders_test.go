package classify

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/bondd/bondd/classify/capture"
)

// Captures made at test time by real encoders (ffmpeg, GStreamer), in a
// temporary folder, checked per packet against the encoder's own ground
// truth. The helpers run the tools; encoder_cases_test.go has the cases.

// needTools skips the test when one of the tools is not installed.
func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (Debian: apt-get install ffmpeg gstreamer1.0-tools gstreamer1.0-plugins-{base,good,bad,ugly}; see .ci/run): %v", tool, err)
		}
	}
}

// needGstElements skips the test when a GStreamer element is missing.
func needGstElements(t *testing.T, elems ...string) {
	t.Helper()
	needTools(t, "gst-launch-1.0", "gst-inspect-1.0")
	for _, e := range elems {
		if err := exec.Command("gst-inspect-1.0", "--exists", e).Run(); err != nil {
			t.Skipf("GStreamer element %s not installed (see .ci/run): %v", e, err)
		}
	}
}

func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// probePkt is one packet of the encoded file in decode order, as ffprobe
// reads it: its pts (stream time base), keyframe flag and byte position.
type probePkt struct {
	pts int64
	key bool
	pos int64
}

// probePackets returns the video packets of file in decode order.
func probePackets(t *testing.T, file string) []probePkt {
	out := run(t, "ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "packet=pts,flags,pos", "-of", "csv=p=0", file)
	var pkts []probePkt
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(l, ",")
		if l == "" {
			continue
		}
		if len(f) < 3 {
			t.Fatalf("ffprobe line %q", l)
		}
		pts, _ := strconv.ParseInt(f[0], 10, 64)
		pos, _ := strconv.ParseInt(f[1], 10, 64)
		pkts = append(pkts, probePkt{pts: pts, pos: pos, key: strings.HasPrefix(f[2], "K")})
	}
	return pkts
}

// checkBitstream compares the packets' keyframe flags with what decoding
// the bitstream says (ffprobe -show_frames key_frame), by pts: the flags the
// ground truth uses must be the decoder's.
func checkBitstream(t *testing.T, file string, pkts []probePkt) {
	out := run(t, "ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "frame=pts,key_frame", "-of", "csv=p=0", file)
	decodedKey := map[int64]bool{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(l, ",")
		if len(f) < 2 {
			continue
		}
		pts, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		decodedKey[pts] = f[0] == "1"
	}
	for _, p := range pkts {
		if k, ok := decodedKey[p.pts]; ok && k != p.key {
			t.Fatalf("%s: packet pts %d flagged key=%v, the decoder says key_frame=%v", file, p.pts, p.key, k)
		}
	}
}

// encodeFFmpeg encodes a 4-second test source (testsrc2, 640x360, 30 fps)
// with ffmpeg into dir/name and returns its path.
func encodeFFmpeg(t *testing.T, dir, name string, args ...string) string {
	path := filepath.Join(dir, name)
	a := []string{"-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=30", "-t", "4", "-pix_fmt", "yuv420p"}
	run(t, "ffmpeg", append(append(a, args...), path)...)
	return path
}

// encodeGst encodes 120 frames of videotestsrc (640x360, 30 fps) with the
// GStreamer encoder enc into a Matroska file dir/name.
func encodeGst(t *testing.T, dir, name, enc string) string {
	path := filepath.Join(dir, name)
	pipe := "videotestsrc num-buffers=120 pattern=smpte ! video/x-raw,width=640,height=360,framerate=30/1 ! " +
		enc + " ! matroskamux ! filesink location=" + path
	run(t, "gst-launch-1.0", append([]string{"-q"}, strings.Fields(pipe)...)...)
	return path
}

// udpSink listens on a loopback UDP port and collects the datagrams sent
// to it until stop.
type udpSink struct {
	conn *net.UDPConn
	done chan [][]byte
}

func newUDPSink(t *testing.T) *udpSink {
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	conn.SetReadBuffer(8 << 20)
	s := &udpSink{conn: conn, done: make(chan [][]byte, 1)}
	go func() {
		var got [][]byte
		buf := make([]byte, 65536)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				break
			}
			if n == len(sinkEnd) && string(buf[:n]) == sinkEnd {
				break
			}
			got = append(got, append([]byte(nil), buf[:n]...))
		}
		s.done <- got
	}()
	return s
}

const sinkEnd = "bondd-test-end-of-capture"

func (s *udpSink) port() int { return s.conn.LocalAddr().(*net.UDPAddr).Port }

// stop returns every datagram received: the sender has exited, so its
// datagrams are queued ahead of the end marker this sends (loopback
// delivers in the sender's call).
func (s *udpSink) stop(t *testing.T) [][]byte {
	c, err := net.DialUDP("udp4", nil, s.conn.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte(sinkEnd))
	c.Close()
	select {
	case got := <-s.done:
		s.conn.Close()
		return got
	case <-time.After(30 * time.Second):
		s.conn.Close()
		t.Fatal("end marker not received")
		return nil
	}
}

// rtpFFmpeg sends file's video as RTP with ffmpeg (-c copy, packets of at
// most pktSize bytes) and returns the RTP packets and the SDP file ffmpeg
// wrote.
func rtpFFmpeg(t *testing.T, file string, pktSize int) (pkts [][]byte, sdp string) {
	sink := newUDPSink(t)
	sdp = file + ".sdp"
	run(t, "ffmpeg", "-v", "error", "-readrate", "8", "-i", file, "-map", "0:v", "-c", "copy", "-strict", "experimental",
		"-f", "rtp", "-sdp_file", sdp, fmt.Sprintf("rtp://127.0.0.1:%d?pkt_size=%d", sink.port(), pktSize))
	return sink.stop(t), sdp
}

// tsFFmpeg sends file's video as MPEG-TS with ffmpeg, raw over UDP (7 TS
// packets a datagram) or over RTP (PT 33), and returns the datagrams.
func tsFFmpeg(t *testing.T, file string, overRTP bool) [][]byte {
	sink := newUDPSink(t)
	format, url := "mpegts", fmt.Sprintf("udp://127.0.0.1:%d?pkt_size=1316", sink.port())
	if overRTP {
		format, url = "rtp_mpegts", fmt.Sprintf("rtp://127.0.0.1:%d?pkt_size=1328", sink.port())
	}
	run(t, "ffmpeg", "-v", "error", "-readrate", "8", "-i", file, "-map", "0:v", "-c", "copy", "-f", format, url)
	return sink.stop(t)
}

// rtpGst payloads file's video with a GStreamer payloader (pay, with its
// properties) and returns the RTP packets, read from rtpstreampay's RFC 4571
// framing (a 2-byte length before each packet).
func rtpGst(t *testing.T, file, parse, pay string) [][]byte {
	out := file + ".rtp"
	pipe := "filesrc location=" + file + " ! matroskademux ! " + parse + " ! " + pay + " ! rtpstreampay ! filesink location=" + out
	run(t, "gst-launch-1.0", append([]string{"-q"}, strings.Fields(pipe)...)...)
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var pkts [][]byte
	for len(data) >= 2 {
		n := int(binary.BigEndian.Uint16(data))
		if 2+n > len(data) {
			t.Fatalf("%s: RFC 4571 frame of %d bytes runs past the end", out, n)
		}
		pkts = append(pkts, data[2:2+n])
		data = data[2+n:]
	}
	return pkts
}

// writePcap writes the datagrams as IPv4/UDP packets (10.0.0.1:40000 →
// 10.0.0.2:50000, raw-IP link type) into a pcap file and returns its path.
func writePcap(t *testing.T, path string, dgrams [][]byte) string {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := pcapgo.NewWriter(f)
	if err := w.WriteFileHeader(65536, layers.LinkTypeRaw); err != nil {
		t.Fatal(err)
	}
	ts := time.Unix(1_700_000_000, 0)
	for i, d := range dgrams {
		pkt := ipv4(0, 17, uint16(i), 0, udp(40000, 50000, d))
		ci := gopacket.CaptureInfo{Timestamp: ts.Add(time.Duration(i) * time.Millisecond), CaptureLength: len(pkt), Length: len(pkt)}
		if err := w.WritePacket(ci, pkt); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// classifyPcap runs a Classifier with opts over a pcap file, in order.
func classifyPcap(t *testing.T, path string, opts Options) []Metadata {
	r, err := capture.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c := mustNew(t, opts)
	var out []Metadata
	var fr capture.Frame
	for {
		err := r.Next(&fr)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		var md Metadata
		if r := c.Parse(fr.IP, &md); r != ReasonNone {
			t.Errorf("packet %d: reason %s", fr.Index, r)
		}
		out = append(out, md)
	}
}

// score is a capture's result against its ground truth, per packet.
type score struct {
	packets, keyPkts, missed, falseKey int
	keyFrames, foundKeyFrames          int
}

func (s score) missedPct() float64 { return pct(s.missed, s.keyPkts) }
func (s score) falsePct() float64  { return pct(s.falseKey, s.packets-s.keyPkts) }

func pct(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

// Targets of the generated captures (percent of packets).
const (
	maxMissedPct = 1.0
	maxFalsePct  = 0.5
)

// check applies the targets and logs one table row.
func (s score) check(t *testing.T, what string) {
	t.Helper()
	t.Logf("RESULT | %s | %d packets | %d keyframe packets | %d/%d keyframes | missed %.2f %% | false %.2f %%",
		what, s.packets, s.keyPkts, s.foundKeyFrames, s.keyFrames, s.missedPct(), s.falsePct())
	if s.missedPct() > maxMissedPct {
		t.Errorf("%s: %d of %d keyframe packets missed (%.2f %%, target ≤ %.1f %%)", what, s.missed, s.keyPkts, s.missedPct(), maxMissedPct)
	}
	if s.falsePct() > maxFalsePct {
		t.Errorf("%s: %d of %d other packets marked keyframe (%.2f %%, target ≤ %.1f %%)", what, s.falseKey, s.packets-s.keyPkts, s.falsePct(), maxFalsePct)
	}
	if s.foundKeyFrames != s.keyFrames {
		t.Errorf("%s: %d of %d keyframes found", what, s.foundKeyFrames, s.keyFrames)
	}
}

// rtpTruth maps each RTP packet to its frame in decode order (a new RTP
// timestamp starts a frame, as packetizers send frames whole and in order)
// and so to ffprobe's keyframe flag of that frame. It fails on lost or
// reordered packets and when the frame counts differ.
func rtpTruth(t *testing.T, rtp [][]byte, frames []probePkt) []bool {
	keys := make([]bool, len(rtp))
	k := -1
	var lastTS uint32
	for i, p := range rtp {
		if len(p) < 12 {
			t.Fatalf("RTP packet %d: %d bytes", i, len(p))
		}
		seq, ts := binary.BigEndian.Uint16(p[2:]), binary.BigEndian.Uint32(p[4:])
		if i > 0 && seq != binary.BigEndian.Uint16(rtp[i-1][2:])+1 {
			t.Fatalf("RTP packet %d: sequence %d after %d (lost on loopback?)", i, seq, binary.BigEndian.Uint16(rtp[i-1][2:]))
		}
		if i == 0 || ts != lastTS {
			k++
			lastTS = ts
		}
		if k >= len(frames) {
			t.Fatalf("more RTP frames than the %d encoded", len(frames))
		}
		keys[i] = frames[k].key
	}
	if k+1 != len(frames) {
		t.Fatalf("%d RTP frames, %d encoded", k+1, len(frames))
	}
	return keys
}

// scoreRTP scores metadata against per-packet truth; every packet must be
// RTP with the codec (after the first, which may be under probation).
func scoreRTP(t *testing.T, mds []Metadata, rtp [][]byte, truth []bool, codec Codec, joined bool) score {
	var s score
	keyTS, foundTS := map[uint32]bool{}, map[uint32]bool{}
	unknown := 0
	for i, md := range mds {
		key, ts := truth[i], binary.BigEndian.Uint32(rtp[i][4:])
		s.packets++
		if key {
			s.keyPkts++
			keyTS[ts] = true
		}
		got := md.FrameType == FrameKey
		if key != got && s.missed+s.falseKey < 5 {
			pl := rtp[i][12:]
			t.Logf("packet %d seq %d ts %d: keyframe %v, truth %v; payload % x", i, binary.BigEndian.Uint16(rtp[i][2:]), ts, got, key, pl[:min(len(pl), 8)])
		}
		switch {
		case key && !got:
			s.missed++
		case !key && got:
			s.falseKey++
		case key && got:
			foundTS[ts] = true
		}
		switch {
		case md.Codec == codec:
		case joined && md.Codec == CodecUnknown && (unknown == i || s.keyPkts == 0):
			unknown = i + 1 // still learning, before any keyframe
		default:
			unknown = len(mds) + 1
			t.Errorf("packet %d: codec %v, want %v", i, md.Codec, codec)
		}
	}
	if !joined && unknown > 1 {
		t.Errorf("%d packets without codec %v", unknown, codec)
	}
	s.keyFrames, s.foundKeyFrames = len(keyTS), len(foundTS)
	return s
}
