package inspect

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// rulesExamples is the folder of example rule files.
var rulesExamples = filepath.Join("..", "..", "docs", "examples", "rules")

// TestRulesCheckExamples checks every example rule file and the listing.
func TestRulesCheckExamples(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(rulesExamples, "*.yaml"))
	if err != nil || len(paths) < 2 {
		t.Fatalf("examples: %v %v", paths, err)
	}
	for _, p := range paths {
		var out, errOut bytes.Buffer
		if err := RulesCheck(&out, &errOut, p); err != nil {
			t.Errorf("%s: %v\n%s", p, err, errOut.String())
		}
		if errOut.Len() > 0 {
			t.Errorf("%s: warnings:\n%s", p, errOut.String())
		}
		if !strings.Contains(out.String(), "ORDER  ID") {
			t.Errorf("%s: output:\n%s", p, out.String())
		}
	}
	var out bytes.Buffer
	if err := RulesCheck(&out, &out, filepath.Join(rulesExamples, "momq-svc.yaml")); err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{
		`momq-svc.yaml: 4 rules, in evaluation order`,
		`(?m)^1 +r1-pframe-interleave +400 +\d+ +frame_type=P and pending_iframe=true +priority=highest$`,
		`(?m)^3 +r3-colocate +200 +\d+ +frame_id exists +affinity=frame_id$`,
		`(?m)^4 +r4-free-path +100 +\d+ +catch-all +prefer=cost_class=free$`,
	} {
		if !regexp.MustCompile(re).MatchString(out.String()) {
			t.Errorf("check output lacks %s:\n%s", re, out.String())
		}
	}
}

// TestRulesCheckErrors checks that a broken file prints file:line errors
// and fails, and that warnings are printed.
func TestRulesCheckErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("rules:\n  - id: a\n    priority: 1\n    match: {dscp: 99, frme_type: P}\n    actions: {priority: 1}\n"), 0o644)
	var out, errOut bytes.Buffer
	err := RulesCheck(&out, &errOut, bad)
	if err == nil || err.Error() != "rules: "+bad+" rejected (2 errors)" {
		t.Errorf("error %v", err)
	}
	for _, want := range []string{bad + `:4: match bad value "99" for dscp`, bad + `:4: unknown key "frme_type" (did you mean "frame_type"?)`} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
		}
	}
	warn := filepath.Join(dir, "warn.yaml")
	os.WriteFile(warn, []byte("rules:\n  - id: a\n    priority: 1\n    actions: {pace_mbps: 5, priority: 1}\n"), 0o644)
	out.Reset()
	errOut.Reset()
	if err := RulesCheck(&out, &errOut, warn); err != nil {
		t.Fatal(err)
	}
	if want := warn + `:4: warning: unknown action "pace_mbps" skipped`; !strings.Contains(errOut.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
	}
	if err := RulesCheck(&out, &errOut, filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("missing file accepted")
	}
}

