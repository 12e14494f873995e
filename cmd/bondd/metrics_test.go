package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/bondd/bondd/fec"
	"github.com/bondd/bondd/internal/config"
	"github.com/bondd/bondd/internal/status"
	"github.com/bondd/bondd/tunnel"
)

// fakeReport is a concentrator with two edges; van-17 has two paths, one
// up and one down, with rule hits and FEC.
func fakeReport() status.Report {
	return status.Report{
		Role:         config.RoleConcentrator,
		Version:      "v0.0.0-test",
		Uptime:       90 * time.Second,
		NoRoute:      3,
		AuthFailures: 2,
		Rules: &status.Rules{File: "/etc/bondd/rules.yaml", Version: 2, Loaded: time.Unix(1_800_000_000, 0), Rules: 2,
			Reloads: 3, ReloadFailures: 1},
		Bonds: []status.Bond{
			{
				BondStats: tunnel.BondStats{
					EdgeID: "van-17", BondID: 0xb0d, Uptime: 80 * time.Second, MTU: 1280,
					TxPackets: 100, RxPackets: 900, ICMPSent: 1, MSSClamped: 4,
					Drops: tunnel.DropCounts{tunnel.DropDuplicate: 7, tunnel.DropSpoofed: 5},
					FEC: &tunnel.FECStats{Mode: "adaptive", CodingRate: 0.9, DataProtected: 90, ParitySent: 10,
						BlocksByK: 4, BlocksByTimer: 1, ParityReceived: 12, Recovered: 6, Lost: 1, ResidualLoss: 0.001,
						Masked: 3, MaskedLead: fec.LeadHistogram{Count: 3, SumNs: 34_500_000, Buckets: [fec.NumLeadBuckets]uint64{1: 1, 2: 1, 5: 1}}},
					Rules: &tunnel.RuleStats{Set: "/etc/bondd/rules.yaml", Rules: []tunnel.RuleHits{{ID: "video", Hits: 42}, {ID: "rest", Hits: 58}}},
					Paths: []tunnel.PathStats{
						{
							Name: "cell-a", Labels: map[string]string{"link_type": "cellular", "cost_class": "metered"}, Status: "ACTIVE",
							SmoothedRTT: 45 * time.Millisecond, MinRTT: 30 * time.Millisecond, CongestionWindow: 64000, BytesInFlight: 1200,
							PacketsSent: 1000, PacketsLost: 10, QueueLen: 3,
							TxPackets: 60, TxBytes: 60_000, RxPackets: 600, RxBytes: 720_000,
							Drops:       tunnel.DropCounts{tunnel.DropQueueFull: 1, tunnel.DropExpired: 2},
							CapacityBps: 11_377_777, PeerAddr: "203.0.113.7:41000", Migrations: 2,
							DatagramBudget: 1195, PMTUState: "SEARCH_COMPLETE", BlackHoles: 1, PMTUProbes: 16, PMTUHeld: 4,
							Resent: 9, ResendLate: 2, Rescued: 5, ObjectsDropped: 1,
							PMTUReason: "black hole: 5 datagrams of 1322+ bytes lost while smaller ones arrive; budget 1322 -> 1163 bytes; then 1195-byte datagram acknowledged; budget 1163 -> 1195 bytes",
						},
						{
							Name: "starlink", Labels: map[string]string{"link_type": "satellite"}, Status: "UNAVAILABLE",
							TxPackets: 40, TxBytes: 40_000, RxPackets: 300, RxBytes: 3 << 20,
							LastError: "timeout: no recent network activity",
						},
					},
				},
				Addresses: []netip.Prefix{netip.MustParsePrefix("10.77.17.0/24")},
			},
			{BondStats: tunnel.BondStats{EdgeID: "van-18", MTU: 1152, MTUConfigured: 1280, MTUChanges: 1,
				MTUReason: "no path carries full-size datagrams; largest datagram budget 1195 bytes, on path cell-a",
				FEC:       &tunnel.FECStats{Mode: "off", CodingRate: 1}}},
		},
	}
}

