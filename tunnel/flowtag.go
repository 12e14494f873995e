package tunnel

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go/quicvarint"

	"github.com/bondd/bondd/classify"
	"github.com/bondd/bondd/rules"
)

// Per-flow sequencing, the send side of resequencing (reseq.go).
//
// The bond sequence number is global to the bond, so a receiver cannot see
// the gaps of one flow in it. For a flow whose packets must reach the far
// TUN in order (MPEG-TS over UDP, or a rule's resequence_ms; see
// reseqWait), the sender numbers the flow's packets itself and puts a
// flow tag in front of the inner packet, flagged by FlagFlow in the
// header:
//
//	varint  flow<<FlowSeqBits | seq, always in the 4-byte form
//	        (RFC 9000 §16 allows a longer encoding than needed); its first
//	        byte, 0b10xxxxxx, is one no IPv4 (0x4_) or IPv6 (0x6_) packet
//	        starts with
//	varint  at most 2 bytes: bit 13 the flow's epoch, bits 0–12 its
//	        wait bound in ms (the directive's resequence_ms, ≤ 5000);
//	        0: the receiver's default
//
// A flow is numbered from 0. When the sender gives its slot (flow id) to a
// new flow, or numbers an idle flow afresh, it flips the slot's epoch, and
// the receiver, seeing the other epoch, starts the flow again from 0.
//
// The tag is part of the payload, not of the header, so that FEC protects
// it with the inner packet: a packet the FEC decoder reconstructs has no
// header but still starts with its tag (IsFlowTagged tells). A peer that
// does not set FlagFlow sends no tags and is delivered as before; a peer
// that does not know FlagFlow must not be sent tags (it would see a
// malformed inner packet), so the sender tags only towards peers that
// announce the capability.

// Flow tag limits.
const (
	// FlowSeqBits is the width of the per-flow sequence number: it wraps
	// at 2^18 and is compared in serial number arithmetic (RFC 1982).
	FlowSeqBits = 18
	// FlowIDBits is the width of the flow id, the sender's flow table slot.
	FlowIDBits = 12
	// MaxFlows is the number of distinct flow ids, per bond and direction.
	MaxFlows = 1 << FlowIDBits
	// MaxFlowTagLen is the longest flow tag in bytes: 4 + 2.
	MaxFlowTagLen = 6

	flowSeqMask = 1<<FlowSeqBits - 1
	flowEpoch   = 1 << 13 // in the second varint
)

// FlowTag is the decoded flow tag of a DATA packet with FlagFlow.
type FlowTag struct {
	Flow   uint16 // flow id, < MaxFlows
	Seq    uint32 // per-flow sequence number, < 2^FlowSeqBits
	WaitMs uint16 // wait bound in ms, ≤ rules.MaxResequence; 0: receiver default
	Epoch  bool   // flips each time the sender numbers the flow id from 0 again
}

// ErrFlowTag is returned by ParseFlowTag for a payload without a valid flow
// tag: per packet, counted and dropped by the caller.
var ErrFlowTag = errors.New("tunnel: malformed flow tag")

// AppendFlowTag appends the encoding of t (MaxFlowTagLen bytes at most) to
// b. Flow, Seq and WaitMs are masked or clamped to their ranges. It
// allocates only if b lacks capacity.
func AppendFlowTag(b []byte, t FlowTag) []byte {
	v := uint64(t.Flow&(MaxFlows-1))<<FlowSeqBits | uint64(t.Seq&flowSeqMask)
	b = quicvarint.AppendWithLen(b, v, 4)
	return quicvarint.Append(b, waitField(t))
}

func waitField(t FlowTag) uint64 {
	w := uint64(min(t.WaitMs, uint16(rules.MaxResequence/time.Millisecond)))
	if t.Epoch {
		w |= flowEpoch
	}
	return w
}

// FlowTagLen returns the encoded length of t in bytes.
func FlowTagLen(t FlowTag) int {
	return 4 + quicvarint.Len(waitField(t))
}

