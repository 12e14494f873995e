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
	}
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
