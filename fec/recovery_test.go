package fec

import (
	"bytes"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/reedsolomon"
)

// TestRecoveryAllErasures is the differential test: for each geometry,
// every erasure pattern of up to r of the k+r shards, fed in a shuffled
// order, must deliver every data packet exactly once and byte-exact, and
// agree with the library's own ReconstructData on the padded shards. Every
// pattern of r+1 erasures that hits data must deliver exactly the data that
// arrived (no wrong packet, nothing invented); those are enumerated for
// blocks of up to 16 shards and sampled by FuzzRoundTrip beyond.
func TestRecoveryAllErasures(t *testing.T) {
	geoms := [][2]int{{1, 1}, {2, 1}, {2, 2}, {3, 3}, {5, 2}, {8, 4}, {10, 3}, {20, 1}, {20, 2}, {20, 3}, {20, 4}}
	if testing.Short() {
		geoms = geoms[:8]
	}
	for _, g := range geoms {
		k, r := g[0], g[1]
		t.Run(geometry(k, r), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(k), uint64(r)))
			enc := mustEncoder(t, EncoderOptions{K: k})
			b := encodeBlock(t, enc, randPackets(rng, k, 1, 300), r)
			ref := referenceReconstruct(t, b)
			n := k + r
			patterns := 0
			most := r + 1 // patterns one past r must fail cleanly; enumerate them where cheap
			if n > 16 {
				most = r
			}
			forEachSubset(n, most, func(mask uint64) {
				patterns++
				dec := mustDecoder(t, DecoderOptions{MaxBlocks: 2, MaxK: 32})
				order := rng.Perm(n)
				got := feed(t, dec, b, order, func(i int) bool { return mask&(1<<i) != 0 }, t0)
				lost := bits.OnesCount64(mask)
				for i := range k {
					p, ok := got[i]
					if !ok {
						if lost <= r {
							t.Fatalf("erasures %b: data %d not recovered", mask, i)
						}
						continue
					}
					if !bytes.Equal(p, b.data[i]) {
						t.Fatalf("erasures %b: data %d = %x, want %x", mask, i, p, b.data[i])
					}
					if lost <= r && mask&(1<<i) != 0 && !bytes.Equal(p, ref[i]) {
						t.Fatalf("erasures %b: data %d differs from the library's reconstruction", mask, i)
					}
				}
				if lost > r {
					for i := range k {
						if _, ok := got[i]; ok && mask&(1<<i) != 0 {
							t.Fatalf("erasures %b: data %d invented with %d > r losses", mask, i, lost)
						}
					}
				}
				s := dec.Stats()
				// Reconstruction starts as soon as any k shards are in, so
				// data still on its way counts as recovered too.
				if lost <= r && (s.Data+s.Recovered != uint64(k) || s.Recovered < uint64(bits.OnesCount64(mask&(1<<k-1)))) {
					t.Fatalf("erasures %b: Data %d + Recovered %d, want %d", mask, s.Data, s.Recovered, k)
				}
			})
			t.Logf("%d erasure patterns", patterns)
		})
	}
}

// referenceReconstruct decodes b with reedsolomon.ReconstructData after
// erasing all data shards that any r parities can recover (the first r),
// and returns the trimmed packets.
func referenceReconstruct(t *testing.T, b block) [][]byte {
	k, r := len(b.data), len(b.parity)
	enc, err := reedsolomon.New(k, r)
	if err != nil {
		t.Fatal(err)
	}
	L := b.parRefs[0].MaxLen + ShardOverhead
	shards := make([][]byte, k+r)
	for i, p := range b.data {
		s := make([]byte, L)
		putPrefix(s, len(p))
		copy(s[ShardOverhead:], p)
		shards[i] = s
	}
	for j, p := range b.parity {
		shards[k+j] = p
	}
	// Parity must match the library's own Encode.
	check := make([][]byte, k+r)
	copy(check, shards[:k])
	for j := range r {
		check[k+j] = make([]byte, L)
	}
	if err := enc.Encode(check); err != nil {
		t.Fatal(err)
	}
	for j := range r {
		if !bytes.Equal(check[k+j], shards[k+j]) {
			t.Fatalf("parity %d differs from reedsolomon Encode", j)
		}
	}
	for i := range min(r, k) {
		shards[i] = nil
	}
	if err := enc.ReconstructData(shards); err != nil {
		t.Fatal(err)
	}
	out := make([][]byte, k)
	for i, s := range shards[:k] {
		out[i] = s[ShardOverhead : ShardOverhead+prefix(s)]
	}
	return out
}

// forEachSubset calls f with every subset of {0…n-1} of at most m elements,
// as a bit mask.
func forEachSubset(n, m int, f func(uint64)) {
	var rec func(start, left int, mask uint64)
	rec = func(start, left int, mask uint64) {
		f(mask)
		if left == 0 {
			return
		}
		for i := start; i < n; i++ {
			rec(i+1, left-1, mask|1<<i)
		}
	}
	rec(0, m, 0)
}
