package fec

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// t0 is the time origin of the tests.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// ms returns t0 plus n milliseconds.
func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

// randPackets returns k packets with lengths in [minLen, maxLen] and random
// bytes, deterministic in seed.
func randPackets(rng *rand.Rand, k, minLen, maxLen int) [][]byte {
	pkts := make([][]byte, k)
	for i := range pkts {
		p := make([]byte, minLen+rng.IntN(maxLen-minLen+1))
		for j := range p {
			p[j] = byte(rng.Uint32())
		}
		pkts[i] = p
	}
	return pkts
}

// newParity returns a Parity with n buffers for packets up to maxPacket
// bytes.
func newParity(n, maxPacket int) *Parity {
	p := &Parity{Bufs: make([][]byte, n)}
	for i := range p.Bufs {
		p.Bufs[i] = make([]byte, maxPacket+ShardOverhead)
	}
	return p
}

// newRecovered returns a Recovered with n buffers at offset off.
func newRecovered(n, maxPacket, off int) *Recovered {
	rc := &Recovered{Bufs: make([][]byte, n), Offset: off}
	for i := range rc.Bufs {
		rc.Bufs[i] = make([]byte, off+maxPacket)
	}
	return rc
}

// block is one encoded block: its data with their Refs, and its parity.
type block struct {
	data    [][]byte
	refs    []Ref
	parity  [][]byte
	parRefs []Ref
}

// encodeBlock runs pkts through a fresh encoder with target k and fixed r,
// sealing after the last packet (early when len(pkts) < k).
func encodeBlock(t testing.TB, enc *Encoder, pkts [][]byte, r int) block {
	t.Helper()
	var b block
	for i, p := range pkts {
		ref, _, ok := enc.Add(t0, p, i%3)
		if !ok {
			t.Fatalf("Add refused packet %d", i)
		}
		b.data = append(b.data, p)
		b.refs = append(b.refs, ref)
	}
	par := newParity(r, enc.Options().MaxPacketLen)
	rd := &Redundancy{Ratio: float64(r) / float64(len(pkts))}
	if !enc.Seal(b.refs[0].Block, rd, par) {
		t.Fatal("Seal refused")
	}
	if par.Ref.R != r {
		t.Fatalf("R = %d, want %d", par.Ref.R, r)
	}
	for j, s := range par.Shards {
		b.parity = append(b.parity, bytes.Clone(s))
		b.parRefs = append(b.parRefs, par.ShardRef(j))
	}
	return b
}

// feed hands the shards of b whose index is not erased to dec in the given
// order, and returns every packet delivered (arrived or recovered) by index.
func feed(t testing.TB, dec *Decoder, b block, order []int, erased func(int) bool, now time.Time) map[int][]byte {
	t.Helper()
	got := map[int][]byte{}
	rc := newRecovered(len(b.parity)+1, dec.Options().MaxPacketLen, 3)
	take := func() {
		for i := range rc.Sizes {
			idx := rc.Indexes[i]
			if _, dup := got[idx]; dup {
				t.Fatalf("index %d delivered twice", idx)
			}
			got[idx] = bytes.Clone(rc.Packet(i))
		}
	}
	k := len(b.data)
	for _, idx := range order {
		if erased(idx) {
			continue
		}
		if idx < k {
			v := dec.AddData(now, b.refs[idx], b.data[idx], rc)
			switch v {
			case Accept:
				if _, dup := got[idx]; dup {
					t.Fatalf("index %d delivered twice", idx)
				}
				got[idx] = b.data[idx]
			case Duplicate:
			default:
				t.Fatalf("AddData(%d) = %v", idx, v)
			}
		} else {
			if v := dec.AddParity(now, b.parRefs[idx-k], b.parity[idx-k], rc); v != Accept && v != Duplicate {
				t.Fatalf("AddParity(%d) = %v", idx, v)
			}
		}
		take()
	}
	return got
}

func mustEncoder(t testing.TB, o EncoderOptions) *Encoder {
	t.Helper()
	e, err := NewEncoder(o)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func mustDecoder(t testing.TB, o DecoderOptions) *Decoder {
	t.Helper()
	d, err := NewDecoder(o)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func geometry(k, r int) string { return fmt.Sprintf("k%d_r%d", k, r) }
