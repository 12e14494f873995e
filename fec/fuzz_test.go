package fec

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"
)

// FuzzDecoder feeds the decoder arbitrary sequences of DATA and PARITY
// packets with arbitrary header fields, lengths and times. It must never
// panic, hand out a packet longer than MaxPacketLen, hand out an index
// twice for one block, or break its counters.
//
// Each op is 12 bytes plus a payload: flags (bit 0 parity, bits 1–3 time
// step), class, block (2 bytes), index, k, r, maxLen (2 bytes), payload
// length (2 bytes), fill byte.
func FuzzDecoder(f *testing.F) {
	op := func(parity bool, class, block, index, k, r, maxLen, n int, fill byte) []byte {
		b := []byte{0, byte(class)}
		if parity {
			b[0] = 1
		}
		b = binary.BigEndian.AppendUint16(b, uint16(block))
		b = append(b, byte(index), byte(k), byte(r))
		b = binary.BigEndian.AppendUint16(b, uint16(maxLen))
		b = binary.BigEndian.AppendUint16(b, uint16(n))
		return append(b, fill)
	}
	// A real block: 3 data, 2 parity, one data lost.
	rng := newSeedBlock()
	var seed []byte
	seed = append(seed, op(false, 0, 0, 0, 3, 0, 0, len(rng.data[0]), 0)...)
	seed = append(seed, op(false, 0, 0, 2, 3, 0, 0, len(rng.data[2]), 0)...)
	seed = append(seed, op(true, 0, 0, 3, 3, 2, rng.parRefs[0].MaxLen, rng.parRefs[0].MaxLen+2, 0)...)
	f.Add(seed)
	f.Add(op(true, 1, 7, 9, 4, 9, 100, 102, 1))
	f.Add(append(op(false, 63, 65535, 0, 1, 0, 0, 1400, 7), op(true, 63, 65535, 1, 1, 1, 1400, 1402, 7)...))
	f.Add(append(op(false, 0, 1, 0, 2, 0, 0, 10, 1), op(true, 0, 1, 2, 2, 2, 5, 7, 3)...))

	f.Fuzz(func(t *testing.T, in []byte) {
		d := mustDecoder(t, DecoderOptions{MaxBlocks: 4, MaxK: 16, MaxPacketLen: 1500, MaxBuffers: 40, Timeout: 30 * time.Millisecond})
		rc := newRecovered(16, 1500, 4)
		seen := map[uint64]map[int]bool{} // entry generation → indexes delivered
		now := t0
		var accepted, handed uint64
		for len(in) >= 12 {
			h := in[:12]
			in = in[12:]
			n := int(binary.BigEndian.Uint16(h[9:11])) % 1600
			pkt := bytes.Repeat([]byte{h[11]}, n)
			ref := Ref{
				Class: uint64(h[1] % (MaxClasses + 2)), Block: uint64(binary.BigEndian.Uint16(h[2:4])),
				Index: int(h[4]), K: int(h[5]), R: int(h[6]), MaxLen: int(binary.BigEndian.Uint16(h[7:9])),
			}
			now = now.Add(time.Duration(h[0]>>1&7) * 10 * time.Millisecond)
			var v Verdict
			if h[0]&1 != 0 {
				v = d.AddParity(now, ref, pkt, rc)
			} else {
				v = d.AddData(now, ref, pkt, rc)
				if v == Accept {
					accepted++
					markOnce(t, seen, entryGen(d, ref), ref.Index)
				}
			}
			for i, x := range rc.Indexes {
				handed++
				if rc.Sizes[i] > 1500 || len(rc.Packet(i)) != rc.Sizes[i] {
					t.Fatalf("recovered packet of %d bytes", rc.Sizes[i])
				}
				if rc.Ref.Class != ref.Class || rc.Ref.Block != ref.Block {
					t.Fatalf("recovered Ref %+v for a packet of %+v", rc.Ref, ref)
				}
				markOnce(t, seen, entryGen(d, ref), x)
			}
			checkInvariants(t, d)
		}
		d.Expire(now.Add(time.Hour))
		s := d.Stats()
		if s.Recovered < handed || s.Recovered-s.RecoveredDropped != handed {
			t.Fatalf("Recovered %d (dropped %d), handed out %d", s.Recovered, s.RecoveredDropped, handed)
		}
		if s.Data+s.Late != accepted {
			t.Fatalf("Data %d + Late %d, accepted %d", s.Data, s.Late, accepted)
		}
		if len(d.free) != len(d.bufs) {
			t.Fatalf("%d of %d buffers free after every block expired", len(d.free), len(d.bufs))
		}
	})
}

// entryGen returns the generation of the table entry that holds ref's
// block right after a call (a block evicted and reopened gets a new one).
func entryGen(d *Decoder, ref Ref) uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	e := d.lookupLocked(d.classLocked(ref.Class), ref.Class, ref.Block)
	if e == nil {
		panic("delivered a packet of a block that is not in the table")
	}
	return e.gen
}