// IsFlowTagged reports whether payload starts with a flow tag rather than
// an IP packet: its first byte is that of a 4-byte varint.
func IsFlowTagged(payload []byte) bool {
	return len(payload) > 0 && payload[0]>>6 == 2
}

// ParseFlowTag decodes the flow tag at the start of payload and returns it
// with its length in bytes; the inner packet is payload[n:]. It does not
// retain payload, never panics, and returns ErrFlowTag when the first
// varint is not in the 4-byte form, the second is longer than 2 bytes or
// its wait above rules.MaxResequence, or either is cut short.
func ParseFlowTag(payload []byte) (t FlowTag, n int, err error) {
	if !IsFlowTagged(payload) || len(payload) < 5 {
		return FlowTag{}, 0, ErrFlowTag
	}
	v, l, err := quicvarint.Parse(payload)
	if err != nil || l != 4 {
		return FlowTag{}, 0, ErrFlowTag
	}
	w, l2, err := quicvarint.Parse(payload[4:])
	if err != nil || l2 > 2 || w&^flowEpoch > uint64(rules.MaxResequence/time.Millisecond) {
		return FlowTag{}, 0, ErrFlowTag
	}
	return FlowTag{Flow: uint16(v >> FlowSeqBits), Seq: uint32(v & flowSeqMask),
		WaitMs: uint16(w &^ flowEpoch), Epoch: w&flowEpoch != 0}, 4 + l2, nil
}

// DefaultResequenceWait caps the hold of a flow that needs order by default
// (reseqWait) when no rule sets resequence_ms, in ms on the wire.
const DefaultResequenceWait = 150 * time.Millisecond

// reseqWait says whether the packet md describes must reach the far TUN in
// its flow's order, and the cap of the receiver's wait for it. A rule's
// resequence_ms decides when the directive sets it (0 turns resequencing
// off). Otherwise the default holds only MPEG-TS directly over UDP: its
// receivers have no reorder buffer (most TS receivers read datagrams as
// they come, and a datagram out of place breaks the ISO/IEC 13818-1
// continuity counters). RTP, including TS over RTP (RFC 2250), is not
// held: its receivers reorder in their jitter buffer by RTP sequence
// number (RFC 3550 §5.1). Nor is TCP: its receiver queues out-of-order
// segments itself (RFC 9293 §3.10.7.4), and a sender with RACK-TLP
// (RFC 8985; Linux's default since 4.18) detects loss by time and widens
// its reordering window when reordering shows (§6.2), so holding TCP only
// delays what the receiver would reorder anyway and, worse, the news of
// every real loss by the whole wait; and each held flow takes one of the
// resequencer's bounded flows from the MPEG-TS streams. Measured, one bulk
// TCP flow over 15- and 45-ms paths: with and without resequencing within
// the run-to-run spread of each other (1.33–1.96× the single path), but
// resequencing once halved it (docs/video.md). A rule's resequence_ms
// turns it on for a flow whose sender counts duplicate ACKs only
// (RFC 5681 §3.2). dir may be nil (no rule set).
func reseqWait(md *classify.Metadata, dir *rules.Directive) (time.Duration, bool) {
	if dir != nil && dir.Fields.Has(rules.FieldResequence) {
		return dir.Resequence, dir.Resequence > 0
	}
	if !md.Has(classify.KeyProto) || md.Proto != protoUDP {
		return 0, false
	}
	if md.Has(classify.KeyCodec) && md.Codec == classify.CodecMP2T && !md.Has(classify.KeyRTPSSRC) {
		return DefaultResequenceWait, true
	}
	return 0, false
}

// IANA protocol numbers.
const (
	protoTCP = 6
	protoUDP = 17
)

