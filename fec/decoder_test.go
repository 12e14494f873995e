package fec

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestDecoderOptions(t *testing.T) {
	d := mustDecoder(t, DecoderOptions{})
	if o := d.Options(); o.MaxBlocks != DefaultMaxBlocks || o.Timeout != DefaultTimeout || o.MaxK != DefaultMaxK ||
		o.MaxPacketLen != DefaultMaxPacketLen || o.MaxBuffers != DefaultMaxBlocks*16 {
		t.Fatalf("defaults: %+v", o)
	}
	for _, tt := range []struct {
		o    DecoderOptions
		want string
	}{
		{DecoderOptions{MaxBlocks: -1}, "MaxBlocks"},
		{DecoderOptions{Timeout: -1}, "Timeout"},
		{DecoderOptions{MaxK: MaxK + 1}, "MaxK"},
		{DecoderOptions{MaxPacketLen: 1 << 16}, "MaxPacketLen"},
		{DecoderOptions{MaxBuffers: 3}, "MaxBuffers"},
	} {
		if _, err := NewDecoder(tt.o); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewDecoder(%+v) = %v, want an error about %s", tt.o, err, tt.want)
		}
	}
}

// TestDecoderBadInput: every impossible or untrackable field is refused
// with the documented verdict and counted under its reason; nothing
// panics.
func TestDecoderBadInput(t *testing.T) {
	good := Ref{Class: 1, Block: 10, Index: 4, K: 4, R: 2, MaxLen: 8}
	shard := make([]byte, 8+ShardOverhead)
	with := func(f func(*Ref)) Ref { r := good; f(&r); return r }
	tests := []struct {
		name   string
		parity bool
		ref    Ref
		pkt    []byte
		want   Verdict
		why    Reason
	}{
		{"data class", false, Ref{Class: MaxClasses, K: 4}, []byte{1}, Unprotected, ReasonClass},
		{"data k 0", false, Ref{K: 0}, []byte{1}, Bad, ReasonIndex},
		{"data index ≥ k", false, Ref{K: 4, Index: 4}, []byte{1}, Bad, ReasonIndex},
		{"data index < 0", false, Ref{K: 4, Index: -1}, []byte{1}, Bad, ReasonIndex},
		{"data k > MaxK", false, Ref{K: DefaultMaxK + 1}, []byte{1}, Unprotected, ReasonK},
		{"data too long", false, Ref{K: 4}, make([]byte, DefaultMaxPacketLen+1), Unprotected, ReasonLength},
		{"parity class", true, with(func(r *Ref) { r.Class = 1 << 40 }), shard, Unprotected, ReasonClass},
		{"parity r 0", true, with(func(r *Ref) { r.R = 0 }), shard, Bad, ReasonK},
		{"parity r > k", true, with(func(r *Ref) { r.R = 5 }), shard, Bad, ReasonK},
		{"parity k 0", true, with(func(r *Ref) { r.K, r.Index = 0, 0 }), shard, Bad, ReasonK},
		{"parity k > MaxK", true, with(func(r *Ref) { r.K, r.Index = DefaultMaxK+1, DefaultMaxK+1 }), shard, Unprotected, ReasonK},
		{"parity index < k", true, with(func(r *Ref) { r.Index = 3 }), shard, Bad, ReasonIndex},
		{"parity index ≥ k+r", true, with(func(r *Ref) { r.Index = 6 }), shard, Bad, ReasonIndex},
		{"parity MaxLen negative", true, with(func(r *Ref) { r.MaxLen = -1 }), shard, Unprotected, ReasonLength},
		{"parity MaxLen too large", true, with(func(r *Ref) { r.MaxLen = DefaultMaxPacketLen + 1 }), shard, Unprotected, ReasonLength},
		{"parity shard short", true, good, shard[:9], Bad, ReasonLength},
		{"parity shard long", true, good, append(shard, 0), Bad, ReasonLength},
		{"parity nil shard", true, good, nil, Bad, ReasonLength},
	}
	d := mustDecoder(t, DecoderOptions{})
	for _, tt := range tests {
		before := d.Stats()
		var v Verdict
		if tt.parity {
			v = d.AddParity(t0, tt.ref, tt.pkt, nil)
		} else {
			v = d.AddData(t0, tt.ref, tt.pkt, nil)
		}
		after := d.Stats()
		if v != tt.want || after.Reasons[tt.why] != before.Reasons[tt.why]+1 {
			t.Errorf("%s: verdict %v (want %v), reason %v count %d→%d", tt.name, v, tt.want, tt.why, before.Reasons[tt.why], after.Reasons[tt.why])
		}
		if v.Deliver() != (v == Unprotected) {
			t.Errorf("%s: Deliver() = %v", tt.name, v.Deliver())
		}
	}
	if s := d.Stats(); s.Data != 0 || s.Parity != 0 || s.Bad+s.Unprotected != uint64(len(tests)) {
		t.Fatalf("stats after bad input: %+v", s)
	}
}

