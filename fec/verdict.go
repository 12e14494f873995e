package fec

// What the decoder reports: a Verdict and Reason per packet, and
// DecoderStats in total.

// Verdict is what the decoder made of one packet.
type Verdict uint8

// Verdicts.
const (
	// Accept: a data packet is new, deliver it; a parity packet is kept.
	Accept Verdict = iota
	// Duplicate: this index of this block is already in, or was already
	// delivered (a late original of a reconstructed packet, or a parity
	// shard the block no longer needs). Drop it.
	Duplicate
	// Unprotected: the fields are possible but the decoder cannot track
	// the packet (class ≥ MaxClasses, k > MaxK, a data packet longer than
	// MaxPacketLen, a block outside the window). Deliver a data packet
	// anyway; a parity packet is dropped. Counted by reason.
	Unprotected
	// Bad: impossible fields, or fields that contradict earlier packets of
	// the block. Drop the packet. Counted by reason.
	Bad
)

// Deliver reports whether AddData's caller should deliver the packet.
func (v Verdict) Deliver() bool { return v == Accept || v == Unprotected }

var verdictNames = [...]string{"accept", "duplicate", "unprotected", "bad"}

// String returns a lower-case name for logs and metric labels.
func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return "unknown"
}

// Reason says why a packet was Unprotected or Bad, or why a reconstruction
// was discarded; a per-packet counter label, never an error.
type Reason uint8

// Reasons.
const (
	ReasonNone     Reason = iota
	ReasonClass           // class ≥ MaxClasses
	ReasonK               // k < 1 or > MaxK, r < 1 or > k
	ReasonIndex           // index outside the data (DATA) or parity (PARITY) part of its block
	ReasonLength          // packet longer than MaxPacketLen, MaxLen too large, or shard length ≠ MaxLen+ShardOverhead
	ReasonWindow          // block id more than MaxBlocks ahead of the class's newest
	ReasonStale           // block id more than MaxBlocks behind the class's newest
	ReasonMismatch        // k, r, MaxLen or a length that contradicts earlier packets of the block
	ReasonCorrupt         // a reconstructed length prefix larger than MaxLen: the inputs were inconsistent
	NumReasons
)

var reasonNames = [NumReasons]string{"", "class", "k", "index", "length", "window", "stale", "mismatch", "corrupt"}

// String returns a short lower-case name for use as a metric label ("" for
// ReasonNone).
func (r Reason) String() string {
	if r < NumReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// DecoderStats are a Decoder's counters, for one class or summed over all.
type DecoderStats struct {
	Data             uint64 // data packets accepted (delivered on arrival)
	Parity           uint64 // parity shards accepted
	Recovered        uint64 // data packets reconstructed and handed out
	Lost             uint64 // data packets still missing when their block expired or was evicted (residual loss)
	Late             uint64 // data packets that arrived after their block expired (delivered, also in Lost)
	Duplicates       uint64 // packets with Verdict Duplicate
	RecoveredDropped uint64 // reconstructed packets the caller had no buffer for (also in Recovered)
	NoBuffer         uint64 // packets not kept for lack of a shard buffer
	BlocksComplete   uint64 // blocks whose data all arrived
	BlocksRecovered  uint64 // blocks completed by reconstruction
	BlocksExpired    uint64 // blocks that timed out with data missing
	BlocksEvicted    uint64 // open blocks pushed out by newer ones or by buffer pressure (missing data in Lost)
	Unprotected      uint64 // packets with Verdict Unprotected
	Bad              uint64 // packets with Verdict Bad, and discarded reconstructions
	Reasons          [NumReasons]uint64
	// Masked are the reconstructed data packets whose original arrived
	// later, while the block was still in the table (delay masked, not
	// loss), with how much earlier the reconstruction was (masking.go).
	Masked LeadHistogram
}

// ResidualLoss returns Lost / (Data + Recovered + Lost), the fraction of
// data packets the receiver never got in time, or 0 before any.
func (s DecoderStats) ResidualLoss() float64 {
	n := s.Data + s.Recovered + s.Lost
	if n == 0 {
		return 0
	}
	return float64(s.Lost) / float64(n)
}

func (s *DecoderStats) add(t *DecoderStats) {
	s.Data += t.Data
	s.Parity += t.Parity
	s.Recovered += t.Recovered
	s.Lost += t.Lost
	s.Late += t.Late
	s.Duplicates += t.Duplicates
	s.RecoveredDropped += t.RecoveredDropped
	s.NoBuffer += t.NoBuffer
	s.BlocksComplete += t.BlocksComplete
	s.BlocksRecovered += t.BlocksRecovered
	s.BlocksExpired += t.BlocksExpired
	s.BlocksEvicted += t.BlocksEvicted
	s.Unprotected += t.Unprotected
	s.Bad += t.Bad
	for i := range s.Reasons {
		s.Reasons[i] += t.Reasons[i]
	}
	s.Masked.Merge(&t.Masked)
}
