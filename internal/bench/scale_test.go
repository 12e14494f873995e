package bench

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestMain lets the scale scenario re-execute the test binary as its
// edges' process.
func TestMain(m *testing.M) {
	RunScaleChildren()
	os.Exit(m.Run())
}

// TestScaleSmoke runs a two-step ramp (1 and 6 bonds, half of them
// sending, the edges in two processes) for a second each, with the flood
// (300 spoofed Initials/s) at 6 bonds and the restart, and checks the
// report: every step ran, the JSON has the headline fields beside the
// single bond's, every active bond delivered nearly all it sent, also
// under the flood, resumed handshakes resumed, the new edge connected
// under the flood, every bond came back after the restart, and the idle
// bonds hold none of the per-bond buffers that traffic allocates.
func TestScaleSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process with edges; seconds")
	}
	dir := t.TempDir()
	jsonFile := filepath.Join(dir, "scale.json")
	o := Options{Scenario: Scale, Out: dir, Duration: time.Second, Settle: 300 * time.Millisecond,
		ScaleBonds: []int{1, 6}, ScalePPS: 400, ScaleActive: 0.5, ScaleEdgeProcs: 2, ScaleFlood: 300, ScaleRestart: true, JSON: jsonFile,
		// One edge after the other, three edges a process: a session cache
		// shared by a process's edges would let its second and third
		// resume the first's ticket.
		ScaleDialing: 1}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := Run(ctx, o, testWriter{t}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	var rep scaleReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	var head map[string]any
	json.Unmarshal(b, &head)
	for _, k := range []string{"bonds", "handshakes_per_s", "rss_mib_per_idle_bond", "rss_mib_per_active_bond", "cpu_us_per_packet", "single_bond",
		"idle_cpu_pct", "handshake_cpu_ms", "flood_pps", "active_delivered_min", "restart_all_back_s"} {
		if _, ok := head[k]; !ok {
			t.Errorf("%s: no %q", jsonFile, k)
		}
	}
	if len(rep.Steps) != 2 || rep.Bonds != 6 || rep.SingleBond == nil || rep.SingleBond.Bonds != 1 {
		t.Fatalf("steps %+v, bonds %d, single %+v", rep.Steps, rep.Bonds, rep.SingleBond)
	}
	for _, s := range rep.Steps {
		if s.Limit != "" {
			t.Errorf("%d bonds: %s", s.Bonds, s.Limit)
		}
		if s.HandshakesPerS <= 0 || s.CPUUsPerPacket <= 0 || s.DeliveredPPS <= 0 {
			t.Errorf("%d bonds: handshakes/s %v, CPU µs/packet %v, delivered %v packets/s", s.Bonds, s.HandshakesPerS, s.CPUUsPerPacket, s.DeliveredPPS)
		}
		if s.MinShare < 0.9 {
			t.Errorf("%d bonds: an active bond delivered %.3f of what it sent, want ≥ 0.9", s.Bonds, s.MinShare)
		}
	}
	for _, s := range rep.Steps {
		if s.HandshakesPerSResumed <= 0 || s.ResumedShare < 0.9 || s.HandshakeCPUms <= 0 {
			t.Errorf("%d bonds: resumed %v handshakes/s, %.3f of them resumed; %v ms of node CPU per fresh one", s.Bonds, s.HandshakesPerSResumed, s.ResumedShare, s.HandshakeCPUms)
		}
		// Fresh: every edge's first handshake has no ticket, whatever
		// else redials (a path whose handshake the loaded machine timed
		// out resumes its sibling's ticket). Edges sharing one session
		// cache made only each process's first edge's full: 4 of 6 bonds.
		if s.FreshFull < uint64(s.Bonds) {
			t.Errorf("%d bonds: %d fresh handshakes did not resume (%.3f resumed), want at least one per edge", s.Bonds, s.FreshFull, s.FreshResumedShare)
		}
	}
	if fl := rep.Flood; fl == nil || fl.FloodPPS < 100 || fl.Retries == 0 || fl.NewEdgeBothS < 0 || fl.ActiveMinShare < 0.9 {
		t.Errorf("flood step %+v: want ≥ 100 Initials/s sent, Retries, the new edge up and the active bonds delivering", fl)
	}
	if rs := rep.Restart; rs == nil || rs.AllBackS <= 0 || rs.Bonds != 6 || len(rs.PerSecond) == 0 || rs.Resumed < 0.5 {
		t.Errorf("restart step %+v: want 6 bonds back, counted per second, mostly resumed", rs)
	}
	last := rep.Steps[1]
	if last.ActiveBonds != 3 {
		t.Errorf("active bonds %d of 6, want 3", last.ActiveBonds)
	}
	// The decoder's own struct (about 1 KiB) is all an idle bond's
	// decoder may hold; its block table alone is tens of KiB.
	if f := last.FootprintIdle; f.FECDecoder > 4096 || f.FECEncoder+f.Queues+f.Dedupe != 0 {
		t.Errorf("an idle bond holds %+v bytes; want no buffers before traffic", f)
	}
	if f := last.FootprintActive; f.FECDecoder == 0 || f.Dedupe == 0 {
		t.Errorf("an active bond holds %+v bytes; want its decoder table and dedupe window", f)
	}
	if _, err := os.Stat(filepath.Join(dir, PlotsFile)); err != nil {
		t.Error(err)
	}
}

// testWriter writes bench output to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
