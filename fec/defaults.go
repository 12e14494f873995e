package fec

import "time"

// Defaults applied to zero fields of EncoderOptions and DecoderOptions, and
// to a zero Redundancy.Alpha.
//
// DefaultBudget trades the overhead of a block against how late its parity
// is. Below about 1 % loss per path ⌈α·L⌉ is one parity packet for every
// block, so the coding rate is n/(n+1) for blocks closed at n packets: a
// 4 Mbit/s stream of 1200-byte packets holds 8 packets in 20 ms (coding
// rate 0.89) and 12 in 30 ms (0.93, paper 1's 0.94 at k = 20). A rebuilt
// packet waits at most the budget plus its parity's path delay; 30 ms is
// under one frame interval at 30 fps. Measured on S1 (docs/evaluation.md):
// coding rate 0.907 → 0.933 at the same loss.
const (
	DefaultK            = 20                     // data packets per block (paper 1 §5.1)
	DefaultBudget       = 30 * time.Millisecond  // longest a block stays open, from its first packet (see above)
	DefaultAlpha        = 2.0                    // safety factor α (paper 1 §4.4)
	DefaultMaxPacketLen = 1500                   // longest packet protected, bytes
	DefaultMaxBlocks    = 128                    // blocks a Decoder tracks at once
	DefaultTimeout      = 100 * time.Millisecond // a block's receive timeout, from its first packet
	DefaultMaxK         = 64                     // largest k a Decoder accepts
)

// Limits.
const (
	// MaxK is the largest block size, in data packets. Parity is limited to
	// r ≤ k, so k+r stays within the 256 shards of Reed–Solomon over GF(2^8).
	MaxK = 128
	// MaxPaths bounds the path indexes an Encoder counts: 0 ≤ path < MaxPaths.
	MaxPaths = 32
	// MaxClasses bounds the FEC classes a Decoder tracks: class < MaxClasses.
	MaxClasses = 64
	// ShardOverhead is the length prefix in front of each packet inside a
	// shard, in bytes: a parity shard is MaxLen + ShardOverhead bytes.
	ShardOverhead = 2
	// NIntervals is the number of loss intervals LossIntervals averages
	// (RFC 5348 §5.4: n = 8).
	NIntervals = 8
)
