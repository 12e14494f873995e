package fec

import "math"

// ParityCount returns the number of parity packets for a block of k data
// packets, paper 1 §4.4 (its third display equation; the first two, in §3.1
// and §3.3, define k = Σ k_i and L̂):
//
//	L̂ = Σ_i k_i · p_i          expected data packets lost in the block (§3.3)
//	r = min(k, ⌈α · L̂⌉)        (§4.4)
//
// kPerPath[i] is the number of the block's data packets the scheduler put on
// path i (an observed outcome, not a control) and lossPerPath[i] that path's
// loss rate p_i, e.g. LossIntervals.Rate. Entries past the shorter of the
// two slices count as zero; negative counts and NaN rates count as zero and
// rates are clamped to [0, 1]. alpha ≤ 0 or NaN means DefaultAlpha; the paper
// requires α ≥ 1 and uses 2. The product is rounded up after subtracting
// 1e-9, so that floating-point noise in an exact product (20 × 0.05 × 2)
// does not add a parity packet. The result is in [0, min(k, MaxK)]; k ≤ 0
// gives 0.
//
// ParityCount is pure and does not allocate.
func ParityCount(k int, kPerPath []int, lossPerPath []float64, alpha float64) int {
	if k <= 0 {
		return 0
	}
	if !(alpha > 0) {
		alpha = DefaultAlpha
	}
	return min(k, ceilCount(alpha*ExpectedLoss(kPerPath, lossPerPath)))
}

// ExpectedLoss returns L̂ = Σ k_i · p_i (paper 1 §3.3), with the same input
// rules as ParityCount.
func ExpectedLoss(kPerPath []int, lossPerPath []float64) float64 {
	var l float64
	for i := range min(len(kPerPath), len(lossPerPath)) {
		k, p := kPerPath[i], lossPerPath[i]
		if k <= 0 || !(p > 0) {
			continue
		}
		l += float64(k) * min(p, 1)
	}
	return l
}

// ceilCount rounds a non-negative count up, forgiving 1e-9 of
// floating-point noise, and saturates instead of overflowing.
func ceilCount(x float64) int {
	if !(x > 0) {
		return 0
	}
	if x >= MaxK {
		return MaxK
	}
	return int(math.Ceil(x - 1e-9))
}

// AssuredParity returns the smallest r in [0, min(k, MaxK)] for which a
// block of k data and r parity packets, each lost independently with
// probability p, loses more than r of its k+r packets with probability at
// most residual: the Reed–Solomon block then fails to rebuild its data at
// most that often. The tail P(X > r), X ~ Binomial(k+r, p), is summed
// from the probability mass function by its recurrence
// P(i+1) = P(i)·(n−i)/(i+1)·p/(1−p). k ≤ 0, p ≤ 0 (or NaN) or residual ≥ 1
// give 0; p ≥ 1 or residual ≤ 0 give min(k, MaxK). Pure; it does not
// allocate.
func AssuredParity(k int, p, residual float64) int {
	if k <= 0 || !(p > 0) || residual >= 1 {
		return 0
	}
	top := min(k, MaxK)
	if p >= 1 || !(residual > 0) {
		return top
	}
	for r := range top {
		if binomialTail(k+r, r, p) <= residual {
			return r
		}
	}
	return top
}

// binomialTail returns P(X > r) for X ~ Binomial(n, p), 0 < p < 1.
func binomialTail(n, r int, p float64) float64 {
	q := 1 - p
	pmf := math.Pow(q, float64(n)) // P(X = 0)
	head := 0.0                    // P(X ≤ i)
	for i := 0; i <= r && i <= n; i++ {
		head += pmf
		pmf *= float64(n-i) / float64(i+1) * p / q
	}
	return max(1-head, 0)
}
