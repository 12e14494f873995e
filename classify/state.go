package classify

import "net/netip"

// Bounds of the per-Classifier state. Every table is set-associative with
// stateWays entries per set and least-recently-used replacement.
const (
	// MaxStreams is the number of confirmed RTP streams (per SSRC and UDP
	// port pair) and raw MPEG-TS flows whose codec and frame state Parse
	// keeps.
	MaxStreams = 256
	// MaxProbation is the number of RTP sources the heuristic watches before
	// they prove themselves (MinSequential packets in sequence). Kept apart
	// from the streams so that a flood of random UDP cannot evict them.
	MaxProbation = 64
	// MaxFragments is the number of fragmented datagrams (per source,
	// destination, protocol and identification) whose first fragment's
	// ports and video metadata are kept for the fragments that follow.
	MaxFragments = 64
	// FramesPerStream is the number of recent frames (RTP timestamps) per
	// stream whose type is remembered, so that every packet of a keyframe
	// is marked even when packets of the frame before it arrive late.
	FramesPerStream = 4
	// MinSequential is the number of packets with consecutive sequence
	// numbers an RTP source found by the heuristic must send before it
	// counts as RTP (RFC 3550 §A.1, MIN_SEQUENTIAL).
	MinSequential = 2
	// MaxSniffPackets is the number of packets of a dynamic payload type
	// Parse inspects to learn the codec before it gives up (codec stays
	// unknown, as for SRTP).
	MaxSniffPackets = 64
	// SniffLockPackets is the number of packets after which a codec is
	// taken without a signature, when all other candidates are ruled out.
	SniffLockPackets = 32
	// SniffRetryPackets is the number of packets (counting the sniffed
	// ones) after which a stream whose codec was not found is sniffed
	// again.
	SniffRetryPackets = 255
	// sniffBadPackets consecutive payloads that contradict a sniffed codec
	// make Parse learn the codec again.
	sniffBadPackets = 4

	stateWays = 4
)

func mix(a, b uint64) uint64 {
	h := a*0x9e3779b97f4a7c15 ^ b
	h ^= h >> 31
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 29
	return h
}

// streamKey identifies an RTP stream (kind rtp: SSRC within a UDP flow) or
// a raw MPEG-TS flow (kind ts, ssrc 0).
type streamKey struct {
	addr         uint64 // hash of source and destination address
	ssrc         uint32
	sport, dport uint16
	kind         uint8
}

const (
	kindRTP = 1
	kindTS  = 2
)

func (k *streamKey) hash() uint64 {
	return mix(k.addr, uint64(k.ssrc)<<32|uint64(k.sport)<<16|uint64(k.dport)) ^ uint64(k.kind)
}

type frameSlot struct {
	ts     uint32
	typ    FrameType
	hinted bool // typ came from a hint only; a packet's word replaces it
	valid  bool
	hasTL  bool
	hasSL  bool
	tl, sl uint8
}

// stream is the state of one confirmed RTP stream or raw TS flow.
type stream struct {
	key  streamKey
	used uint64 // Classifier.clock at last use; 0 = free

	codec Codec // learned codec of pt; CodecUnknown while sniffing
	pt    uint8 // the payload type the codec belongs to
	ptSet bool
	// sniffing (codec detection from the payload)
	alive   uint8 // candidate bits over sniffCodecs not yet ruled out
	strongs uint8 // candidate bits that showed a signature
	wrongs  uint8 // candidate bits whose payload contradicted its hint
	pkts    uint8 // packets sniffed
	gaveUp  bool
	sniffed bool  // codec came from sniffing (may be re-learned)
	bad     uint8 // consecutive payloads contradicting the codec
	lastTS  uint32
	haveTS  bool
	// noHints: a payload contradicted its own frame-type hint (a VP9
	// packetizer that leaves P = 0), so hints are ignored.
	noHints  bool
	nextSlot uint8
	frames   [FramesPerStream]frameSlot
	ts       tsState
}

