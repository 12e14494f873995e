package fec

import (
	"crypto/subtle"
	"fmt"
	"sync"

	"github.com/klauspost/reedsolomon"
)

// The coding, and why it is built this way.
//
// Encoding uses a reedsolomon.Encoder for exactly (k, r), created once and
// cached (New costs ≈23 µs and ≈160 allocations), and computes parity with
// EncodeIdx, one data shard at a time: measured here it allocates nothing
// and is as fast as Encode, which allocates twice per call.
//
// Decoding does not call ReconstructData, which allocates 6–7 times per
// call. With the library's default matrix the generator is [I; A]: parity j
// is P_j = Σ_i A[j][i]·D_i, and row j of A does not depend on r. So the
// decoder takes A from one reedsolomon.New(k, k) per k (extracted by
// encoding unit vectors, so it is whatever matrix the library uses), inverts
// the small e×e system for the e missing data shards in Go, and combines the
// surviving shards with a multiply-accumulate kernel: the SIMD
// galMulSliceXor of an encoder whose single parity row is [1, 2, …, 255], so
// that EncodeIdx(in, c-1, [out]) is out ^= c·in (WithCustomMatrix and
// EncodeIdx are both public API). Nothing allocates per block.

// codecKey packs (k, r) for the encoder cache.
type codecKey uint16

func keyOf(k, r int) codecKey { return codecKey(k<<8 | r) }

var codecs struct {
	mu  sync.RWMutex
	enc map[codecKey]reedsolomon.Encoder // (k, r) → encoder, 1 ≤ r ≤ k ≤ MaxK
	mat [MaxK + 1]*[]byte                // k → A, k rows of k coefficients, row-major
}

// encoderFor returns the cached reedsolomon encoder for k data and r parity
// shards, creating it on first use. 1 ≤ r ≤ k ≤ MaxK. Safe for concurrent
// use; the encoders are too (reedsolomon's are safe to share).
func encoderFor(k, r int) (reedsolomon.Encoder, error) {
	key := keyOf(k, r)
	codecs.mu.RLock()
	e := codecs.enc[key]
	codecs.mu.RUnlock()
	if e != nil {
		return e, nil
	}
	if k < 1 || k > MaxK || r < 1 || r > k {
		return nil, fmt.Errorf("fec: no code for k=%d r=%d", k, r)
	}
	codecs.mu.Lock()
	defer codecs.mu.Unlock()
	if e := codecs.enc[key]; e != nil {
		return e, nil
	}
	e, err := reedsolomon.New(k, r)
	if err != nil {
		return nil, fmt.Errorf("fec: reedsolomon.New(%d, %d): %w", k, r, err)
	}
	if codecs.enc == nil {
		codecs.enc = make(map[codecKey]reedsolomon.Encoder)
	}
	codecs.enc[key] = e
	return e, nil
}

// parityMatrix returns A for k data shards: k rows (parity 0 … k-1) of k
// coefficients, row-major, the rows of the library's default matrix.
// Parity j of any (k, r) code with r > j uses row j. Created on first use
// and cached for the process (at most MaxK of them, ≤ 16 KiB each).
func parityMatrix(k int) ([]byte, error) {
	if k < 1 || k > MaxK {
		return nil, fmt.Errorf("fec: no code for k=%d", k)
	}
	codecs.mu.RLock()
	m := codecs.mat[k]
	codecs.mu.RUnlock()
	if m != nil {
		return *m, nil
	}
	codecs.mu.Lock()
	defer codecs.mu.Unlock()
	if m := codecs.mat[k]; m != nil {
		return *m, nil
	}
	a, err := extractMatrix(k, k)
	if err != nil {
		return nil, err
	}
	codecs.mat[k] = &a
	return a, nil
}

