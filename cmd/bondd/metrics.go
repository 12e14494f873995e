package main

// Prometheus metrics, served on metrics_listen.
//
// The data path keeps no counters for Prometheus: metricsCollector takes
// one status snapshot per scrape (the report the control socket serves)
// and turns it into constant metrics. Labels are bounded by configuration:
// edge (the configured edge ids), path (the uplink names, at most 16 per
// bond), rule (the rule ids of the rule file), reason and status (fixed
// sets), and the path labels of the config. Nothing is labelled by packet
// contents. docs/operations.md lists the metrics.

import (
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/bondd/bondd/fec"
	"github.com/bondd/bondd/internal/config"
	"github.com/bondd/bondd/internal/status"
	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/tunnel"
)

const metricsNamespace = "bondd"

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(metricsNamespace+"_"+name, help, labels, nil)
}

var (
	bondLabels = []string{"edge"}
	pathLabels = []string{"edge", "path"}
)

// Daemon-wide metrics.
var (
	descInfo           = desc("info", "Always 1: the role and version of this bondd.", "role", "version")
	descUptime         = desc("uptime_seconds", "Time since the daemon started.")
	descAuthFailures   = desc("auth_failures_total", "Concentrator: path connections refused at the hello (unknown edge or bad credentials).")
	descNoRoute        = desc("no_route_packets_total", "Concentrator: downlink packets dropped because no edge's allowed prefixes hold their destination.")
	descLinkLocal      = desc("link_local_packets_total", "Concentrator: packets read from the TUN for link-local or link-scope multicast destinations, which are not routed.")
	descTransportDrops = desc("transport_dropped_packets_total", "Concentrator: UDP packets (connections for handshake_failed and refused) its QUIC transport dropped before any bond saw them, by reason (see docs/operations.md).", "reason")
	descRulesVersion   = desc("rules_version", "Rule sets installed since the daemon started: 1 at start, one more per successful reload.")
	descRulesLoaded    = desc("rules_loaded_timestamp_seconds", "When the rule set in force was installed, Unix time.")
	descRulesCount     = desc("rules", "Rules in the rule set in force.")
	descRulesReloads   = desc("rules_reloads_total", "Rule file reloads tried after the first load (file changes and SIGHUP).")
	descRulesReloadErr = desc("rules_reload_failures_total", "Rule file reloads that failed and kept the running rule set.")
)

