package bench

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bondd/bondd/emu"
	"github.com/bondd/bondd/tunnel"
)

func TestPathSamples(t *testing.T) {
	path := func(name string, tx, lost, expired uint64, rate *tunnel.RateStats) tunnel.PathStats {
		p := tunnel.PathStats{Name: name, Status: "ACTIVE", TxBytes: tx, PacketsLost: lost, Rate: rate,
			CongestionWindow: 100_000, BytesInFlight: 90_000, SmoothedRTT: 60 * time.Millisecond, MinRTT: 50 * time.Millisecond,
			Drops: tunnel.DropCounts{}}
		p.Drops[tunnel.DropExpired] = expired
		return p
	}
	a := tunnel.BondStats{Paths: []tunnel.PathStats{path("sat", 1_000_000, 10, 5, &tunnel.RateStats{Active: true, Overuses: 7}), path("cell", 500, 3, 0, nil)}}
	b := tunnel.BondStats{Paths: []tunnel.PathStats{
		path("sat", 1_000_000+1_250_000, 40, 25, &tunnel.RateStats{Active: true, TargetBps: 42e6, DeliveryBps: 35e6, CapacityBps: 38e6,
			QueueDelay: 12500 * time.Microsecond, Loss: 0.02, Overuses: 9}),
		path("cell", 100, 1, 0, nil),                                  // restarted: counters went back
		path("new", 250_000, 2, 1, &tunnel.RateStats{TargetBps: 9e6}), // not in a; rate control not active
	}}
	links := map[string][2]emu.DirStats{"sat": {{DropQueue: 4, DropLoss: 1, DropOutage: 2}, {DropQueue: 10, DropLoss: 4, DropOutage: 2}}}
	rows := pathSamples(a, b, 250*time.Millisecond, map[string]float64{"sat": 80, "cell": 5}, links)
	want := []pathSample{
		{Path: "sat", Status: "ACTIVE", LinkMbps: 80, TxMbps: 40, CwndBytes: 100_000, InflightBytes: 90_000, SRTTms: 60, MinRTTms: 50, Lost: 30, QueueDrops: 20, TargetMbps: 42,
			DeliveryMbps: 35, CapacityMbps: 38, QueueDelayMs: 12.5, Loss: 0.02, Overuses: 2, LinkQueueDrops: 6, LinkLoss: 3},
		{Path: "cell", Status: "ACTIVE", LinkMbps: 5, TxMbps: 0, CwndBytes: 100_000, InflightBytes: 90_000, SRTTms: 60, MinRTTms: 50},
		{Path: "new", Status: "ACTIVE", TxMbps: 8, CwndBytes: 100_000, InflightBytes: 90_000, SRTTms: 60, MinRTTms: 50, Lost: 2, QueueDrops: 1},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("row %d:\n got %+v\nwant %+v", i, rows[i], want[i])
		}
	}
}

// checkPathTrace checks dir/paths.csv: the header, then rows of the
// paths named, in order of time within a configuration.
func checkPathTrace(t *testing.T, dir string, paths ...string) {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "paths.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) < 1+len(paths) || len(recs[0]) != len(pathTraceHeader) || recs[0][2] != "t_s" {
		t.Fatalf("paths.csv: %d records, header %v", len(recs), recs[0])
	}
	seen := map[string]bool{}
	for _, r := range recs[1:] {
		seen[r[3]] = true
	}
	for _, p := range paths {
		if !seen[p] {
			t.Errorf("paths.csv has no row of path %s", p)
		}
	}
}
