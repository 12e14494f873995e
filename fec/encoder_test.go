package fec

import (
	"strings"
	"sync"
	"testing"
	"time"
)

func TestEncoderOptions(t *testing.T) {
	e := mustEncoder(t, EncoderOptions{})
	if o := e.Options(); o.K != DefaultK || o.Budget != DefaultBudget || o.MaxPacketLen != DefaultMaxPacketLen || o.MaxR != DefaultK {
		t.Fatalf("defaults: %+v", o)
	}
	for _, tt := range []struct {
		o    EncoderOptions
		want string
	}{
		{EncoderOptions{K: MaxK + 1}, "K"},
		{EncoderOptions{K: -1}, "K"},
		{EncoderOptions{Budget: -1}, "Budget"},
		{EncoderOptions{MaxPacketLen: 1 << 16}, "MaxPacketLen"},
		{EncoderOptions{K: 4, MaxR: 5}, "MaxR"},
	} {
		if _, err := NewEncoder(tt.o); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewEncoder(%+v) = %v, want an error about %s", tt.o, err, tt.want)
		}
	}
}

// TestEncoderBlocks walks blocks closed by k, by the timer, by Seal and by
// a forgotten Seal, and checks Refs, parity geometry and counters.
func TestEncoderBlocks(t *testing.T) {
	e := mustEncoder(t, EncoderOptions{Class: 3, K: 4, Budget: 20 * time.Millisecond})
	par := newParity(4, DefaultMaxPacketLen)
	rd := &Redundancy{Loss: []float64{0.1, 0.5}, Alpha: 2}

	if _, ok := e.Deadline(); ok {
		t.Fatal("Deadline with no open block")
	}
	// Block 0: full at k = 4; paths 0,1,1,0 → L̂ = 2·0.1 + 2·0.5 = 1.2, r = ⌈2.4⌉ = 3.
	lens := []int{10, 300, 7, 1}
	for i, n := range lens {
		ref, full, ok := e.Add(ms(i), make([]byte, n), []int{0, 1, 1, 0}[i])
		if !ok || ref != (Ref{Class: 3, Block: 0, Index: i, K: 4}) || full != (i == 3) {
			t.Fatalf("Add %d = %+v full=%v ok=%v", i, ref, full, ok)
		}
	}
	if dl, ok := e.Deadline(); !ok || !dl.Equal(ms(20)) {
		t.Fatalf("Deadline = %v %v", dl, ok)
	}
	if e.Seal(1, rd, par) {
		t.Fatal("Seal of a block that is not open")
	}
	if !e.Seal(0, rd, par) {
		t.Fatal("Seal refused the full block")
	}
	if par.Ref != (Ref{Class: 3, Block: 0, K: 4, R: 3, MaxLen: 300}) || len(par.Shards) != 3 || par.ByTimer {
		t.Fatalf("parity %+v, %d shards", par.Ref, len(par.Shards))
	}
	for j, s := range par.Shards {
		if len(s) != 300+ShardOverhead || par.ShardRef(j).Index != 4+j {
			t.Fatalf("shard %d: len %d ref %+v", j, len(s), par.ShardRef(j))
		}
	}
	if got := par.KPerPath; len(got) != 2 || got[0] != 2 || got[1] != 2 {
		t.Fatalf("KPerPath = %v", got)
	}
	if e.Seal(0, rd, par) {
		t.Fatal("second Seal of block 0")
	}

	// Block 1: two packets, the budget closes it at Flush.
	e.Add(ms(100), make([]byte, 50), 0)
	e.Add(ms(110), make([]byte, 60), 0)
	if e.Flush(ms(119), rd, par) {
		t.Fatal("Flush before the budget ran out")
	}
	if !e.Flush(ms(120), rd, par) || !par.ByTimer || par.Ref.K != 2 || par.Ref.Block != 1 || par.Ref.R != 1 || par.Ref.MaxLen != 60 {
		t.Fatalf("Flush at the budget: %+v byTimer=%v", par.Ref, par.ByTimer)
	}
	if e.Flush(ms(500), rd, par) {
		t.Fatal("Flush with no open block")
	}

	// Block 2: forced close by Seal before full; no loss → no parity.
	ref, _, _ := e.Add(ms(200), []byte{1}, 5)
	if !e.Seal(ref.Block, &Redundancy{}, par) || par.Ref.R != 0 || len(par.Shards) != 0 {
		t.Fatalf("forced Seal: %+v", par.Ref)
	}

	// Block 3: full but never sealed; the next Add closes it without parity.
	for range 4 {
		e.Add(ms(300), []byte{1, 2}, 0)
	}
	ref, _, _ = e.Add(ms(301), []byte{3}, 0)
	if ref.Block != 4 || ref.Index != 0 {
		t.Fatalf("Add after an unsealed full block: %+v", ref)
	}
	// A full block is closed by Flush even before its budget.
	for range 3 {
		e.Add(ms(302), []byte{4}, 0)
	}
	if !e.Flush(ms(303), rd, par) || par.ByTimer || par.Ref.Block != 4 {
		t.Fatalf("Flush of a full block: %+v byTimer=%v", par.Ref, par.ByTimer)
	}

	// Refusals.
	if _, _, ok := e.Add(ms(400), make([]byte, DefaultMaxPacketLen+1), 0); ok {
		t.Fatal("Add took an oversized packet")
	}
	if _, _, ok := e.Add(ms(400), []byte{1}, MaxPaths); ok {
		t.Fatal("Add took a bad path index")
	}
	if _, _, ok := e.Add(ms(400), []byte{1}, -1); ok {
		t.Fatal("Add took a negative path index")
	}

	s := e.Stats()
	want := EncoderStats{Blocks: 5, BlocksByK: 3, BlocksByTimer: 1, BlocksForced: 1, BlocksUnseal: 1,
		Data: 4 + 2 + 1 + 4 + 4, Parity: 3 + 1 + 0 + 0 + 1, Unprotected: 3}
	if s != want {
		t.Fatalf("stats\n got %+v\nwant %+v", s, want)
	}
	if cr := s.CodingRate(); cr != 15.0/20 {
		t.Fatalf("CodingRate = %v", cr)
	}
}