func TestMetricsLint(t *testing.T) {
	c := newMetricsCollector(fakeReport)
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	for _, r := range []status.Report{{Role: config.RoleEdge}, {}} { // no bonds, no rules
		if _, err := testutil.CollectAndLint(newMetricsCollector(func() status.Report { return r })); err != nil {
			t.Errorf("role %q: %v", r.Role, err)
		}
	}
}

func TestMetricsExposition(t *testing.T) {
	c := newMetricsCollector(fakeReport)
	want := `
# HELP bondd_path_sent_bytes_total Bytes of bondd datagrams sent on the path.
# TYPE bondd_path_sent_bytes_total counter
bondd_path_sent_bytes_total{edge="van-17",path="cell-a"} 60000
bondd_path_sent_bytes_total{edge="van-17",path="starlink"} 40000
# HELP bondd_path_smoothed_rtt_seconds Smoothed RTT of the path's QUIC connection (RFC 9002).
# TYPE bondd_path_smoothed_rtt_seconds gauge
bondd_path_smoothed_rtt_seconds{edge="van-17",path="cell-a"} 0.045
bondd_path_smoothed_rtt_seconds{edge="van-17",path="starlink"} 0
# HELP bondd_path_status 1 for the path's current status (ACTIVE, DEGRADED, UNAVAILABLE), 0 for the others.
# TYPE bondd_path_status gauge
bondd_path_status{edge="van-17",path="cell-a",status="ACTIVE"} 1
bondd_path_status{edge="van-17",path="cell-a",status="DEGRADED"} 0
bondd_path_status{edge="van-17",path="cell-a",status="UNAVAILABLE"} 0
bondd_path_status{edge="van-17",path="starlink",status="ACTIVE"} 0
bondd_path_status{edge="van-17",path="starlink",status="DEGRADED"} 0
bondd_path_status{edge="van-17",path="starlink",status="UNAVAILABLE"} 1
# HELP bondd_path_label_info Always 1: one series per configured path label.
# TYPE bondd_path_label_info gauge
bondd_path_label_info{edge="van-17",key="cost_class",path="cell-a",value="metered"} 1
bondd_path_label_info{edge="van-17",key="link_type",path="cell-a",value="cellular"} 1
bondd_path_label_info{edge="van-17",key="link_type",path="starlink",value="satellite"} 1
# HELP bondd_rule_hits_total Packets each rule matched on this end's send path; restarts from 0 with each rule set version.
# TYPE bondd_rule_hits_total counter
bondd_rule_hits_total{edge="van-17",rule="rest"} 58
bondd_rule_hits_total{edge="van-17",rule="video"} 42
# HELP bondd_fec_recovered_packets_total Data packets reconstructed from parity and delivered.
# TYPE bondd_fec_recovered_packets_total counter
bondd_fec_recovered_packets_total{edge="van-17"} 6
bondd_fec_recovered_packets_total{edge="van-18"} 0
# HELP bondd_fec_blocks_total FEC blocks sent, by what closed them: k data packets, or the block's time budget.
# TYPE bondd_fec_blocks_total counter
bondd_fec_blocks_total{closed_by="k",edge="van-17"} 4
bondd_fec_blocks_total{closed_by="k",edge="van-18"} 0
bondd_fec_blocks_total{closed_by="timer",edge="van-17"} 1
bondd_fec_blocks_total{closed_by="timer",edge="van-18"} 0
# HELP bondd_fec_masked_lead_seconds How much earlier than its original a masked packet was reconstructed.
# TYPE bondd_fec_masked_lead_seconds histogram
bondd_fec_masked_lead_seconds_bucket{edge="van-17",le="0.001"} 0
bondd_fec_masked_lead_seconds_bucket{edge="van-17",le="0.002"} 1
bondd_fec_masked_lead_seconds_bucket{edge="van-17",le="0.005"} 2
bondd_fec_masked_lead_seconds_bucket{edge="van-17",le="0.01"} 2
bondd_fec_masked_lead_seconds_bucket{edge="van-17",le="0.02"} 2
bondd_fec_masked_lead_seconds_bucket{edge="van-17",le="0.05"} 3
bondd_fec_masked_lead_seconds_bucket{edge="van-17",le="0.1"} 3
bondd_fec_masked_lead_seconds_bucket{edge="van-17",le="0.2"} 3
bondd_fec_masked_lead_seconds_bucket{edge="van-17",le="0.5"} 3
bondd_fec_masked_lead_seconds_bucket{edge="van-17",le="1"} 3
bondd_fec_masked_lead_seconds_bucket{edge="van-17",le="+Inf"} 3
bondd_fec_masked_lead_seconds_sum{edge="van-17"} 0.0345
bondd_fec_masked_lead_seconds_count{edge="van-17"} 3
bondd_fec_masked_lead_seconds_bucket{edge="van-18",le="0.001"} 0
bondd_fec_masked_lead_seconds_bucket{edge="van-18",le="0.002"} 0
bondd_fec_masked_lead_seconds_bucket{edge="van-18",le="0.005"} 0
bondd_fec_masked_lead_seconds_bucket{edge="van-18",le="0.01"} 0
bondd_fec_masked_lead_seconds_bucket{edge="van-18",le="0.02"} 0
bondd_fec_masked_lead_seconds_bucket{edge="van-18",le="0.05"} 0
bondd_fec_masked_lead_seconds_bucket{edge="van-18",le="0.1"} 0
bondd_fec_masked_lead_seconds_bucket{edge="van-18",le="0.2"} 0
bondd_fec_masked_lead_seconds_bucket{edge="van-18",le="0.5"} 0
bondd_fec_masked_lead_seconds_bucket{edge="van-18",le="1"} 0
bondd_fec_masked_lead_seconds_bucket{edge="van-18",le="+Inf"} 0
bondd_fec_masked_lead_seconds_sum{edge="van-18"} 0
bondd_fec_masked_lead_seconds_count{edge="van-18"} 0
# HELP bondd_auth_failures_total Concentrator: path connections refused at the hello (unknown edge or bad credentials).
# TYPE bondd_auth_failures_total counter
bondd_auth_failures_total 2
# HELP bondd_rules_version Rule sets installed since the daemon started: 1 at start, one more per successful reload.
# TYPE bondd_rules_version gauge
bondd_rules_version 2
# HELP bondd_rules_loaded_timestamp_seconds When the rule set in force was installed, Unix time.
# TYPE bondd_rules_loaded_timestamp_seconds gauge
bondd_rules_loaded_timestamp_seconds 1.8e+09
`
	names := []string{"bondd_path_sent_bytes_total", "bondd_path_smoothed_rtt_seconds", "bondd_path_status", "bondd_path_label_info",
		"bondd_rule_hits_total", "bondd_fec_recovered_packets_total", "bondd_fec_blocks_total", "bondd_fec_masked_lead_seconds", "bondd_auth_failures_total",
		"bondd_rules_version", "bondd_rules_loaded_timestamp_seconds"}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}

	// Every drop reason of the bond and the path is a series, zero or not.
	wantDrops := `
# HELP bondd_path_dropped_packets_total Datagrams the path dropped, by reason (see docs/operations.md).
# TYPE bondd_path_dropped_packets_total counter
bondd_path_dropped_packets_total{edge="van-17",path="cell-a",reason="black_hole"} 0
bondd_path_dropped_packets_total{edge="van-17",path="cell-a",reason="deadline"} 0
bondd_path_dropped_packets_total{edge="van-17",path="cell-a",reason="expired"} 2
bondd_path_dropped_packets_total{edge="van-17",path="cell-a",reason="object_lost"} 0
bondd_path_dropped_packets_total{edge="van-17",path="cell-a",reason="queue_full"} 1
bondd_path_dropped_packets_total{edge="van-17",path="cell-a",reason="receive_queue_full"} 0
bondd_path_dropped_packets_total{edge="van-17",path="cell-a",reason="send_error"} 0
bondd_path_dropped_packets_total{edge="van-17",path="cell-a",reason="stale"} 0
bondd_path_dropped_packets_total{edge="van-17",path="cell-a",reason="suspect"} 0
bondd_path_dropped_packets_total{edge="van-17",path="cell-a",reason="too_large"} 0
bondd_path_dropped_packets_total{edge="van-17",path="starlink",reason="black_hole"} 0
bondd_path_dropped_packets_total{edge="van-17",path="starlink",reason="deadline"} 0
bondd_path_dropped_packets_total{edge="van-17",path="starlink",reason="expired"} 0
bondd_path_dropped_packets_total{edge="van-17",path="starlink",reason="object_lost"} 0
bondd_path_dropped_packets_total{edge="van-17",path="starlink",reason="queue_full"} 0
bondd_path_dropped_packets_total{edge="van-17",path="starlink",reason="receive_queue_full"} 0
bondd_path_dropped_packets_total{edge="van-17",path="starlink",reason="send_error"} 0
bondd_path_dropped_packets_total{edge="van-17",path="starlink",reason="stale"} 0
bondd_path_dropped_packets_total{edge="van-17",path="starlink",reason="suspect"} 0
bondd_path_dropped_packets_total{edge="van-17",path="starlink",reason="too_large"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(wantDrops), "bondd_path_dropped_packets_total"); err != nil {
		t.Error(err)
	}
	wantPMTU := `
