package main

import (
	"context"
	"math"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bondd/bondd/internal/bench"
)

// TestNetnsFaultMatrix runs the short version of bondd bench faults (the
// fault matrix of docs/operations.md: the real binary as edge and
// concentrator in network namespaces, a 1 kHz probe through the tunnel)
// and checks each row against the targets, with bounds that leave
// room for a loaded CI machine where a target is a time the machine's load
// stretches (named at each check).
func TestNetnsFaultMatrix(t *testing.T) {
	requireNetns(t)
	bin := filepath.Join(t.TempDir(), "bondd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	started := time.Now()
	rows, err := bench.RunFaults(ctx, bench.Options{Bin: bin, Short: true}, testLogWriter{t, "faults"})
	t.Logf("fault matrix (short) in %s:\n%s", time.Since(started).Round(time.Second), bench.FaultsTable(rows))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range rows {
		seen[r.Name+"/"+r.Rules] = true
		t.Run(r.Name+"/"+r.Rules, func(t *testing.T) { checkFaultRow(t, r) })
	}
	for _, want := range []string{"blackhole/default", "blackhole/prefer", "ipv6-blackhole/prefer", "mtu-blackhole/default", "mtu-blackhole/prefer",
		"link-down/default", "address-change/default", "all-down/default", "conc-kill/default", "conc-term/default", "garbage/default"} {
		if !seen[want] {
			t.Errorf("the short matrix has no row %s", want)
		}
	}
}

// checkFaultRow checks one row of the matrix.
func checkFaultRow(t *testing.T, r bench.FaultResult) {
	gapBound := math.Max(3*r.RTTms, 150)
	// Every lost probe packet is explained by a drop counter, to within a
	// few packets on the wire at the onset. Counting more than was lost
	// is allowed: `suspect` presumes lost what a stalled path (a loaded
	// machine) still delivered.
	explained := func(slack int64) {
		if r.Unexplained > slack {
			t.Errorf("%d of %d lost probe packets unexplained (counters %v), want ≤ %d", r.Unexplained, r.Lost, r.Drops, slack)
		}
	}
	// Logged: datagrams inside quic-go when a link goes down are counted
	// only once the path's last connection ends.
	logExplained := func() {
		t.Logf("%s (%s rules): %d lost, %d unexplained (counters %v)", r.Name, r.Rules, r.Lost, r.Unexplained, r.Drops)
	}
	if strings.Contains(r.Note, "carried the probe") {
		t.Errorf("the prefer rule did not steer the probe: %s", r.Note)
	}
	switch r.Name {
	case "blackhole", "ipv6-blackhole", "link-down", "address-change":
		if r.GapFaultMs > gapBound {
			t.Errorf("longest probe gap during the fault %.0f ms, want ≤ max(3 × RTT %.1f ms, 150 ms)", r.GapFaultMs, r.RTTms)
		}
		// The matrix's row holds the whole case to the bound. Here, with
		// other tests on the same two cores, the concentrator's receive
		// queue can overflow when traffic moves back to the healed path
		// (receive_queue_full, counted): at most 1 s after the heal.
		if r.GapAfterHealMs > math.Max(gapBound, 1000) {
			t.Errorf("longest probe gap after the heal %.0f ms, want ≤ 1 s", r.GapAfterHealMs)
		} else if r.GapAfterHealMs > gapBound {
			t.Logf("longest probe gap after the heal %.0f ms (counters %v)", r.GapAfterHealMs, r.Drops)
		}
		if r.Name == "blackhole" || r.Name == "ipv6-blackhole" {
			explained(10)
		} else {
			logExplained()
		}
		if r.Name != "link-down" && r.Lost > 0 && r.DetectMs < 0 {
			t.Errorf("the probe lost %d packets but the edge's status never showed the fault on %s", r.Lost, r.Path)
		}
	case "mtu-blackhole":
		if r.RecoverMs < 0 || r.RecoverMs > 3000 {
			t.Errorf("traffic restored %.0f ms after the onset, want ≤ 3000 ms", r.RecoverMs)
		}
		// The target is 1 s (the matrix's rows: 118–204 ms in six runs
		// alone, three of them beside three busy loops). Beside the
		// rest of `go test ./...` the prefer row has read 1,048, 1,054
		// and 1,096 ms in some runs, one with 85 frames expired in the
		// edge's queue where a quiet run has 2–20: the machine stalled
		// the send path; what holds one packet for a second then is not
		// found yet. 2 s under load.
		if r.LateMs > 2000 {
			t.Errorf("a probe packet delivered %.0f ms late, want ≤ 1000 ms (2 s under load)", r.LateMs)
		} else if r.LateMs > 1000 {
			t.Logf("a probe packet delivered %.0f ms late (counters %v): over the 1-s target, within the 2 s allowed under load", r.LateMs, r.Drops)
		}
		if r.DetectMs < 0 {
			t.Errorf("the edge's status never showed the black hole on %s", r.Path)
		}
		if !strings.Contains(r.PMTUReason, "black hole") {
			t.Errorf("the path's pmtu_reason %q does not name the black hole", r.PMTUReason)
		}
		explained(10)
	case "all-down":
		// The edge watches its uplinks' interfaces and redials one as
		// soon as it comes up (internal/node/uplinks.go), rather than
		// after its redial backoff (up to redial_max, 10 s).
		if r.RecoverMs < 0 || r.RecoverMs > 1500 {
			t.Errorf("traffic restored %.0f ms after the links returned, want ≤ 1500 ms", r.RecoverMs)
		}
		logExplained()
	case "conc-kill", "conc-term":
		if r.GapMs > r.RestartMs+1000 {
			t.Errorf("probe gap %.0f ms, want ≤ restart %.0f ms + 1000 ms", r.GapMs, r.RestartMs)
		}
		// The target is 0.5 s (about 25 ms measured on an idle machine);
		// 1.5 s under load.
		if r.Name == "conc-term" {
			if r.ExitMs > 1500 {
				t.Errorf("SIGTERM → exit %.0f ms, want ≤ 500 ms (1.5 s under load)", r.ExitMs)
			}
		}
		// What went to the old process after it was last heard is
		// presumed lost when the new one resets the connection.
		explained(20)
	case "garbage":
		// The target is 0.1 % (the matrix's row, on a quiet machine). Here
		// the flood, the probe and both daemons share two cores that other
		// tests load too, and the concentrator sheds what it cannot drain
		// (receive_queue_full, explained below): 5 %. A flood that starved
		// the bond's receive path would take most of the probe.
		if loss := 100 * float64(r.Lost) / float64(max(r.Sent, 1)); loss > 5 {
			t.Errorf("probe lost %.2f %% during the flood, want ≤ 0.1 %% (5 %% on a loaded machine)", loss)
		}
		// Every kind is counted by reason, the short headers over 42 bytes
		// for no connection too: quic-go answers them with a stateless
		// reset and reports nothing, so the concentrator counts the resets
		// it sends (tunnel/conc_resets.go).
		counted := r.GarbageByReason["not_quic"] + r.GarbageByReason["bad_header"] + r.GarbageByReason["unknown_connection"] + r.GarbageByReason["dos_prevention"]
		if want := r.GarbageSent * 99 / 100; counted < want {
			t.Errorf("%d garbage datagrams counted by reason of %d sent (%v), want ≥ %d", counted, r.GarbageSent, r.GarbageByReason, want)
		}
		explained(5)
	default:
		t.Errorf("unknown fault %s", r.Name)
	}
	if t.Failed() {
		t.Logf("row: %+v", r)
	}
}