// Per-bond metrics (label edge).
var (
	descBondUptime   = desc("bond_uptime_seconds", "Time since the bond was created.", bondLabels...)
	descBondMTU      = desc("bond_mtu_bytes", "Inner (TUN) MTU of the bond now: below the configured one while path MTU discovery finds no path that carries full-size datagrams.", bondLabels...)
	descBondDrops    = desc("bond_dropped_packets_total", "Packets the bond dropped, by reason (see docs/operations.md).", "edge", "reason")
	descRuleHits     = desc("rule_hits_total", "Packets each rule matched on this end's send path; restarts from 0 with each rule set version.", "edge", "rule")
	descFECCoding    = desc("fec_coding_rate", "FEC coding rate k/(k+r) over the blocks sent (1 without FEC).", bondLabels...)
	descFECResidual  = desc("fec_residual_loss_ratio", "Data packets lost after FEC recovery over the data packets of received blocks.", bondLabels...)
	descFECBlocks    = desc("fec_blocks_total", "FEC blocks sent, by what closed them: k data packets, or the block's time budget.", "edge", "closed_by")
	descFECMode      = desc("fec_mode_info", "Always 1: the FEC mode of what this end sends.", "edge", "mode")
	descFECMaskLead  = desc("fec_masked_lead_seconds", "How much earlier than its original a masked packet was reconstructed.", bondLabels...)
	bondCounterDescs = []struct {
		desc *prometheus.Desc
		get  func(*tunnel.BondStats) uint64
	}{
		{desc("bond_sent_packets_total", "Packets read from the TUN and sent into the bond.", bondLabels...), func(b *tunnel.BondStats) uint64 { return b.TxPackets }},
		{desc("bond_received_packets_total", "Packets received from the bond and written to the TUN.", bondLabels...), func(b *tunnel.BondStats) uint64 { return b.RxPackets }},
		{desc("bond_icmp_too_big_sent_total", "ICMP fragmentation-needed and ICMPv6 packet-too-big replies to oversize packets.", bondLabels...), func(b *tunnel.BondStats) uint64 { return b.ICMPSent }},
		{desc("bond_mss_clamped_packets_total", "TCP SYNs whose MSS was clamped to fit the tunnel MTU.", bondLabels...), func(b *tunnel.BondStats) uint64 { return b.MSSClamped }},
		{desc("flow_tagged_packets_total", "Packets sent with a flow tag, for the peer to deliver in flow order.", bondLabels...), func(b *tunnel.BondStats) uint64 { return b.FlowTagged }},
		{desc("flow_untagged_packets_total", "Packets that needed a flow tag but found no slot in the flow table: delivered as they arrive.", bondLabels...), func(b *tunnel.BondStats) uint64 { return b.FlowUntagged }},
		{desc("reseq_in_order_packets_total", "Tagged packets received in their flow's order and written at once.", bondLabels...), reseqGet(func(r *tunnel.ReseqStats) uint64 { return r.InOrder })},
		{desc("reseq_held_packets_total", "Tagged packets held behind a gap of their flow.", bondLabels...), reseqGet(func(r *tunnel.ReseqStats) uint64 { return r.Held })},
		{desc("reseq_released_in_order_packets_total", "Held packets released when their gap filled.", bondLabels...), reseqGet(func(r *tunnel.ReseqStats) uint64 { return r.ReleasedInOrder })},
		{desc("reseq_released_timeout_packets_total", "Held packets released after their flow gave a gap up (wait bound passed, or no room).", bondLabels...), reseqGet(func(r *tunnel.ReseqStats) uint64 { return r.ReleasedTimeout })},
		{desc("reseq_skipped_packets_total", "Flow sequence numbers given up on: lost for the receiver, or arriving late.", bondLabels...), reseqGet(func(r *tunnel.ReseqStats) uint64 { return r.Skipped })},
		{desc("reseq_late_packets_total", "Tagged packets that arrived after their gap was given up, written at once (out of order).", bondLabels...), reseqGet(func(r *tunnel.ReseqStats) uint64 { return r.Late })},
		{desc("reseq_overflow_packets_total", "Tagged packets that found the resequencer full or ran past a flow's window.", bondLabels...), reseqGet(func(r *tunnel.ReseqStats) uint64 { return r.Overflow })},
	}
	descReseqHeldNow = desc("reseq_held_packets", "Packets the resequencer holds now.", bondLabels...)
	descReseqWait    = desc("reseq_wait_seconds", "The resequencer's adaptive wait bound before each flow's resequence_ms cap; 0 until learnt.", bondLabels...)
	fecCounterDescs  = []struct {
		desc *prometheus.Desc
		get  func(*tunnel.FECStats) uint64
	}{
		{desc("fec_data_packets_total", "Data packets sent in FEC blocks.", bondLabels...), func(f *tunnel.FECStats) uint64 { return f.DataProtected }},
		{desc("fec_parity_sent_packets_total", "Parity packets sent.", bondLabels...), func(f *tunnel.FECStats) uint64 { return f.ParitySent }},
		{desc("fec_parity_skipped_packets_total", "Parity packets not sent because no path had congestion-window room.", bondLabels...), func(f *tunnel.FECStats) uint64 { return f.ParitySkipped }},
		{desc("fec_parity_received_packets_total", "Parity packets received.", bondLabels...), func(f *tunnel.FECStats) uint64 { return f.ParityReceived }},
		{desc("fec_recovered_packets_total", "Data packets reconstructed from parity and delivered.", bondLabels...), func(f *tunnel.FECStats) uint64 { return f.Recovered }},
		{desc("fec_lost_packets_total", "Data packets still missing when their block timed out (loss after FEC).", bondLabels...), func(f *tunnel.FECStats) uint64 { return f.Lost }},
		{desc("fec_masked_packets_total", "Data packets reconstructed before their original arrived (FEC masked their delay; see fec_masked_lead_seconds).", bondLabels...), func(f *tunnel.FECStats) uint64 { return f.Masked }},
		{desc("fec_duplicate_packets_total", "Late originals of reconstructed packets and spare parity.", bondLabels...), func(f *tunnel.FECStats) uint64 { return f.Duplicates }},
		{desc("fec_corrupt_reconstructions_total", "Reconstructions discarded because their inputs were inconsistent (bad FEC datagrams are bond drops, reason bad_fec).", bondLabels...), func(f *tunnel.FECStats) uint64 { return f.Corrupt }},
	}
)

