package fec

import (
	"math/rand/v2"
	"testing"
	"time"
)

// pipeline is a sender and a receiver wired back to back with a fixed loss
// pattern per block, reused by the alloc tests and the benchmarks.
type pipeline struct {
	enc    *Encoder
	dec    *Decoder
	rd     Redundancy
	par    *Parity
	rec    *Recovered
	pkts   [][]byte
	refs   []Ref
	lose   map[int]bool // data indexes lost in every block
	now    time.Time
	blocks int
}

func newPipeline(tb testing.TB, k, r, size int, lose []int) *pipeline {
	rng := rand.New(rand.NewPCG(9, 9))
	p := &pipeline{
		enc:  mustEncoder(tb, EncoderOptions{K: k}),
		dec:  mustDecoder(tb, DecoderOptions{}),
		rd:   Redundancy{Ratio: float64(r) / float64(k)},
		par:  newParity(r, DefaultMaxPacketLen),
		rec:  newRecovered(r, DefaultMaxPacketLen, 16),
		pkts: randPackets(rng, k, size, size),
		refs: make([]Ref, k),
		lose: map[int]bool{},
		now:  t0,
	}
	for _, i := range lose {
		p.lose[i] = true
	}
	return p
}

// send encodes one block.
func (p *pipeline) send() {
	p.now = p.now.Add(time.Millisecond)
	for i, pkt := range p.pkts {
		p.refs[i], _, _ = p.enc.Add(p.now, pkt, i&1)
	}
	p.enc.Seal(p.refs[0].Block, &p.rd, p.par)
}

// receive decodes the block just sent, minus the lost data, and returns
// how many packets were recovered.
func (p *pipeline) receive() int {
	n := 0
	for i, pkt := range p.pkts {
		if !p.lose[i] {
			p.dec.AddData(p.now, p.refs[i], pkt, p.rec)
			n += len(p.rec.Sizes)
		}
	}
	for j, s := range p.par.Shards {
		p.dec.AddParity(p.now, p.par.ShardRef(j), s, p.rec)
		n += len(p.rec.Sizes)
	}
	p.blocks++
	return n
}

// TestEncodeDecodeAllocs proves the send and receive paths allocate
// nothing in steady state, for a clean block and one that needs the full
// r = 4 reconstruction.
func TestEncodeDecodeAllocs(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose []int
	}{{"no loss", nil}, {"4 lost", []int{0, 5, 11, 19}}} {
		p := newPipeline(t, 20, 4, 1300, tc.lose)
		for range 300 { // warm up: codecs, matrices, shard buffers, slices
			p.send()
			if got := p.receive(); got != len(tc.lose) {
				t.Fatalf("%s: recovered %d", tc.name, got)
			}
		}
		if a := testing.AllocsPerRun(200, func() { p.send(); p.receive() }); a != 0 {
			t.Errorf("%s: encoder+decoder: %v allocs per block", tc.name, a)
		}
		if a := testing.AllocsPerRun(200, p.send); a != 0 { // last: the receiver misses these
			t.Errorf("%s: encoder: %v allocs per block", tc.name, a)
		}
		if s := p.dec.Stats(); s.Lost != 0 || s.RecoveredDropped != 0 {
			t.Fatalf("%s: stats %+v", tc.name, s)
		}
	}
}

// TestFlushExpireAllocs covers the timer paths.
func TestFlushExpireAllocs(t *testing.T) {
	e := mustEncoder(t, EncoderOptions{K: 20})
	d := mustDecoder(t, DecoderOptions{})
	par := newParity(4, DefaultMaxPacketLen)
	rd := &Redundancy{Loss: []float64{0.05}}
	pkt := make([]byte, 1200)
	now := t0
	step := func() {
		now = now.Add(30 * time.Millisecond)
		for i := range 3 {
			ref, _, _ := e.Add(now, pkt, 0)
			if i != 1 {
				d.AddData(now, ref, pkt, nil)
			}
		}
		e.Deadline()
		e.Flush(now.Add(DefaultBudget), rd, par)
		d.Expire(now)
	}
	for range 300 {
		step()
	}
	if a := testing.AllocsPerRun(200, step); a != 0 {
		t.Errorf("%v allocs per timer-closed block", a)
	}
}

func TestLossIntervalsAllocs(t *testing.T) {
	var l LossIntervals
	i := 0
	if a := testing.AllocsPerRun(1000, func() {
		l.OnSent(1)
		i++
		if i%50 == 0 {
			l.OnLoss(t0.Add(time.Duration(i)*time.Second), rtt)
		}
		_ = l.Rate()
		_ = l.PacketRate()
	}); a != 0 {
		t.Errorf("%v allocs", a)
	}
}

func TestParityCountAllocs(t *testing.T) {
	ki, pi := []int{7, 7, 6}, []float64{0.02, 0.05, 0.005}
	if a := testing.AllocsPerRun(1000, func() { ParityCount(20, ki, pi, 2) }); a != 0 {
		t.Errorf("%v allocs", a)
	}
}

// TestAssuredSealAllocs: sealing blocks of assured packets with the
// Residual bound (AssuredParity) allocates nothing once the (k, r)
// encoder exists.
func TestAssuredSealAllocs(t *testing.T) {
	enc := mustEncoder(t, EncoderOptions{K: 8})
	rd := &Redundancy{Loss: []float64{0.01, 0.02}, AssuredLoss: []float64{0.015, 0.03}, Alpha: 2, Residual: 1e-4}
	par := newParity(8, DefaultMaxPacketLen)
	pkt := make([]byte, 1000)
	now := t0
	block := func() {
		now = now.Add(time.Millisecond)
		var ref Ref
		for i := range 8 {
			ref, _, _ = enc.AddAssured(now, pkt, i&1)
		}
		enc.Seal(ref.Block, rd, par)
	}
	block()
	if a := testing.AllocsPerRun(100, block); a != 0 {
		t.Fatalf("%v allocations per assured block", a)
	}
	if par.Ref.R < 2 {
		t.Fatalf("r = %d, want the Residual bound's ≥ 2", par.Ref.R)
	}
}