// flowHash is a 64-bit hash of md's 5-tuple (addresses, protocol, ports;
// ports are 0 when absent). It is the key of the send side's flow table;
// equal tuples hash equal within one process, which is all it needs.
func flowHash(md *classify.Metadata) uint64 {
	s, d := md.Src.As16(), md.Dst.As16()
	h := uint64(md.Proto)<<32 | uint64(md.SrcPort)<<16 | uint64(md.DstPort)
	h = mix64(h ^ le64(s[:8]))
	h = mix64(h ^ le64(s[8:]))
	h = mix64(h ^ le64(d[:8]))
	return mix64(h ^ le64(d[8:]))
}

func le64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// mix64 is the SplitMix64 finalizer (Steele, Lea, Flood, "Fast splittable
// pseudorandom number generators", OOPSLA 2014).
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// Flow table defaults.
const (
	// DefaultFlowTableSize is the send side's flow table capacity, flows.
	DefaultFlowTableSize = 1024
	// DefaultFlowIdle is how long a flow slot stays reserved after the
	// flow's last packet; a flow idle for longer is numbered afresh, in a
	// new epoch.
	DefaultFlowIdle = 10 * time.Second
	flowProbe       = 8 // slots tried per lookup
)

// flowTable assigns flow ids and per-flow sequence numbers on the send
// side. It is a fixed open-addressed table keyed by flowHash: a flow's id
// is its slot, a new flow takes a free or idle slot among flowProbe, and a
// flow that finds none is sent untagged and counted (the receiver then
// delivers it as it arrives). A flow idle for longer than idle starts
// again from sequence number 0, possibly in another slot, and each
// (re)numbering flips the slot's epoch. It never allocates after
// newFlowTable and is owned by the TUN reader goroutine (not safe for
// concurrent use).
type flowTable struct {
	slots []flowSlot
	mask  uint64
	idle  int64 // ns
	epoch time.Time
	set   bool
	full  atomic.Uint64 // packets sent untagged: no slot free; read by Stats
}

type flowSlot struct {
	hash  uint64
	last  int64 // ns since epoch, 0: never used
	seq   uint32
	epoch bool
}

// newFlowTable returns a table of size slots (rounded up to a power of two,
// at most MaxFlows; ≤ 0: DefaultFlowTableSize) whose slots are reused after
// idle (≤ 0: DefaultFlowIdle).
func newFlowTable(size int, idle time.Duration) *flowTable {
	if size <= 0 {
		size = DefaultFlowTableSize
	}
	n := 1
	for n < min(size, MaxFlows) {
		n <<= 1
	}
	if idle <= 0 {
		idle = DefaultFlowIdle
	}
	return &flowTable{mask: uint64(n - 1), idle: int64(idle)} // slots come with the first flow (next)
}

// next returns the tag (flow id, next sequence number, epoch; WaitMs
// unset) for the flow with hash h, at now. ok is false when the table has
// no slot for a new flow.
func (t *flowTable) next(h uint64, now time.Time) (tag FlowTag, ok bool) {
	if !t.set {
		t.epoch, t.set = now.Add(-time.Nanosecond), true // last == 0 stays "never used"
		t.slots = make([]flowSlot, t.mask+1)             // an idle bond holds none
	}
	ns := int64(now.Sub(t.epoch))
	free := -1
	for i := range uint64(flowProbe) {
		j := (h + i) & t.mask
		s := &t.slots[j]
		switch {
		case s.last != 0 && s.hash == h && ns-s.last <= t.idle:
			tag = FlowTag{Flow: uint16(j), Seq: s.seq, Epoch: s.epoch}
			s.seq, s.last = (s.seq+1)&flowSeqMask, ns
			return tag, true
		case free < 0 && (s.last == 0 || ns-s.last > t.idle):
			free = int(j)
		}
	}
	if free < 0 {
		t.full.Add(1)
		return FlowTag{}, false
	}
	s := &t.slots[free]
	*s = flowSlot{hash: h, last: ns, seq: 1, epoch: !s.epoch}
	return FlowTag{Flow: uint16(free), Epoch: s.epoch}, true
}
