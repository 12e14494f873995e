package policy

import "testing"

func TestSeqLoss(t *testing.T) {
	tests := []struct {
		name  string
		steps [][]uint32 // arrivals between Takes
		want  []uint32   // what each Take after a step returns
	}{
		{"in order", [][]uint32{{1, 2, 3}, {4, 5}, {}}, []uint32{0, 0, 0}},
		{"gap counted one Take later", [][]uint32{{1, 2, 5}, {6}, {}}, []uint32{0, 2, 0}},
		{"late within an interval", [][]uint32{{1, 3}, {2, 4}, {}}, []uint32{0, 0, 0}},
		{"late by two intervals is lost", [][]uint32{{1, 3}, {4}, {2}}, []uint32{0, 1, 0}},
		{"heavy reordering", [][]uint32{{10, 1, 11, 2, 12, 3}, {4, 5, 6, 7, 8, 9, 13}, {}}, []uint32{0, 0, 0}},
		{"half lost", [][]uint32{{1, 3, 5, 7}, {9}, {}}, []uint32{0, 3, 1}},
		{"wrap", [][]uint32{{1<<32 - 2, 1}, {2}, {}}, []uint32{0, 2, 0}},
		{"restart resyncs", [][]uint32{{1 << 30, 1<<30 + 1}, {5, 6}, {}}, []uint32{0, 0, 0}},
		{"duplicate", [][]uint32{{1, 2, 2, 3}, {}, {}}, []uint32{0, 0, 0}},
		{"jump past the window", [][]uint32{{1, 10001}, {}, {}}, []uint32{5904, 4095, 0}},
		{"late for an evicted number", [][]uint32{{1, 5001}, {2}, {}}, []uint32{904, 4095, 0}},
		{"eviction across the wrap", [][]uint32{{1<<32 - 100, 5000}, {}, {}}, []uint32{1004, 4095, 0}},
	}
	// A high packet rate: two intervals hold more than the window.
	var fast, fastGaps [][]uint32
	var fastWant, fastGapsWant []uint32
	for i := range uint32(4) {
		var all, gaps []uint32
		for seq := i * 5000; seq < (i+1)*5000; seq++ {
			all = append(all, seq)
			if seq%10 != 0 {
				gaps = append(gaps, seq)
			}
		}
		fast, fastGaps = append(fast, all), append(fastGaps, gaps)
		fastWant = append(fastWant, 0)
	}
	// Each Take has what left the window since the one before (a window
	// behind the sequence) and what the interval before it passed.
	fastGapsWant = []uint32{90, 500, 500, 500}
	tests = append(tests,
		struct {
			name  string
			steps [][]uint32
			want  []uint32
		}{"5000 an interval, in order", fast, fastWant},
		struct {
			name  string
			steps [][]uint32
			want  []uint32
		}{"5000 an interval, every tenth lost", fastGaps, fastGapsWant})
	for _, tt := range tests {
		var s SeqLoss
		for i, step := range tt.steps {
			for _, seq := range step {
				s.OnSeq(seq)
			}
			if got := s.Take(); got != tt.want[i] {
				t.Errorf("%s: Take %d = %d, want %d", tt.name, i, got, tt.want[i])
			}
		}
	}
}

func TestSeqLossAllocs(t *testing.T) {
	var s SeqLoss
	seq := uint32(0)
	if a := testing.AllocsPerRun(1000, func() {
		s.OnSeq(seq)
		seq += 2
		s.Take()
	}); a != 0 {
		t.Fatalf("%v allocations", a)
	}
}
