package tunnel

import (
	"math/rand/v2"
	"testing"
)

func TestDedupe(t *testing.T) {
	var d dedupe
	steps := []struct {
		seq  uint64
		want int
	}{
		{0, seqNew}, {0, seqDuplicate}, {2, seqNew}, {1, seqNew}, {1, seqDuplicate},
		{100000, seqNew}, {2, seqTooOld}, {100000 - dedupeWindow + 1, seqNew},
		{100000 - dedupeWindow, seqTooOld}, {99999, seqNew}, {99999, seqDuplicate},
		{100000 + 3*dedupeWindow, seqNew}, {100000, seqTooOld},
	}
	for i, s := range steps {
		if got := d.check(s.seq); got != s.want {
			t.Fatalf("step %d: check(%d) = %d, want %d", i, s.seq, got, s.want)
		}
	}
}

// TestDedupeDifferential compares the bitmap against a naive map over random
// reordered sequences with duplicates.
func TestDedupeDifferential(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var d dedupe
	seen := map[uint64]bool{}
	var top uint64
	next := uint64(0)
	for range 300000 {
		var seq uint64
		switch r := rng.IntN(10); {
		case r < 6:
			seq = next
			next += uint64(1 + rng.IntN(3))
		case r < 9 && next > 0:
			seq = next - 1 - uint64(rng.IntN(min(int(next), 2*dedupeWindow)))
		default:
			seq = next + uint64(rng.IntN(200))
		}
		want := seqNew
		switch {
		case seq+1 <= top && top-(seq+1) >= dedupeWindow:
			want = seqTooOld
		case seen[seq]:
			want = seqDuplicate
		}
		if got := d.check(seq); got != want {
			t.Fatalf("check(%d) top %d = %d, want %d", seq, top, got, want)
		}
		if want == seqNew {
			seen[seq] = true
		}
		top = max(top, seq+1)
	}
}

func BenchmarkDedupeInOrder(b *testing.B) {
	var d dedupe
	var s uint64
	b.ReportAllocs()
	for b.Loop() {
		d.check(s)
		s++
	}
}