// Per-path metrics (labels edge, path).
var (
	descPathStatus = desc("path_status", "1 for the path's current status (ACTIVE, DEGRADED, UNAVAILABLE), 0 for the others.", "edge", "path", "status")
	descPathLabel  = desc("path_label_info", "Always 1: one series per configured path label.", "edge", "path", "key", "value")
	descPathDrops  = desc("path_dropped_packets_total", "Datagrams the path dropped, by reason (see docs/operations.md).", "edge", "path", "reason")
	pathGaugeDescs = []pathMetric{
		{desc("path_smoothed_rtt_seconds", "Smoothed RTT of the path's QUIC connection (RFC 9002).", pathLabels...), func(p *tunnel.PathStats) float64 { return p.SmoothedRTT.Seconds() }},
		{desc("path_min_rtt_seconds", "Minimum RTT of the path's QUIC connection.", pathLabels...), func(p *tunnel.PathStats) float64 { return p.MinRTT.Seconds() }},
		{desc("path_congestion_window_bytes", "Congestion window of the path's QUIC connection.", pathLabels...), func(p *tunnel.PathStats) float64 { return float64(p.CongestionWindow) }},
		{desc("path_in_flight_bytes", "Bytes in flight on the path's QUIC connection.", pathLabels...), func(p *tunnel.PathStats) float64 { return float64(p.BytesInFlight) }},
		{desc("path_capacity_bytes_per_second", "What the path's congestion windows carry per smoothed RTT: the capacity the scheduler sees.", pathLabels...), func(p *tunnel.PathStats) float64 { return float64(p.CapacityBps) / 8 }},
		{desc("path_queued_packets", "Datagrams waiting in the path's send queue.", pathLabels...), func(p *tunnel.PathStats) float64 { return float64(p.QueueLen) }},
		{desc("path_rate_target_bytes_per_second", "Rate control: the rate the path's pacer releases at (0 without rate control).", pathLabels...), func(p *tunnel.PathStats) float64 { return rateOf(p).TargetBps / 8 }},
		{desc("path_rate_delivery_bytes_per_second", "Rate control: the smoothed rate the peer received on the path.", pathLabels...), func(p *tunnel.PathStats) float64 { return rateOf(p).DeliveryBps / 8 }},
		{desc("path_rate_queue_delay_seconds", "Rate control: the queueing delay the peer measured on the path.", pathLabels...), func(p *tunnel.PathStats) float64 { return rateOf(p).QueueDelay }},
		{desc("path_datagram_budget_bytes", "Largest datagram the scheduler puts on the path now: path MTU discovery (RFC 8899) lowers it below the bond's largest datagram on a black hole.", pathLabels...), func(p *tunnel.PathStats) float64 { return float64(p.DatagramBudget) }},
		{desc("path_receiver_loss_ratio", "Rate control: the datagram loss the peer sees on the path over about a second, 0-1.", pathLabels...), func(p *tunnel.PathStats) float64 { return rateOf(p).Loss }},
		{desc("path_own_loss_ratio", "Rate control: the receiver-seen loss without the reports that showed the queue overflowing or draining, 0-1; 0.10 or more makes the path DEGRADED (loss).", pathLabels...), func(p *tunnel.PathStats) float64 { return rateOf(p).OwnLoss }},
	}
	pathCounterDescs = []pathMetric{
		{desc("path_sent_packets_total", "bondd datagrams (data and parity) sent on the path.", pathLabels...), func(p *tunnel.PathStats) float64 { return float64(p.TxPackets) }},
		{desc("path_sent_bytes_total", "Bytes of bondd datagrams sent on the path.", pathLabels...), func(p *tunnel.PathStats) float64 { return float64(p.TxBytes) }},
		{desc("path_received_packets_total", "bondd datagrams received on the path.", pathLabels...), func(p *tunnel.PathStats) float64 { return float64(p.RxPackets) }},
		{desc("path_received_bytes_total", "Bytes of bondd datagrams received on the path.", pathLabels...), func(p *tunnel.PathStats) float64 { return float64(p.RxBytes) }},
		{desc("path_quic_sent_packets_total", "QUIC packets sent on the path, every connection so far.", pathLabels...), func(p *tunnel.PathStats) float64 { return float64(p.PacketsSent) }},
		{desc("path_quic_lost_packets_total", "QUIC packets declared lost by loss detection (RFC 9002) on the path.", pathLabels...), func(p *tunnel.PathStats) float64 { return float64(p.PacketsLost) }},
		{desc("path_rescued_packets_total", "Queued datagrams moved to other paths: when this one failed, or when they had waited half their time while it slowed.", pathLabels...), func(p *tunnel.PathStats) float64 { return float64(p.Rescued) }},
		{desc("path_resent_packets_total", "Data datagrams lost on the path and sent again: on the path while it is ACTIVE, else on another.", pathLabels...), func(p *tunnel.PathStats) float64 { return float64(p.Resent) }},
		{desc("path_resend_late_packets_total", "Data datagrams lost on the path too late to arrive before they expired, not sent again.", pathLabels...), func(p *tunnel.PathStats) float64 { return float64(p.ResendLate) }},
		{desc("path_queue_hit_frames_total", "Video frames of which the path's send queue dropped at least one packet, each counted once.", pathLabels...), func(p *tunnel.PathStats) float64 { return float64(p.ObjectsDropped) }},
		{desc("path_paced_held_back_bytes_total", "Rate control: bytes that waited in the path's queue for the pacer.", pathLabels...), func(p *tunnel.PathStats) float64 { return rateOf(p).HeldBack }},
		{desc("path_suspect_total", "Times the path turned SUSPECT: the peer left a send unanswered for max(3 srtt, 100 ms).", pathLabels...), func(p *tunnel.PathStats) float64 { return float64(p.SuspectEvents) }},
		{desc("path_liveness_probes_total", "Liveness probes sent on the path while it was SUSPECT.", pathLabels...), func(p *tunnel.PathStats) float64 { return float64(p.Probes) }},
		{desc("path_keepalives_total", "Keepalives the edge sent on the path: every paths.keepalive unheard while the bond carries traffic, every paths.idle_keepalive while it is idle.", pathLabels...), func(p *tunnel.PathStats) float64 { return float64(p.Keepalives) }},
		{desc("path_pmtu_black_holes_total", "Path MTU black holes detected on the path: large datagrams lost while smaller ones arrive (RFC 8899 §4.3).", pathLabels...), func(p *tunnel.PathStats) float64 { return float64(p.BlackHoles) }},
		{desc("path_pmtu_probes_total", "Path MTU probes (padded datagrams) sent on the path.", pathLabels...), func(p *tunnel.PathStats) float64 { return float64(p.PMTUProbes) }},
		{desc("path_pmtu_held_packets_total", "Datagrams parked for a path MTU probe's answer while the path's budget was cut on suspicion alone.", pathLabels...), func(p *tunnel.PathStats) float64 { return float64(p.PMTUHeld) }},
		{desc("path_migrations_total", "Changes of the peer's address under a live connection of the path (migration, NAT rebinding).", pathLabels...), func(p *tunnel.PathStats) float64 { return float64(p.Migrations) }},
	}
	pathStatuses = []string{policy.StatusActive.String(), policy.StatusDegraded.String(), policy.StatusUnavailable.String()}
)

