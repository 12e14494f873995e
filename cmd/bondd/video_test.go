package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bondd/bondd/internal/config"
	"github.com/bondd/bondd/internal/testbed"
	"github.com/bondd/bondd/internal/testkit"
	"github.com/bondd/bondd/rules"
	"github.com/bondd/bondd/tunnel"
)

// TestNetnsVideo streams real encoder output through the bond, as
// docs/video.md tells an operator to: ffmpeg in the edge namespace encodes a
// 4 s H.264 test pattern and sends it as RTP to the concentrator's inner
// address, ffmpeg in the concentrator namespace receives it with the SDP
// file the sender wrote and records it, and ffprobe decodes every frame of
// the recording. The edge uses the classify section and the rule file of
// docs/video.md, whose rules must match the stream and its keyframes.
func TestNetnsVideo(t *testing.T) {
	requireNetns(t)
	for _, tool := range []string{"ffmpeg", "ffprobe"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipping: %s is not on PATH (Debian package ffmpeg; .ci/run installs it)", tool)
		}
	}
	began := time.Now()
	classifySection, ruleFile := videoDocYAML(t)
	b := newITBed(t)
	pin := b.writeCreds(t)
	if err := os.WriteFile(filepath.Join(b.dir, "rules.yaml"), []byte(ruleFile), 0o600); err != nil {
		t.Fatal(err)
	}
	b.start(t, b.conc, "concentrator", b.concConfig(), b.concSock)
	getStatus(t, b.concSock)
	b.start(t, b.edge, "edge", b.edgeConfig("bondd0", "10.77.0.2/24", "van.token", pin)+classifySection, b.edgeSock)
	testkit.WaitFor(t, "three active edge paths", 15*time.Second, func() bool { return activePaths(getStatus(t, b.edgeSock)) == 3 })

	const (
		dst      = "10.78.0.1:5004" // the concentrator's inner address; RTCP goes to 5005
		seconds  = 4
		fps      = 25
		minFrame = seconds * fps * 9 / 10
	)
	sdp := filepath.Join(b.dir, "video.sdp")
	out := filepath.Join(b.dir, "received.ts")
	progress := filepath.Join(b.dir, "sender.progress")
	// The sender of docs/video.md with a test pattern as the camera.
	encoder := func(sdpFile string, extra ...string) []string {
		args := []string{"-nostdin", "-hide_banner", "-loglevel", "error"}
		args = append(args, extra...)
		return append(args,
			"-f", "lavfi", "-i", fmt.Sprintf("testsrc=size=640x360:rate=%d", fps), "-t", strconv.Itoa(seconds),
			"-pix_fmt", "yuv420p", "-c:v", "libx264", "-g", strconv.Itoa(fps), "-bf", "0",
			"-pkt_size", "1200", "-f", "rtp", "-sdp_file", sdpFile, "rtp://"+dst)
	}

	// The receiver needs the SDP before the first packet, so that it sees
	// the first keyframe: the same command with no frames writes it and
	// sends nothing.
	nsRun(t, b.edge, 30*time.Second, "ffmpeg", append(encoder(sdp), "-frames:v", "0")...)
	sdpText, err := os.ReadFile(sdp)
	if err != nil {
		t.Fatalf("the sender wrote no SDP: %v", err)
	}
	t.Logf("SDP:\n%s", sdpText)

	// The receiver records without decoding. It ends by itself a few
	// seconds after the last packet (-listen_timeout 3), having read
	// everything that came; the end of the test kills it otherwise.
	var rxLog bytes.Buffer
	rx := nsCommand(t.Context(), b.conc, "ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "warning",
		"-protocol_whitelist", "file,udp,rtp", "-listen_timeout", "3", "-i", sdp,
		"-c", "copy", "-f", "mpegts", out)
	rx.Stdout, rx.Stderr = &rxLog, &rxLog
	if err := rx.Start(); err != nil {
		t.Fatal(err)
	}
	var rxErr error
	rxDone := make(chan struct{})
	go func() { rxErr = rx.Wait(); close(rxDone) }()
	t.Cleanup(func() { <-rxDone })
	testkit.WaitFor(t, "the receiver to bind UDP port 5004", 10*time.Second, func() bool { return udpPortBound(rx.Process.Pid, 5004) })

	edgeBefore, concBefore := getStatus(t, b.edgeSock).Bonds[0], getStatus(t, b.concSock).Bonds[0]
	hitsBefore := ruleHits(edgeBefore.Rules)

	// -re paces the encoder at the frame rate, as a live encoder sends.
	sendStart := time.Now()
	sentSDP := filepath.Join(b.dir, "sent.sdp")
	nsRun(t, b.edge, 30*time.Second, "ffmpeg", encoder(sentSDP, "-re", "-progress", progress)...)
	sendEnd := time.Now()
	t.Logf("sender: %v", sendEnd.Sub(sendStart).Round(time.Millisecond))
	if s, err := os.ReadFile(sentSDP); err != nil || !bytes.Equal(s, sdpText) {
		t.Fatalf("the stream's SDP differs from the one the receiver used (%v):\n%s", err, s)
	}
	sent := progressFrames(t, progress)

	select {
	case <-rxDone:
		t.Logf("receiver ended %v after the sender: %v\n%s", time.Since(sendEnd).Round(time.Millisecond), rxErr, rxLog.String())
	case <-time.After(20 * time.Second):
		rx.Process.Kill()
		<-rxDone
		t.Fatalf("the receiver did not end 20 s after the sender\n%s", rxLog.String())
	}
	// rtpdec logs a sequence number gap as "RTP: missed N packets".
	if strings.Contains(rxLog.String(), "missed") {
		t.Errorf("the receiver lost RTP packets:\n%s", rxLog.String())
	}

	// Decode the recording: every frame the sender encoded must decode, and
	// the decoder must not complain.
	probe := exec.Command("ffprobe", "-v", "error", "-count_frames", "-select_streams", "v",
		"-show_entries", "stream=codec_name,width,height,nb_read_frames", "-of", "json", out)
	var probeOut, probeErr bytes.Buffer
	probe.Stdout, probe.Stderr = &probeOut, &probeErr
	if err := probe.Run(); err != nil {
		t.Fatalf("ffprobe %s: %v\n%s", out, err, probeErr.String())
	}
	var pr struct {
		Streams []struct {
			Codec  string `json:"codec_name"`
			Width  int    `json:"width"`
			Height int    `json:"height"`
			Frames string `json:"nb_read_frames"`
		} `json:"streams"`
	}
	if err := json.Unmarshal(probeOut.Bytes(), &pr); err != nil || len(pr.Streams) != 1 {
		t.Fatalf("ffprobe output %q: %v", probeOut.String(), err)
	}
	st := pr.Streams[0]
	decoded, _ := strconv.Atoi(st.Frames)
	t.Logf("sent %d frames, received %s %dx%d, %d frames decoded", sent, st.Codec, st.Width, st.Height, decoded)
	if sent < minFrame {
		t.Fatalf("the sender encoded %d frames, want at least %d (%d s at %d fps)", sent, minFrame, seconds, fps)
	}
	if st.Codec != "h264" || st.Width != 640 || st.Height != 360 {
		t.Errorf("received %s %dx%d, want h264 640x360", st.Codec, st.Width, st.Height)
	}
	if decoded != sent {
		t.Errorf("%d frames decoded, %d sent", decoded, sent)
	}
	if probeErr.Len() > 0 {
		t.Errorf("decoding errors:\n%s", probeErr.String())
	}

	// The packets went through the bond, and the keyframe rule saw them.
	edgeAfter, concAfter := getStatus(t, b.edgeSock).Bonds[0], getStatus(t, b.concSock).Bonds[0]
	tx := edgeAfter.TxPackets - edgeBefore.TxPackets
	rxPkts := concAfter.RxPackets - concBefore.RxPackets
	hitsAfter := ruleHits(edgeAfter.Rules)
	keyHits := hitsAfter["video-keyframes"] - hitsBefore["video-keyframes"]
	videoHits := hitsAfter["video"] - hitsBefore["video"]
	t.Logf("bond: edge tx %d packets, concentrator rx %d packets, mtu %d; rule hits video-keyframes %d, video %d",
		tx, rxPkts, edgeAfter.MTU, keyHits, videoHits)
	if tx < uint64(sent) || rxPkts < uint64(sent) {
		t.Errorf("edge sent %d and concentrator received %d packets for %d frames: the stream did not go through the bond", tx, rxPkts, sent)
	}
	// -g 25: a keyframe every 25 frames, each of at least one packet; the
	// other frames are not keyframes.
	if keyframes := uint64(sent+fps-1) / fps; keyHits < keyframes || keyHits >= tx {
		t.Errorf("rule video-keyframes matched %d packets: want at least one per keyframe (%d) and fewer than the %d sent", keyHits, keyframes, tx)
	}
	// Every packet of the stream, RTP and RTCP, is in the video class.
	if videoHits < uint64(sent) || videoHits > tx {
		t.Errorf("rule video matched %d packets, want between the %d frames and the %d packets sent", videoHits, sent, tx)
	}
	if o, n := edgeAfter.Drops[tunnel.DropOversize]-edgeBefore.Drops[tunnel.DropOversize], edgeAfter.Drops[tunnel.DropNoPath]-edgeBefore.Drops[tunnel.DropNoPath]; o != 0 || n != 0 {
		t.Errorf("the edge dropped %d packets as oversize and %d for want of a path", o, n)
	}
	t.Logf("whole test: %v", time.Since(began).Round(time.Millisecond))
}

