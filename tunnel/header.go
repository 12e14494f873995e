package tunnel

import (
	"encoding/binary"
	"errors"

	"github.com/quic-go/quic-go/quicvarint"
)

// Wire format of a bondd datagram (the payload of one QUIC DATAGRAM frame):
//
//	byte 0      version (high 4 bits, = Version) | type (low 4 bits)
//	byte 1      flags (FlagFEC, FlagFlow, FlagPathSeq)
//	if FlagPathSeq: 4 bytes, the per-path sequence number (big-endian)
//	varint      bond sequence number (QUIC variable-length integer, RFC 9000 §16)
//	varint      send timestamp, µs on the sender's clock (internal/monoclock)
//	if FlagFEC: varint FEC class, varint block id, varint index in block,
//	            varint k (data shards), varint r (parity shards)
//	if PARITY:  varint length of the longest data packet in the block (bytes)
//	payload     the inner IP packet (DATA) or a parity shard (PARITY); with
//	            FlagFlow (DATA only) the inner packet follows a flow tag
//	            (flowtag.go), which FEC protects with it
//
// Every field is checked on parse; a datagram that fails is counted and
// dropped by the caller.

// Version is the wire-format version this package speaks.
const Version = 1

// Datagram types.
const (
	TypeData   = 1 // an inner IP packet
	TypeParity = 2 // a Reed–Solomon parity shard
)

// Header flags.
const (
	// FlagFEC marks a header that carries FEC block fields.
	FlagFEC = 0x01
	// FlagFlow marks a DATA packet whose payload starts with a flow tag
	// (ParseFlowTag). Receivers that predate it ignore the bit; senders
	// set it only towards peers that know it.
	FlagFlow = 0x02
	// FlagPathSeq marks a header with a 4-byte per-path sequence number
	// right after the flags byte (PathSeqLen, at offset PathSeqOffset). The
	// path's send routine writes it, and rewrites the send timestamp, in place when
	// it hands the datagram to QUIC (StampPathSeq), so the receiver sees
	// gaps only for datagrams the path itself lost (rate control, ratectl.go).
	// Senders set it only towards peers that negotiated the "rate" control
	// capability; older receivers would misparse it.
	FlagPathSeq = 0x04
)

// Position of the per-path sequence number of a FlagPathSeq header.
const (
	PathSeqOffset = 2 // bytes from the start of the header
	PathSeqLen    = 4 // bytes
)

// Limits checked by ParseHeader.
const (
	// MaxFECShards bounds k and r (and k+r): Reed–Solomon over GF(2^8).
	MaxFECShards = 256
	// MaxHeaderLen is the longest header AppendHeader produces, in bytes:
	// 2 fixed + 4 path seq + 8 seq + 8 timestamp + 8 class + 8 block + 3×2
	// (index, k, r) + 2 length.
	MaxHeaderLen = 46
	// HeaderBudget is the header length, in bytes, the inner MTU leaves
	// room for (MTUFor): MaxHeaderLen without the path sequence number. A
	// DATA header with FEC fields and a flow tag in front of its payload
	// takes 2 + 8 + 8 + 1 class (< fec.MaxClasses) + 8 + 3×2 +
	// MaxFlowTagLen = 39. A sender adds FlagPathSeq only to a datagram that
	// still fits the budget with it (in practice all of them until the bond
	// sequence or the FEC block id needs an 8-byte varint, after 2^30), so
	// the 1280-byte inner MTU of the default 1360-byte QUIC packets stays.
	HeaderBudget = 42
	// Headroom is the space, in bytes, reserved in front of every packet read
	// from the TUN, so the header is written in place with no copy. It is at
	// least MaxHeaderLen and a multiple of 16.
	Headroom = 48
)

// Header is the decoded bondd header.
type Header struct {
	Type      uint8
	Flags     uint8
	PathSeq   uint32 // per-path sequence number, valid when Flags&FlagPathSeq != 0
	Seq       uint64 // bond-wide sequence number
	Timestamp uint64 // send time, µs on the sender's clock: Unix time at its start plus monotonic time since (internal/monoclock)

	// FEC fields, valid when Flags&FlagFEC != 0.
	Class  uint64
	Block  uint64
	Index  uint16
	K, R   uint16
	MaxLen uint16 // PARITY only: the block's longest data packet, bytes
}

// Errors returned by ParseHeader. Each is a per-datagram problem: the caller
// counts it as a drop reason and carries on.
var (
	ErrShortHeader = errors.New("tunnel: datagram shorter than its header")
	ErrVersion     = errors.New("tunnel: unknown wire version")
	ErrType        = errors.New("tunnel: unknown datagram type")
	ErrFEC         = errors.New("tunnel: inconsistent FEC fields")
	ErrFlags       = errors.New("tunnel: flag not valid for the datagram type")
)

