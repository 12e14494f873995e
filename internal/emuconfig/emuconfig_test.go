package emuconfig

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bondd/bondd/emu"
	"github.com/bondd/bondd/internal/testkit"
)

func TestEmuConfigExample(t *testing.T) {
	if emu.DefaultTracesDir() == "" {
		t.Skip("docs/examples/emu.yaml replays the shared traces, and ../shared/data/traces is absent")
	}
	cfg, err := Load(filepath.Join("..", "..", "docs", "examples", "emu.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Relays) != 3 || cfg.StatsInterval != 5*time.Second {
		t.Fatalf("%d relays, stats every %v", len(cfg.Relays), cfg.StatsInterval)
	}
	att, ver, sat := cfg.Relays[0], cfg.Relays[1], cfg.Relays[2]
	if att.Up.Mahimahi == nil || att.Up.Mahimahi != att.Down.Mahimahi || len(att.Up.DelaySamples) != 120 || att.Seed != 1 {
		t.Errorf("att: %+v", att)
	}
	if ver.Up.Mahimahi == nil || ver.Seed != 2 {
		t.Errorf("verizon model: %+v", ver)
	}
	if sat.Up.Series == nil || sat.Up.Outages == nil || !sat.Up.WallClock || sat.Down.GilbertElliott == nil || sat.Down.Rate != 25*emu.Mbps || sat.Seed != 42 {
		t.Errorf("starlink: %+v", sat)
	}
}

func TestEmuConfigErrors(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "t.down")
	if err := os.WriteFile(trace, []byte("1\n2\nx\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "good.down"), []byte("1\n2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	head := "relays:\n  - name: a\n    listen: 127.0.0.1:9001\n    upstream: 127.0.0.1:4433\n"
	tests := []struct {
		name, yaml string
		want       string // regexp on the error
	}{
		{"empty", "", `^F: empty file`},
		{"no relays", "seed: 1\n", `^F:1: relays: no relays`},
		{"unknown key", head + "    up: {delay_msx: 1}\n", `^F:5: field delay_msx not found; did you mean "delay_ms"\?$`},
		{"wrong type", head + "    up:\n      delay_ms: fast\n", `^F:6: cannot unmarshal str .fast. into float64`},
		{"syntax", head + "    up: [\n", `^F:\d+: did not find expected node content`},
		{"no listen", "relays:\n  - upstream: 127.0.0.1:1\n", `^F:2: relays\[0\]: listen is required`},
		{"bad upstream", "relays:\n  - listen: 127.0.0.1:1\n    upstream: nowhere\n", `^F:3: relays\[0\]\.upstream: want host:port`},
		{"duplicate listen", head + "  - listen: 127.0.0.1:9001\n    upstream: 127.0.0.1:1\n", `^F:5: relays\[1\]\.listen: 127\.0\.0\.1:9001 is already used by relay a`},
		{"negative delay", head + "    down:\n      delay_ms: -5\n", `^F:6: relays\[0\]\.down\.delay_ms: must be ≥ 0`},
		{"loss percent", head + "    up:\n      loss_frac: 2\n", `^F:6: relays\[0\]\.up\.loss_frac: a fraction in \[0, 1\]`},
		{"two capacities", head + "    up:\n      rate_mbps: 4\n      mahimahi: good.down\n", `^F:5: relays\[0\]\.up: more than one capacity source`},
		{"bad trace", head + "    up:\n      mahimahi: t.down\n", `^F:6: relays\[0\]\.up\.mahimahi: .*t\.down:3: want a timestamp`},
		{"missing trace", head + "    up:\n      mahimahi: nope.down\n", `^F:6: relays\[0\]\.up\.mahimahi: open `},
		{"ge", head + "    up:\n      gilbert_elliott: {p_good_bad: 3}\n", `^F:5: relays\[0\]\.up: gilbert-elliott p_good_bad`},
		{"outage", head + "    up:\n      outages: {period_ms: 1000, at_ms: [2000]}\n", `^F:5: relays\[0\]\.up: outage start`},
		{"model and up", head + "    model: cellular/att\n    up: {delay_ms: 1}\n", `^F:5: relays\[0\]\.model: a relay takes either model or up/down`},
		{"unknown model", head + "    model: cellular/sprint\n", `^F:5: relays\[0\]\.model: unknown model "cellular/sprint"; want one of cellular/att`},
		{"starlink direction", head + "    up:\n      starlink: {file: x.csv, direction: sideways}\n", `^F:6: relays\[0\]\.up\.starlink: direction "sideways"`},
		{"traces_dir", "traces_dir: nope\n" + head, `^F:1: traces_dir: nope \(.*/nope, relative to the config file\) is not a folder`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name := filepath.Join(dir, "emu.yaml")
			_, err := Parse(name, []byte(tc.yaml))
			if err == nil {
				t.Fatalf("no error, want %s", tc.want)
			}
			msg := strings.ReplaceAll(err.Error(), name, "F")
			if !regexp.MustCompile(tc.want).MatchString(msg) {
				t.Errorf("error\n  %s\nwant match for\n  %s", msg, tc.want)
			}
		})
	}
}

func TestEmuConfigValues(t *testing.T) {
	yaml := `stats_interval_ms: -1
seed: 7
relays:
  - listen: 127.0.0.1:0
    upstream: 127.0.0.1:4433
    up:
      delay_ms: 12.5
      jitter_ms: 1
      reorder: true
      loss_frac: 0.01
      rate_mbps: 2.5
      queue_bytes: 3000
      queue_ms: 40
      outages: {period_ms: 1000, at_ms: [100], durations_ms: [5, 10], wall_clock_unused: 0}
`
	if _, err := Parse("f.yaml", []byte(yaml)); err == nil || !strings.Contains(err.Error(), "wall_clock_unused") {
		t.Fatalf("unknown nested key accepted: %v", err)
	}
	yaml = strings.Replace(yaml, ", wall_clock_unused: 0", "", 1)
	cfg, err := Parse("f.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Relays[0]
	up := r.Up
	if cfg.StatsInterval != 0 || r.Seed != 7 || r.Name != "relay0" ||
		up.Delay != 12500*time.Microsecond || up.Jitter != time.Millisecond || !up.Reorder || up.Loss != 0.01 ||
		up.Rate != 2_500_000 || up.QueueBytes != 3000 || up.QueueDelay != 40*time.Millisecond ||
		up.Outages.Period != time.Second || up.Outages.At[0] != 100*time.Millisecond || up.Outages.Durations[1] != 10*time.Millisecond {
		t.Errorf("decoded %+v", r)
	}
}

// TestEmuRun runs a relay from a config on loopback: a datagram crosses
// with the configured delay, and stats are printed on exit.
func TestEmuRun(t *testing.T) {
	server, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	yaml := "stats_interval_ms: 50\nrelays:\n  - name: r1\n    listen: 127.0.0.1:0\n    upstream: " + server.LocalAddr().String() + "\n    up: {delay_ms: 30}\n"
	cfg, err := Parse("f.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := &testkit.SyncBuffer{}
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, out, slog.New(slog.DiscardHandler)) }()
	re := regexp.MustCompile(`r1: listening on (\S+),`)
	var addr string
	for deadline := time.Now().Add(2 * time.Second); addr == "" && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			addr = m[1]
		}
	}
	if addr == "" {
		cancel()
		t.Fatalf("relay did not start: %q", out.String())
	}
	client, err := net.Dial("udp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	t0 := time.Now()
	if _, err := client.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	server.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 64)
	n, _, err := server.ReadFromUDP(buf)
	if err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("upstream got %q, %v", buf[:n], err)
	}
	if el := time.Since(t0); el < 30*time.Millisecond {
		t.Errorf("arrived after %v, before the 30 ms delay", el)
	}
	testkit.WaitFor(t, "a periodic stats line", 2*time.Second, func() bool { return strings.Contains(out.String(), "r1 up") })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if !strings.Contains(s, "final stats:") || !strings.Contains(s, "r1 up   in 1 pkt 5 B, delivered 1 pkt 5 B, drop loss 0 queue 0 outage 0 other 0") || strings.Count(s, "r1 up") < 2 {
		t.Errorf("output:\n%s", s)
	}
}

// FuzzParse checks that no config file makes Parse panic.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"relays:\n  - {listen: 127.0.0.1:0, upstream: 127.0.0.1:9, up: {delay_ms: 5}}\n",
		"relays:\n  - {listen: 127.0.0.1:0, upstream: 127.0.0.1:9, model: cellular/att}\n",
		"relays: [{up: {delay_msx: 1}}]\n", "\x00\x01", "",
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4096 {
			return
		}
		_, _ = Parse(filepath.Join(dir, "emu.yaml"), data)
	})
}
