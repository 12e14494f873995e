package main

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/bondd/bondd/internal/config"
	"github.com/bondd/bondd/internal/status"
	"github.com/bondd/bondd/internal/usage"
)

// usageReport is an edge whose metered uplink has used 62 % of its budget.
func usageReport() status.Report {
	return status.Report{Role: config.RoleEdge, Usage: &status.Usage{
		File: "/var/lib/bondd/usage.db", Since: time.Unix(1_790_000_000, 0),
		Paths: []usage.PathUsage{
			{Bond: "van-17", Path: "cell-a", Total: usage.Counts{UpBytes: 9e9, DownBytes: 3e9, UpPackets: 7e6, DownPackets: 4e6},
				Budget: "20GB/month", BudgetBytes: 20e9, UsedBytes: 12.4e9, Share: 0.62, ProjectedBytes: 15.3e9, ProjectedShare: 0.765},
			{Bond: "van-17", Path: "starlink", Total: usage.Counts{UpBytes: 1000}},
		},
		Stats: usage.Stats{Alerts90: 1, Flushes: 40, FlushFails: 2},
	}}
}

func TestMetricsUsage(t *testing.T) {
	c := newMetricsCollector(usageReport)
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
	want := `
# HELP bondd_path_wire_bytes_total Bytes on the wire (IP, UDP and QUIC: acks, probes and keepalives included) of the path since the usage store was created, by direction (up: sent, down: received); continues across restarts.
# TYPE bondd_path_wire_bytes_total counter
bondd_path_wire_bytes_total{direction="down",edge="van-17",path="cell-a"} 3e+09
bondd_path_wire_bytes_total{direction="down",edge="van-17",path="starlink"} 0
bondd_path_wire_bytes_total{direction="up",edge="van-17",path="cell-a"} 9e+09
bondd_path_wire_bytes_total{direction="up",edge="van-17",path="starlink"} 1000
# HELP bondd_path_budget_used_ratio Share of the path's budget used in the current period, 0-1 (above 1 past it).
# TYPE bondd_path_budget_used_ratio gauge
bondd_path_budget_used_ratio{edge="van-17",path="cell-a"} 0.62
# HELP bondd_budget_alerts_total Budget thresholds crossed (each logged once per path and period), by threshold: 90 or 100 percent.
# TYPE bondd_budget_alerts_total counter
bondd_budget_alerts_total{threshold="100"} 0
bondd_budget_alerts_total{threshold="90"} 1
# HELP bondd_usage_flush_failures_total Writes of the usage counters that failed (the counts stay in memory until one succeeds).
# TYPE bondd_usage_flush_failures_total counter
bondd_usage_flush_failures_total 2
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "bondd_path_wire_bytes_total", "bondd_path_budget_used_ratio",
		"bondd_budget_alerts_total", "bondd_usage_flush_failures_total"); err != nil {
		t.Error(err)
	}
}
