package fec

import (
	"testing"
	"time"
)

// TestDecoderLazy checks that a decoder holds no block table before its
// first FEC packet (an idle bond), allocates it with the first block, and
// that reconstruction into a Recovered with BufLen and no Bufs grows the
// buffers once and then allocates nothing.
func TestDecoderLazy(t *testing.T) {
	d := mustDecoder(t, DecoderOptions{})
	idle := d.MemoryBytes()
	if idle > 4096 {
		t.Errorf("a new decoder holds %d bytes; want its struct only", idle)
	}
	d.Expire(t0) // no table yet: nothing to do, no panic
	d.Reset()
	if d.MemoryBytes() != idle {
		t.Errorf("Expire or Reset allocated: %d bytes, was %d", d.MemoryBytes(), idle)
	}

	p := newPipeline(t, 20, 4, 1300, []int{0, 5, 11, 19})
	p.rec = &Recovered{Offset: 16, BufLen: DefaultMaxPacketLen}
	for range 50 {
		p.send()
		if got := p.receive(); got != 4 {
			t.Fatalf("recovered %d of 4 into lazily grown buffers", got)
		}
	}
	if n := len(p.rec.Bufs); n != 4 {
		t.Errorf("%d recovered buffers grown; want 4 (one per packet of the largest reconstruction)", n)
	}
	if a := testing.AllocsPerRun(100, func() { p.send(); p.receive() }); a != 0 {
		t.Errorf("%v allocs per block once the buffers are grown", a)
	}
	if got, min := p.dec.MemoryBytes(), 128*(2*DefaultMaxK*2); got < min {
		t.Errorf("a working decoder reports %d bytes; its slot table alone is %d", got, min)
	}
	if s := p.dec.Stats(); s.RecoveredDropped != 0 {
		t.Errorf("recovered packets dropped: %+v", s)
	}
}

// TestDecoderPending checks Pending through a block's life: none open,
// one open with data missing, none once it expired.
func TestDecoderPending(t *testing.T) {
	d := mustDecoder(t, DecoderOptions{})
	if d.Pending() {
		t.Fatal("a new decoder reports a pending block")
	}
	d.AddData(t0, Ref{Block: 1, Index: 0, K: 4}, []byte{1, 2, 3}, nil)
	if !d.Pending() {
		t.Fatal("a block missing 3 of 4 packets is not pending")
	}
	d.Expire(t0.Add(DefaultTimeout + time.Millisecond))
	if d.Pending() {
		t.Fatal("a block past its timeout is still pending after Expire")
	}
}
