package fec

import "time"

// Defaults applied to zero fields of EncoderOptions and DecoderOptions, and
// to a zero Redundancy.Alpha.
const (
	DefaultK            = 20                     // data packets per block (paper 1 §5.1)
	DefaultBudget       = 20 * time.Millisecond  // longest a block stays open, from its first packet
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