// rateFigures are a path's rate-control figures as metrics want them: bit/s,
// seconds, ratio, bytes; all 0 without rate control.
type rateFigures struct {
	TargetBps, DeliveryBps, QueueDelay, Loss, OwnLoss, HeldBack float64
}

func rateOf(p *tunnel.PathStats) rateFigures {
	r := p.Rate
	if r == nil {
		return rateFigures{}
	}
	return rateFigures{TargetBps: float64(r.TargetBps), DeliveryBps: float64(r.DeliveryBps),
		QueueDelay: r.QueueDelay.Seconds(), Loss: r.Loss, OwnLoss: r.OwnLoss, HeldBack: float64(r.HeldBackBytes)}
}

type pathMetric struct {
	desc *prometheus.Desc
	get  func(*tunnel.PathStats) float64
}

// metricsCollector is a prometheus.Collector over status snapshots.
type metricsCollector struct {
	snapshot func() status.Report // called once per scrape, possibly concurrently
}

func newMetricsCollector(snapshot func() status.Report) *metricsCollector {
	return &metricsCollector{snapshot: snapshot}
}

// Describe sends every metric's descriptor.
func (c *metricsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		descInfo, descUptime, descAuthFailures, descNoRoute, descLinkLocal, descTransportDrops,
		descRulesVersion, descRulesLoaded, descRulesCount, descRulesReloads, descRulesReloadErr,
		descBondUptime, descBondMTU, descBondDrops, descRuleHits,
		descFECCoding, descFECResidual, descFECBlocks, descFECMode, descFECMaskLead, descReseqHeldNow, descReseqWait,
		descPathStatus, descPathLabel, descPathDrops,
	} {
		ch <- d
	}
	for _, m := range bondCounterDescs {
		ch <- m.desc
	}
	for _, d := range fleetDescs {
		ch <- d
	}
	for _, m := range fecCounterDescs {
		ch <- m.desc
	}
	for _, m := range pathGaugeDescs {
		ch <- m.desc
	}
	for _, m := range pathCounterDescs {
		ch <- m.desc
	}
	for _, d := range usageDescs { // metrics_usage.go
		ch <- d
	}
}