// videoDocYAML returns the classify section and the rule file that
// docs/video.md gives an edge.
func videoDocYAML(t *testing.T) (classifySection, ruleFile string) {
	t.Helper()
	for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(readDoc(t, "video.md"), -1) {
		switch y := m[1]; {
		case strings.HasPrefix(y, "classify:") && classifySection == "":
			classifySection = y
		case strings.HasPrefix(y, "rules:") && ruleFile == "":
			ruleFile = y
		}
	}
	if classifySection == "" || ruleFile == "" {
		t.Fatal("docs/video.md lacks a YAML block starting with classify: or one starting with rules:")
	}
	return classifySection, ruleFile
}

// nsCommand runs name in network namespace ns, killed when ctx is done.
// ip netns exec execs the command, so the process id is the command's.
func nsCommand(ctx context.Context, ns *testbed.NS, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns.Name(), name}, args...)...)
}

// nsRun runs name in ns to completion and fails the test if it fails or
// takes longer than timeout.
func nsRun(t *testing.T, ns *testbed.NS, timeout time.Duration, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := nsCommand(ctx, ns, name, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s in %s: %v\n%s", strings.Join(cmd.Args, " "), ns.Name(), err, out)
	}
}

// udpPortBound reports whether a UDP socket is bound to port in the network
// namespace of process pid.
func udpPortBound(pid int, port uint16) bool {
	f, err := os.Open(fmt.Sprintf("/proc/%d/net/udp", pid))
	if err != nil {
		return false
	}
	defer f.Close()
	suffix := fmt.Sprintf(":%04X", port)
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) > 1 && strings.HasSuffix(fields[1], suffix) {
			return true
		}
	}
	return false
}