# HELP bondd_path_pmtu_held_packets_total Datagrams parked for a path MTU probe's answer while the path's budget was cut on suspicion alone.
# TYPE bondd_path_pmtu_held_packets_total counter
bondd_path_pmtu_held_packets_total{edge="van-17",path="cell-a"} 4
bondd_path_pmtu_held_packets_total{edge="van-17",path="starlink"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(wantPMTU), "bondd_path_pmtu_held_packets_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(c, "bondd_bond_dropped_packets_total"); n != 2*len(tunnel.BondDropReasons) {
		t.Errorf("%d bond drop series, want %d (2 bonds × %d reasons)", n, 2*len(tunnel.BondDropReasons), len(tunnel.BondDropReasons))
	}
}

// TestMetricsSnapshotPerScrape checks that each scrape takes one fresh
// snapshot: the collector keeps no state between scrapes.
func TestMetricsSnapshotPerScrape(t *testing.T) {
	calls := 0
	c := newMetricsCollector(func() status.Report {
		calls++
		r := fakeReport()
		r.Bonds[0].Paths[0].TxBytes = uint64(calls)
		return r
	})
	for want := 1; want <= 3; want++ {
		exp := "# HELP bondd_path_sent_bytes_total Bytes of bondd datagrams sent on the path.\n# TYPE bondd_path_sent_bytes_total counter\n" +
			"bondd_path_sent_bytes_total{edge=\"van-17\",path=\"cell-a\"} " + string(rune('0'+want)) + "\n" +
			"bondd_path_sent_bytes_total{edge=\"van-17\",path=\"starlink\"} 40000\n"
		if err := testutil.CollectAndCompare(c, strings.NewReader(exp), "bondd_path_sent_bytes_total"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMetricsDuplicateNames checks that a report with a path or rule named
// twice still scrapes (the first one wins) rather than failing.
func TestMetricsDuplicateNames(t *testing.T) {
	r := fakeReport()
	b := &r.Bonds[0]
	b.Paths = append(b.Paths, b.Paths[0])
	b.Rules.Rules = append(b.Rules.Rules, b.Rules.Rules[0])
	if _, err := testutil.CollectAndLint(newMetricsCollector(func() status.Report { return r })); err != nil {
		t.Fatal(err)
	}
}

// TestServeMetrics serves the registry over HTTP as bondd run does.
func TestServeMetrics(t *testing.T) {
	srv, addr, err := serveMetrics("127.0.0.1:0", fakeReport, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr.String()+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s\n%s", resp.Status, body)
	}
	for _, want := range []string{
		`bondd_info{role="concentrator",version="v0.0.0-test"} 1`,
		`bondd_path_received_bytes_total{edge="van-17",path="starlink"} 3.145728e+06`,
		`bondd_bond_dropped_packets_total{edge="van-17",reason="spoofed"} 5`,
		"go_goroutines ",
		"process_open_fds ",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics has no %q", want)
		}
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + addr.String() + "/metrics"); err == nil {
		t.Error("the metrics endpoint still answers after Close")
	}
}
