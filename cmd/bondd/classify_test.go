package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bondd/bondd/classify/capture"
)

// pcapDir is where the real captures live: the shared data folder beside
// the repository (../shared/data/pcap from the repository root).
var pcapDir = filepath.Join("..", "..", "..", "shared", "data", "pcap")

// realCapture returns the path of a capture under pcapDir, or skips the
// test when the shared data folder is absent.
func realCapture(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(pcapDir, name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("real capture %s not found (the shared data folder beside the repository is absent): %v", name, err)
	}
	return p
}

// ipFrames returns the 0-based capture index of every frame that carries
// an IP packet, read independently of the command.
func ipFrames(t *testing.T, path string) []int {
	t.Helper()
	r, err := capture.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var (
		fr  capture.Frame
		out []int
	)
	for {
		err := r.Next(&fr)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if fr.IP != nil {
			out = append(out, fr.Index)
		}
	}
}

// runClassifyCmd runs `bondd classify` with args and returns what it
// printed.
func runClassifyCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newClassifyCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	cmd.SilenceUsage = true
	err := cmd.Execute()
	return out.String(), err
}

// jsonLines decodes one JSON object per line.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var objs []map[string]any
	for i, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			t.Fatalf("line %d is empty", i+1)
		}
		dec := json.NewDecoder(strings.NewReader(line))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("line %d is not a JSON object: %v\n%s", i+1, err, line)
		}
		objs = append(objs, m)
	}
	return objs
}

// classifyEdge is a minimal edge config of three lines, so that a
// classify section appended to it starts at line 4.
const classifyEdge = "role: edge\ntun: {addresses: [10.77.17.1/24]}\n" +
	"edge: {id: van-17, concentrator: concentrator.example.net:4433, ca_file: ca.pem, token_file: van-17.token, uplinks: [{name: cell-a, interface: wwan0}]}\n"

