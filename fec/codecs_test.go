package fec

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/reedsolomon"
)

// TestGFMatchesLibrary checks the Go field arithmetic against the library's
// kernel (mulAdd) for every pair, and mulAdd on long unaligned slices
// against the scalar product.
func TestGFMatchesLibrary(t *testing.T) {
	one := make([][]byte, 1)
	in := make([]byte, 256)
	for i := range in {
		in[i] = byte(i)
	}
	for c := range 256 {
		out := make([]byte, 256)
		mulAdd(mulKernel(), byte(c), in, out, one)
		for b := range 256 {
			if want := gfMul(byte(c), byte(b)); out[b] != want {
				t.Fatalf("%d·%d: kernel %d, Go %d", c, b, out[b], want)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 1))
	for _, n := range []int{1, 15, 63, 64, 65, 1299, 1302, 4097} {
		a := make([]byte, n+3)[3:]
		o := make([]byte, n+1)[1:]
		for i := range a {
			a[i], o[i] = byte(rng.Uint32()), byte(rng.Uint32())
		}
		c := byte(rng.IntN(254) + 2)
		want := bytes.Clone(o)
		for i := range want {
			want[i] ^= gfMul(c, a[i])
		}
		mulAdd(mulKernel(), c, a, o, one)
		if !bytes.Equal(o, want) {
			t.Fatalf("mulAdd over %d bytes differs", n)
		}
	}
	for a := 1; a < 256; a++ {
		if gfMul(byte(a), gfInv(byte(a))) != 1 {
			t.Fatalf("inverse of %d", a)
		}
	}
}

// TestParityRowsIndependentOfR proves the property the decoder rests on:
// with the default matrix, parity row j of New(k, r) is row j of New(k, k)
// for every r > j (docs/fec.md, "Coding"), for every k the decoder may see.
func TestParityRowsIndependentOfR(t *testing.T) {
	ks := []int{1, 2, 3, 4, 5, 8, 10, 16, 20, 32, 33, 64, 100, MaxK}
	for _, k := range ks {
		a, err := parityMatrix(k)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range []int{1, 2, 3, 4, k / 2, k - 1} {
			if r < 1 || r > k {
				continue
			}
			got, err := extractMatrix(k, r)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, a[:r*k]) {
				t.Fatalf("k=%d r=%d: parity rows differ from New(k, k)", k, r)
			}
		}
	}
	if _, err := parityMatrix(0); err == nil {
		t.Fatal("parityMatrix(0)")
	}
	if _, err := encoderFor(4, 5); err == nil {
		t.Fatal("encoderFor(4, 5)")
	}
}

// TestEncodeMatchesLibrary: parity from the cached encoders via EncodeIdx
// equals the library's Encode, shard for shard.
func TestEncodeMatchesLibrary(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	for _, g := range [][2]int{{1, 1}, {20, 4}, {64, 64}, {MaxK, MaxK}} {
		k, r := g[0], g[1]
		e := mustEncoder(t, EncoderOptions{K: k})
		b := encodeBlock(t, e, randPackets(rng, k, 1, 700), r)
		lib, err := reedsolomon.New(k, r)
		if err != nil {
			t.Fatal(err)
		}
		L := b.parRefs[0].MaxLen + ShardOverhead
		shards := make([][]byte, k+r)
		for i, p := range b.data {
			shards[i] = make([]byte, L)
			putPrefix(shards[i], len(p))
			copy(shards[i][ShardOverhead:], p)
		}
		for j := range r {
			shards[k+j] = make([]byte, L)
		}
		if err := lib.Encode(shards); err != nil {
			t.Fatal(err)
		}
		for j := range r {
			if !bytes.Equal(shards[k+j], b.parity[j]) {
				t.Fatalf("%s: parity %d differs from Encode", geometry(k, r), j)
			}
		}
	}
}

func TestGFInvert(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	work := make([]byte, 64*64)
	for n := 1; n <= 8; n++ {
		for range 50 {
			m := make([]byte, n*n)
			for i := range m {
				m[i] = byte(rng.Uint32())
			}
			orig := bytes.Clone(m)
			if !gfInvert(m, n, work) {
				continue // singular
			}
			for i := range n {
				for j := range n {
					var s byte
					for x := range n {
						s ^= gfMul(orig[i*n+x], m[x*n+j])
					}
					if want := byte(0); i == j && s != 1 || i != j && s != want {
						t.Fatalf("n=%d: M·M⁻¹ is not I", n)
					}
				}
			}
		}
	}
	if gfInvert([]byte{1, 2, 2, 4}, 2, work) {
		t.Fatal("inverted a singular matrix")
	}
}

// TestRecoveryLargeBlocks samples erasure patterns for large geometries,
// up to k = r = MaxK, including a few losses past r.
func TestRecoveryLargeBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for _, g := range [][2]int{{32, 8}, {64, 16}, {MaxK, MaxK}} {
		k, r := g[0], g[1]
		b := encodeBlock(t, mustEncoder(t, EncoderOptions{K: k}), randPackets(rng, k, 1, 1500), r)
		for range 20 {
			lost := rng.IntN(min(r+3, k+r) + 1)
			erased := map[int]bool{}
			for _, i := range rng.Perm(k + r)[:lost] {
				erased[i] = true
			}
			d := mustDecoder(t, DecoderOptions{MaxK: MaxK, MaxBlocks: 2})
			got := feed(t, d, b, rng.Perm(k+r), func(i int) bool { return erased[i] }, t0)
			for i := range k {
				p, ok := got[i]
				if ok && !bytes.Equal(p, b.data[i]) || !ok && lost <= r {
					t.Fatalf("%s, %d lost: data %d wrong or missing", geometry(k, r), lost, i)
				}
			}
		}
	}
}
