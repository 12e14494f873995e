package config

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bondd/bondd/classify"
	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/tun/tuntest"
)

func TestConfigDefaults(t *testing.T) {
	dir := configDir(t)
	c, err := ParseWith("bondd.yaml", []byte(edgeOK), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		Role:      RoleEdge,
		LogLevel:  "info",
		LogFormat: "text",
		TUN: TUNConfig{
			Name:      "bondd0",
			Addresses: []netip.Prefix{netip.MustParsePrefix("10.77.17.1/24")},
		},
		Edge: &EdgeConfig{
			ID:           "van-17",
			Concentrator: "concentrator.example.net:4433",
			ServerName:   "concentrator.example.net",
			CAFile:       filepath.Join(dir, "ca.pem"),
			TokenFile:    filepath.Join(dir, "van-17.token"),
			Uplinks:      []UplinkConfig{{Name: "cell-a", Interface: "wwan0"}},
		},
		Paths: PathsConfig{
			QueuePackets:           256,
			MaxQueueDelay:          200 * time.Millisecond,
			Keepalive:              time.Second,
			IdleKeepalive:          15 * time.Second,
			IdleTimeout:            5 * time.Second,
			RedialMin:              250 * time.Millisecond,
			RedialMax:              10 * time.Second,
			InitialPacketSizeBytes: 1360,
			RateControl:            "bondd",
		},
		Web: WebConfig{Listen: DefaultWebListen},
	}
	c.src = nil
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
		t.Errorf("edge got  %+v\nedge want %+v", c.Edge, want.Edge)
	}
	if c.TUN.MTU != 0 {
		t.Errorf("MTU = %d, want 0 (auto)", c.TUN.MTU)
	}

	// An IP concentrator address is the default server name.
	in := strings.Replace(edgeOK, "concentrator.example.net:4433", `"[2001:db8::10]:4433"`, 1)
	c, err = ParseWith("bondd.yaml", []byte(in), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if c.Edge.ServerName != "2001:db8::10" {
		t.Errorf("ServerName = %q, want 2001:db8::10", c.Edge.ServerName)
	}
}