// TestDecoderMismatch: packets that contradict earlier packets of their
// block are Bad and change nothing.
func TestDecoderMismatch(t *testing.T) {
	d := mustDecoder(t, DecoderOptions{})
	data := func(i, k, n int) Verdict { return d.AddData(t0, Ref{Block: 1, Index: i, K: k}, make([]byte, n), nil) }
	par := func(i, k, r, maxLen int) Verdict {
		return d.AddParity(t0, Ref{Block: 1, Index: i, K: k, R: r, MaxLen: maxLen}, make([]byte, maxLen+ShardOverhead), nil)
	}
	steps := []struct {
		name string
		v    Verdict
		want Verdict
	}{
		{"data 0 of 8", data(0, 8, 100), Accept},
		{"data with another K", data(1, 9, 10), Bad},
		{"data 5 of 8", data(5, 8, 10), Accept},
		{"parity with k above the data's K", par(9, 9, 1, 100), Bad},
		{"parity with k below a data index", par(5, 5, 1, 100), Bad},
		{"parity MaxLen below a data length", par(6, 6, 2, 99), Bad},
		{"parity k 6 r 2", par(6, 6, 2, 100), Accept},
		{"parity with another r", par(7, 6, 3, 100), Bad},
		{"parity with another MaxLen", par(7, 6, 2, 101), Bad},
		{"parity repeated", par(6, 6, 2, 100), Duplicate},
		{"data past the real k", data(6, 8, 10), Bad},
		{"data longer than MaxLen", data(2, 8, 101), Bad},
		{"data repeated", data(0, 8, 100), Duplicate},
	}
	for _, s := range steps {
		if s.v != s.want {
			t.Errorf("%s: %v, want %v", s.name, s.v, s.want)
		}
	}
	if s := d.Stats(); s.Reasons[ReasonMismatch] != 8 || s.Duplicates != 2 {
		t.Fatalf("stats %+v", s)
	}
}

// TestDecoderLateOriginal: once a packet is reconstructed its original is
// a Duplicate, and so is a parity shard that arrives after the block is
// done.
func TestDecoderLateOriginal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	b := encodeBlock(t, mustEncoder(t, EncoderOptions{K: 4}), randPackets(rng, 4, 20, 80), 2)
	d := mustDecoder(t, DecoderOptions{})
	rc := newRecovered(2, DefaultMaxPacketLen, 10)
	for i := range 3 {
		if v := d.AddData(t0, b.refs[i], b.data[i], rc); v != Accept {
			t.Fatalf("data %d: %v", i, v)
		}
	}
	if v := d.AddParity(t0, b.parRefs[0], b.parity[0], rc); v != Accept || len(rc.Sizes) != 1 || rc.Indexes[0] != 3 {
		t.Fatalf("parity: %v, recovered %v", v, rc.Indexes)
	}
	if !bytes.Equal(rc.Packet(0), b.data[3]) || !bytes.Equal(rc.Bufs[0][10:10+rc.Sizes[0]], b.data[3]) {
		t.Fatal("recovered packet differs")
	}
	if rc.Ref != (Ref{Block: 0, K: 4, R: 2, MaxLen: b.parRefs[0].MaxLen}) {
		t.Fatalf("recovered Ref %+v", rc.Ref)
	}
	if v := d.AddData(t0, b.refs[3], b.data[3], rc); v != Duplicate || v.Deliver() {
		t.Fatalf("late original: %v", v)
	}
	if v := d.AddParity(t0, b.parRefs[1], b.parity[1], rc); v != Duplicate {
		t.Fatalf("late parity: %v", v)
	}
	s := d.Stats()
	if s.Data != 3 || s.Recovered != 1 || s.BlocksRecovered != 1 || s.Duplicates != 2 || s.Lost != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// TestDecoderEarlyClose: a block the timer closed at 5 of 20 packets is
