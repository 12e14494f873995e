package tun

import "encoding/binary"

// checksumAdd adds b to the running 32-bit one's complement accumulator sum
// (RFC 1071) and returns the new accumulator. An odd trailing byte is padded
// with a zero byte, so b must start at an even offset of the checksummed
// data for the result to be meaningful.
func checksumAdd(sum uint64, b []byte) uint64 {
	for len(b) >= 8 {
		v := binary.BigEndian.Uint64(b)
		sum += v >> 32
		sum += v & 0xffffffff
		b = b[8:]
	}
	if len(b) >= 4 {
		sum += uint64(binary.BigEndian.Uint32(b))
		b = b[4:]
	}
	if len(b) >= 2 {
		sum += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint64(b[0]) << 8
	}
	return sum
}

// checksumFold folds a 64-bit accumulator into 16 bits with end-around carry
// and returns the one's complement of the result, ready to be stored in a
// checksum field.
func checksumFold(sum uint64) uint16 {
	sum = (sum & 0xffffffff) + (sum >> 32)
	sum = (sum & 0xffffffff) + (sum >> 32)
	sum = (sum & 0xffff) + (sum >> 16)
	sum = (sum & 0xffff) + (sum >> 16)
	sum = (sum & 0xffff) + (sum >> 16)
	return ^uint16(sum)
}

// checksumUpdate returns the checksum field hc after data covered by it
// changed from words whose one's complement sum was oldSum to words whose
// sum is newSum (RFC 1624, equation 3: HC' = ~(~HC + ~m + m')). oldSum and
// newSum are unfolded accumulators from [checksumAdd] over the same aligned
// region.
func checksumUpdate(hc uint16, oldSum, newSum uint64) uint16 {
	// checksumFold(oldSum) is ~m: the complement of the old words' folded sum.
	return checksumFold(uint64(^hc) + uint64(checksumFold(oldSum)) + newSum)
}
