package tunnel

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/bondd/bondd/classify"
	"github.com/bondd/bondd/rules"
)

func TestFlowTagRoundTrip(t *testing.T) {
	tests := []struct {
		tag    FlowTag
		want   FlowTag // after masking and clamping
		encLen int
	}{
		{FlowTag{}, FlowTag{}, 5},
		{FlowTag{Flow: 1, Seq: 2, WaitMs: 63}, FlowTag{Flow: 1, Seq: 2, WaitMs: 63}, 5},
		{FlowTag{Flow: MaxFlows - 1, Seq: flowSeqMask, WaitMs: 100}, FlowTag{Flow: MaxFlows - 1, Seq: flowSeqMask, WaitMs: 100}, 6},
		{FlowTag{Flow: MaxFlows + 3, Seq: flowSeqMask + 5, WaitMs: 60000}, FlowTag{Flow: 3, Seq: 4, WaitMs: 5000}, 6},
		{FlowTag{Flow: 2, Seq: 3, Epoch: true}, FlowTag{Flow: 2, Seq: 3, Epoch: true}, 6},
		{FlowTag{Flow: 2, Seq: 3, WaitMs: 5000, Epoch: true}, FlowTag{Flow: 2, Seq: 3, WaitMs: 5000, Epoch: true}, 6},
	}
	for _, tt := range tests {
		b := AppendFlowTag(nil, tt.tag)
		if len(b) != tt.encLen || len(b) != FlowTagLen(tt.tag) || len(b) > MaxFlowTagLen {
			t.Fatalf("%+v: %d bytes, FlowTagLen %d, want %d", tt.tag, len(b), FlowTagLen(tt.tag), tt.encLen)
		}
		if !IsFlowTagged(b) {
			t.Fatalf("%+v: %x not recognised as a tag", tt.tag, b)
		}
		b = append(b, 0x45, 0x00)
		got, n, err := ParseFlowTag(b)
		if err != nil || got != tt.want || n != tt.encLen {
			t.Fatalf("%+v: got %+v n=%d err=%v, want %+v", tt.tag, got, n, err, tt.want)
		}
	}
	// No IP packet looks like a tag.
	for _, first := range []byte{0x45, 0x4f, 0x60, 0x6f} {
		if IsFlowTagged([]byte{first, 0, 0, 0, 0, 0}) {
			t.Fatalf("0x%02x taken for a tag", first)
		}
	}
}

func TestFlowTagErrors(t *testing.T) {
	good := AppendFlowTag(nil, FlowTag{Flow: 1, Seq: 1, WaitMs: 100})
	tests := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"ipv4 packet", []byte{0x45, 0, 0, 20, 0, 0}},
		{"cut short", good[:4]},
		{"wait cut short", good[:5]},
		{"1-byte first varint", []byte{0x05, 0x40, 0x64, 0x45, 0}},
		{"8-byte first varint", append([]byte{0xc0, 0, 0, 0, 0, 0, 0, 1}, 0x01)},
		{"4-byte wait", append(good[:4:4], 0x80, 0, 0, 1)},
		{"wait above the rules' limit", append(good[:4:4], quicAppend2(5001)...)},
		{"wait above the limit, epoch set", append(good[:4:4], quicAppend2(5001|flowEpoch)...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := ParseFlowTag(tt.b); !errors.Is(err, ErrFlowTag) {
				t.Fatalf("err %v, want ErrFlowTag", err)
			}
		})
	}
}

func quicAppend2(v uint16) []byte { return []byte{0x40 | byte(v>>8), byte(v)} }