// TestEncoderParityCaps: r is cut by MaxR, by too few buffers and by
// buffers too small for the block, and counted.
func TestEncoderParityCaps(t *testing.T) {
	e := mustEncoder(t, EncoderOptions{K: 8, MaxR: 3})
	all := &Redundancy{Ratio: 1}
	for _, tt := range []struct {
		name string
		par  *Parity
		want int
	}{
		{"MaxR", newParity(8, 100), 3},
		{"two buffers", newParity(2, 100), 2},
		{"no buffers", &Parity{}, 0},
		{"second buffer too small", &Parity{Bufs: [][]byte{make([]byte, 102), make([]byte, 101), make([]byte, 102)}}, 1},
	} {
		var ref Ref
		for range 8 {
			ref, _, _ = e.Add(t0, make([]byte, 100), 0)
		}
		if !e.Seal(ref.Block, all, tt.par) || tt.par.Ref.R != tt.want || len(tt.par.Shards) != tt.want {
			t.Errorf("%s: R = %d, %d shards, want %d", tt.name, tt.par.Ref.R, len(tt.par.Shards), tt.want)
		}
	}
	if s := e.Stats(); s.ParityCapped != 4 || s.Parity != 6 {
		t.Fatalf("ParityCapped %d Parity %d", s.ParityCapped, s.Parity)
	}
}

// TestEncoderConcurrent runs the documented split under -race: the sender
// adds and seals, a timer flushes.
func TestEncoderConcurrent(t *testing.T) {
	e := mustEncoder(t, EncoderOptions{K: 5, Budget: time.Millisecond})
	rd := &Redundancy{Ratio: 0.4}
	var wg sync.WaitGroup
	var sealed, flushed int
	wg.Go(func() {
		par := newParity(5, DefaultMaxPacketLen)
		for i := range 5000 {
			if ref, full, _ := e.Add(ms(i), make([]byte, 64), i%2); full && e.Seal(ref.Block, rd, par) {
				sealed++
			}
		}
	})
	wg.Go(func() {
		par := newParity(5, DefaultMaxPacketLen)
		for i := range 5000 {
			if e.Flush(ms(i), rd, par) {
				flushed++
			}
		}
	})
	wg.Wait()
	s := e.Stats()
	if s.Data != 5000-uint64(sumPending(e)) || s.Blocks != uint64(sealed+flushed)+s.BlocksUnseal {
		t.Fatalf("stats %+v, sealed %d flushed %d", s, sealed, flushed)
	}
}

func sumPending(e *Encoder) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n
}
