package tunnel

import (
	"errors"
	"testing"
)

func TestHeaderRoundTrip(t *testing.T) {
	tests := []Header{
		{Type: TypeData, Seq: 0, Timestamp: 0},
		{Type: TypeData, Seq: 1<<62 - 1, Timestamp: 1_800_000_000_000_000},
		{Type: TypeData, Flags: FlagFEC, Seq: 77, Timestamp: 5, Class: 3, Block: 1 << 40, Index: 19, K: 20, R: 4},
		{Type: TypeParity, Flags: FlagFEC, Seq: 78, Timestamp: 6, Class: 0, Block: 9, Index: 21, K: 20, R: 4, MaxLen: 1200},
		{Type: TypeData, Flags: FlagFlow, Seq: 79, Timestamp: 7},
		{Type: TypeData, Flags: FlagFEC | FlagFlow, Seq: 80, Timestamp: 8, Class: 1, Block: 10, Index: 3, K: 20, R: 4},
		{Type: TypeData, Flags: FlagPathSeq, PathSeq: 1<<32 - 1, Seq: 81, Timestamp: 9},
		{Type: TypeParity, Flags: FlagFEC | FlagPathSeq, PathSeq: 7, Seq: 1<<62 - 1, Timestamp: 1<<62 - 1,
			Class: 1<<62 - 1, Block: 1<<62 - 1, Index: 255, K: 200, R: 56, MaxLen: 1500},
	}
	for _, h := range tests {
		b := AppendHeader(nil, &h)
		if len(b) != HeaderLen(&h) || len(b) > MaxHeaderLen {
			t.Fatalf("%+v: len %d, HeaderLen %d, max %d", h, len(b), HeaderLen(&h), MaxHeaderLen)
		}
		b = append(b, "payload"...)
		var got Header
		n, err := ParseHeader(b, &got)
		if err != nil {
			t.Fatalf("%+v: %v", h, err)
		}
		if got != h || string(b[n:]) != "payload" {
			t.Fatalf("got %+v payload %q, want %+v", got, b[n:], h)
		}
	}
}

func TestHeaderErrors(t *testing.T) {
	good := AppendHeader(nil, &Header{Type: TypeData, Seq: 300, Timestamp: 1 << 40})
	fec := func(h Header) []byte { h.Flags = FlagFEC; return AppendHeader(nil, &h) }
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrShortHeader},
		{"one byte", good[:1], ErrShortHeader},
		{"truncated varint", good[:3], ErrShortHeader},
		{"version 2", append([]byte{0x21}, good[1:]...), ErrVersion},
		{"type 0", append([]byte{0x10}, good[1:]...), ErrType},
		{"type 9", append([]byte{0x19}, good[1:]...), ErrType},
		{"parity without fec", AppendHeader(nil, &Header{Type: TypeParity}), ErrFEC},
		{"k zero", fec(Header{Type: TypeData}), ErrFEC},
		{"data index past k", fec(Header{Type: TypeData, Index: 5, K: 5, R: 1}), ErrFEC},
		{"parity index below k", fec(Header{Type: TypeParity, Index: 2, K: 5, R: 1, MaxLen: 9}), ErrFEC},
		{"k+r too big", fec(Header{Type: TypeData, K: 200, R: 100}), ErrFEC},
		{"parity no length", fec(Header{Type: TypeParity, Index: 5, K: 5, R: 1}), ErrFEC},
		{"path seq truncated", []byte{0x11, FlagPathSeq, 0, 0, 1}, ErrShortHeader},
		{"parity with a flow tag", AppendHeader(nil, &Header{Type: TypeParity, Flags: FlagFEC | FlagFlow, Index: 5, K: 5, R: 1, MaxLen: 9}), ErrFlags},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h Header
			if _, err := ParseHeader(tt.b, &h); !errors.Is(err, tt.want) {
				t.Fatalf("err %v, want %v", err, tt.want)
			}
		})
	}
}

// TestHeaderMaxLenWithFlowTag checks the claim of HeaderBudget's doc: the
// longest DATA header with FEC fields plus a flow tag fits in it, so the
// tag costs no MTU.
func TestHeaderMaxLenWithFlowTag(t *testing.T) {
	h := Header{Type: TypeData, Flags: FlagFEC | FlagFlow, Seq: 1<<62 - 1, Timestamp: 1<<62 - 1,
		Class: 63, Block: 1<<62 - 1, Index: 255, K: 256, R: 256}
	if n := HeaderLen(&h) + MaxFlowTagLen; n > HeaderBudget {
		t.Fatalf("DATA header + flow tag = %d bytes > HeaderBudget %d", n, HeaderBudget)
	}
}

