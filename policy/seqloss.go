package policy

// SeqLossWindow is how many sequence numbers behind the highest a
// [SeqLoss] remembers, a power of two.
const SeqLossWindow = 4096

// SeqLoss counts the datagrams missing from a path's sequence with
// reordering tolerated: a gap is counted as lost only at the second Take
// after the sequence passed it, or once the sequence is SeqLossWindow past
// it if that comes first, so a datagram may arrive up to one feedback
// interval (50–100 ms at the tunnel's 50-ms reports) or SeqLossWindow
// datagrams late and still count as received.
// Datagrams of one path can arrive out of order by more than the packet
// threshold of RFC 9002 §6.1.1 (3): a lost datagram resent behind newer
// ones, a connection replaced by a redial while the old one's packets are
// still on the way; RFC 4737's reordering extent is the measure, and one
// interval is the tolerance (compare the time threshold of RFC 9002
// §6.1.2). A forward jump of more than 2^16
// (a restarted sender) resynchronises without loss. The zero value is
// ready; not safe for concurrent use; it does not allocate.
type SeqLoss struct {
	bits    [SeqLossWindow / 64]uint64
	have    bool
	highest uint32 // the highest sequence number seen
	mark    uint32 // highest at the previous Take
	final   uint32 // every number up to this one is accounted for
	evicted uint32 // missing numbers accounted for as they left the window, not yet taken
}

func (s *SeqLoss) set(seq uint32)   { s.bits[seq/64%uint32(len(s.bits))] |= 1 << (seq % 64) }
func (s *SeqLoss) clear(seq uint32) { s.bits[seq/64%uint32(len(s.bits))] &^= 1 << (seq % 64) }
func (s *SeqLoss) isSet(seq uint32) bool {
	return s.bits[seq/64%uint32(len(s.bits))]&(1<<(seq%64)) != 0
}

// OnSeq records the arrival of sequence number seq (mod 2^32).
func (s *SeqLoss) OnSeq(seq uint32) {
	d := int32(seq - s.highest)
	switch {
	case !s.have || d > maxSeqJump || d < -maxSeqJump:
		s.bits = [SeqLossWindow / 64]uint64{}
		s.have, s.highest, s.mark, s.final = true, seq, seq-1, seq-1
		s.set(seq)
	case d > SeqLossWindow:
		// The whole window leaves it: account for what it held, and
		// the numbers jumped over that leave it too never arrived.
		for x := s.final + 1; int32(x-s.highest) <= 0; x++ {
			if !s.isSet(x) {
				s.evicted++
			}
		}
		gone := seq - SeqLossWindow // the newest number that leaves
		s.evicted += gone - s.highest
		s.bits = [SeqLossWindow / 64]uint64{}
		s.highest, s.final = seq, gone
		s.set(seq)
	case d > 0:
		// Each number the sequence passes takes the bit of the number a
		// window behind it, which is accounted for first if it was not:
		// at a high packet rate (more than SeqLossWindow datagrams in
		// two feedback intervals: about 400 Mbit/s of 1200-byte
		// datagrams at 50 ms) numbers leave the window before the Take
		// that would account for them.
		for i := uint32(1); i <= uint32(d); i++ {
			next := s.highest + i
			if old := next - SeqLossWindow; int32(old-s.final) > 0 {
				if !s.isSet(old) {
					s.evicted++
				}
				s.final = old
			}
			s.clear(next)
		}
		s.highest = seq
		s.set(seq)
	case int32(seq-s.final) > 0 && uint32(-d) < SeqLossWindow:
		s.set(seq) // late, but not yet accounted for
	}
}

// Take returns the datagrams found missing among the numbers the sequence
// had passed at the previous Take, and starts the next interval. A number
// the sequence left SeqLossWindow behind is accounted for then, and lost
// if it had not arrived: reordering beyond the window is loss.
func (s *SeqLoss) Take() (lost uint32) {
	if !s.have {
		return 0
	}
	lost, s.evicted = s.evicted, 0
	n := int32(s.mark - s.final)
	for i := int32(1); i <= n; i++ {
		if !s.isSet(s.final + uint32(i)) {
			lost++
		}
	}
	if n > 0 {
		s.final = s.mark
	}
	s.mark = s.highest
	return lost
}