func TestConfigDecodesEveryField(t *testing.T) {
	dir := configDir(t)
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte("rules: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	in := snippet(`
role: edge
log_level: warn
log_format: json
metrics_listen: 127.0.0.1:9477
qlog_dir: qlog
tun:
  name: bond1
  addresses: [10.77.17.1/24, "fd77:17::1/64"]
  mtu: 1368
  routes: [10.78.0.0/16]
edge:
  id: van-17
  concentrator: 203.0.113.10:4433
  server_name: concentrator.example.net
  server_cert_sha256: "` + strings.Repeat("0f", 32) + `"
  cert_file: van-17.pem
  key_file: van-17.key
  downlink_rules: rules.yaml
  uplinks:
    - name: starlink
      bind: 192.168.1.20
      interface: eth1
      labels: {link_type: satellite, cost_class: unmetered}
      leo_reconf: {seconds: [12, 42], window_ms: 150}
      budget: 500GB/month
paths:
  queue_packets: 64
  max_queue_delay: 300ms
  keepalive: 200ms
  idle_timeout: 2s
  redial_min: 1s
  redial_max: 1m
  initial_packet_size_bytes: 1452
  rate_control: quic
fec:
  mode: fixed
  k: 10
  alpha: 1.5
  ratio: 0.2
  budget: 30ms
rules: rules.yaml
classify:
  rtp_ports: [5004-5010, 6000]
  payload_types: {96: h264, 98: auto, 111: opus}
  rtp_heuristic: false
  classes:
    - name: video
      match:
        proto: [udp]
        src: [10.77.17.0/24]
        dst: ["fd78::/48"]
        src_ports: [1024-65535]
        dst_ports: [5004-5010]
        ports: [5004]
        dscp: [AF41, 46]
      labels: {media: camera, priority: high}
    - name: rest
`)
	c, err := ParseWith("bondd.yaml", []byte(in), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	pin := bytes.Repeat([]byte{0x0f}, sha256.Size)
	want := &Config{
		Role:          RoleEdge,
		LogLevel:      "warn",
		LogFormat:     "json",
		MetricsListen: "127.0.0.1:9477",
		QlogDir:       filepath.Join(dir, "qlog"),
		TUN: TUNConfig{
			Name:      "bond1",
			Addresses: []netip.Prefix{netip.MustParsePrefix("10.77.17.1/24"), netip.MustParsePrefix("fd77:17::1/64")},
			MTU:       1368,
			Routes:    []netip.Prefix{netip.MustParsePrefix("10.78.0.0/16")},
		},
		Edge: &EdgeConfig{
			ID:               "van-17",
			Concentrator:     "203.0.113.10:4433",
			ServerName:       "concentrator.example.net",
			ServerCertSHA256: pin,
			CertFile:         filepath.Join(dir, "van-17.pem"),
			KeyFile:          filepath.Join(dir, "van-17.key"),
			DownlinkRules:    filepath.Join(dir, "rules.yaml"),
			Uplinks: []UplinkConfig{{
				Name:      "starlink",
				Bind:      netip.MustParseAddr("192.168.1.20"),
				Interface: "eth1",
				Labels:    map[string]string{"link_type": "satellite", "cost_class": "unmetered"},
				LEOReconf: &policy.LEOReconf{Seconds: []int{12, 42}, Window: 150 * time.Millisecond},
				Budget:    policy.Budget{Bytes: 500e9, Period: policy.PeriodMonth},
			}},
		},
		Paths: PathsConfig{
			QueuePackets:           64,
			MaxQueueDelay:          300 * time.Millisecond,
			Keepalive:              200 * time.Millisecond,
			IdleKeepalive:          15 * time.Second,
			IdleTimeout:            2 * time.Second,
			RedialMin:              time.Second,
			RedialMax:              time.Minute,
			InitialPacketSizeBytes: 1452,
			RateControl:            "quic",
		},
		FEC:   FECConfig{Mode: "fixed", K: 10, Alpha: 1.5, Ratio: 0.2, Budget: 30 * time.Millisecond},
		Rules: filepath.Join(dir, "rules.yaml"),
		Classify: ClassifyConfig{
			RTPPorts:       []classify.PortRange{{Lo: 5004, Hi: 5010}, {Lo: 6000, Hi: 6000}},
			PayloadTypes:   map[uint8]classify.Codec{96: classify.CodecH264, 98: classify.CodecUnknown, 111: classify.CodecOpus},
			NoRTPHeuristic: true,
			Classes: []classify.Class{
				{
					Name: "video",
					Match: classify.ClassMatch{
						Protos:   []uint8{17},
						Src:      []netip.Prefix{netip.MustParsePrefix("10.77.17.0/24")},
						Dst:      []netip.Prefix{netip.MustParsePrefix("fd78::/48")},
						SrcPorts: []classify.PortRange{{Lo: 1024, Hi: 65535}},
						DstPorts: []classify.PortRange{{Lo: 5004, Hi: 5010}},
						Ports:    []classify.PortRange{{Lo: 5004, Hi: 5004}},
						DSCP:     []uint8{34, 46},
					},
					Labels: []classify.Label{{Key: "media", Value: "camera"}, {Key: "priority", Value: "high"}},
				},
				{Name: "rest"},
			},
		},
	}
	c.src, c.Classify.src = nil, nil
	want.Web = WebConfig{Listen: DefaultWebListen}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
		t.Errorf("edge got  %+v\nedge want %+v", c.Edge, want.Edge)
		t.Errorf("classify got  %+v\nclassify want %+v", c.Classify, want.Classify)
	}
}

// TestConfigClassifyOptions checks that the classify section becomes
// classifier options that classify packets as the section says.
func TestConfigClassifyOptions(t *testing.T) {
	dir := configDir(t)
	in := withClassify(`
classify:
  rtp_ports: [5004-5010]
  payload_types: {96: h264, 98: auto}
  rtp_heuristic: false
  classes:
    - name: video
      match: {proto: [udp], src: [10.77.17.0/24], dst_ports: [5004-5010]}
      labels: {media: camera}
    - name: control
      match: {dscp: [EF, CS6]}
    - name: rest
`)
	c, err := ParseWith("bondd.yaml", []byte(in), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	opts, err := c.Classify.Options()
	if err != nil {
		t.Fatal(err)
	}
	if want := []classify.PortRange{{Lo: 5004, Hi: 5010}}; !reflect.DeepEqual(opts.RTPPorts, want) {
		t.Errorf("RTPPorts = %v, want %v", opts.RTPPorts, want)
	}
	if want := map[uint8]classify.Codec{96: classify.CodecH264, 98: classify.CodecUnknown}; !reflect.DeepEqual(opts.PayloadTypes, want) {
		t.Errorf("PayloadTypes = %v, want %v", opts.PayloadTypes, want)
	}
	if !opts.NoHeuristic {
		t.Error("NoHeuristic = false, want true (rtp_heuristic: false)")
	}
	if opts.Classes == nil || opts.Classes.Len() != 3 {
		t.Fatalf("Classes = %v, want 3 classes", opts.Classes)
	}
	cl, err := classify.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	media, ok := opts.Classes.KeyByName("media")
	if !ok {
		t.Fatal("label key media not defined")
	}
	tests := []struct {
		name      string
		src       string
		dport     uint16
		dscp      uint8
		wantClass string
		wantMedia string
	}{
		{"video", "10.77.17.5", 5004, 0, "video", "camera"},
		{"video first even with EF", "10.77.17.5", 5010, 46, "video", "camera"},
		{"control by EF", "10.99.0.1", 5004, 46, "control", ""},
		{"control by CS6", "10.77.17.5", 179, 48, "control", ""},
		{"rest", "10.99.0.1", 5004, 0, "rest", ""},
		{"rest AF41", "10.77.17.5", 5011, 34, "rest", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var md classify.Metadata
			if r := cl.Parse(udp4(tc.src, "10.78.1.1", 40000, tc.dport, tc.dscp), &md); r != classify.ReasonNone {
				t.Fatalf("reason %v", r)
			}
			if md.DSCP != tc.dscp {
				t.Fatalf("test packet has DSCP %d, want %d", md.DSCP, tc.dscp)
			}
			if got := md.Class(); got != tc.wantClass {
				t.Errorf("class = %q, want %q", got, tc.wantClass)
			}
			got, _ := md.AppendValue(nil, media)
			if string(got) != tc.wantMedia {
				t.Errorf("media = %q, want %q", got, tc.wantMedia)
			}
		})
	}
}

// udp4 returns an IPv4 UDP packet with a 12-byte zero payload and the
// given DSCP (the classifier does not check the IP header checksum).
func udp4(src, dst string, sport, dport uint16, dscp uint8) []byte {
	p, err := tuntest.AppendUDP4(nil, netip.AddrPortFrom(netip.MustParseAddr(src), sport),
		netip.AddrPortFrom(netip.MustParseAddr(dst), dport), make([]byte, 12))
	if err != nil {
		panic(err)
	}
	p[1] = dscp << 2
	return p
}

// TestConfigClassifyOptionsBuiltInGo checks Options on a ClassifyConfig that
// did not come from a file: the zero and nil values, and errors that name
// fields but no file or line.
func TestConfigClassifyOptionsBuiltInGo(t *testing.T) {
	many := func(n int) []classify.PortRange {
		rs := make([]classify.PortRange, n)
		for i := range rs {
			rs[i] = classify.PortRange{Lo: uint16(1000 + i), Hi: uint16(1000 + i)}
		}
		return rs
	}
	tests := []struct {
		name string
		c    *ClassifyConfig
		want string // the whole error; "" means none
	}{
		{"nil", nil, ""},
		{"zero", &ClassifyConfig{}, ""},
		{"ports", &ClassifyConfig{RTPPorts: many(16)}, ""},
		{"too many ports", &ClassifyConfig{RTPPorts: many(17)}, "classify.rtp_ports[16]: at most 16 port ranges are allowed, got 17"},
		{"payload type 72", &ClassifyConfig{PayloadTypes: map[uint8]classify.Codec{72: classify.CodecH264}}, "classify.payload_types.72: payload type 72 cannot be told from RTCP (packet types 200-204 with the marker bit, RFC 3550 §12.1, RFC 5761 §4); expected 0 to 71 or 77 to 127"},
		{"payload type 200", &ClassifyConfig{PayloadTypes: map[uint8]classify.Codec{200: classify.CodecH264}}, "classify.payload_types.200: expected an RTP payload type from 0 to 127 as the key, got 200"},
		{"bad codec", &ClassifyConfig{PayloadTypes: map[uint8]classify.Codec{96: 200}}, "classify.payload_types.96: unknown codec 200; expected one of h264, h265, vp8, vp9, av1, mp2t, h263, h261, jpeg, mpv, pcmu, gsm, g723, dvi4, lpc, pcma, g722, l16, qcelp, cn, mpa, g728, g729, opus, red, fec, rtx, or auto"},
		{"class", &ClassifyConfig{Classes: []classify.Class{{Name: "video", Match: classify.ClassMatch{DSCP: []uint8{46}}}}}, ""},
		{"class without name", &ClassifyConfig{Classes: []classify.Class{{Name: "video"}, {}}}, "classify.classes[1].name: required; expected the name rules see as class, like video"},
		{"dscp 64", &ClassifyConfig{Classes: []classify.Class{{Name: "video", Match: classify.ClassMatch{DSCP: []uint8{64}}}}}, "classify.classes[0].match.dscp[0]: expected a DSCP from 0 to 63 or a name like EF, AF41, CS6 or LE, got 64"},
		{"invalid prefix", &ClassifyConfig{Classes: []classify.Class{{Name: "video", Match: classify.ClassMatch{Src: []netip.Prefix{{}}}}}}, "classify.classes[0].match.src[0]: expected a network prefix, like 10.77.17.0/24"},
		{"label twice", &ClassifyConfig{Classes: []classify.Class{{Name: "video", Labels: []classify.Label{{Key: "a", Value: "1"}, {Key: "a", Value: "2"}}}}}, `classify.classes[0].labels.a: label "a" set twice`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts, err := tc.c.Options()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if _, err := classify.New(opts); err != nil {
					t.Fatalf("classify.New rejects the options: %v", err)
				}
				return
			}
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Options() error =\n%v\nwant\n%s", err, tc.want)
			}
			var errs Errors
			if !errors.As(err, &errs) {
				t.Errorf("error is %T, want Errors", err)
			}
		})
	}
}

// TestConfigClassSetError checks that classify.NewClassSet's errors, which
// count classes from 1, name the class's field.
func TestConfigClassSetError(t *testing.T) {
	tests := []struct {
		err       error
		wantField string
		wantMsg   string
	}{
		{&classify.FieldError{Field: "classes[2]", What: `class 3 ("video")`, Err: errors.New("duplicate name")}, "classify.classes[2]", "duplicate name"},
		{fmt.Errorf("wrapped: %w", &classify.FieldError{Field: "classes[0]", What: `class 1 ("a): b")`, Err: errors.New(`label key "x" twice`)}), "classify.classes[0]", `label key "x" twice`},
		{errors.New("classify: 65 classes, at most 64"), "classify.classes", "65 classes, at most 64"},
	}
	for _, tc := range tests {
		e := classSetError(tc.err)
		if e.Field != tc.wantField || e.Msg != tc.wantMsg {
			t.Errorf("classSetError(%q) = %q, %q; want %q, %q", tc.err, e.Field, e.Msg, tc.wantField, tc.wantMsg)
		}
	}
}

// TestConfigCollectsAllErrors checks that errors of every step come back
// together, one per problem, sorted by line, in the documented format.
func TestConfigCollectsAllErrors(t *testing.T) {
	dir := configDir(t)
	in, err := os.ReadFile(filepath.Join("testdata", "bad-edge.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "bad-edge.golden"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = ParseWith("bad-edge.yaml", in, Options{Dir: dir})
	if err == nil {
		t.Fatal("no error")
	}
	got := strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), "$DIR/") + "\n"
	if got != string(want) {
		t.Errorf("errors differ from testdata/bad-edge.golden\ngot:\n%s\nwant:\n%s", got, want)
	}
	var errs Errors
	errors.As(err, &errs)
	for i := 1; i < len(errs); i++ {
		if errs[i].Line < errs[i-1].Line {
			t.Errorf("errors not sorted by line: %d after %d", errs[i].Line, errs[i-1].Line)
		}
	}
	var one *Error
	if !errors.As(err, &one) || one.Field == "" {
		t.Errorf("errors.As(*Error) = %v, %+v", one != nil, one)
	}
}

func TestConfigErrorFormat(t *testing.T) {
	tests := []struct {
		e    Error
		want string
	}{
		{Error{"bondd.yaml", 12, "edge.uplinks[1].bind", "expected an IP address"}, "bondd.yaml:12: edge.uplinks[1].bind: expected an IP address"},
		{Error{"bondd.yaml", 3, "", "invalid YAML: x"}, "bondd.yaml:3: invalid YAML: x"},
		{Error{"bondd.yaml", 0, "", "cannot read"}, "bondd.yaml: cannot read"},
		{Error{"", 0, "role", "required"}, "role: required"},
	}
	for _, tc := range tests {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

// TestConfigValidateBuiltInGo checks Validate on a Config that did not come
// from a file: errors name fields but no file or line.
func TestConfigValidateBuiltInGo(t *testing.T) {
	c := &Config{
		Role: RoleEdge,
		TUN:  TUNConfig{Addresses: []netip.Prefix{netip.MustParsePrefix("10.77.17.1/24")}},
		Edge: &EdgeConfig{
			ID:           "van-17",
			Concentrator: "203.0.113.10:4433",
			CAFile:       "/etc/bondd/ca.pem",
			TokenFile:    "/etc/bondd/van-17.token",
			Uplinks:      []UplinkConfig{{Name: "cell-a", Bind: netip.MustParseAddr("192.0.2.10")}},
		},
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate before Defaults: %v", err)
	}
	c.Defaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate after Defaults: %v", err)
	}
	if c.Edge.ServerName != "203.0.113.10" || c.TUN.Name != DefaultTUNName || c.Paths.RedialMax != DefaultRedialMax {
		t.Errorf("Defaults left %+v %+v", c.TUN, c.Paths)
	}
	c.Edge.Uplinks = append(c.Edge.Uplinks, UplinkConfig{Name: "cell-a", Interface: "wwan0"})
	c.TUN.MTU = 100
	err := c.Validate()
	want := "tun.mtu: expected \"auto\" or an integer number of bytes from 576 to 9000, got 100\n" +
		"edge.uplinks[1].name: uplink name \"cell-a\" is already used by edge.uplinks[0]"
	if err == nil || err.Error() != want {
		t.Errorf("Validate() =\n%v\nwant\n%s", err, want)
	}
}

func TestConfigLoad(t *testing.T) {
	dir := configDir(t)
	path := filepath.Join(dir, "edge.yaml")
	if err := os.WriteFile(path, []byte(edgeOK), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "van-17.token"); c.Edge.TokenFile != want {
		t.Errorf("TokenFile = %q, want %q (relative to the config file)", c.Edge.TokenFile, want)
	}
	tok, err := c.LoadToken(c.Edge.TokenFile)
	if err != nil || string(tok) != testToken {
		t.Errorf("LoadToken = %q, %v; want %q", tok, err, testToken)
	}

	_, err = Load(filepath.Join(dir, "missing.yaml"))
	if err == nil || !strings.Contains(err.Error(), "missing.yaml: cannot read the config file: no such file or directory") {
		t.Errorf("Load(missing) = %v", err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, bytes.Repeat([]byte("#\n"), maxConfigFileBytes), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Load(big) = %v", err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("role: edgy\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad); err == nil || !strings.HasPrefix(err.Error(), bad+`:1: role: expected "edge" or "concentrator", got "edgy"`) {
		t.Errorf("Load(bad) = %v", err)
	}
}

func TestConfigLoadToken(t *testing.T) {
	dir := configDir(t)
	c, err := ParseWith("bondd.yaml", []byte(edgeOK), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		want string // token, or error substring after "ERR "
	}{
		{"van-17.token", testToken},
		{"van-18.token", testToken + "ff"}, // trimmed; mode 0400 is fine
		{filepath.Join(dir, "van-17.token"), testToken},
		{"short.token", "ERR holds a 10-byte token; expected 16 to 4096 bytes"},
		{"shared.token", "ERR may be read or written by group or others (mode 0640); expected mode 0600 or stricter: chmod 600 "},
		{"none.token", "ERR none.token: no such file or directory"},
		{"certs", "ERR is not a regular file"},
	}
	for _, tc := range tests {
		tok, err := c.LoadToken(tc.path)
		if want, ok := strings.CutPrefix(tc.want, "ERR "); ok {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("LoadToken(%q) = %q, %v; want error %q", tc.path, tok, err, want)
			}
			continue
		}
		if err != nil || string(tok) != tc.want {
			t.Errorf("LoadToken(%q) = %q, %v; want %q", tc.path, tok, err, tc.want)
		}
	}
	if _, err := c.LoadToken("none.token"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadToken(missing) error %v is not os.ErrNotExist", err)
	}
}

// TestConfigExamples parses docs/examples and checks that the concentrator
// accepts the edge. The files they name live on the target machines, so
// file checks are skipped.
func TestConfigExamples(t *testing.T) {
	load := func(name string) *Config {
		t.Helper()
		path := filepath.Join("..", "..", "docs", "examples", name)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		c, err := ParseWith(path, data, Options{SkipFileChecks: true})
		if err != nil {
			t.Fatalf("%s:\n%v", name, err)
		}
		return c
	}
	edge, conc := load("edge.yaml"), load("concentrator.yaml")
	if edge.Role != RoleEdge || conc.Role != RoleConcentrator {
		t.Fatalf("roles %q, %q", edge.Role, conc.Role)
	}
	if n := len(edge.Edge.Uplinks); n != 3 {
		t.Errorf("edge example has %d uplinks, want 3", n)
	}
	links := map[string]int{}
	for _, u := range edge.Edge.Uplinks {
		links[u.Labels["link_type"]]++
	}
	if links["cellular"] != 2 || links["satellite"] != 1 {
		t.Errorf("edge example uplinks by link_type = %v, want 2 cellular and 1 satellite", links)
	}

	var entry *EdgeEntry
	for i := range conc.Concentrator.Edges {
		if conc.Concentrator.Edges[i].ID == edge.Edge.ID {
			entry = &conc.Concentrator.Edges[i]
		}
	}
	if entry == nil {
		t.Fatalf("concentrator example has no edge %q", edge.Edge.ID)
	}
	if (edge.Edge.TokenFile != "") != (entry.TokenFile != "") {
		t.Errorf("edge token_file %q, concentrator token_file %q: credentials do not match", edge.Edge.TokenFile, entry.TokenFile)
	}
	for _, a := range edge.TUN.Addresses {
		ok := false
		for _, p := range entry.AllowedPrefixes {
			ok = ok || p.Contains(a.Addr())
		}
		if !ok {
			t.Errorf("edge address %s is outside the concentrator's allowed_prefixes %v", a, entry.AllowedPrefixes)
		}
	}
	_, port, _ := strings.Cut(edge.Edge.Concentrator, ":")
	if !strings.HasSuffix(conc.Concentrator.Listen, ":"+port) {
		t.Errorf("edge dials port %s, concentrator listens on %s", port, conc.Concentrator.Listen)
	}

	// The edge's classes: video RTP on 5004-5010, control by DSCP.
	opts, err := edge.Classify.Options()
	if err != nil {
		t.Fatalf("edge example classify: %v", err)
	}
	cl, err := classify.New(opts)
	if err != nil {
		t.Fatalf("edge example classify: %v", err)
	}
	for _, tc := range []struct {
		dport uint16
		dscp  uint8
		want  string
	}{
		{5004, 0, "video"}, {5010, 0, "video"}, {5011, 46, "control"}, {443, 48, "control"}, {443, 0, ""},
	} {
		var md classify.Metadata
		cl.Parse(udp4("10.77.17.5", "10.78.1.1", 40000, tc.dport, tc.dscp), &md)
		if got := md.Class(); got != tc.want {
			t.Errorf("edge example: UDP to port %d with DSCP %d has class %q, want %q", tc.dport, tc.dscp, got, tc.want)
		}
	}
	if _, err := conc.Classify.Options(); err != nil {
		t.Errorf("concentrator example classify: %v", err)
	}
}

// TestConfigDoc keeps docs/config.md in step with the decoder: it names
// every key, its Syntax block lists each key under its section and no
// other, and the YAML blocks under Examples parse.
func TestConfigDoc(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "config.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, keys := range [][]string{configKeys, tunKeys, edgeKeys, failoverKeys, uplinkKeys, leoReconfKeys, concentratorKeys, edgeEntryKeys, bgpKeys, bgpNeighborKeys, handshakesKeys, pathsKeys, fecKeys, classifyKeys, classKeys, classMatchKeys, webKeys} {
		for _, k := range keys {
			if !bytes.Contains(doc, []byte("`"+k+"`")) {
				t.Errorf("docs/config.md does not mention `%s`", k)
			}
		}
	}
	syntaxKeys := map[string][]string{
		"": configKeys, "tun": tunKeys, "edge": edgeKeys, "edge.failover": failoverKeys,
		"edge.uplinks": uplinkKeys, "concentrator": concentratorKeys, "concentrator.edges": edgeEntryKeys,
		"concentrator.bgp": bgpKeys, "concentrator.bgp.neighbors": bgpNeighborKeys, "concentrator.handshakes": handshakesKeys, "paths": pathsKeys,
		"fec": fecKeys, "classify": classifyKeys, "classify.classes": classKeys, "classify.classes.match": classMatchKeys,
		"web": webKeys,
	}
	got := syntaxBlockKeys(t, string(doc))
	for section, keys := range syntaxKeys {
		for _, k := range keys {
			if !slices.Contains(got[section], k) {
				t.Errorf("docs/config.md's Syntax block has no %q under %q", k, section)
			}
		}
		for _, k := range got[section] {
			if !slices.Contains(keys, k) {
				t.Errorf("docs/config.md's Syntax block has %q under %q, which the decoder does not know", k, section)
			}
		}
	}
	for section := range got {
		if _, ok := syntaxKeys[section]; !ok {
			t.Errorf("docs/config.md's Syntax block has a section %q the test does not know", section)
		}
	}
	_, examples, ok := strings.Cut(string(doc), "\n## Examples\n")
	if !ok {
		t.Fatal("docs/config.md has no Examples section")
	}
	blocks := strings.Split(examples, "```yaml\n")[1:]
	if len(blocks) < 3 {
		t.Fatalf("docs/config.md has %d YAML examples, want at least 3", len(blocks))
	}
	for i, b := range blocks {
		b, _, _ = strings.Cut(b, "```")
		if _, err := ParseWith("config.md", []byte(b), Options{SkipFileChecks: true}); err != nil {
			t.Errorf("docs/config.md example %d:\n%v", i+1, err)
		}
	}
}

// syntaxBlockKeys reads the first YAML block under "## Syntax" in doc and
// returns, per section (dotted path of its keys, list items taken as the
// list's key), the keys written in it.
func syntaxBlockKeys(t *testing.T, doc string) map[string][]string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "\n## Syntax\n")
	if !ok {
		t.Fatal("docs/config.md has no Syntax section")
	}
	_, block, ok := strings.Cut(rest, "```yaml\n")
	if !ok {
		t.Fatal("docs/config.md's Syntax section has no YAML block")
	}
	block, _, _ = strings.Cut(block, "```")
	type level struct {
		indent int
		key    string
	}
	var stack []level
	keys := make(map[string][]string)
	for _, line := range strings.Split(block, "\n") {
		line, _, _ = strings.Cut(line, "#")
		trimmed := strings.TrimLeft(line, " ")
		if strings.TrimSpace(trimmed) == "" {
			continue
		}
		indent := len(line) - len(trimmed)
		if item, ok := strings.CutPrefix(trimmed, "- "); ok {
			trimmed, indent = item, indent+2
		}
		key, _, ok := strings.Cut(trimmed, ":")
		if !ok {
			t.Fatalf("docs/config.md's Syntax block: %q is not a key", line)
		}
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		path := make([]string, len(stack))
		for i, l := range stack {
			path[i] = l.key
		}
		section := strings.Join(path, ".")
		keys[section] = append(keys[section], key)
		stack = append(stack, level{indent, key})
	}
	return keys
}
