package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/bondd/bondd/rules"
	"github.com/bondd/bondd/tunnel"
)

// probeAt builds a probe record: one packet per ms from 0, delivered
// after delay unless its index is in lost.
func probeAt(n int, delay time.Duration, lost func(i int) bool) *faultProbe {
	p := &faultProbe{}
	for i := range n {
		s := time.Duration(i) * time.Millisecond
		p.sendAt = append(p.sendAt, s)
		if lost(i) {
			p.recvAt = append(p.recvAt, -1)
			continue
		}
		p.recvAt = append(p.recvAt, s+delay)
		p.arrivals = append(p.arrivals, s+delay)
	}
	return p
}

func TestFaultProbeGapStarting(t *testing.T) {
	const ms = time.Millisecond
	// A 100 ms hole from 300 ms: open at 350 ms, so not counted from there.
	p := probeAt(1000, 0, func(i int) bool { return i >= 300 && i < 400 })
	if g := p.longestGapStarting(350*ms, 1000*ms); g != ms {
		t.Errorf("from inside the hole: %s, want 1ms", g)
	}
	if g := p.longestGapStarting(299*ms, 1000*ms); g != 101*ms {
		t.Errorf("from before the hole: %s, want 101ms", g)
	}
}

func TestFaultProbeMetrics(t *testing.T) {
	const ms = time.Millisecond
	for _, tt := range []struct {
		name              string
		lost              func(i int) bool
		from, to          time.Duration
		gap, restored     time.Duration
		wantSent, wantGot int
	}{
		{"no loss", func(int) bool { return false }, 0, 1000 * ms, 1 * ms, 0, 1000, 1000},
		{"100 ms hole at 300 ms", func(i int) bool { return i >= 300 && i < 400 }, 200 * ms, 1000 * ms, 101 * ms, 200 * ms, 1000, 900},
		{"one in three lost until 700 ms", func(i int) bool { return i < 700 && i%3 == 0 }, 0, 1000 * ms, 2 * ms, 700 * ms, 1000, 766},
		{"sparse loss is no outage", func(i int) bool { return i%50 == 7 }, 0, 1000 * ms, 2 * ms, 0, 1000, 980},
		{"silence still open at the end", func(i int) bool { return i >= 800 }, 0, 1000 * ms, 196 * ms, 900 * ms, 1000, 800},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := probeAt(1000, 5*ms, tt.lost)
			if g := p.longestGap(tt.from, tt.to); g != tt.gap {
				t.Errorf("longest gap %s, want %s", g, tt.gap)
			}
			if r := p.restoredAfter(tt.from, 900*ms); r != tt.restored {
				t.Errorf("restored after %s, want %s", r, tt.restored)
			}
			if g := p.longestGapStarting(tt.from, tt.to); g > tt.gap {
				t.Errorf("longest gap starting after %s: %s, more than the longest gap %s", tt.from, g, tt.gap)
			}
			if d := p.maxDelay(); d != 5*ms {
				t.Errorf("max delay %s, want 5ms", d)
			}
			if s, g := p.counts(); s != tt.wantSent || g != tt.wantGot {
				t.Errorf("counts %d/%d, want %d/%d", s, g, tt.wantSent, tt.wantGot)
			}
		})
	}
}

// TestProbeRulesCompile checks that both rule sets the matrix installs
// are valid rule files.
func TestProbeRulesCompile(t *testing.T) {
	for _, prefer := range []string{"", "up1", "up2"} {
		src := probeRules(prefer)
		set, err := rules.CompileBytes("faults.yaml", []byte(src), rules.Options{})
		if err != nil {
			t.Fatalf("prefer %q: %v\n%s", prefer, err, src)
		}
		if set == nil {
			t.Fatalf("prefer %q: no rule set", prefer)
		}
		if got := strings.Count(src, "- id:"); got != 1+min(len(prefer), 1) {
			t.Errorf("prefer %q: %d rules", prefer, got)
		}
	}
}

// TestFaultExplain checks the accounting: drops during the case explain
// the loss, FEC recoveries do not count, a restarted concentrator's
// counters start at zero.
func TestFaultExplain(t *testing.T) {
	st := func(suspect, noPath, stale, recovered uint64) *faultStatus {
		b := tunnel.BondStats{
			Drops: tunnel.DropCounts{tunnel.DropNoPath: noPath},
			Paths: []tunnel.PathStats{{Name: "up0", Drops: tunnel.DropCounts{tunnel.DropSuspect: suspect, tunnel.DropStale: stale}}},
			FEC:   &tunnel.FECStats{Recovered: recovered},
		}
		return &faultStatus{Bonds: []tunnel.BondStats{b}}
	}
	for _, tt := range []struct {
		name                   string
		lost                   uint64
		e0, e1, c0, c1         *faultStatus
		explained, unexplained int64
	}{
		{"suspect drops explain a black hole", 100, st(5, 0, 0, 0), st(105, 0, 0, 0), st(0, 0, 0, 0), st(0, 0, 0, 0), 100, 0},
		{"stale and no_path add, recovered subtracts", 50, st(0, 10, 0, 0), st(0, 40, 0, 0), st(0, 0, 1, 2), st(0, 0, 31, 12), 50, 0},
		{"what nothing counts stays unexplained", 70, st(0, 0, 0, 0), st(0, 20, 0, 0), nil, st(0, 0, 0, 0), 20, 50},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := FaultResult{Lost: tt.lost}
			explain(&r, tt.e0, tt.e1, tt.c0, tt.c1)
			if r.Explained != tt.explained || r.Unexplained != tt.unexplained {
				t.Errorf("explained %d, unexplained %d (drops %v), want %d, %d", r.Explained, r.Unexplained, r.Drops, tt.explained, tt.unexplained)
			}
		})
	}
}

// TestFaultsTable checks the table's shape: a header, a rule and one row
// per result, each with the same number of cells.
func TestFaultsTable(t *testing.T) {
	md := FaultsTable([]FaultResult{
		{Name: "blackhole", Rules: RulesDefault, Path: "up0", RTTms: 0.3, GapMs: 101, Lost: 99, Sent: 3000, DetectMs: 121, RecoverMs: 200, HealMs: -1,
			Drops: map[string]uint64{"edge:suspect": 100}, Target: "gap ≤ 150 ms", Pass: true},
		{Name: "conc-term", Rules: RulesPrefer, ExitMs: 30, RestartMs: 120, DetectMs: -1, Target: "exit ≤ 500 ms"},
	})
	lines := strings.Split(strings.TrimSpace(md), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 4:\n%s", len(lines), md)
	}
	cells := strings.Count(lines[0], "|")
	for _, l := range lines[1:] {
		if strings.Count(l, "|") != cells {
			t.Errorf("row %q has %d cell borders, want %d", l, strings.Count(l, "|"), cells)
		}
	}
	for _, want := range []string{"edge:suspect 100", "| pass |", "| **miss** |", "exit 30 ms", "| - |"} {
		if !strings.Contains(md, want) {
			t.Errorf("table lacks %q:\n%s", want, md)
		}
	}
}

// TestFaultNames checks the matrix holds every fault the issue names and
// the IPv6 case.
func TestFaultNames(t *testing.T) {
	got := strings.Join(FaultNames(), ",")
	for _, want := range []string{"blackhole", "ipv6-blackhole", "mtu-blackhole", "link-down", "address-change", "all-down", "conc-kill", "conc-term", "garbage"} {
		if !strings.Contains(","+got+",", ","+want+",") {
			t.Errorf("no fault %s in %s", want, got)
		}
	}
}
