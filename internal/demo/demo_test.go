package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bondd/bondd/emu"
	"github.com/bondd/bondd/internal/testbed"
)

// runDemoTest runs a short demo and returns its printed report and JSON.
func runDemoTest(t *testing.T, o Options) (string, map[string]any) {
	t.Helper()
	o.JSONPath = filepath.Join(t.TempDir(), "report.json")
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := Run(ctx, o, &out); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	b, err := os.ReadFile(o.JSONPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep map[string]any
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	t.Logf("report:\n%s", out.String())
	return out.String(), rep
}

// checkDemoReport checks the JSON fields the demo promises and that the
// flow got through as the scenario predicts. At 1 Mbit/s the three
// emulated cellular paths (5.2, 12.8 and 5.0 Mbit/s mean capacity,
// emu.CellularScenario) have room to spare, so packets queue little: the
// mean one-way delay lies between half the smallest base RTT of the
// 5Gophers samples (24.2 ms, so 12 ms) and the largest base one-way delay
// (45 ms) plus queueing well under the send queue's 200-ms limit (150 ms in
// all; runs measure 20–45 ms). Loss is the paths' random-loss floor (0.6–0.7
// % each way), mostly recovered by adaptive FEC: at most 5 %.
func checkDemoReport(t *testing.T, rep map[string]any, mode string) {
	t.Helper()
	for _, k := range []string{"paths", "owd_ms", "loss_rate", "goodput_mbps", "packets_sent", "packets_received", "duration_s", "mode", "traces"} {
		if _, ok := rep[k]; !ok {
			t.Errorf("report has no %q", k)
		}
	}
	if rep["mode"] != mode {
		t.Errorf("mode %v, want %s", rep["mode"], mode)
	}
	paths, _ := rep["paths"].([]any)
	if len(paths) != 3 {
		t.Fatalf("%d paths in the report, want 3", len(paths))
	}
	var share float64
	for _, p := range paths {
		pm := p.(map[string]any)
		for _, k := range []string{"name", "share", "rtt_ms", "loss_rate", "state"} {
			if _, ok := pm[k]; !ok {
				t.Errorf("path %v has no %q", pm["name"], k)
			}
		}
		share += pm["share"].(float64)
	}
	if share < 0.999 || share > 1.001 {
		t.Errorf("path shares sum to %v", share)
	}
	sent, recv := rep["packets_sent"].(float64), rep["packets_received"].(float64)
	if sent < 250 || recv < 0.95*sent {
		t.Errorf("sent %v, received %v: more than 5 %% lost", sent, recv)
	}
	owd := rep["owd_ms"].(map[string]any)
	if m := owd["mean"].(float64); m < 12 || m > 150 {
		t.Errorf("mean one-way delay %v ms outside what the scenario predicts (12–150 ms)", m)
	}
	if !(owd["p50"].(float64) <= owd["p95"].(float64) && owd["p95"].(float64) <= owd["p99"].(float64)) {
		t.Errorf("delay quantiles out of order: %v", owd)
	}
}

func TestDemoInprocessBuiltin(t *testing.T) {
	out, rep := runDemoTest(t, Options{Duration: 3 * time.Second, RateMbps: 1, Seed: 1, Inprocess: true})
	checkDemoReport(t, rep, "inprocess")
	if tr := rep["traces"].([]any); len(tr) != 1 || tr[0] != "builtin" {
		t.Errorf("traces %v, want [builtin]", tr)
	}
	if !strings.Contains(out, "built-in models") {
		t.Error("the report does not say it used the built-in models")
	}
}

func TestDemoInprocessTraces(t *testing.T) {
	dir := emu.DefaultTracesDir()
	if dir == "" {
		t.Skip("skipping: the public trace folder (../shared/data/traces) is not present")
	}
	_, rep := runDemoTest(t, Options{Duration: 3 * time.Second, RateMbps: 1, Seed: 1, Traces: dir, Inprocess: true})
	checkDemoReport(t, rep, "inprocess")
	if tr := rep["traces"].([]any); len(tr) < 3 || !strings.Contains(tr[0].(string), "mahimahi") {
		t.Errorf("traces %v, want the replayed files", tr)
	}
}

func TestDemoNetns(t *testing.T) {
	if why := testbed.Unavailable(); why != "" {
		t.Skip("skipping: " + why)
	}
	_, rep := runDemoTest(t, Options{Duration: 3 * time.Second, RateMbps: 1, Seed: 2, Traces: emu.DefaultTracesDir()})
	checkDemoReport(t, rep, "netns")
	// Everything the demo created is gone (namespace names carry the pid).
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), fmt.Sprintf("%s%d-", demoNSPrefix, os.Getpid())) {
			t.Errorf("namespace %s left behind", e.Name())
		}
	}
}
