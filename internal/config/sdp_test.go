package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bondd/bondd/classify"
)

// TestClassifySDP checks that classify.sdp reads the payload types of an
// SDP file relative to the config file, that payload_types override it, and
// that a bad SDP file is reported with the config's line and the SDP's.
func TestClassifySDP(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad := write("bad.sdp", "v=0\nm=video 5004 RTP/AVP 96\na=rtpmap:96 H264\n")
	write("good.sdp", "v=0\nm=video 50000 RTP/AVP 96\na=rtpmap:96 H265/90000\n")

	_, err := Parse(filepath.Join(dir, "bondd.yaml"), []byte(edgeOK+"classify:\n  sdp: bad.sdp\n"))
	if err == nil || !strings.Contains(err.Error(), "bondd.yaml:11: classify.sdp: "+bad+":3: expected a=rtpmap:PT NAME/CLOCK") {
		t.Errorf("bad SDP: error %v, want the config line and the SDP line", err)
	}
	cfg, err := ParseWith(filepath.Join(dir, "bondd.yaml"), []byte(edgeOK+"classify:\n  sdp: good.sdp\n  payload_types: {97: vp9}\n"), Options{SkipFileChecks: true})
	if err != nil {
		t.Fatal(err)
	}
	opts, err := cfg.Classify.Options()
	if err != nil {
		t.Fatal(err)
	}
	if opts.PayloadTypes[96] != classify.CodecH265 || opts.PayloadTypes[97] != classify.CodecVP9 {
		t.Errorf("payload types %v, want 96 h265 (SDP) and 97 vp9", opts.PayloadTypes)
	}
}