// TestRulesExplainBadOptions checks that bad flag values are errors.
func TestRulesExplainBadOptions(t *testing.T) {
	pcap := writeTestCapture(t)
	for _, bad := range []ExplainOptions{
		{Labels: []string{"sat"}}, {Labels: []string{"sat=cost_class"}}, {Annotate: []string{"leo_state=calm"}}, {Annotate: []string{"budget_used=lots"}}, {RTPPTs: []string{"96=nope"}},
	} {
		bad.RulesPath, bad.PcapPath = filepath.Join(rulesExamples, "vehicular.yaml"), pcap
		var out bytes.Buffer
		if err := RulesExplain(&out, &out, bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// testPacket builds an IPv4 packet: UDP (with an RTP H.264 NAL unit when
// nal is non-zero) or TCP.
func testPacket(proto uint8, dscp uint8, dport uint16, nal byte, ts uint32) []byte {
	var l4 []byte
	if proto == 17 {
		var pay []byte
		if nal != 0 {
			pay = make([]byte, 12, 64)
			pay[0], pay[1] = 0x80, 96
			binary.BigEndian.PutUint32(pay[4:], ts)
			binary.BigEndian.PutUint32(pay[8:], 0x11223344)
			pay = append(pay, nal, 0x88, 0x84, 0x00, 0x33)
		} else {
			pay = make([]byte, 20)
		}
		l4 = make([]byte, 8, 8+len(pay))
		binary.BigEndian.PutUint16(l4[0:], 40000)
		binary.BigEndian.PutUint16(l4[2:], dport)
		binary.BigEndian.PutUint16(l4[4:], uint16(8+len(pay)))
		l4 = append(l4, pay...)
	} else {
		l4 = make([]byte, 20)
		binary.BigEndian.PutUint16(l4[0:], 50000)
		binary.BigEndian.PutUint16(l4[2:], dport)
		l4[12] = 5 << 4
	}
	h := make([]byte, 20, 20+len(l4))
	h[0], h[1], h[8], h[9] = 0x45, dscp<<2, 64, proto
	binary.BigEndian.PutUint16(h[2:], uint16(20+len(l4)))
	copy(h[12:], []byte{10, 0, 0, 1})
	copy(h[16:], []byte{10, 0, 0, 2})
	return append(h, l4...)
}

// writeTestCapture writes a raw-IP pcap: an H.264 keyframe packet and two
// delta-frame packets (RTP to port 5004), two DSCP EF packets and a TCP
// packet.
func writeTestCapture(t *testing.T) string {
	t.Helper()
	pkts := [][]byte{
		testPacket(17, 0, 5004, 0x65, 1000),
		testPacket(17, 0, 5004, 0x41, 4000),
		testPacket(17, 0, 5004, 0x41, 7000),
		testPacket(17, 46, 7000, 0, 0),
		testPacket(17, 46, 7000, 0, 0),
		testPacket(6, 0, 443, 0, 0),
	}
	var buf bytes.Buffer
	w := pcapgo.NewWriter(&buf)
	if err := w.WriteFileHeader(65535, layers.LinkTypeRaw); err != nil {
		t.Fatal(err)
	}
	for i, p := range pkts {
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(1700000000, int64(i)*1e6), CaptureLength: len(p), Length: len(p)}
		if err := w.WritePacket(ci, p); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "test.pcap")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// matchAll fails the test for each regexp out does not match.
func matchAll(t *testing.T, out string, res ...string) {
	t.Helper()
	for _, re := range res {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("output lacks %s:\n%s", re, out)
		}
	}
}

// TestRulesExplain runs explain on a synthetic capture with both example
// files.
func TestRulesExplain(t *testing.T) {
	pcap := writeTestCapture(t)
	var out, errOut bytes.Buffer
	err := RulesExplain(&out, &errOut, ExplainOptions{
		RulesPath: filepath.Join(rulesExamples, "momq-svc.yaml"), PcapPath: pcap,
		Labels:   []string{"sat=cost_class=free,link_type=satellite", "ter=cost_class=metered"},
		Annotate: []string{"pending_iframe=true", "leo_state=reconf"},
		RTPPorts: []string{"5004"}, RTPPTs: []string{"96=h264"},
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	matchAll(t, out.String(),
		`capture: .*test.pcap: 6 IP packets in 3 flows`,
		`annotations: pending_iframe=true leo_state=reconf`,
		`paths: sat\{cost_class=free,link_type=satellite\} ter\{cost_class=metered\}`,
		`flow 1: udp codec=h264 10.0.0.1:40000 -> 10.0.0.2:5004 rtp_ssrc=0x11223344, first packet 0, 3 packets`,
		`(?m)^  1 +frame_type=IDR +r2-reconf-keyframe,r3-colocate,r4-free-path +prefer=cost_class=metered affinity=frame_id +cost_class=metered→ter$`,
		`(?m)^  2 +frame_type=P +r1-pframe-interleave,r3-colocate,r4-free-path +priority=255 prefer=cost_class=free affinity=frame_id +cost_class=free→sat$`,
		`flow 2: udp dscp=46 10.0.0.1:40000 -> 10.0.0.2:7000, first packet 3, 2 packets`,
		`(?m)^  2 +- +r4-free-path +prefer=cost_class=free +cost_class=free→sat$`,
		`(?m)^r1-pframe-interleave +400 +2$`,
		`(?m)^r4-free-path +100 +6$`,
		`(?m)^\(no rule\) +- +0$`,
	)

	out.Reset()
	err = RulesExplain(&out, &errOut, ExplainOptions{
		RulesPath: filepath.Join(rulesExamples, "vehicular.yaml"), PcapPath: pcap,
		Labels:   []string{"lte1=cost_class=free", "lte2=cost_class=free", "sat=cost_class=metered"},
		RTPPorts: []string{"5004"}, RTPPTs: []string{"96=h264"},
	})
	if err != nil {
		t.Fatal(err)
	}
	matchAll(t, out.String(),
		`(?m)^  2 +- +control-ef,bulk-off-metered +priority=255 prefer=cost_class=free duplicate=2 deadline_ms=150 +cost_class=free→lte1,lte2$`,
		`(?m)^  1 +- +tcp-bonded,bulk-off-metered +balancing=multi_path prefer=cost_class=free +cost_class=free→lte1,lte2$`,
		`(?m)^  1 +frame_type=IDR +video-keyframes,bulk-off-metered +priority=200 prefer=cost_class=free fec=adaptive,k=20,alpha=2 +`,
		`(?m)^control-ef +500 +2$`,
	)

	// No labels: no PATHS column; a preference no path carries.
	out.Reset()
	err = RulesExplain(&out, &errOut, ExplainOptions{
		RulesPath: filepath.Join(rulesExamples, "vehicular.yaml"), PcapPath: pcap,
		Labels: []string{"x=link_type=satellite"},
	})
	if err != nil {
		t.Fatal(err)
	}
	matchAll(t, out.String(), `cost_class=free→none \(default selection\)`)
}

// sharedCaptures finds the shared data folder beside the repository.
func sharedCaptures(t *testing.T) string {
	for _, dir := range []string{
		filepath.Join("..", "..", "shared", "data", "pcap"),
		filepath.Join("..", "..", "..", "shared", "data", "pcap"),
	} {
		if _, err := os.Stat(dir); err == nil {
			return dir
		}
	}
	t.Skip("the shared data folder (shared/data/pcap beside the repository) is absent; skipping the real-capture test")
	return ""
}

// TestRulesExplainCapture runs explain on real captures: an H.264 call
// with the MoMQ rules, and a Skinny (Cisco IP phone) capture whose voice is
// marked EF with the vehicular default.
func TestRulesExplainCapture(t *testing.T) {
	dir := sharedCaptures(t)
	var out, errOut bytes.Buffer
	err := RulesExplain(&out, &errOut, ExplainOptions{
		RulesPath: filepath.Join(rulesExamples, "momq-svc.yaml"), PcapPath: filepath.Join(dir, "video", "str0m-h264.pcap"),
		Labels:   []string{"sat=cost_class=free", "ter=cost_class=metered"},
		Annotate: []string{"pending_iframe=true", "leo_state=reconf"},
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	// 298 packets; 14 in keyframes (docs/classify.md and the classify tests
	// agree on the keyframe count).
	matchAll(t, out.String(),
		`298 IP packets in 1 flow\n`,
		`(?m)^  14 +frame_type=IDR +r2-reconf-keyframe,r3-colocate,r4-free-path `,
		`(?m)^  284 +frame_type=P +r1-pframe-interleave,r3-colocate,r4-free-path `,
		`(?m)^r3-colocate +200 +298$`,
	)
	out.Reset()
	err = RulesExplain(&out, &errOut, ExplainOptions{
		RulesPath: filepath.Join(rulesExamples, "vehicular.yaml"), PcapPath: filepath.Join(dir, "dscp-and-webrtc", "ndpi-skinny.pcap"),
	})
	if err != nil {
		t.Fatal(err)
	}
	matchAll(t, out.String(), `(?m)^control-ef +500 +135$`, `(?m)^bulk-off-metered +0 +\d+$`)
}

// docBlock returns the output docs/rules.md shows after the line
// "$ "+command (and its continuation lines), up to the closing fence.
func docBlock(t *testing.T, command string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "rules.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "$ "+command)
	if i < 0 {
		t.Fatalf("docs/rules.md has no example of %q", command)
	}
	rest := doc[i:]
	rest = rest[:strings.Index(rest, "```")]
	lines := strings.Split(rest, "\n")
	for len(lines) > 0 && (strings.HasPrefix(lines[0], "$ ") || strings.HasPrefix(lines[0], "    --")) {
		lines = lines[1:]
	}
	return strings.Join(lines, "\n")
}

// TestRulesDocOutput checks that the command output docs/rules.md shows is
// what the commands print.
func TestRulesDocOutput(t *testing.T) {
	var out bytes.Buffer
	path := filepath.Join(rulesExamples, "vehicular.yaml")
	if err := RulesCheck(&out, &out, path); err != nil {
		t.Fatal(err)
	}
	got := strings.ReplaceAll(out.String(), path, "docs/examples/rules/vehicular.yaml")
	if want := docBlock(t, "bondd rules check docs/examples/rules/vehicular.yaml"); got != want {
		t.Errorf("docs/rules.md shows\n%s\nbut check prints\n%s", want, got)
	}

	dir := sharedCaptures(t)
	out.Reset()
	pcap := filepath.Join(dir, "video", "str0m-h264.pcap")
	momq := filepath.Join(rulesExamples, "momq-svc.yaml")
	err := RulesExplain(&out, &out, ExplainOptions{
		RulesPath: momq, PcapPath: pcap,
		Labels:   []string{"sat=cost_class=free,link_type=satellite", "ter=cost_class=metered"},
		Annotate: []string{"pending_iframe=true", "leo_state=reconf"},
	})
	if err != nil {
		t.Fatal(err)
	}
	got = strings.ReplaceAll(strings.ReplaceAll(out.String(), pcap, "str0m-h264.pcap"), momq, "docs/examples/rules/momq-svc.yaml")
	if want := docBlock(t, "bondd rules explain --rules docs/examples/rules/momq-svc.yaml"); got != want {
		t.Errorf("docs/rules.md shows\n%s\nbut explain prints\n%s", want, got)
	}
}