// extractMatrix returns the r×k parity rows of reedsolomon.New(k, r) by
// encoding each unit vector as 1-byte shards.
func extractMatrix(k, r int) ([]byte, error) {
	enc, err := reedsolomon.New(k, r)
	if err != nil {
		return nil, fmt.Errorf("fec: reedsolomon.New(%d, %d): %w", k, r, err)
	}
	a := make([]byte, r*k)
	par := make([][]byte, r)
	for j := range par {
		par[j] = make([]byte, 1)
	}
	one := []byte{1}
	for i := range k {
		for j := range par {
			par[j][0] = 0
		}
		if err := enc.EncodeIdx(one, i, par); err != nil {
			return nil, fmt.Errorf("fec: extracting the code matrix: %w", err)
		}
		for j := range r {
			a[j*k+i] = par[j][0]
		}
	}
	return a, nil
}

// mulKernel is the multiply-accumulate kernel: an encoder with 255 data
// shards and one parity row [1, 2, …, 255], so EncodeIdx(in, c-1, [out])
// computes out ^= c·in in GF(2^8) with the library's SIMD code. Built on
// first use (≈110 µs, 146 KB), not at program start.
var mulKernel = sync.OnceValue(func() reedsolomon.Encoder {
	row := make([]byte, 255)
	for i := range row {
		row[i] = byte(i + 1)
	}
	e, err := reedsolomon.New(255, 1, reedsolomon.WithCustomMatrix([][]byte{row}))
	if err != nil {
		panic("fec: cannot build the GF(2^8) kernel: " + err.Error()) // a broken build, not input
	}
	return e
})

// mulAdd computes out ^= c·in over GF(2^8) with kernel (mulKernel());
// len(in) == len(out). one is a caller-owned 1-element scratch slice, so the
// call does not allocate.
func mulAdd(kernel reedsolomon.Encoder, c byte, in, out []byte, one [][]byte) {
	switch c {
	case 0:
	case 1:
		subtle.XORBytes(out, out, in)
	default:
		one[0] = out
		_ = kernel.EncodeIdx(in, int(c)-1, one) // lengths match by construction
		one[0] = nil
	}
}

// GF(2^8) with the library's field polynomial x^8+x^4+x^3+x^2+1 (0x11d) and
// generator 2, for the small matrix work; checked against mulAdd in tests.
var gfExp [510]byte
var gfLog [256]byte

func init() {
	x := 1
	for i := range 255 {
		gfExp[i], gfExp[i+255] = byte(x), byte(x)
		gfLog[x] = byte(i)
		x <<= 1
		if x&0x100 != 0 {
			x ^= 0x11d
		}
	}
}

func gfMul(a, b byte) byte {
	if a == 0 || b == 0 {
		return 0
	}
	return gfExp[int(gfLog[a])+int(gfLog[b])]
}

func gfInv(a byte) byte { return gfExp[255-int(gfLog[a])] } // a ≠ 0

// gfInvert inverts the n×n matrix m (row-major) in place by Gauss–Jordan
// elimination, using work (≥ n*n bytes) as scratch. It reports false if m
// is singular, which cannot happen for a square part of an MDS code's A.
func gfInvert(m []byte, n int, work []byte) bool {
	inv := work[:n*n]
	clear(inv)
	for i := range n {
		inv[i*n+i] = 1
	}
	for col := range n {
		p := -1
		for row := col; row < n; row++ {
			if m[row*n+col] != 0 {
				p = row
				break
			}
		}
		if p < 0 {
			return false
		}
		if p != col {
			for c := range n {
				m[p*n+c], m[col*n+c] = m[col*n+c], m[p*n+c]
				inv[p*n+c], inv[col*n+c] = inv[col*n+c], inv[p*n+c]
			}
		}
		if d := m[col*n+col]; d != 1 {
			s := gfInv(d)
			for c := range n {
				m[col*n+c] = gfMul(m[col*n+c], s)
				inv[col*n+c] = gfMul(inv[col*n+c], s)
			}
		}
		for row := range n {
			f := m[row*n+col]
			if row == col || f == 0 {
				continue
			}
			for c := range n {
				m[row*n+c] ^= gfMul(f, m[col*n+c])
				inv[row*n+c] ^= gfMul(f, inv[col*n+c])
			}
		}
	}
	copy(m, inv)
	return true
}