// AppendHeader appends the encoding of h to b and returns the extended
// slice. It allocates only if b lacks capacity (MaxHeaderLen bytes suffice).
// Sequence numbers and timestamps must be below 2^62.
func AppendHeader(b []byte, h *Header) []byte {
	b = append(b, Version<<4|h.Type&0x0f, h.Flags)
	if h.Flags&FlagPathSeq != 0 {
		b = binary.BigEndian.AppendUint32(b, h.PathSeq)
	}
	b = quicvarint.Append(b, h.Seq)
	b = quicvarint.AppendWithLen(b, h.Timestamp, timestampLen(h))
	if h.Flags&FlagFEC != 0 {
		b = quicvarint.Append(b, h.Class)
		b = quicvarint.Append(b, h.Block)
		b = quicvarint.Append(b, uint64(h.Index))
		b = quicvarint.Append(b, uint64(h.K))
		b = quicvarint.Append(b, uint64(h.R))
		if h.Type == TypeParity {
			b = quicvarint.Append(b, uint64(h.MaxLen))
		}
	}
	return b
}

// timestampLen is the length of h's timestamp varint: 8 bytes when the
// header has FlagPathSeq, so that StampPathSeq can rewrite it in place
// (a process whose wall clock read less than 2^30 µs at its start, a
// vehicle booted at 1970, sends smaller timestamps for its first 18
// minutes); the shortest encoding otherwise.
func timestampLen(h *Header) int {
	if h.Flags&FlagPathSeq != 0 {
		return 8
	}
	return quicvarint.Len(h.Timestamp)
}

// HeaderLen returns the encoded length of h in bytes.
func HeaderLen(h *Header) int {
	n := 2 + quicvarint.Len(h.Seq) + timestampLen(h)
	if h.Flags&FlagPathSeq != 0 {
		n += PathSeqLen
	}
	if h.Flags&FlagFEC != 0 {
		n += quicvarint.Len(h.Class) + quicvarint.Len(h.Block) +
			quicvarint.Len(uint64(h.Index)) + quicvarint.Len(uint64(h.K)) + quicvarint.Len(uint64(h.R))
		if h.Type == TypeParity {
			n += quicvarint.Len(uint64(h.MaxLen))
		}
	}
	return n
}

// ParseHeader decodes the header at the start of b into h and returns its
// length in bytes; the payload is b[n:]. It does not retain b. It returns
// ErrShortHeader, ErrVersion, ErrType, ErrFEC or ErrFlags (FlagFlow on
// PARITY) for a malformed header and never panics. It does not parse the
// flow tag of a FlagFlow payload: see ParseFlowTag.
func ParseHeader(b []byte, h *Header) (n int, err error) {
	if len(b) < 2 {
		return 0, ErrShortHeader
	}
	if b[0]>>4 != Version {
		return 0, ErrVersion
	}
	h.Type, h.Flags = b[0]&0x0f, b[1]
	if h.Type != TypeData && h.Type != TypeParity {
		return 0, ErrType
	}
	if h.Flags&FlagFlow != 0 && h.Type != TypeData {
		return 0, ErrFlags
	}
	n = 2
	h.PathSeq = 0
	if h.Flags&FlagPathSeq != 0 {
		if len(b) < 2+PathSeqLen {
			return 0, ErrShortHeader
		}
		h.PathSeq = binary.BigEndian.Uint32(b[2:])
		n += PathSeqLen
	}
	var fields [8]uint64 // seq, timestamp, class, block, index, k, r, max length
	nf := 2
	if h.Flags&FlagFEC != 0 {
		nf = 7
		if h.Type == TypeParity {
			nf = 8
		}
	} else if h.Type == TypeParity {
		return 0, ErrFEC
	}
	for i := range nf {
		v, l, err := quicvarint.Parse(b[n:])
		if err != nil {
			return 0, ErrShortHeader
		}
		fields[i] = v
		n += l
	}
	h.Seq, h.Timestamp = fields[0], fields[1]
	h.Class, h.Block, h.Index, h.K, h.R, h.MaxLen = 0, 0, 0, 0, 0, 0
	if h.Flags&FlagFEC != 0 {
		idx, k, r := fields[4], fields[5], fields[6]
		if k == 0 || k > MaxFECShards || r > MaxFECShards || k+r > MaxFECShards || idx >= k+r {
			return 0, ErrFEC
		}
		if h.Type == TypeData && idx >= k || h.Type == TypeParity && idx < k {
			return 0, ErrFEC
		}
		if h.Type == TypeParity && (fields[7] == 0 || fields[7] > 0xffff) {
			return 0, ErrFEC
		}
		h.Class, h.Block = fields[2], fields[3]
		h.Index, h.K, h.R, h.MaxLen = uint16(idx), uint16(k), uint16(r), uint16(fields[7])
	}
	return n, nil
}

// StampPathSeq writes seq and the send timestamp now (µs on the sender's
// clock, internal/monoclock) into the header at the start of d in place,
// when d's header has FlagPathSeq; it reports whether it did. The
// timestamp is rewritten only when its encoding keeps its length (an
// 8-byte varint, as AppendHeader writes it with FlagPathSeq), so the
// header's length never changes. It does not allocate and never panics
// on a short d.
func StampPathSeq(d []byte, seq uint32, now uint64) bool {
	if len(d) < 2+PathSeqLen+1 || d[1]&FlagPathSeq == 0 {
		return false
	}
	binary.BigEndian.PutUint32(d[PathSeqOffset:], seq)
	ts := 2 + PathSeqLen + 1<<(d[2+PathSeqLen]>>6) // after the bond sequence varint
	if len(d) >= ts+8 && d[ts]>>6 == 3 && now < 1<<62 {
		binary.BigEndian.PutUint64(d[ts:], now|3<<62)
	}
	return true
}