// Collect takes one snapshot and sends its metrics.
func (c *metricsCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.snapshot()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}

	gauge(descInfo, 1, r.Role, r.Version)
	gauge(descUptime, r.Uptime.Seconds())
	if r.Role == config.RoleConcentrator {
		counter(descAuthFailures, r.AuthFailures)
		counter(descNoRoute, r.NoRoute)
		counter(descLinkLocal, r.LinkLocal)
		for _, name := range tunnel.TransportDrops() {
			counter(descTransportDrops, r.TransportDrops[name], name)
		}
	}
	collectFleet(&r, gauge, counter) // fleet.go
	collectUsage(&r, ch)             // metrics_usage.go
	if rs := r.Rules; rs != nil {
		gauge(descRulesVersion, float64(rs.Version))
		gauge(descRulesLoaded, float64(rs.Loaded.UnixNano())/1e9)
		gauge(descRulesCount, float64(rs.Rules))
		counter(descRulesReloads, rs.Reloads)
		counter(descRulesReloadErr, rs.ReloadFailures)
	}

	for i := range r.Bonds {
		b := &r.Bonds[i].BondStats
		edge := b.EdgeID
		gauge(descBondUptime, b.Uptime.Seconds(), edge)
		gauge(descBondMTU, float64(b.MTU), edge)
		for _, m := range bondCounterDescs {
			counter(m.desc, m.get(b), edge)
		}
		for _, d := range tunnel.BondDropReasons {
			counter(descBondDrops, b.Drops[d], edge, d.String())
		}
		if rs := b.Reseq; rs != nil {
			gauge(descReseqHeldNow, float64(rs.HeldNow), edge)
			gauge(descReseqWait, rs.WaitMs/1000, edge)
		}
		if f := b.FEC; f != nil {
			gauge(descFECMode, 1, edge, f.Mode)
			gauge(descFECCoding, f.CodingRate, edge)
			gauge(descFECResidual, f.ResidualLoss, edge)
			counter(descFECBlocks, f.BlocksByK, edge, "k")
			counter(descFECBlocks, f.BlocksByTimer, edge, "timer")
			for _, m := range fecCounterDescs {
				counter(m.desc, m.get(f), edge)
			}
			ch <- leadHistogram(&f.MaskedLead, edge)
		}
		if rs := b.Rules; rs != nil {
			seen := make(map[string]bool, len(rs.Rules))
			for _, h := range rs.Rules {
				if !seen[h.ID] { // ids are unique in a compiled set; a duplicate would fail the scrape
					seen[h.ID] = true
					counter(descRuleHits, h.Hits, edge, h.ID)
				}
			}
		}
		seen := make(map[string]bool, len(b.Paths))
		for j := range b.Paths {
			p := &b.Paths[j]
			if seen[p.Name] {
				continue // names are unique in a bond; see above
			}
			seen[p.Name] = true
			for _, st := range pathStatuses {
				v := 0.0
				if p.Status == st {
					v = 1
				}
				gauge(descPathStatus, v, edge, p.Name, st)
			}
			for k, v := range p.Labels {
				gauge(descPathLabel, 1, edge, p.Name, k, v)
			}
			for _, m := range pathGaugeDescs {
				gauge(m.desc, m.get(p), edge, p.Name)
			}
			for _, m := range pathCounterDescs {
				ch <- prometheus.MustNewConstMetric(m.desc, prometheus.CounterValue, m.get(p), edge, p.Name)
			}
			for _, d := range tunnel.PathDropReasons {
				counter(descPathDrops, p.Drops[d], edge, p.Name, d.String())
			}
		}
	}
}

