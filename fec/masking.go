package fec

// Delay masking. Paper 1 (§5, discussion) explains part of its p95 gain:
// when a block's packets travel on different paths, parity that arrives
// over a fast path rebuilds data packets still on their way over a slow
// one, so FEC masks delay spikes as well as loss. The decoder sees this
// happen when the original of a reconstructed packet arrives after all:
// it counts the packet and how much earlier the reconstruction delivered
// it (the lead) in a fixed-bucket histogram, without allocating.

import "time"

// LeadBoundsMs are the upper bounds, ms, of the buckets of a
// LeadHistogram; the last bucket (index len(LeadBoundsMs)) holds leads
// above the largest bound.
var LeadBoundsMs = [...]float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}

// NumLeadBuckets is the number of buckets of a LeadHistogram.
const NumLeadBuckets = len(LeadBoundsMs) + 1

// LeadHistogram counts masked packets by lead, the time between a data
// packet's reconstruction and the arrival of its original. The zero value
// is empty. It is a plain value: the Decoder updates it under its lock and
// hands out copies.
type LeadHistogram struct {
	Count   uint64                 `json:"count"`   // masked packets
	SumNs   uint64                 `json:"sum_ns"`  // sum of their leads, ns
	Buckets [NumLeadBuckets]uint64 `json:"buckets"` // Buckets[i]: leads ≤ LeadBoundsMs[i] and > the bound before (not cumulative)
}

// add records one lead of ns nanoseconds (negative counts as 0).
func (h *LeadHistogram) add(ns int64) {
	ns = max(ns, 0)
	h.Count++
	h.SumNs += uint64(ns)
	ms := float64(ns) / 1e6
	i := 0
	for i < len(LeadBoundsMs) && ms > LeadBoundsMs[i] {
		i++
	}
	h.Buckets[i]++
}

// Merge adds o's counts to h.
func (h *LeadHistogram) Merge(o *LeadHistogram) {
	h.Count += o.Count
	h.SumNs += o.SumNs
	for i := range h.Buckets {
		h.Buckets[i] += o.Buckets[i]
	}
}

// Sub returns h minus an earlier snapshot o of the same histogram (the
// packets masked in between); counts never go below 0.
func (h LeadHistogram) Sub(o LeadHistogram) LeadHistogram {
	d := LeadHistogram{Count: h.Count - min(h.Count, o.Count), SumNs: h.SumNs - min(h.SumNs, o.SumNs)}
	for i := range d.Buckets {
		d.Buckets[i] = h.Buckets[i] - min(h.Buckets[i], o.Buckets[i])
	}
	return d
}

// Mean returns the mean lead, or 0 when no packet was masked.
func (h *LeadHistogram) Mean() time.Duration {
	if h.Count == 0 {
		return 0
	}
	return time.Duration(h.SumNs / h.Count)
}

// Quantile returns the q-quantile (0 ≤ q ≤ 1) of the leads, ms, by linear
// interpolation inside the bucket that holds it (the estimate Prometheus's
// histogram_quantile makes); leads in the last, open bucket read as the
// largest bound. 0 when no packet was masked.
func (h *LeadHistogram) Quantile(q float64) float64 {
	var n uint64
	for _, c := range h.Buckets {
		n += c
	}
	if n == 0 {
		return 0
	}
	rank := min(max(q, 0), 1) * float64(n)
	var below float64
	for i, c := range h.Buckets {
		if c == 0 || below+float64(c) < rank {
			below += float64(c)
			continue
		}
		if i == len(LeadBoundsMs) {
			return LeadBoundsMs[len(LeadBoundsMs)-1]
		}
		lo := 0.0
		if i > 0 {
			lo = LeadBoundsMs[i-1]
		}
		return lo + (LeadBoundsMs[i]-lo)*(rank-below)/float64(c)
	}
	return LeadBoundsMs[len(LeadBoundsMs)-1]
}
