package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunCheck runs `bondd run --check` on configs that are good and
// broken, in the config itself and in its rule file.
func TestRunCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("ca.pem", "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n", 0o644)
	write("van-17.token", strings.Repeat("t", 32), 0o600)
	write("rules.yaml", "rules:\n  - id: video-sat\n    priority: 10\n    match: {codec: h264}\n    actions: {prefer: {link_type: satellite}}\n", 0o644)
	write("broken-rules.yaml", "rules:\n  - id: x\n    priority: 1\n    match: {codek: h264}\n    actions: {prefer: {link_type: satellite}}\n", 0o644)
	write("broken-down.yaml", "rules:\n  - id: y\n    priority: 1\n    match: {dscpp: 46}\n    actions: {prefer: {link_type: satellite}}\n", 0o644)
	const edge = "role: edge\ntun: {name: bond0, addresses: [10.77.17.1/24]}\n" +
		"edge:\n  id: van-17\n  concentrator: concentrator.example.net:4433\n  ca_file: ca.pem\n  token_file: van-17.token\n" +
		"  uplinks:\n    - {name: cell-a, interface: wwan0, labels: {link_type: cellular, cost_class: metered}}\n" +
		"    - {name: sat, interface: eth1, leo_reconf: true, labels: {link_type: satellite}}\n"
	cases := []struct {
		name, config string
		want         []string // in the output, or in the error when errWant
		errWant      bool
		once         string // in the error only once, when set
	}{
		{"good", edge + "rules: rules.yaml\n",
			[]string{"OK, role edge", "edge van-17 to concentrator concentrator.example.net:4433, 2 uplink(s)",
				"cell-a on wwan0, labels cost_class=metered link_type=cellular", "sat on eth1, LEO reconfiguration schedule (seconds 12,27,42,57 of each UTC minute, window ±100ms, hold 100ms)", "1 rule(s)",
				"web page on 127.0.0.1:8740"}, false, ""},
		{"no rules", edge, []string{"OK, role edge"}, false, ""},
		// A retired key: OK, with a warning that says why and where.
		{"retired lanes", strings.Replace(edge, "interface: wwan0,", "interface: wwan0, lanes: auto,", 1),
			[]string{"OK, role edge", "warning: " + filepath.Join(dir, "bondd.yaml") + ":9: edge.uplinks[0].lanes: retired and ignored:",
				"one QUIC connection", "0.30–0.46", "docs/performance.md"}, false, ""},
		{"broken config", strings.Replace(edge, "id: van-17", "id: ''", 1), []string{"edge.id"}, true, ""},
		{"broken rule file", edge + "rules: broken-rules.yaml\n", []string{"broken-rules.yaml", "codek"}, true, ""},
		{"missing rule file", edge + "rules: nope.yaml\n", []string{"nope.yaml"}, true, "nope.yaml"},
		// The config's errors and the rule file's, in one run.
		{"broken config and rule file", strings.Replace(edge, "id: van-17", "id: ''", 1) + "rules: broken-rules.yaml\n",
			[]string{"edge.id", "broken-rules.yaml", "codek"}, true, ""},
		{"not YAML", "role: edge\n  tun: [\n", []string{"bondd.yaml"}, true, ""},
		{"good downlink rules", strings.Replace(edge, "  uplinks:", "  downlink_rules: rules.yaml\n  uplinks:", 1),
			[]string{"OK, role edge", "downlink rules: " + filepath.Join(dir, "rules.yaml") + ", 1 rule(s)"}, false, ""},
		{"broken downlink rules", strings.Replace(edge, "  uplinks:", "  downlink_rules: broken-rules.yaml\n  uplinks:", 1),
			[]string{"broken-rules.yaml", "codek"}, true, ""},
		// Every rule file's errors, in one run.
		{"both broken", strings.Replace(edge, "  uplinks:", "  downlink_rules: broken-down.yaml\n  uplinks:", 1) + "rules: broken-rules.yaml\n",
			[]string{"broken-rules.yaml", "codek", "broken-down.yaml", "dscpp"}, true, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, "bondd.yaml")
			write("bondd.yaml", c.config, 0o644)
			cmd := newRunCmd()
			var out, errOut bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&errOut)
			cmd.SetArgs([]string{"--check", "-c", p, "--control-socket", ""})
			cmd.SilenceUsage = true
			err := cmd.Execute()
			got := out.String()
			if c.errWant {
				if err == nil {
					t.Fatalf("no error; printed:\n%s", got)
				}
				if strings.Contains(got, "OK") {
					t.Errorf("printed OK for a config with errors:\n%s", got)
				}
				got = err.Error()
				if c.once != "" && strings.Count(got, c.once) != 1 {
					t.Errorf("%q not once in:\n%s", c.once, got)
				}
			} else if err != nil {
				t.Fatalf("error: %v", err)
			}
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q not in:\n%s", w, got)
				}
			}
		})
	}
}
