package main

// The usage store's metrics (internal/usage): wire bytes and packets per
// path from the store's lifetime totals, so they continue across restarts
// (each series carries the store's creation time as its _created
// timestamp), the budget's period use, and the alerts and flushes.

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bondd/bondd/internal/status"
)

var (
	descWireBytes     = desc("path_wire_bytes_total", "Bytes on the wire (IP, UDP and QUIC: acks, probes and keepalives included) of the path since the usage store was created, by direction (up: sent, down: received); continues across restarts.", "edge", "path", "direction")
	descWirePackets   = desc("path_wire_packets_total", "QUIC packets of the path since the usage store was created, by direction; continues across restarts.", "edge", "path", "direction")
	descBudgetUsed    = desc("path_budget_used_bytes", "Wire bytes counted against the path's budget in the current period.", pathLabels...)
	descBudgetBytes   = desc("path_budget_bytes", "The path's byte budget per period (only paths with a budget).", pathLabels...)
	descBudgetRatio   = desc("path_budget_used_ratio", "Share of the path's budget used in the current period, 0-1 (above 1 past it).", pathLabels...)
	descBudgetProj    = desc("path_budget_projected_ratio", "Share of the path's budget the period will have used at its end if its average rate so far goes on.", pathLabels...)
	descBudgetAlerts  = desc("budget_alerts_total", "Budget thresholds crossed (each logged once per path and period), by threshold: 90 or 100 percent.", "threshold")
	descUsageFlushes  = desc("usage_flushes_total", "Writes of the usage counters to the store.")
	descUsageFlushErr = desc("usage_flush_failures_total", "Writes of the usage counters that failed (the counts stay in memory until one succeeds).")
	usageDescs        = []*prometheus.Desc{descWireBytes, descWirePackets, descBudgetUsed, descBudgetBytes, descBudgetRatio, descBudgetProj,
		descBudgetAlerts, descUsageFlushes, descUsageFlushErr}
)

// collectUsage sends the usage metrics of r.
func collectUsage(r *status.Report, ch chan<- prometheus.Metric) {
	u := r.Usage
	if u == nil {
		return
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, p := range u.Paths {
		for _, m := range []struct {
			d   *prometheus.Desc
			v   uint64
			dir string
		}{
			{descWireBytes, p.Total.UpBytes, "up"}, {descWireBytes, p.Total.DownBytes, "down"},
			{descWirePackets, p.Total.UpPackets, "up"}, {descWirePackets, p.Total.DownPackets, "down"},
		} {
			ch <- prometheus.MustNewConstMetricWithCreatedTimestamp(m.d, prometheus.CounterValue, float64(m.v), u.Since, p.Bond, p.Path, m.dir)
		}
		if p.BudgetBytes > 0 {
			gauge(descBudgetUsed, float64(p.UsedBytes), p.Bond, p.Path)
			gauge(descBudgetBytes, float64(p.BudgetBytes), p.Bond, p.Path)
			gauge(descBudgetRatio, p.Share, p.Bond, p.Path)
			gauge(descBudgetProj, p.ProjectedShare, p.Bond, p.Path)
		}
	}
	counter(descBudgetAlerts, u.Stats.Alerts90, "90")
	counter(descBudgetAlerts, u.Stats.Alerts100, "100")
	counter(descUsageFlushes, u.Stats.Flushes)
	counter(descUsageFlushErr, u.Stats.FlushFails)
}
