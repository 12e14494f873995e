package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestRulesCommand runs the cobra commands.
func TestRulesCommand(t *testing.T) {
	run := func(args ...string) (string, error) {
		cmd := newRulesCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(args)
		err := cmd.Execute()
		return out.String(), err
	}
	if out, err := run("check", filepath.Join("..", "..", "docs", "examples", "rules", "vehicular.yaml")); err != nil || !strings.Contains(out, "control-ef") {
		t.Errorf("check: %v\n%s", err, out)
	}
	if _, err := run("check"); err == nil {
		t.Error("check without a file accepted")
	}
	if _, err := run("explain", "--rules", filepath.Join("..", "..", "docs", "examples", "rules", "vehicular.yaml")); err == nil || !strings.Contains(err.Error(), "--pcap CAPTURE") {
		t.Errorf("explain without --pcap: %v", err)
	}
}