// progressFrames returns the last frame count in an ffmpeg -progress file.
func progressFrames(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^frame=(\d+)$`).FindAllStringSubmatch(string(data), -1)
	if len(m) == 0 || !strings.Contains(string(data), "progress=end") {
		t.Fatalf("no final frame count in the sender's progress:\n%s", data)
	}
	n, _ := strconv.Atoi(m[len(m)-1][1])
	return n
}

// ruleHits returns the hits of each rule by id.
func ruleHits(r *tunnel.RuleStats) map[string]uint64 {
	m := map[string]uint64{}
	if r != nil {
		for _, h := range r.Rules {
			m[h.ID] = h.Hits
		}
	}
	return m
}

// TestVideoDoc checks the YAML of docs/video.md that TestNetnsVideo gives
// the edge: the rule file compiles without warnings, and the classify
// section parses as part of an edge's config.
func TestVideoDoc(t *testing.T) {
	classifySection, ruleFile := videoDocYAML(t)
	s, err := rules.CompileBytes("docs/video.md", []byte(ruleFile), rules.Options{})
	if err != nil {
		t.Errorf("rule file does not compile:\n%s\n%v", ruleFile, err)
	} else if len(s.Warnings()) > 0 {
		t.Errorf("rule file has warnings %v", s.Warnings())
	}
	cfg := "role: edge\ntun: {addresses: [10.77.17.1/24], routes: [10.78.0.0/16]}\n" +
		"edge: {id: van-17, concentrator: 203.0.113.10:4433, server_cert_sha256: " + strings.Repeat("ab", 32) +
		", token_file: /etc/bondd/van-17.token, uplinks: [{name: cell-a, interface: wwan0}]}\n" + classifySection
	if _, err := config.ParseWith("video.md", []byte(cfg), config.Options{SkipFileChecks: true}); err != nil {
		t.Errorf("classify section does not parse:\n%s\n%v", classifySection, err)
	}
}