// decoded with the real k from its parity header, and a parity-less block
// that lost nothing is not counted lost at timeout.
func TestDecoderEarlyClose(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	e := mustEncoder(t, EncoderOptions{K: 20})
	pkts := randPackets(rng, 5, 1, 1400)
	var refs []Ref
	for _, p := range pkts {
		ref, _, _ := e.Add(t0, p, 0)
		refs = append(refs, ref)
	}
	par := newParity(20, DefaultMaxPacketLen)
	if !e.Flush(t0.Add(DefaultBudget), &Redundancy{Ratio: 0.4}, par) || par.Ref.K != 5 || par.Ref.R != 2 {
		t.Fatalf("Flush: %+v", par.Ref)
	}
	d := mustDecoder(t, DecoderOptions{})
	rc := newRecovered(2, DefaultMaxPacketLen, 0)
	for _, i := range []int{0, 2, 4} {
		d.AddData(t0, refs[i], pkts[i], rc)
	}
	d.AddParity(t0, par.ShardRef(1), par.Shards[1], rc)
	if len(rc.Sizes) != 0 {
		t.Fatal("recovered with 4 of 5")
	}
	d.AddParity(t0, par.ShardRef(0), par.Shards[0], rc)
	if len(rc.Sizes) != 2 || !bytes.Equal(rc.Packet(0), pkts[rc.Indexes[0]]) || !bytes.Equal(rc.Packet(1), pkts[rc.Indexes[1]]) {
		t.Fatalf("recovered %v", rc.Indexes)
	}

	// Block 1: 3 packets, r = 0, all arrive; block 2: 3 packets, the middle one lost.
	for blk := uint64(1); blk <= 2; blk++ {
		for i := range 3 {
			if blk == 2 && i == 1 {
				continue
			}
			d.AddData(ms(1), Ref{Block: blk, Index: i, K: 20}, []byte{byte(i)}, rc)
		}
	}
	d.Expire(ms(1).Add(DefaultTimeout - 1))
	if s := d.Stats(); s.Lost != 0 || s.BlocksExpired != 0 {
		t.Fatalf("expired early: %+v", s)
	}
	d.Expire(ms(1).Add(DefaultTimeout))
	s := d.Stats()
	if s.Lost != 1 || s.BlocksExpired != 1 || s.BlocksComplete != 1 || s.BlocksRecovered != 1 {
		t.Fatalf("after timeout: %+v", s)
	}
	// The lost packet turns up late: delivered, counted Late; twice is a Duplicate.
	if v := d.AddData(ms(500), Ref{Block: 2, Index: 1, K: 20}, []byte{1}, rc); v != Accept {
		t.Fatalf("late data: %v", v)
	}
	if v := d.AddData(ms(501), Ref{Block: 2, Index: 1, K: 20}, []byte{1}, rc); v != Duplicate {
		t.Fatalf("late data again: %v", v)
	}
	if s := d.Stats(); s.Late != 1 || s.Data != 3+5 {
		t.Fatalf("late: %+v", s)
	}
}

// TestDecoderTimeoutWithParity: with the real k known, what is missing at
// timeout is lost, and parity that arrives afterwards is a Duplicate.
func TestDecoderTimeoutWithParity(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	b := encodeBlock(t, mustEncoder(t, EncoderOptions{K: 10}), randPackets(rng, 10, 50, 60), 2)
	d := mustDecoder(t, DecoderOptions{Timeout: 30 * time.Millisecond})
	for i := range 7 {
		d.AddData(ms(i), b.refs[i], b.data[i], nil)
	}
	d.AddParity(ms(8), b.parRefs[0], b.parity[0], nil)
	if v := d.AddParity(ms(30), b.parRefs[1], b.parity[1], nil); v != Duplicate {
		t.Fatalf("parity after the timeout: %v", v)
	}
	if s := d.Stats(); s.Lost != 3 || s.BlocksExpired != 1 || s.ResidualLoss() != 0.3 {
		t.Fatalf("stats %+v residual %v", s, s.ResidualLoss())
	}
	d.SetTimeout(0)
	if d.Options().Timeout != DefaultTimeout {
		t.Fatal("SetTimeout(0) is not the default")
	}
}