// classifyConfig writes an edge config with the given classify section
// (starting at line 4) and returns its path. The files it names do not
// exist: bondd classify does not need them.
func classifyConfig(t *testing.T, section string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bondd.yaml")
	if err := os.WriteFile(p, []byte(classifyEdge+section), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// count returns how many objects satisfy f.
func count(objs []map[string]any, f func(map[string]any) bool) int {
	n := 0
	for _, o := range objs {
		if f(o) {
			n++
		}
	}
	return n
}

// Facts about the captures, from the data README and the str0m dissection.
const (
	h264Capture   = "video/str0m-h264.pcap"            // 298 RTP packets, 10.1.1.1:1234 → 10.2.2.2:1235, PT 126
	h264Packets   = 298                                // all IP
	h264SSRC      = "0x6a5cc848"                       // its one SSRC
	skinnyCapture = "dscp-and-webrtc/ndpi-skinny.pcap" // EF on RTP, CS3 on signalling
)

func TestClassifyCommand(t *testing.T) {
	h264 := realCapture(t, h264Capture)
	skinny := realCapture(t, skinnyCapture)
	h264Frames := ipFrames(t, h264)
	if len(h264Frames) != h264Packets {
		t.Fatalf("%s has %d IP packets, want %d", h264Capture, len(h264Frames), h264Packets)
	}
	skinnyFrames := ipFrames(t, skinny)

	// metadataKeys are the keys every IP packet has; rtpKeys those every
	// packet of the H.264 capture has.
	metadataKeys := []string{"ip_version", "proto", "src_ip", "dst_ip", "dscp", "ecn", "length"}
	rtpKeys := []string{"src_port", "dst_port", "rtp_ssrc", "rtp_pt", "rtp_seq", "rtp_ts", "rtp_marker", "codec", "frame_id"}

	// perPacket checks one JSON object per IP packet, in capture order,
	// with index and the metadata keys.
	perPacket := func(t *testing.T, frames []int, objs []map[string]any) {
		t.Helper()
		if len(objs) != len(frames) {
			t.Fatalf("%d objects, want one per IP packet: %d", len(objs), len(frames))
		}
		for i, o := range objs {
			if idx, err := o["index"].(json.Number).Int64(); err != nil || int(idx) != frames[i] {
				t.Fatalf("object %d: index %v, want %d", i, o["index"], frames[i])
			}
			for _, k := range metadataKeys {
				if _, ok := o[k]; !ok {
					t.Fatalf("object %d has no %q: %v", i, k, o)
				}
			}
		}
	}
	has := func(k string, v any) func(map[string]any) bool {
		return func(o map[string]any) bool {
			got, ok := o[k]
			if n, isNum := got.(json.Number); isNum {
				return ok && n.String() == v
			}
			return ok && got == v
		}
	}

	tests := []struct {
		name   string
		args   []string
		config string // classify section; "" for no --config
		check  func(t *testing.T, out string)
	}{
		{
			name: "json per packet",
			args: []string{"--pcap", h264, "--json"},
			check: func(t *testing.T, out string) {
				objs := jsonLines(t, out)
				perPacket(t, h264Frames, objs)
				for i, o := range objs {
					for _, k := range rtpKeys {
						if _, ok := o[k]; !ok {
							t.Fatalf("object %d has no %q: %v", i, k, o)
						}
					}
					if _, ok := o["class"]; ok {
						t.Fatalf("object %d has a class without --config: %v", i, o)
					}
				}
				if n := count(objs, has("codec", "h264")); n != h264Packets {
					t.Errorf("%d packets with codec h264, want %d", n, h264Packets)
				}
				if n := count(objs, has("rtp_pt", "126")); n != h264Packets {
					t.Errorf("%d packets with rtp_pt 126, want %d", n, h264Packets)
				}
				if n := count(objs, has("frame_type", "IDR")); n == 0 {
					t.Error("no packet with frame_type IDR")
				}
				if o := objs[0]; o["src_ip"] != "10.1.1.1" || o["dst_ip"] != "10.2.2.2" || o["proto"] != "udp" {
					t.Errorf("first packet %v, want udp 10.1.1.1 → 10.2.2.2", o)
				}
				if _, isBool := objs[0]["rtp_marker"].(bool); !isBool {
					t.Errorf("rtp_marker is %T, want a JSON boolean", objs[0]["rtp_marker"])
				}
			},
		},
		{
			name: "text per packet",
			args: []string{"--pcap", h264},
			check: func(t *testing.T, out string) {
				lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
				if len(lines) != h264Packets {
					t.Fatalf("%d lines, want %d", len(lines), h264Packets)
				}
				want := "0 ip_version=4 proto=udp src_ip=10.1.1.1 dst_ip=10.2.2.2 src_port=1234 dst_port=1235 dscp=0 ecn=0 length=685 "
				if !strings.HasPrefix(lines[0], want) || !strings.Contains(lines[0], " codec=h264 ") {
					t.Errorf("first line %q, want it to start with %q and have codec=h264", lines[0], want)
				}
			},
		},
		{
			name: "summary lists flows",
			args: []string{"--pcap", h264, "--summary"},
			check: func(t *testing.T, out string) {
				lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
				if len(lines) != 2 {
					t.Fatalf("%d lines, want a header and one flow:\n%s", len(lines), out)
				}
				if got := strings.Fields(lines[0]); !slices.Equal(got, []string{"FIRST", "PROTO", "SOURCE", "DESTINATION", "SSRC", "PT", "CODEC", "CLASS", "DSCP", "PACKETS", "BYTES", "FRAMES", "KEYFRAMES", "KEY_PACKETS"}) {
					t.Errorf("header %q", lines[0])
				}
				got := strings.Fields(lines[1])
				want := []string{"0", "udp", "10.1.1.1:1234", "10.2.2.2:1235", h264SSRC, "126", "h264", "-", "0", "298"}
				if len(got) != 14 || !slices.Equal(got[:len(want)], want) {
					t.Errorf("flow %q, want it to start with %q", lines[1], want)
				}
			},
		},
		{
			name: "summary json",
			args: []string{"--pcap", skinny, "--summary", "--json"},
			check: func(t *testing.T, out string) {
				flows := jsonLines(t, out)
				if len(flows) < 2 {
					t.Fatalf("%d flows, want the signalling and the RTP flows", len(flows))
				}
				total, rtp := 0, 0
				for _, f := range flows {
					n, _ := f["packets"].(json.Number).Int64()
					total += int(n)
					if _, ok := f["rtp_ssrc"]; ok {
						rtp++
					}
					if _, ok := f["class"]; ok {
						t.Errorf("flow with a class without --config: %v", f)
					}
				}
				if total != len(skinnyFrames) {
					t.Errorf("flows hold %d packets, want every IP packet: %d", total, len(skinnyFrames))
				}
				if rtp == 0 {
					t.Error("no RTP flow")
				}
			},
		},
		{
			name: "config class on the RTP port",
			args: []string{"--pcap", h264, "--json"},
			config: `
classify:
  classes:
    - name: video
      match: {proto: [udp], dst_ports: [1230-1240]}
      labels: {media: camera}
`,
			check: func(t *testing.T, out string) {
				objs := jsonLines(t, out)
				perPacket(t, h264Frames, objs)
				if n := count(objs, has("class", "video")); n != h264Packets {
					t.Errorf("%d packets with class video, want %d", n, h264Packets)
				}
				if n := count(objs, has("media", "camera")); n != h264Packets {
					t.Errorf("%d packets with label media=camera, want %d", n, h264Packets)
				}
			},
		},
		{
			name: "config class not matching",
			args: []string{"--pcap", h264, "--json"},
			config: `
classify:
  classes:
    - name: video
      match: {proto: [udp], src_ports: [1235]}
`,
			check: func(t *testing.T, out string) {
				objs := jsonLines(t, out)
				perPacket(t, h264Frames, objs)
				if n := count(objs, func(o map[string]any) bool { _, ok := o["class"]; return ok }); n != 0 {
					t.Errorf("%d packets with a class, want 0 (the capture's source port is 1234)", n)
				}
			},
		},
		{
			name: "config class in summary",
			args: []string{"--pcap", h264, "--summary"},
			config: `
classify:
  classes:
    - {name: video, match: {ports: [1235]}}
`,
			check: func(t *testing.T, out string) {
				lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
				if len(lines) != 2 {
					t.Fatalf("%d lines, want 2:\n%s", len(lines), out)
				}
				if got := strings.Fields(lines[1]); len(got) != 14 || got[7] != "video" {
					t.Errorf("flow %q, want CLASS video", lines[1])
				}
			},
		},
		{
			name: "config DSCP names",
			args: []string{"--pcap", skinny, "--json"},
			config: `
classify:
  classes:
    - {name: voice, match: {dscp: [EF]}}
    - {name: signalling, match: {proto: [tcp], dscp: [CS3]}}
`,
			check: func(t *testing.T, out string) {
				objs := jsonLines(t, out)
				perPacket(t, skinnyFrames, objs)
				for i, o := range objs {
					want := ""
					switch d := o["dscp"].(json.Number).String(); {
					case d == "46":
						want = "voice"
					case d == "24" && o["proto"] == "tcp":
						want = "signalling"
					}
					if got, _ := o["class"].(string); got != want {
						t.Fatalf("object %d (dscp %v, %v): class %q, want %q", i, o["dscp"], o["proto"], got, want)
					}
				}
				if count(objs, has("class", "voice")) == 0 || count(objs, has("class", "signalling")) == 0 {
					t.Error("want packets of both classes (EF RTP and CS3 signalling)")
				}
			},
		},
		{
			name:   "config payload types",
			args:   []string{"--pcap", h264, "--json"},
			config: "classify:\n  payload_types: {126: vp8}\n",
			check: func(t *testing.T, out string) {
				if n := count(jsonLines(t, out), has("codec", "vp8")); n != h264Packets {
					t.Errorf("%d packets with codec vp8, want %d (the config's payload type)", n, h264Packets)
				}
			},
		},
		{
			name:   "flag overrides config payload types",
			args:   []string{"--pcap", h264, "--json", "--rtp-pt", "126=h264"},
			config: "classify:\n  payload_types: {126: vp8}\n",
			check: func(t *testing.T, out string) {
				if n := count(jsonLines(t, out), has("codec", "h264")); n != h264Packets {
					t.Errorf("%d packets with codec h264, want %d (--rtp-pt replaces payload_types)", n, h264Packets)
				}
			},
		},
		{
			name:   "config without heuristic",
			args:   []string{"--pcap", h264, "--json"},
			config: "classify:\n  rtp_heuristic: false\n",
			check: func(t *testing.T, out string) {
				objs := jsonLines(t, out)
				perPacket(t, h264Frames, objs)
				if n := count(objs, func(o map[string]any) bool { _, ok := o["rtp_ssrc"]; return ok }); n != 0 {
					t.Errorf("%d RTP packets, want 0: rtp_heuristic is false and no port or payload type is listed", n)
				}
			},
		},
		{
			name:   "flag overrides config heuristic",
			args:   []string{"--pcap", h264, "--json", "--no-heuristic=false"},
			config: "classify:\n  rtp_heuristic: false\n",
			check: func(t *testing.T, out string) {
				if n := count(jsonLines(t, out), has("rtp_ssrc", "1784465480")); n < h264Packets-1 {
					t.Errorf("%d RTP packets, want at least %d with the heuristic back on", n, h264Packets-1)
				}
			},
		},
		{
			name:   "config RTP ports",
			args:   []string{"--pcap", h264, "--json"},
			config: "classify:\n  rtp_ports: [1235]\n  rtp_heuristic: false\n",
			check: func(t *testing.T, out string) {
				if n := count(jsonLines(t, out), has("rtp_ssrc", "1784465480")); n != h264Packets {
					t.Errorf("%d RTP packets, want all %d: port 1235 is an RTP port", n, h264Packets)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.config != "" {
				args = append(slices.Clone(args), "--config", classifyConfig(t, strings.TrimPrefix(tc.config, "\n")))
			}
			out, err := runClassifyCmd(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, out)
		})
	}
}

// TestClassifyCommandErrors checks errors that need no capture: the config
// is read before the capture is opened.
func TestClassifyCommandErrors(t *testing.T) {
	pcap := filepath.Join(t.TempDir(), "none.pcap")
	tests := []struct {
		name    string
		args    []string
		config  string // classify section; "" for no --config
		wantErr string // substring of the error
	}{
		{
			name:    "config error names file and line",
			args:    []string{"--pcap", pcap},
			config:  "classify:\n  classes:\n    - {name: video, match: {dscp: [EF, XF]}}\n",
			wantErr: `bondd.yaml:6: classify.classes[0].match.dscp[1]: expected a DSCP from 0 to 63 or a name like EF, AF41, CS6 or LE, got "XF"`,
		},
		{
			name:    "config missing",
			args:    []string{"--pcap", pcap, "--config", filepath.Join(t.TempDir(), "none.yaml")},
			wantErr: "none.yaml: cannot read the config file: no such file or directory",
		},
		{
			name:    "pcap missing",
			args:    []string{"--json"},
			wantErr: "classify: --pcap FILE is required",
		},
		{
			name:    "bad flag with config",
			args:    []string{"--pcap", pcap, "--rtp-ports", "5010-5004"},
			config:  "classify:\n  rtp_ports: [5004]\n",
			wantErr: `classify: --rtp-ports "5010-5004": want PORT or LO-HI`,
		},
		{
			name:    "config fine, capture missing",
			args:    []string{"--pcap", pcap},
			config:  "classify:\n  classes: [{name: video, match: {dscp: [AF41]}}]\n",
			wantErr: "none.pcap",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.config != "" {
				args = append(slices.Clone(args), "--config", classifyConfig(t, strings.TrimPrefix(tc.config, "\n")))
			}
			_, err := runClassifyCmd(t, args...)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}