// markOnce fails if an index is delivered twice in one life of a block.
func markOnce(t *testing.T, seen map[uint64]map[int]bool, gen uint64, index int) {
	m := seen[gen]
	if m == nil {
		m = map[int]bool{}
		seen[gen] = m
	}
	if m[index] {
		t.Fatalf("entry %d: index %d delivered twice", gen, index)
	}
	m[index] = true
}

// checkInvariants verifies the decoder's bookkeeping: counts match the
// bitmaps and slots, and every buffer is either free or held by exactly one
// open entry.
func checkInvariants(t *testing.T, d *Decoder) {
	d.mu.Lock()
	defer d.mu.Unlock()
	owner := make([]int, len(d.bufs))
	for _, id := range d.free {
		owner[id]++
	}
	for x := range d.ents {
		e := &d.ents[x]
		delivered, stored, par := 0, 0, 0
		for i := range 256 {
			if e.delivered(i) {
				delivered++
			}
		}
		for i, id := range e.slot {
			if id == 0 {
				continue
			}
			owner[id-1]++
			if i < MaxK && (e.k == 0 || i < int(e.k)) && i < len(e.slot)/2 {
				stored++
			} else {
				par++
			}
		}
		if e.state != stOpen && stored+par != 0 {
			t.Fatalf("closed entry %d holds %d buffers", e.gen, stored+par)
		}
		if delivered != int(e.nData) || e.state == stOpen && (stored+par != int(e.nStored)+int(e.nPar)) {
			t.Fatalf("entry %d: nData %d vs %d delivered, held %d+%d vs %d", e.gen, e.nData, delivered, e.nStored, e.nPar, stored+par)
		}
	}
	for id, n := range owner {
		if n != 1 {
			t.Fatalf("buffer %d owned %d times", id, n)
		}
	}
}

// newSeedBlock encodes a small real block for the fuzz seeds.
func newSeedBlock() block {
	e, _ := NewEncoder(EncoderOptions{K: 3})
	var b block
	for i, n := range []int{5, 9, 1} {
		p := bytes.Repeat([]byte{0}, n) // matches the fuzz fill byte 0
		ref, _, _ := e.Add(t0, p, i)
		b.data, b.refs = append(b.data, p), append(b.refs, ref)
	}
	par := &Parity{Bufs: [][]byte{make([]byte, 20), make([]byte, 20)}}
	e.Seal(0, &Redundancy{Ratio: 1}, par)
	for j, s := range par.Shards {
		b.parity, b.parRefs = append(b.parity, s), append(b.parRefs, par.ShardRef(j))
	}
	return b
}

// FuzzRoundTrip encodes fuzzer-chosen packets into one block with
// fuzzer-chosen r, erases a fuzzer-chosen set of shards, feeds the rest in
// a fuzzer-chosen order, and requires every data packet back byte-exact
// whenever at most r shards were erased, and no wrong packet ever.
func FuzzRoundTrip(f *testing.F) {
	f.Add(uint8(20), uint8(4), uint64(0b1010), uint64(7), []byte("hello, world"))
	f.Add(uint8(1), uint8(1), uint64(1), uint64(0), []byte{})
	f.Add(uint8(5), uint8(5), uint64(0b11111), uint64(99), bytes.Repeat([]byte{0xff}, 300))
	f.Fuzz(func(t *testing.T, k8, r8 uint8, erase, perm uint64, content []byte) {
		k := int(k8)%24 + 1
		r := int(r8)%k + 1
		pkts := make([][]byte, k)
		for i := range pkts {
			n := 0
			if len(content) > 0 {
				n = int(content[i%len(content)]) * 5 % 1501
			}
			p := make([]byte, n)
			for j := range p {
				p[j] = byte(i*31 + j)
			}
			pkts[i] = p
		}
		enc := mustEncoder(t, EncoderOptions{K: k})
		b := encodeBlock(t, enc, pkts, r)
		n := k + r
		order := make([]int, n)
		for i := range order {
			order[i] = i
		}
		for i := n - 1; i > 0; i-- { // a permutation driven by perm
			j := int(perm % uint64(i+1))
			perm = perm/uint64(i+1) ^ perm<<7
			order[i], order[j] = order[j], order[i]
		}
		mask := erase & (1<<n - 1)
		lost := 0
		for i := range n {
			if mask&(1<<i) != 0 {
				lost++
			}
		}
		d := mustDecoder(t, DecoderOptions{MaxBlocks: 2, MaxK: 32})
		got := feed(t, d, b, order, func(i int) bool { return mask&(1<<i) != 0 }, t0)
		for i := range k {
			p, ok := got[i]
			if ok && !bytes.Equal(p, pkts[i]) {
				t.Fatalf("data %d wrong", i)
			}
			if !ok && lost <= r {
				t.Fatalf("data %d not recovered with %d ≤ r = %d erasures", i, lost, r)
			}
		}
	})
}