// TestDecoderEviction: the table holds MaxBlocks blocks; a new one evicts
// the oldest and counts what it was missing.
func TestDecoderEviction(t *testing.T) {
	d := mustDecoder(t, DecoderOptions{MaxBlocks: 2})
	for blk := range uint64(3) {
		d.AddData(t0, Ref{Block: blk, Index: 1, K: 4}, []byte{1}, nil) // index 0 missing in each
	}
	if s := d.Stats(); s.BlocksEvicted != 1 || s.Lost != 1 {
		t.Fatalf("stats %+v", s)
	}
	// Block 0 is gone and behind the window: its late packet is delivered
	// unprotected.
	if v := d.AddData(t0, Ref{Block: 0, Index: 0, K: 4}, []byte{1}, nil); v != Unprotected {
		t.Fatalf("evicted block's packet: %v", v)
	}
	if s := d.Stats(); s.Reasons[ReasonStale] != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestDecoderBufferPressure: when MaxBuffers run out the oldest open block
// gives up its buffers; a block that cannot get one still delivers.
func TestDecoderBufferPressure(t *testing.T) {
	d := mustDecoder(t, DecoderOptions{MaxK: 4, MaxBuffers: 8})
	for blk := range uint64(3) {
		for i := range 3 {
			if v := d.AddData(t0, Ref{Block: blk, Index: i, K: 4}, []byte{1}, nil); v != Accept {
				t.Fatalf("block %d data %d: %v", blk, i, v)
			}
		}
	}
	if s := d.Stats(); s.BlocksEvicted != 1 || s.Lost != 0 || s.NoBuffer != 0 {
		t.Fatalf("stats %+v", s)
	}
	// One block alone wanting more than MaxBuffers.
	d2 := mustDecoder(t, DecoderOptions{MaxK: 8, MaxBuffers: 16})
	for blk := range uint64(3) {
		for i := range 6 {
			d2.AddData(t0, Ref{Block: blk, Index: i, K: 8}, []byte{1}, nil)
		}
	}
	if s := d2.Stats(); s.NoBuffer != 0 || s.BlocksEvicted != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestDecoderWindow: block ids far ahead are refused (parity Bad, data
// delivered unprotected) until four data packets in a row say the sender
// really moved on; ids far behind are stale.
func TestDecoderWindow(t *testing.T) {
	d := mustDecoder(t, DecoderOptions{MaxBlocks: 8})
	data := func(blk uint64) Verdict { return d.AddData(t0, Ref{Class: 2, Block: blk, K: 4}, []byte{1}, nil) }
	if v := data(1000); v != Accept {
		t.Fatalf("first block: %v", v)
	}
	if v := data(1008); v != Accept {
		t.Fatalf("edge of the window: %v", v)
	}
	if v := d.AddParity(t0, Ref{Class: 2, Block: 1017, Index: 4, K: 4, R: 1, MaxLen: 1}, make([]byte, 3), nil); v != Bad {
		t.Fatalf("far parity: %v", v)
	}
	for i := range 3 {
		if v := data(5000 + uint64(i)); v != Unprotected {
			t.Fatalf("far data %d: %v", i, v)
		}
	}
	if v := data(5003); v != Accept {
		t.Fatalf("resync: %v", v)
	}
	if v := data(5003 - 8); v != Unprotected {
		t.Fatalf("stale: %v", v)
	}
	if v := data(5003 - 7); v != Accept {
		t.Fatalf("inside the window behind: %v", v)
	}
	s := d.ClassStats(2)
	if s.Reasons[ReasonWindow] != 4 || s.Reasons[ReasonStale] != 1 {
		t.Fatalf("class stats %+v", s)
	}
	if d.ClassStats(3) != (DecoderStats{}) || d.ClassStats(1<<50) != (DecoderStats{}) {
		t.Fatal("stats of unknown classes")
	}
}

// TestDecoderRecoveredBuffers: reconstructed packets beyond the caller's
// buffers, or too big for them, are counted and dropped; nil rec is fine.
func TestDecoderRecoveredBuffers(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	b := encodeBlock(t, mustEncoder(t, EncoderOptions{K: 6}), randPackets(rng, 6, 100, 100), 3)
	for _, tt := range []struct {
		name    string
		rc      *Recovered
		got     int
		dropped uint64
	}{
		{"nil", nil, 0, 3},
		{"one buffer", newRecovered(1, 100, 0), 1, 2},
		{"small buffers", newRecovered(3, 99, 0), 0, 3},
		{"negative offset", &Recovered{Bufs: newRecovered(3, 200, 0).Bufs, Offset: -1}, 0, 3},
	} {
		d := mustDecoder(t, DecoderOptions{})
		for i := 3; i < 6; i++ {
			d.AddData(t0, b.refs[i], b.data[i], tt.rc)
		}
		for j := range 3 {
			d.AddParity(t0, b.parRefs[j], b.parity[j], tt.rc)
		}
		s := d.Stats()
		n := 0
		if tt.rc != nil {
			n = len(tt.rc.Sizes)
		}
		if n != tt.got || s.RecoveredDropped != tt.dropped || s.Recovered != 3 {
			t.Errorf("%s: got %d, stats %+v", tt.name, n, s)
		}
	}
}

// TestDecoderClasses: blocks of different classes with the same id are
// separate, and Stats sums the classes.
func TestDecoderClasses(t *testing.T) {
	d := mustDecoder(t, DecoderOptions{})
	for c := range uint64(3) {
		for i := range 2 {
			if v := d.AddData(t0, Ref{Class: c, Block: 7, Index: i, K: 2}, []byte{byte(c)}, nil); v != Accept {
				t.Fatalf("class %d index %d: %v", c, i, v)
			}
		}
	}
	if s := d.Stats(); s.Data != 6 || s.BlocksComplete != 3 || d.ClassStats(1).Data != 2 {
		t.Fatalf("stats %+v", s)
	}
	d.AddData(t0, Ref{Class: MaxClasses, K: 1}, []byte{1}, nil)
	if s := d.Stats(); s.Unprotected != 1 {
		t.Fatalf("class-less stats not summed: %+v", s)
	}
	d.Reset()
	if v := d.AddData(t0, Ref{Class: 0, Block: 7, Index: 0, K: 2}, []byte{0}, nil); v != Accept {
		t.Fatalf("after Reset: %v", v)
	}
}

func TestVerdictReasonNames(t *testing.T) {
	for v := range Bad + 2 {
		if v.String() == "" {
			t.Errorf("Verdict %d has no name", v)
		}
	}
	for r := range NumReasons + 1 {
		if (r.String() == "") != (r == ReasonNone) {
			t.Errorf("Reason %d name %q", r, r.String())
		}
	}
}

// TestDecoderConcurrent runs several receive goroutines and a ticker
// against one decoder (run with -race).
func TestDecoderConcurrent(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 10))
	enc := mustEncoder(t, EncoderOptions{K: 8})
	var blocks []block
	for range 200 {
		blocks = append(blocks, encodeBlock(t, enc, randPackets(rng, 8, 10, 200), 2))
	}
	d := mustDecoder(t, DecoderOptions{MaxBlocks: 256})
	var recv, tick sync.WaitGroup
	for path := range 3 {
		recv.Go(func() {
			rc := newRecovered(2, DefaultMaxPacketLen, 0)
			for _, b := range blocks {
				for i := path; i < 10; i += 3 {
					switch {
					case i == 1: // lost on the wire
					case i < 8:
						d.AddData(t0, b.refs[i], b.data[i], rc)
					default:
						d.AddParity(t0, b.parRefs[i-8], b.parity[i-8], rc)
					}
				}
			}
		})
	}
	done := make(chan struct{})
	tick.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
				d.Expire(t0)
				_ = d.Stats()
			}
		}
	})
	recv.Wait()
	close(done)
	tick.Wait()
	if s := d.Stats(); s.Data+s.Recovered != 200*8 || s.Recovered < 200 {
		t.Fatalf("stats %+v", s)
	}
}