// frame records the evidence of a packet with RTP timestamp ts and returns
// the frame's type: a keyframe stays one once any packet proved it.
func (s *stream) frame(ts uint32, ev *evidence) *frameSlot {
	var f *frameSlot
	for i := range s.frames {
		if s.frames[i].valid && s.frames[i].ts == ts {
			f = &s.frames[i]
			break
		}
	}
	first := false
	if f == nil {
		first = !s.frames[0].valid && !s.frames[FramesPerStream-1].valid
		f = &s.frames[s.nextSlot]
		s.nextSlot = (s.nextSlot + 1) % FramesPerStream
		*f = frameSlot{ts: ts, valid: true}
	}
	switch ev.frame {
	case FrameKey:
		f.typ, f.hinted = FrameKey, false
	case FrameDelta:
		if f.typ == FrameUnknown || f.hinted {
			f.typ, f.hinted = FrameDelta, false
		}
	}
	if ev.hintWrong {
		s.noHints = true
	}
	if f.typ == FrameUnknown && ev.hint != FrameUnknown && !s.noHints {
		f.typ, f.hinted = ev.hint, true
	}
	if f.typ == FrameUnknown && ev.startKey && first {
		f.typ, f.hinted = FrameKey, true
	}
	if ev.hasTL {
		f.hasTL, f.tl = true, ev.tl
	}
	if ev.hasSL {
		f.hasSL, f.sl = true, ev.sl
	}
	return f
}

// payloadEvidence runs codec c's parser, the stateful one for MPEG-TS.
func (s *stream) payloadEvidence(c Codec, p []byte, partial bool) evidence {
	if c == CodecMP2T {
		if !isTS(p, partial) {
			return evidence{}
		}
		return evidence{valid: true, strong: true, frame: scanTS(p, &s.ts)}
	}
	return parsePayload(c, p, partial)
}

// sniff inspects one payload of the stream's dynamic payload type, rules out
// the codecs it contradicts, and decides (locks) a codec when exactly one
// candidate still standing showed a signature, or when one candidate is left
// after SniffLockPackets packets. It returns the codec (CodecUnknown while
// undecided) and that codec's evidence for this packet.
//
// newFrame says the packet's timestamp differs from the stream's previous
// packet's. With packets in order, such a packet starts its frame: B = 1 for
// VP9, S = 1 and PID = 0 for VP8, Z = 0 for AV1 (an OBU belongs to one
// temporal unit). This separates VP8, VP9 and AV1, whose descriptors look
// alike.
func (s *stream) sniff(p []byte, newFrame, partial bool) (Codec, evidence) {
	var evs [len(sniffCodecs)]evidence
	for i, c := range sniffCodecs {
		bit := uint8(1) << i
		if s.alive&bit == 0 {
			continue
		}
		switch c {
		case CodecMP2T: // scanTS only once the codec is decided
			if isTS(p, partial) {
				evs[i] = evidence{valid: true, strong: true}
			}
		default:
			evs[i] = parsePayload(c, p, partial)
		}
		if newFrame && !startsFrame(c, p) {
			evs[i].valid = false
		}
		if evs[i].hintWrong {
			s.wrongs |= bit
		}
		switch {
		case !evs[i].valid || evs[i].unlikely:
			s.alive &^= bit
		case evs[i].strong:
			s.strongs |= bit
		}
	}
	s.pkts++
	pick := -1
	if c := s.strongs & s.alive; c != 0 && c&(c-1) == 0 {
		pick = bitIndex(c)
	} else if a := s.alive; a != 0 && a&(a-1) == 0 && s.pkts >= SniffLockPackets {
		pick = bitIndex(a)
	}
	if pick >= 0 {
		s.codec, s.sniffed, s.bad = sniffCodecs[pick], true, 0
		s.noHints = s.wrongs&(1<<pick) != 0
		ev := evs[pick]
		if s.codec == CodecMP2T {
			ev.frame = scanTS(p, &s.ts)
		}
		return s.codec, ev
	}
	if s.alive == 0 || s.pkts >= MaxSniffPackets {
		s.gaveUp = true
	}
	return CodecUnknown, evidence{}
}

// retrySniff counts a packet of a stream whose codec sniffing gave up, and
// starts it again after SniffRetryPackets such packets (the stream may have
// been joined mid-way, or lost packets while it was watched).
func (s *stream) retrySniff() {
	if s.pkts++; s.pkts == SniffRetryPackets {
		s.resetSniff()
	}
}

// startsFrame reports whether a payload of codec c can be the first packet
// of a frame.
func startsFrame(c Codec, p []byte) bool {
	if len(p) == 0 {
		return false
	}
	switch c {
	case CodecVP8:
		return p[0]&0x17 == 0x10
	case CodecVP9:
		return p[0]&0x08 != 0
	case CodecAV1:
		return p[0]&0x80 == 0
	}
	return true
}

func (s *stream) resetSniff() {
	s.codec, s.sniffed, s.gaveUp = CodecUnknown, false, false
	s.alive, s.strongs, s.wrongs, s.pkts, s.bad = allSniffCandidates, 0, 0, 0, 0
}

func bitIndex(b uint8) int {
	for i := 0; i < 8; i++ {
		if b == 1<<i {
			return i
		}
	}
	return -1
}