// TestStampPathSeq checks that the send routine's in-place stamp writes the path
// sequence number and the send time without changing the header's length
// or its other fields, and leaves a header without FlagPathSeq alone.
func TestStampPathSeq(t *testing.T) {
	const now = 1_800_000_000_123_456
	tests := []struct {
		name string
		h    Header
		want bool
	}{
		{"data", Header{Type: TypeData, Flags: FlagPathSeq, Seq: 5, Timestamp: 1_700_000_000_000_000}, true},
		{"fec data, long seq", Header{Type: TypeData, Flags: FlagPathSeq | FlagFEC, Seq: 1 << 40, Timestamp: 1_700_000_000_000_000, Class: 2, Block: 9, Index: 1, K: 4, R: 1}, true},
		{"small timestamp: a process started with its clock at 1970", Header{Type: TypeData, Flags: FlagPathSeq, Seq: 5, Timestamp: 7}, true},
		{"no flag", Header{Type: TypeData, Seq: 5, Timestamp: 1_700_000_000_000_000}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := append(AppendHeader(nil, &tt.h), "payload"...)
			if got := StampPathSeq(b, 0xdeadbeef, now); got != tt.want {
				t.Fatalf("StampPathSeq = %v, want %v", got, tt.want)
			}
			var got Header
			n, err := ParseHeader(b, &got)
			if err != nil || string(b[n:]) != "payload" {
				t.Fatalf("parse after stamp: %v, payload %q", err, b[n:])
			}
			want := tt.h
			if tt.want {
				want.PathSeq, want.Timestamp = 0xdeadbeef, now
			}
			if got != want {
				t.Fatalf("got %+v, want %+v", got, want)
			}
		})
	}
	if StampPathSeq([]byte{0x11, FlagPathSeq}, 1, now) {
		t.Fatal("stamped a truncated header")
	}
}

func TestHeaderAllocs(t *testing.T) {
	h := Header{Type: TypeData, Flags: FlagFEC, Seq: 1 << 33, Timestamp: 1 << 50, K: 20, R: 2, Index: 3}
	buf := make([]byte, 0, MaxHeaderLen)
	var got Header
	a := testing.AllocsPerRun(1000, func() {
		b := AppendHeader(buf[:0], &h)
		if _, err := ParseHeader(b, &got); err != nil {
			t.Fatal(err)
		}
	})
	if a != 0 {
		t.Fatalf("header codec allocates %v times per round trip", a)
	}
}

func FuzzParseHeader(f *testing.F) {
	f.Add(AppendHeader(nil, &Header{Type: TypeData, Seq: 1, Timestamp: 2}))
	f.Add(AppendHeader(nil, &Header{Type: TypeParity, Flags: FlagFEC, Seq: 1, Timestamp: 2, Index: 4, K: 4, R: 2, MaxLen: 100}))
	f.Add([]byte{0x11, 0xff, 0xc0})
	f.Add(AppendFlowTag(AppendHeader(nil, &Header{Type: TypeData, Flags: FlagFEC | FlagFlow, Seq: 1, Timestamp: 2, Index: 1, K: 4, R: 2}),
		FlowTag{Flow: 3, Seq: 4, WaitMs: 100}))
	f.Add(AppendHeader(nil, &Header{Type: TypeData, Flags: FlagPathSeq | FlagFEC, PathSeq: 9, Seq: 1, Timestamp: 2, Index: 1, K: 4, R: 2}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var h Header
		n, err := ParseHeader(b, &h)
		if err != nil {
			return
		}
		if h.Flags&FlagFlow != 0 { // the payload starts with a flow tag
			if tag, tn, err := ParseFlowTag(b[n:]); err == nil {
				if got, _, err := ParseFlowTag(AppendFlowTag(nil, tag)); err != nil || got != tag || n+tn > len(b) {
					t.Fatalf("flow tag re-encode: %v %+v != %+v", err, got, tag)
				}
			}
		}
		if n > len(b) || n < HeaderLen(&h) { // varints may be non-minimal (RFC 9000 §16)
			t.Fatalf("n=%d len=%d HeaderLen=%d", n, len(b), HeaderLen(&h))
		}
		// Stamping a parsed header keeps it parseable at the same length.
		if h.Flags&FlagPathSeq != 0 {
			c := append([]byte(nil), b...)
			var h3 Header
			if !StampPathSeq(c, h.PathSeq+1, 1_800_000_000_000_000) {
				t.Fatal("StampPathSeq refused a parsed FlagPathSeq header")
			}
			if n3, err := ParseHeader(c, &h3); err != nil || n3 != n || h3.PathSeq != h.PathSeq+1 {
				t.Fatalf("after stamp: %v n=%d/%d %+v", err, n3, n, h3)
			}
		}
		// A header that parses re-encodes to a header that parses the same.
		var h2 Header
		b2 := AppendHeader(nil, &h)
		if _, err := ParseHeader(b2, &h2); err != nil || h2 != h {
			t.Fatalf("re-encode: %v %+v != %+v", err, h2, h)
		}
	})
}

func BenchmarkHeaderParse(b *testing.B) {
	buf := AppendHeader(nil, &Header{Type: TypeData, Seq: 1 << 20, Timestamp: 1 << 50})
	var h Header
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseHeader(buf, &h); err != nil {
			b.Fatal(err)
		}
	}
}