func FuzzParseFlowTag(f *testing.F) {
	f.Add(AppendFlowTag(nil, FlowTag{Flow: 7, Seq: 9, WaitMs: 100}))
	f.Add([]byte{0x80, 0, 0, 0, 0x40})
	f.Add([]byte{0x45, 0, 0, 20})
	f.Fuzz(func(t *testing.T, b []byte) {
		tag, n, err := ParseFlowTag(b)
		if err != nil {
			return
		}
		if n > len(b) || n < 5 || n > MaxFlowTagLen || !IsFlowTagged(b) {
			t.Fatalf("n=%d len=%d", n, len(b))
		}
		// A tag that parses re-encodes to the same tag.
		got, _, err := ParseFlowTag(AppendFlowTag(nil, tag))
		if err != nil || got != tag {
			t.Fatalf("re-encode: %v %+v != %+v", err, got, tag)
		}
	})
}

func TestFlowTable(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	type step struct {
		at    time.Duration
		hash  uint64
		flow  uint16
		seq   uint32
		ok    bool
		epoch bool
	}
	tests := []struct {
		name  string
		size  int
		steps []step
	}{
		{"one flow counts from 0", 16, []step{{0, 5, 5, 0, true, true}, {1, 5, 5, 1, true, true}, {2, 5, 5, 2, true, true}}},
		{"two flows, two ids", 16, []step{{0, 5, 5, 0, true, true}, {0, 21, 6, 0, true, true}, {0, 5, 5, 1, true, true}, {0, 21, 6, 1, true, true}}},
		{"full table: untagged", 1, []step{{0, 1, 0, 0, true, true}, {1, 2, 0, 0, false, false}, {2, 1, 0, 1, true, true}}},
		{"idle slot reused from 0, other epoch", 1, []step{{0, 1, 0, 0, true, true}, {1, 1, 0, 1, true, true}, {DefaultFlowIdle + 2, 2, 0, 0, true, false}, {DefaultFlowIdle + 3, 2, 0, 1, true, false}}},
		{"match after a free slot", 16, []step{{0, 3, 3, 0, true, true}, {0, 19, 4, 0, true, true}, {DefaultFlowIdle, 19, 4, 1, true, true}, {DefaultFlowIdle + 2, 19, 4, 2, true, true}}},
		{"a flow idle too long restarts from 0, other epoch", 16, []step{{0, 3, 3, 0, true, true}, {1, 3, 3, 1, true, true}, {DefaultFlowIdle + 2, 3, 3, 0, true, false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ft := newFlowTable(tt.size, 0)
			for i, s := range tt.steps {
				tag, ok := ft.next(s.hash, t0.Add(s.at))
				if tag.Flow != s.flow || tag.Seq != s.seq || ok != s.ok {
					t.Fatalf("step %d: got %+v %v, want flow %d seq %d %v", i, tag, ok, s.flow, s.seq, s.ok)
				}
				if ok && tag.Epoch != s.epoch {
					t.Fatalf("step %d: epoch %v, want %v", i, tag.Epoch, s.epoch)
				}
			}
		})
	}
	ft := newFlowTable(MaxFlows*4, 0)
	if len(ft.slots) != 0 {
		t.Fatalf("a new table holds %d slots, want none before its first flow", len(ft.slots))
	}
	ft.next(1, t0)
	if len(ft.slots) != MaxFlows {
		t.Fatalf("%d slots, want at most MaxFlows", len(ft.slots))
	}
	ft.slots[9] = flowSlot{hash: 9, last: 1, seq: flowSeqMask}
	ft.set, ft.epoch = true, t0
	if tag, _ := ft.next(9, t0.Add(time.Millisecond)); tag.Seq != flowSeqMask {
		t.Fatalf("seq %d", tag.Seq)
	}
	if tag, _ := ft.next(9, t0.Add(time.Millisecond)); tag.Seq != 0 {
		t.Fatalf("after the wrap: seq %d, want 0", tag.Seq)
	}
}

func TestFlowTableAllocs(t *testing.T) {
	ft := newFlowTable(0, 0)
	now := time.Unix(1_800_000_000, 0)
	var md classify.Metadata
	cls, _ := classify.New(classify.Options{})
	cls.Parse(tcp4(1000, 80), &md)
	buf := make([]byte, 0, MaxFlowTagLen)
	if a := testing.AllocsPerRun(1000, func() {
		tag, _ := ft.next(flowHash(&md), now)
		tag.WaitMs = 100
		buf = AppendFlowTag(buf[:0], tag)
		if _, _, err := ParseFlowTag(buf); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Fatalf("%v allocations per packet", a)
	}
}

// tcp4 builds an IPv4/TCP packet (ACK, no payload) between fixed addresses.
func tcp4(sport, dport uint16) []byte {
	pkt := make([]byte, 40)
	pkt[0] = 0x45
	binary.BigEndian.PutUint16(pkt[2:], 40)
	pkt[8], pkt[9] = 64, protoTCP
	copy(pkt[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
	binary.BigEndian.PutUint16(pkt[20:], sport)
	binary.BigEndian.PutUint16(pkt[22:], dport)
	pkt[32], pkt[33] = 5<<4, 0x10
	return pkt
}

func TestReseqWait(t *testing.T) {
	src, dst := netip.MustParseAddrPort("10.0.0.1:5000"), netip.MustParseAddrPort("10.0.0.2:5004")
	ts := bytes.Repeat(append([]byte{0x47, 0x01, 0x00, 0x10}, make([]byte, 184)...), 7)
	rtpTS := append([]byte{0x80, 33, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2}, ts...)
	set := func(ms int) *rules.Directive {
		return &rules.Directive{Fields: rules.FieldResequence, Resequence: time.Duration(ms) * time.Millisecond}
	}
	tests := []struct {
		name string
		pkt  []byte
		dir  *rules.Directive
		want time.Duration
		ok   bool
	}{
		{"tcp", tcp4(40000, 443), nil, 0, false},
		{"mpeg-ts over udp", udp4(src, dst, ts), nil, DefaultResequenceWait, true},
		{"mpeg-ts over rtp", udp4(src, dst, rtpTS), nil, 0, false},
		{"dns", udp4(src, netip.MustParseAddrPort("10.0.0.2:53"), []byte("query")), nil, 0, false},
		{"tcp, a rule with another field only", tcp4(40000, 443), &rules.Directive{Fields: rules.FieldPriority}, 0, false},
		{"tcp, resequence_ms 100", tcp4(40000, 443), set(100), 100 * time.Millisecond, true},
		{"tcp, resequence_ms 0", tcp4(40000, 443), set(0), 0, false},
		{"mpeg-ts, a rule with another field only", udp4(src, dst, ts), &rules.Directive{Fields: rules.FieldPriority}, DefaultResequenceWait, true},
		{"mpeg-ts, resequence_ms 0", udp4(src, dst, ts), set(0), 0, false},
		{"udp, resequence_ms 40", udp4(src, netip.MustParseAddrPort("10.0.0.2:53"), []byte("query")), set(40), 40 * time.Millisecond, true},
		{"not ip", []byte{0x00, 0x01}, nil, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cls, err := classify.New(classify.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var md classify.Metadata
			for range 3 { // past RTP probation
				cls.Parse(tt.pkt, &md)
			}
			if got, ok := reseqWait(&md, tt.dir); got != tt.want || ok != tt.ok {
				t.Fatalf("reseqWait = %v %v, want %v %v (codec %v)", got, ok, tt.want, tt.ok, md.Codec)
			}
		})
	}
}

func TestFlowHash(t *testing.T) {
	cls, _ := classify.New(classify.Options{})
	var a, b, c classify.Metadata
	cls.Parse(tcp4(1000, 80), &a)
	cls.Parse(tcp4(1000, 80), &b)
	cls.Parse(tcp4(1001, 80), &c)
	if flowHash(&a) != flowHash(&b) || flowHash(&a) == flowHash(&c) {
		t.Fatalf("hashes %x %x %x", flowHash(&a), flowHash(&b), flowHash(&c))
	}
}
