package fec

import (
	"math"
	"testing"
	"time"
)

// TestParityCount checks r = min(k, ⌈α·Σ k_i·p_i⌉) with the paper's k = 20
// and α = 2.
func TestParityCount(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name  string
		k     int
		ki    []int
		pi    []float64
		alpha float64
		want  int
	}{
		{"lossless", 20, []int{20}, []float64{0}, 2, 0},
		{"no paths", 20, nil, nil, 2, 0},
		{"1% one path: 2·0.2 → 1", 20, []int{20}, []float64{0.01}, 2, 1},
		{"5% one path: 2·1 = 2 exactly", 20, []int{20}, []float64{0.05}, 2, 2},
		{"10%: 2·2 → 4", 20, []int{20}, []float64{0.1}, 2, 4},
		{"2.6%: 2·0.52 = 1.04 → 2", 20, []int{20}, []float64{0.026}, 2, 2},
		{"50%: 20, capped at k", 20, []int{20}, []float64{0.5}, 2, 20},
		{"60%: 24 → k", 20, []int{20}, []float64{0.6}, 2, 20},
		{"S1 paths 2%, 5%, 0.5%: 2·(0.14+0.35+0.03) = 1.04 → 2", 20, []int{7, 7, 6}, []float64{0.02, 0.05, 0.005}, 2, 2},
		{"all on the clean path", 20, []int{0, 0, 20}, []float64{0.02, 0.05, 0.005}, 2, 1},
		{"all on the worst path", 20, []int{0, 20, 0}, []float64{0.02, 0.05, 0.005}, 2, 2},
		{"alpha 1", 20, []int{20}, []float64{0.1}, 1, 2},
		{"alpha 0 means 2", 20, []int{20}, []float64{0.1}, 0, 4},
		{"alpha NaN means 2", 20, []int{20}, []float64{0.1}, nan, 4},
		{"NaN and negative rates count 0", 20, []int{10, 10}, []float64{nan, -1}, 2, 0},
		{"rates above 1 clamp", 4, []int{4}, []float64{7}, 2, 4},
		{"negative counts count 0", 20, []int{-5, 20}, []float64{1, 0.05}, 2, 2},
		{"more counts than rates", 20, []int{10, 10}, []float64{0.1}, 2, 2},
		{"more rates than counts", 20, []int{10}, []float64{0.1, 1}, 2, 2},
		{"k 0", 0, []int{1}, []float64{1}, 2, 0},
		{"k negative", -3, []int{1}, []float64{1}, 2, 0},
		{"infinite alpha", 20, []int{20}, []float64{0.01}, math.Inf(1), 20},
		{"timer-closed block of 3 at 10%", 3, []int{3}, []float64{0.1}, 2, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParityCount(tt.k, tt.ki, tt.pi, tt.alpha); got != tt.want {
				t.Errorf("ParityCount(%d, %v, %v, %v) = %d, want %d (L̂ = %v)", tt.k, tt.ki, tt.pi, tt.alpha, got, tt.want, ExpectedLoss(tt.ki, tt.pi))
			}
		})
	}
}

// TestParityCountCodingRate sweeps one path's loss rate with k = 20, α = 2:
// r rises in steps of one every 2.5 % (L̂ = 20p, α·L̂ = 40p), and the coding
// rate k/(k+r) that paper 1 reports as 0.94 corresponds to r ≈ 1.3, i.e.
// mean p_i of a few per cent.
func TestParityCountCodingRate(t *testing.T) {
	prev := 0
	for i := 0; i <= 100; i++ {
		p := float64(i) / 1000
		r := ParityCount(20, []int{20}, []float64{p}, 2)
		if want := int(math.Ceil(40*p - 1e-9)); r != want {
			t.Fatalf("p=%v: r = %d, want %d", p, r, want)
		}
		if r < prev {
			t.Fatalf("p=%v: r fell from %d to %d", p, prev, r)
		}
		prev = r
	}
	if cr := 20.0 / (20 + float64(ParityCount(20, []int{20}, []float64{0.02}, 2))); cr < 0.9 || cr > 0.96 {
		t.Fatalf("coding rate at 2%% = %v", cr)
	}
}

// TestAssuredParity checks r against the binomial tail computed by hand
// (k = 4, p = 0.015: one parity fails with P(X ≥ 2 of 5) ≈ 2.2e-3, two
// with P(X ≥ 3 of 6) ≈ 6.6e-5) and the edge cases.
func TestAssuredParity(t *testing.T) {
	for _, tt := range []struct {
		k           int
		p, residual float64
		want        int
	}{
		{4, 0.015, 1e-2, 1},
		{4, 0.015, 1e-3, 2},
		{4, 0.015, 1e-4, 2},
		{4, 0.015, 1e-5, 3},
		{20, 0.015, 1e-4, 4},
		{20, 0.001, 1e-4, 2},
		{1, 0.5, 1e-4, 1}, // capped at k
		{4, 0, 1e-4, 0},   // no loss: no parity
		{4, 0.015, 0, 4},  // no residual allowed: all the parity there is
		{4, 0.015, 1, 0},  // any failure allowed
		{4, 1, 1e-4, 4},   // every packet lost
		{0, 0.1, 1e-4, 0}, // no block
		{4, math.NaN(), 1e-4, 0},
		{MaxK + 10, 0.5, 1e-4, MaxK},
	} {
		if got := AssuredParity(tt.k, tt.p, tt.residual); got != tt.want {
			t.Errorf("AssuredParity(%d, %v, %v) = %d, want %d", tt.k, tt.p, tt.residual, got, tt.want)
		}
	}
}

// TestEncoderAssured: a block with an assured packet gets the parity of
// Residual, one without it α's.
func TestEncoderAssured(t *testing.T) {
	rd := &Redundancy{Loss: []float64{0.015}, Alpha: 2, Residual: 1e-4}
	for _, tt := range []struct {
		assured bool
		want    int
	}{{false, 1}, {true, 2}} {
		e, err := NewEncoder(EncoderOptions{K: 4})
		if err != nil {
			t.Fatal(err)
		}
		par := &Parity{}
		for range 4 {
			par.Bufs = append(par.Bufs, make([]byte, DefaultMaxPacketLen+ShardOverhead))
		}
		var ref Ref
		for i := range 4 {
			add := e.Add
			if tt.assured && i == 2 {
				add = e.AddAssured
			}
			ref, _, _ = add(time.Now(), []byte{byte(i), 1, 2}, 0)
		}
		if !e.Seal(ref.Block, rd, par) || par.Ref.R != tt.want {
			t.Errorf("assured %v: r = %d, want %d", tt.assured, par.Ref.R, tt.want)
		}
		// The next block starts without the flag.
		ref, _, _ = e.Add(time.Now(), []byte{1}, 0)
		if e.Seal(ref.Block, rd, par); par.Ref.R != 1 {
			t.Errorf("assured %v: the next block's r = %d, want 1", tt.assured, par.Ref.R)
		}
	}
}