// lookupStream returns the stream with key k, inserting it (evicting the
// least recently used entry of its set) when insert is set.
func (c *Classifier) lookupStream(k *streamKey, insert bool) *stream {
	set := int(k.hash()%(MaxStreams/stateWays)) * stateWays
	ways := c.streams[set : set+stateWays]
	victim := &ways[0]
	for i := range ways {
		e := &ways[i]
		if e.used != 0 && e.key == *k {
			e.used = c.clock
			return e
		}
		if e.used < victim.used {
			victim = e
		}
	}
	if !insert {
		return nil
	}
	if victim.used != 0 {
		c.stats.StreamEvictions++
	}
	*victim = stream{key: *k, used: c.clock, alive: allSniffCandidates}
	return victim
}

// probe is an RTP source under probation.
type probe struct {
	key   streamKey
	used  uint64
	seq   uint16
	count uint8
}

// probeSeq counts seq for the source k and reports whether the source has
// now sent MinSequential packets in sequence; the probe is then freed.
func (c *Classifier) probeSeq(k *streamKey, seq uint16) bool {
	set := int(k.hash()%(MaxProbation/stateWays)) * stateWays
	ways := c.probation[set : set+stateWays]
	victim := &ways[0]
	for i := range ways {
		e := &ways[i]
		if e.used != 0 && e.key == *k {
			if seq == e.seq+1 {
				e.count++
			} else if seq != e.seq {
				e.count = 1
			}
			e.seq, e.used = seq, c.clock
			if e.count >= MinSequential {
				*e = probe{}
				return true
			}
			return false
		}
		if e.used < victim.used {
			victim = e
		}
	}
	if victim.used != 0 {
		c.stats.ProbationEvictions++
	}
	*victim = probe{key: *k, used: c.clock, seq: seq, count: 1}
	return false
}

// fragKey identifies a fragmented datagram (RFC 791 §3.2, RFC 8200 §4.5).
type fragKey struct {
	src, dst netip.Addr
	id       uint32
	proto    uint8
}

// fragEntry carries the keys of a first fragment to the later ones.
type fragEntry struct {
	key     fragKey
	used    uint64
	present uint64 // keys carried (ports and RTP/video keys)
	sport   uint16
	dport   uint16
	rtp     RTPHeader
	codec   Codec
	frame   FrameType
	tl, sl  uint8
}

// carriedKeys are the keys a first fragment passes on to the others.
const carriedKeys = 1<<KeySrcPort | 1<<KeyDstPort | 1<<KeyRTPSSRC | 1<<KeyRTPPayloadType |
	1<<KeyRTPSeq | 1<<KeyRTPTimestamp | 1<<KeyRTPMarker | 1<<KeyCodec | 1<<KeyFrameType |
	1<<KeyFrameID | 1<<KeyTemporalLayer | 1<<KeySpatialLayer

func (c *Classifier) fragSlot(k *fragKey, addrKey uint64, insert bool) *fragEntry {
	set := int(mix(addrKey, uint64(k.id)<<8|uint64(k.proto))%(MaxFragments/stateWays)) * stateWays
	ways := c.frags[set : set+stateWays]
	victim := &ways[0]
	for i := range ways {
		e := &ways[i]
		if e.used != 0 && e.key == *k {
			e.used = c.clock
			return e
		}
		if e.used < victim.used {
			victim = e
		}
	}
	if !insert {
		return nil
	}
	if victim.used != 0 {
		c.stats.FragmentEvictions++
	}
	*victim = fragEntry{key: *k, used: c.clock}
	return victim
}

// fragStore remembers the carried keys of a first fragment.
func (c *Classifier) fragStore(md *Metadata, ip *ipInfo) {
	k := fragKey{src: md.Src, dst: md.Dst, id: ip.fragID, proto: md.Proto}
	e := c.fragSlot(&k, ip.addrKey, true)
	e.present = md.present & carriedKeys
	e.sport, e.dport, e.rtp = md.SrcPort, md.DstPort, md.RTP
	e.codec, e.frame, e.tl, e.sl = md.Codec, md.FrameType, md.TemporalLayer, md.SpatialLayer
}

// fragLoad gives a non-first fragment the keys of its first fragment.
func (c *Classifier) fragLoad(md *Metadata, ip *ipInfo) {
	k := fragKey{src: md.Src, dst: md.Dst, id: ip.fragID, proto: md.Proto}
	e := c.fragSlot(&k, ip.addrKey, false)
	if e == nil {
		return
	}
	md.present |= e.present
	md.SrcPort, md.DstPort, md.RTP = e.sport, e.dport, e.rtp
	md.Codec, md.FrameType, md.TemporalLayer, md.SpatialLayer = e.codec, e.frame, e.tl, e.sl
}
