package fec

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestDecoderMasked checks the delay-masking counter: a late original of a
// reconstructed packet counts once, with the time since the
// reconstruction; an original that never comes, a second copy of the
// original, and a late original of a packet that was not reconstructed do
// not count.
func TestDecoderMasked(t *testing.T) {
	tests := []struct {
		name      string
		late      []int // data indexes whose originals arrive after the parity, in order
		lateAtMs  int   // when they arrive, ms after the reconstruction (at 10 ms): the lead
		wantCount uint64
		wantBkt   int // bucket of the lead when wantCount > 0
	}{
		{"both originals late", []int{2, 3}, 25, 2, 5},           // (20, 50]
		{"one original late, one lost", []int{3}, 2, 1, 1},       // (1, 2]
		{"an original twice", []int{2, 2}, 700, 1, 9},            // (500, 1000], and the block expired meanwhile
		{"no original arrives", nil, 0, 0, 0},                    // both lost: loss masked, not delay
		{"a lead past the last bound", []int{2}, 1500, 1, 10},    // the open bucket
		{"a data index that arrived on time", []int{0}, 5, 0, 0}, // a plain duplicate
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, 6))
			b := encodeBlock(t, mustEncoder(t, EncoderOptions{K: 4}), randPackets(rng, 4, 20, 80), 2)
			d := mustDecoder(t, DecoderOptions{})
			rc := newRecovered(2, DefaultMaxPacketLen, 0)
			for i := range 2 {
				d.AddData(ms(0), b.refs[i], b.data[i], rc)
			}
			d.AddParity(ms(10), b.parRefs[0], b.parity[0], rc)
			d.AddParity(ms(10), b.parRefs[1], b.parity[1], rc)
			if len(rc.Sizes) != 2 {
				t.Fatalf("recovered %d packets, want 2", len(rc.Sizes))
			}
			for _, i := range tc.late {
				if v := d.AddData(ms(10+tc.lateAtMs), b.refs[i], b.data[i], rc); v != Duplicate {
					t.Fatalf("late original %d: %v", i, v)
				}
			}
			m := d.Stats().Masked
			if m.Count != tc.wantCount {
				t.Fatalf("masked %d, want %d (%+v)", m.Count, tc.wantCount, m)
			}
			if tc.wantCount == 0 {
				return
			}
			if m.Buckets[tc.wantBkt] != tc.wantCount {
				t.Errorf("buckets %v, want %d in bucket %d", m.Buckets, tc.wantCount, tc.wantBkt)
			}
			if want := time.Duration(tc.lateAtMs) * time.Millisecond; m.Mean() != want {
				t.Errorf("mean lead %v, want %v", m.Mean(), want)
			}
		})
	}
}

// TestLeadHistogramQuantile checks the bucket interpolation and Sub.
func TestLeadHistogramQuantile(t *testing.T) {
	var h LeadHistogram
	for _, ns := range []int64{-5, 500e3, 3e6, 4e6, 15e6, 2e9} {
		h.add(ns)
	}
	// buckets: ≤1: 2, (2,5]: 2, (10,20]: 1, >1000: 1
	tests := []struct {
		q, want float64
	}{
		{0, 0},
		{1.0 / 6, 0.5},
		{2.0 / 6, 1},
		{0.5, 3.5},
		{4.0 / 6, 5},
		{5.0 / 6, 20},
		{1, 1000},
	}
	for _, tc := range tests {
		if got := h.Quantile(tc.q); got < tc.want-1e-9 || got > tc.want+1e-9 {
			t.Errorf("Quantile(%.3f) = %g, want %g", tc.q, got, tc.want)
		}
	}
	var empty LeadHistogram
	if empty.Quantile(0.5) != 0 || empty.Mean() != 0 {
		t.Error("an empty histogram reads non-zero")
	}
	early := h
	h.add(7e6)
	d := h.Sub(early)
	if d.Count != 1 || d.Buckets[3] != 1 || d.SumNs != 7e6 {
		t.Errorf("Sub = %+v, want the one 7 ms lead", d)
	}
	if z := early.Sub(h); z.Count != 0 || z.SumNs != 0 {
		t.Errorf("Sub of a later snapshot = %+v, want zero", z)
	}
}

// TestDecoderParityLag checks ParityLag: the largest lag from a block's
// first packet to its parity, decaying by 1/16 of the difference towards
// shorter ones, and measured even when the block expired first.
func TestDecoderParityLag(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	enc := mustEncoder(t, EncoderOptions{K: 4})
	d := mustDecoder(t, DecoderOptions{Timeout: 50 * time.Millisecond})
	if d.ParityLag() != 0 {
		t.Fatal("lag before any parity")
	}
	steps := []struct {
		lagMs int
		want  time.Duration
	}{
		{80, 80 * time.Millisecond}, // after the 50-ms timeout: still measured
		{16, 76 * time.Millisecond}, // 80 − (80 − 16)/16
		{100, 100 * time.Millisecond},
	}
	start := 0
	for _, st := range steps {
		b := encodeBlock(t, enc, randPackets(rng, 4, 20, 80), 1)
		d.AddData(ms(start), b.refs[0], b.data[0], nil)
		d.AddParity(ms(start+st.lagMs), b.parRefs[0], b.parity[0], nil)
		if got := d.ParityLag(); got != st.want {
			t.Fatalf("after a %d-ms lag: ParityLag %v, want %v", st.lagMs, got, st.want)
		}
		start += 1000
	}
}
