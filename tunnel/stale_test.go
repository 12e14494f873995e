package tunnel

import (
	"testing"
	"time"
)

// TestStaleFilter feeds one connection's filter datagrams (send timestamp, receive
// time, both µs) with a constant clock offset and checks which are stale.
func TestStaleFilter(t *testing.T) {
	const off = 5_000_000_000 // the receiver's clock is 5000 s ahead: it cancels
	const limit = time.Second
	type dg struct {
		ts, rx int64 // sender µs, receiver µs (without the offset)
		stale  bool
	}
	cases := []struct {
		name string
		dgs  []dg
	}{
		{"fresh at the baseline", []dg{{0, 20_000, false}, {1000, 21_000, false}}},
		{"queued 900 ms is fresh", []dg{{0, 20_000, false}, {10_000, 930_000, false}}},
		{"held 1.5 s is stale", []dg{{0, 20_000, false}, {10_000, 1_530_000, true}, {1_520_000, 1_540_000, false}}},
		{"a lower delay lowers the baseline", []dg{{0, 500_000, false}, {1_000_000, 1_010_000, false}, {1_100_000, 2_200_000, true}}},
		{"a run of stale longer than the limit resets the baseline (clock step)", []dg{
			{0, 20_000, false},
			{-2_000_000, 100_000, true}, {-1_500_000, 600_000, true}, {-800_000, 1_300_000, false}, {-700_000, 1_400_000, false}}},
		{"the baseline follows a longer path after two windows", []dg{
			{0, 10_000, false}, {10_000_000, 10_050_000, false}, {20_100_000, 21_400_000, true},
			{30_200_000, 31_500_000, false}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var f staleFilter
			for i, d := range c.dgs {
				if got := f.stale(d.ts, d.rx+off, limit); got != d.stale {
					t.Fatalf("datagram %d (ts %d rx %d): stale %v, want %v (filter %+v)", i, d.ts, d.rx, got, d.stale, f)
				}
			}
		})
	}
}

// FuzzPeekTimestamp checks peekTimestamp against ParseHeader: never a panic,
// and the same timestamp whenever the header parses.
func FuzzPeekTimestamp(f *testing.F) {
	h := Header{Type: TypeData, Seq: 77, Timestamp: 1_700_000_000_000_000}
	f.Add(AppendHeader(nil, &h))
	hs := Header{Type: TypeData, Flags: FlagPathSeq | FlagFEC, PathSeq: 9, Seq: 78, Timestamp: 1_700_000_000_000_001, K: 20, R: 2}
	f.Add(AppendHeader(nil, &hs)) // the per-path sequence number before the bond sequence
	f.Add([]byte{0x11})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, ok := peekTimestamp(b)
		var h Header
		if _, err := ParseHeader(b, &h); err == nil && (!ok || ts != h.Timestamp) {
			t.Fatalf("peekTimestamp = %d, %v; ParseHeader timestamp %d", ts, ok, h.Timestamp)
		}
	})
}
