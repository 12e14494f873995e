package fec

// Ref is one packet's place in an FEC block: the FEC fields of bondd's wire
// header (tunnel.Header Class, Block, Index, K, R and MaxLen), as plain ints.
//
// On a DATA packet the block's final size is not yet known, so K is the
// block's target size (EncoderOptions.K, an upper bound on the real count),
// R is 0, MaxLen is 0 and Index < K. On a PARITY packet K is the real number
// of data packets in the block (fewer than the target when the time budget
// closed it), R the number of parity packets, K ≤ Index < K+R, and MaxLen the
// length of the block's longest data packet; the shard is MaxLen +
// ShardOverhead bytes.
type Ref struct {
	Class  uint64 // FEC class, < MaxClasses at the Decoder
	Block  uint64 // block id, counting up from 0 per class
	Index  int    // position in the block: data < K ≤ parity
	K      int    // data packets: target (DATA) or actual (PARITY)
	R      int    // parity packets (PARITY; 0 on DATA)
	MaxLen int    // longest data packet of the block, bytes (PARITY; 0 on DATA)
}

// putPrefix writes the shard length prefix for an n-byte packet.
func putPrefix(b []byte, n int) { b[0], b[1] = byte(n>>8), byte(n) }

// prefix reads the shard length prefix.
func prefix(b []byte) int { return int(b[0])<<8 | int(b[1]) }
