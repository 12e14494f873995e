package bench

// Delay masking in S1. Paper 1 (§5, discussion) explains part of its p95
// gain: parity that arrives over a fast path rebuilds data packets still
// delayed on a slow one, so FEC masks delay spikes, not only loss. The
// concentrator's decoder counts the packets it rebuilt before their
// original arrived and how much earlier (fec.DecoderStats.Masked); this
// file turns that into each configuration's masking figures and the most
// the masked packets can have moved the p95 one-way delay.

import (
	"fmt"
	"strings"

	"github.com/bondd/bondd/fec"
)

// s1Masking is one configuration's delay masking in results.json.
type s1Masking struct {
	// Masked counts the flow packets the concentrator rebuilt before their
	// original arrived (FECStats.Masked over the run).
	Masked uint64 `json:"masked"`
	// Share is Masked over the packets received.
	Share float64 `json:"share"`
	// Lead*Ms summarise how much earlier the rebuilt packet was delivered
	// than its original arrived, ms (mean exact; quantiles interpolated in
	// the histogram's buckets, fec.LeadHistogram.Quantile).
	LeadMeanMs float64 `json:"lead_mean_ms"`
	LeadP50Ms  float64 `json:"lead_p50_ms"`
	LeadP95Ms  float64 `json:"lead_p95_ms"`
	// P95UnmaskedMaxMs bounds the p95 one-way delay the run would have had
	// if every masked packet had waited for its original (p95UnmaskedMax),
	// so the masking's share of the p95 is at most P95UnmaskedMaxMs − the
	// measured p95.
	P95UnmaskedMaxMs float64 `json:"p95_unmasked_max_ms"`
}

// p95UnmaskedMax bounds the p95 of sorted (n one-way delays, ms) had the
// masked packets of h each arrived their lead later. For any δ, the
// packets with a lead ≤ δ move up by at most δ and the m(δ) others by any
// amount, so at least count(≤ x − δ) − m(δ) delays stay ≤ x: the q-quantile
// is at most the measured (q + m(δ)/n)-quantile plus δ. The bound is the
// least over δ = 0 and the histogram's bucket bounds (whose m(δ) it knows
// exactly).
func p95UnmaskedMax(sorted []float64, h *fec.LeadHistogram) float64 {
	n := float64(len(sorted))
	if n == 0 {
		return 0
	}
	above := h.Count // m(0): every masked packet
	best := quantile(sorted, min(1, 0.95+float64(above)/n))
	for i, d := range fec.LeadBoundsMs {
		above -= min(above, h.Buckets[i])
		best = min(best, quantile(sorted, min(1, 0.95+float64(above)/n))+d)
	}
	return best
}

// s1MaskingOf returns the masking of run, whose flow received received
// packets with one-way delays sorted (ms, ascending).
func s1MaskingOf(run *benchRun, sorted []float64, received uint64) s1Masking {
	var m s1Masking
	a, b := run.conc1.FEC, run.conc0.FEC
	if a == nil || b == nil || received == 0 {
		return m
	}
	h := a.MaskedLead.Sub(b.MaskedLead)
	m.Masked = h.Count
	m.Share = float64(h.Count) / float64(received)
	m.LeadMeanMs = float64(h.Mean()) / 1e6
	m.LeadP50Ms, m.LeadP95Ms = h.Quantile(0.5), h.Quantile(0.95)
	m.P95UnmaskedMaxMs = p95UnmaskedMax(sorted, &h)
	return m
}

// s1MaskingMarkdown renders the masking table of the configurations that
// send parity.
func s1MaskingMarkdown(cs []s1Result) string {
	var b strings.Builder
	b.WriteString("\nDelay masking (packets rebuilt from parity before their original arrived; medians over the runs):\n\n")
	b.WriteString("| configuration | placement | recovered | masked | masked % of received | lead mean / p50 / p95 ms | p95 OWD ms | p95 if masked packets waited, at most ms |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | --- | ---: | ---: |\n")
	for _, c := range cs {
		if c.ParitySent == 0 {
			continue
		}
		pl := c.Placement
		if pl == "" {
			pl = "scheduler"
		}
		m := c.Masking
		fmt.Fprintf(&b, "| %s | %s | %d | %d%s | %.2f | %.1f / %.1f / %.1f | %.1f | %.1f |\n", c.Name, pl, c.Recovered, m.Masked, c.CI95.text("masking.masked"),
			100*m.Share, m.LeadMeanMs, m.LeadP50Ms, m.LeadP95Ms, c.OWDms.P95, m.P95UnmaskedMaxMs)
	}
	return b.String()
}