// metricsRegistry returns a registry with the bondd collector over
// snapshot and the standard Go runtime and process collectors.
func metricsRegistry(snapshot func() status.Report) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		newMetricsCollector(snapshot),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// serveMetrics serves the metrics of snapshot at http://addr/metrics until
// the returned server is closed, and returns the address it listens on.
// Scrape errors go to log.
func serveMetrics(addr string, snapshot func() status.Report, log *slog.Logger) (*http.Server, net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	reg := metricsRegistry(snapshot)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:            slog.NewLogLogger(log.Handler(), slog.LevelError),
		Registry:            reg, // counts its own errors in promhttp_metric_handler_errors_total
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
	}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return srv, ln.Addr(), nil
}

// reseqGet reads a resequencing counter of a bond; 0 without one.
func reseqGet(get func(*tunnel.ReseqStats) uint64) func(*tunnel.BondStats) uint64 {
	return func(b *tunnel.BondStats) uint64 {
		if b.Reseq == nil {
			return 0
		}
		return get(b.Reseq)
	}
}

// leadHistogram turns a masked-lead histogram into a Prometheus histogram
// in seconds (cumulative buckets; the open last bucket is +Inf).
func leadHistogram(h *fec.LeadHistogram, edge string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(fec.LeadBoundsMs))
	var cum uint64
	for i, ms := range fec.LeadBoundsMs {
		cum += h.Buckets[i]
		buckets[ms/1000] = cum
	}
	return prometheus.MustNewConstHistogram(descFECMaskLead, h.Count, float64(h.SumNs)/1e9, buckets, edge)
}
