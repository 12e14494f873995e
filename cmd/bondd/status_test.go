package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bondd/bondd/internal/node"
	"github.com/bondd/bondd/internal/status"
)

func TestPrintStatus(t *testing.T) {
	r := fakeReport()
	var b bytes.Buffer
	status.Print(&b, &r, r.Rules.Loaded.Add(5*time.Minute))
	out := b.String()
	for _, want := range []string{
		"concentrator, v0.0.0-test, up 1m30s",
		"rules /etc/bondd/rules.yaml: version 2, 2 rules, loaded " + r.Rules.Loaded.Format(time.DateTime) + " (5m0s ago); 3 reloads, 1 failed",
		"refused connections: 2, downlink packets without a bond: 3",
		"bond van-17 (id b0d), up 1m20s, mtu 1280, addresses 10.77.17.0/24: tx 100 rx 900 packets",
		"duplicate 7 too_old 0 spoofed 5",
		"rule hits: video=42 rest=58",
		"bond van-18 (id 0), up 0s, mtu 1152 (configured 1280: no path carries full-size datagrams; largest datagram budget 1195 bytes, on path cell-a), addresses -:",
		"  path cell-a datagram budget 1195 bytes (SEARCH_COMPLETE, 1 black holes, 16 probes, 4 datagrams parked for a probe): black hole: 5 datagrams of 1322+ bytes lost",
		"  path cell-a: 9 datagrams resent, 2 lost too late to resend, 5 queued frames moved to other paths when it failed, 1 video frames hit in its queue",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	// The path rows, in two tables: share of the bond's datagrams both ways
	// (660 and 340 of 1000), bytes each way; then drops, labels, peer and
	// last error.
	rows := []*regexp.Regexp{
		regexp.MustCompile(`(?m)^  cell-a +ACTIVE +66\.0 % +45ms +30ms +64000 +11\.4 Mbit/s +10/1000 +60 +58\.6 KiB +600 +703 KiB +3$`),
		regexp.MustCompile(`(?m)^  starlink +UNAVAILABLE +34\.0 % +0s +0s +0 +- +0/0 +40 +39\.1 KiB +300 +3\.00 MiB +0$`),
		regexp.MustCompile(`(?m)^  path drops, in this order: queue_full/expired/deadline/too_large/send_error/receive_queue_full/object_lost/suspect/stale/black_hole$`),
		regexp.MustCompile(`(?m)^  cell-a +1/2/0/0/0/0/0/0/0/0 +cost_class=metered,link_type=cellular +203\.0\.113\.7:41000 \(migrated 2×\) *$`),
		regexp.MustCompile(`(?m)^  starlink +0/0/0/0/0/0/0/0/0/0 +link_type=satellite +- +timeout: no recent network activity$`),
	}
	for _, re := range rows {
		if !re.MatchString(out) {
			t.Errorf("no row matching %s in\n%s", re, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "  cell-a ") || strings.HasPrefix(line, "  path ") && strings.Contains(line, "status") {
			if n := len([]rune(line)); n > 160 {
				t.Errorf("a path table line of %d characters, want ≤ 160 so that it fits a terminal:\n%s", n, line)
			}
		}
	}
	if strings.Contains(out, "  path  status") {
		t.Errorf("a bond without paths prints the path tables' headers:\n%s", out)
	}
}

// frameWriter collects what status.Watch writes, one Write per report, and
// cancels after n reports.
type frameWriter struct {
	mu     sync.Mutex
	frames []string
	n      int
	cancel context.CancelFunc
}

func (w *frameWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.frames = append(w.frames, string(p))
	if len(w.frames) == w.n {
		w.cancel()
	}
	return len(p), nil
}

// TestStatusWatch serves a changing report on a control socket and watches
// it: each refresh shows the report of that moment.
func TestStatusWatch(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "bondd.sock")
	var mu sync.Mutex
	served := 0
	ctl, err := status.Serve(sock, func() status.Report {
		mu.Lock()
		defer mu.Unlock()
		served++
		r := fakeReport()
		r.Bonds[0].TxPackets = uint64(served)
		return r
	}, func() error { return node.Drain(nil) })
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()

	for _, tc := range []struct {
		name          string
		json, clear   bool
		prefix, first string
	}{
		{"table", false, false, "every 10ms, ", "tx 1 rx 900 packets"},
		{"terminal", false, true, "\x1b[H\x1b[2J" + "every 10ms, ", "rx 900 packets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w := &frameWriter{n: 3, cancel: cancel}
			if err := status.Watch(ctx, w, sock, 10*time.Millisecond, tc.json, tc.clear); err != nil {
				t.Fatal(err)
			}
			if len(w.frames) != 3 {
				t.Fatalf("%d reports, want 3", len(w.frames))
			}
			for i, f := range w.frames {
				if i > 0 && !tc.clear {
					f = strings.TrimPrefix(f, "\n")
				}
				if !strings.HasPrefix(f, tc.prefix) {
					t.Errorf("report %d starts %.40q, want %q", i, f, tc.prefix)
				}
			}
			if !strings.Contains(w.frames[0], tc.first) {
				t.Errorf("first report has no %q:\n%s", tc.first, w.frames[0])
			}
			if w.frames[1] == w.frames[2] {
				t.Error("the report did not change between refreshes")
			}
		})
	}

	t.Run("json", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		w := &frameWriter{n: 2, cancel: cancel}
		if err := status.Watch(ctx, w, sock, 10*time.Millisecond, true, false); err != nil {
			t.Fatal(err)
		}
		var last uint64
		for i, f := range w.frames {
			if strings.Count(f, "\n") != 1 {
				t.Errorf("report %d is not one line: %q", i, f)
			}
			var r status.Report
			if err := json.Unmarshal([]byte(f), &r); err != nil {
				t.Fatalf("report %d: %v", i, err)
			}
			if got := r.Bonds[0].TxPackets; got <= last {
				t.Errorf("report %d: tx %d after %d", i, got, last)
			} else {
				last = got
			}
			if r.Bonds[0].Addresses[0].String() != "10.77.17.0/24" || r.Rules.Version != 2 {
				t.Errorf("report %d lost fields: %+v", i, r)
			}
		}
	})

	t.Run("no daemon", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		w := &frameWriter{n: 2, cancel: cancel}
		if err := status.Watch(ctx, w, filepath.Join(t.TempDir(), "none.sock"), 10*time.Millisecond, false, false); err != nil {
			t.Fatal(err)
		}
		if len(w.frames) != 2 || !strings.Contains(w.frames[1], "no bondd answering on") {
			t.Errorf("reports %q, want two errors", w.frames)
		}
	})
}

// TestStatusCmdWatchInterval checks the flag validation.
func TestStatusCmdWatchInterval(t *testing.T) {
	cmd := newStatusCmd()
	cmd.SetArgs([]string{"--watch", "--interval", "1ms", "--socket", filepath.Join(t.TempDir(), "x.sock")})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--interval 1ms is too short") {
		t.Errorf("err = %v", err)
	}
}
