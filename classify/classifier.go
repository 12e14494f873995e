package classify

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
)

// MaxRTPPortRanges bounds Options.RTPPorts.
const MaxRTPPortRanges = 16

// Options configure a Classifier. The zero value is valid: RTP is then found
// by the heuristic alone and no traffic class is set.
type Options struct {
	// RTPPorts are UDP port ranges on which every payload with RTP version
	// 2 is RTP (either the source or the destination port may match), with
	// no probation. Optional; at most MaxRTPPortRanges.
	RTPPorts []PortRange
	// PayloadTypes maps RTP payload types to codecs, as the senders' SDP
	// a=rtpmap lines would. A UDP payload with a listed payload type is RTP
	// with no probation; CodecUnknown means "RTP, learn the codec from the
	// payload". Entries override the static types of RFC 3551. Optional.
	PayloadTypes map[uint8]Codec
	// NoHeuristic turns off RTP detection on UDP that matches neither
	// RTPPorts nor PayloadTypes.
	NoHeuristic bool
	// Classes are the traffic classes. Optional; SetClasses replaces them.
	Classes *ClassSet
}

// Classifier parses IP packets into Metadata and keeps the bounded state
// that needs: fragments, RTP probation, and per-stream codec and frame
// state. Not safe for concurrent use except SetClasses (see the package
// doc). Create it with New; the zero value is not usable.
type Classifier struct {
	rtpPorts  []PortRange
	ptCodec   [128]Codec
	ptListed  [128]bool
	heuristic bool
	classes   atomic.Pointer[ClassSet]

	clock     uint64 // packets parsed; the tables' LRU clock
	stats     Stats
	streams   [MaxStreams]stream
	probation [MaxProbation]probe
	frags     [MaxFragments]fragEntry
}

// Stats count the Classifier's state. Read them from the Parse goroutine.
type Stats struct {
	Packets            uint64 // packets parsed
	StreamEvictions    uint64 // live streams replaced by new ones
	ProbationEvictions uint64 // sources under probation replaced
	FragmentEvictions  uint64 // fragment entries replaced
	Streams            int    // live streams (≤ MaxStreams)
	Probation          int    // sources under probation (≤ MaxProbation)
	Fragments          int    // fragment entries (≤ MaxFragments)
}

// New returns a Classifier for opts, or an error naming a bad option.
func New(opts Options) (*Classifier, error) {
	if len(opts.RTPPorts) > MaxRTPPortRanges {
		return nil, fmt.Errorf("classify: %d RTP port ranges, at most %d", len(opts.RTPPorts), MaxRTPPortRanges)
	}
	c := &Classifier{heuristic: !opts.NoHeuristic}
	for _, r := range opts.RTPPorts {
		if r.Lo > r.Hi {
			return nil, fmt.Errorf("classify: RTP port range %d-%d is empty", r.Lo, r.Hi)
		}
		c.rtpPorts = append(c.rtpPorts, r)
	}
	for pt, codec := range opts.PayloadTypes {
		if pt > 127 {
			return nil, fmt.Errorf("classify: RTP payload type %d above 127", pt)
		}
		if pt >= 72 && pt <= 76 {
			return nil, fmt.Errorf("classify: RTP payload type %d clashes with RTCP (RFC 3550 §12.1)", pt)
		}
		if codec >= numCodecs {
			return nil, fmt.Errorf("classify: payload type %d: unknown codec %d", pt, codec)
		}
		c.ptCodec[pt], c.ptListed[pt] = codec, true
	}
	if opts.Classes != nil {
		c.classes.Store(opts.Classes)
	}
	return c, nil
}

// SetClasses installs the traffic classes that Parse matches from the next
// packet on (nil: none). Safe to call from any goroutine.
func (c *Classifier) SetClasses(s *ClassSet) { c.classes.Store(s) }

// Stats returns the counters and table occupancy.
func (c *Classifier) Stats() Stats {
	s := c.stats
	s.Packets = c.clock
	for i := range c.streams {
		if c.streams[i].used != 0 {
			s.Streams++
		}
	}
	for i := range c.probation {
		if c.probation[i].used != 0 {
			s.Probation++
		}
	}
	for i := range c.frags {
		if c.frags[i].used != 0 {
			s.Fragments++
		}
	}
	return s
}

// Reset forgets all per-flow state and counters.
func (c *Classifier) Reset() {
	c.clock, c.stats = 0, Stats{}
	clear(c.streams[:])
	clear(c.probation[:])
	clear(c.frags[:])
}

// Parse fills md from the IP packet pkt (starting at the version nibble, as
// a TUN device delivers it; bytes past the IP length are ignored). It
// overwrites all of md, allocates nothing, never panics, and keeps no
// reference to pkt. The Reason is ReasonNone for a clean packet; otherwise
// md still holds every key read before the problem.
//
// For UDP it finds RTP (configured ports or payload types, or the guarded
// heuristic: version 2, a payload type outside 64–95 that RTCP could use,
// and MinSequential packets in sequence or a codec signature), then the
// codec, frame type, frame id and layers; it finds MPEG-TS by its sync
// bytes. Non-first fragments inherit the ports and video keys of their first
// fragment. Last, the first matching traffic class sets class and labels.
func (c *Classifier) Parse(pkt []byte, md *Metadata) Reason {
	*md = Metadata{}
	c.clock++
	var ip ipInfo
	r := parseHeaders(pkt, md, &ip)
	switch {
	case md.IPVersion == 0:
		return r
	case md.Fragment > FragmentFirst:
		c.fragLoad(md, &ip)
	default:
		if md.Fragment == FragmentFirst {
			ip.partial = true
		}
		if p := udpPayload(pkt, md, &ip); len(p) > 0 {
			c.parseUDP(p, md, &ip)
		}
		if md.Fragment == FragmentFirst {
			c.fragStore(md, &ip)
		}
	}
	if cs := c.classes.Load(); cs != nil {
		cs.match(md)
	}
	return r
}

func (c *Classifier) rtpPort(sport, dport uint16) bool {
	for _, r := range c.rtpPorts {
		if r.Contains(sport) || r.Contains(dport) {
			return true
		}
	}
	return false
}

func (c *Classifier) parseUDP(p []byte, md *Metadata, ip *ipInfo) {
	if p[0] == 0x47 {
		if !isTS(p, ip.partial) {
			return
		}
		k := streamKey{addr: ip.addrKey, sport: md.SrcPort, dport: md.DstPort, kind: kindTS}
		s := c.lookupStream(&k, true)
		md.Codec = CodecMP2T
		md.set(KeyCodec)
		if ft := scanTS(p, &s.ts); ft != FrameUnknown {
			md.FrameType = ft
			md.set(KeyFrameType)
		}
		return
	}
	c.parseRTP(p, md, ip)
}

// parseRTP reads the RTP header (RFC 3550 §5.1) and the payload.
func (c *Classifier) parseRTP(p []byte, md *Metadata, ip *ipInfo) {
	if len(p) < 12 || p[0]>>6 != 2 {
		return
	}
	if p[1] >= 192 && p[1] <= 223 {
		return // RTCP packet types 192–223 (RFC 5761 §4)
	}
	pt := p[1] & 0x7f
	listed := c.ptListed[pt] || c.rtpPort(md.SrcPort, md.DstPort)
	if !listed && (!c.heuristic || (pt >= 64 && pt <= 95)) {
		return
	}
	off := 12 + 4*int(p[0]&0x0f)
	if p[0]&0x10 != 0 { // header extension (§5.3.1)
		if off+4 > len(p) {
			return
		}
		off += 4 + 4*int(binary.BigEndian.Uint16(p[off+2:]))
	}
	if off > len(p) {
		return
	}
	end := len(p)
	if p[0]&0x20 != 0 && !ip.partial { // padding, counted by the last octet
		pad := int(p[end-1])
		if pad == 0 || off+pad > end {
			return
		}
		end -= pad
	}
	payload := p[off:end]
	hdr := RTPHeader{
		SSRC:        binary.BigEndian.Uint32(p[8:]),
		Timestamp:   binary.BigEndian.Uint32(p[4:]),
		Seq:         binary.BigEndian.Uint16(p[2:]),
		PayloadType: pt,
		Marker:      p[1]&0x80 != 0,
	}
	k := streamKey{addr: ip.addrKey, ssrc: hdr.SSRC, sport: md.SrcPort, dport: md.DstPort, kind: kindRTP}
	s := c.lookupStream(&k, listed)
	if s == nil {
		if !c.probeSeq(&k, hdr.Seq) && !signature(pt, payload, ip.partial) {
			return
		}
		s = c.lookupStream(&k, true)
	}
	md.RTP = hdr
	md.present |= 1<<KeyRTPSSRC | 1<<KeyRTPPayloadType | 1<<KeyRTPSeq |
		1<<KeyRTPTimestamp | 1<<KeyRTPMarker | 1<<KeyFrameID
	if len(payload) == 0 {
		return // header only (keep-alive, or all padding)
	}

	codec, ev := c.payloadCodec(s, &hdr, payload, ip.partial)
	if codec == CodecUnknown {
		return
	}
	md.Codec = codec
	md.set(KeyCodec)
	ft := ev.frame
	if codec != CodecMP2T && codec <= CodecAV1 {
		f := s.frame(hdr.Timestamp, &ev)
		ft = f.typ
		if f.hasTL {
			md.TemporalLayer = f.tl
			md.set(KeyTemporalLayer)
		}
		if f.hasSL {
			md.SpatialLayer = f.sl
			md.set(KeySpatialLayer)
		}
	}
	if ft != FrameUnknown {
		md.FrameType = ft
		md.set(KeyFrameType)
	}
}

// payloadCodec decides the codec of a payload of type pt on stream s and
// returns it with the payload's evidence: a configured payload type first,
// then a static one (RFC 3551 §6), then what sniffing learned for the
// stream's first dynamic payload type. Another dynamic type on the same
// stream (RED, FEC, RTX) is left unknown.
func (c *Classifier) payloadCodec(s *stream, hdr *RTPHeader, p []byte, partial bool) (Codec, evidence) {
	pt := hdr.PayloadType
	// The first packet seen of a stream may be one inside a frame.
	newFrame := s.haveTS && hdr.Timestamp != s.lastTS
	s.lastTS, s.haveTS = hdr.Timestamp, true
	codec := c.ptCodec[pt]
	if !c.ptListed[pt] {
		codec = staticPT[pt]
	}
	if codec != CodecUnknown {
		return codec, s.payloadEvidence(codec, p, partial)
	}
	if !sniffable(pt) {
		return CodecUnknown, evidence{}
	}
	if !s.ptSet {
		s.pt, s.ptSet = pt, true
	}
	if pt != s.pt {
		return CodecUnknown, evidence{}
	}
	if s.codec == CodecUnknown {
		if s.gaveUp {
			s.retrySniff()
			return CodecUnknown, evidence{}
		}
		return s.sniff(p, newFrame, partial)
	}
	ev := s.payloadEvidence(s.codec, p, partial)
	if ev.valid {
		s.bad = 0
	} else if s.bad++; s.bad >= sniffBadPackets {
		s.resetSniff()
	}
	return s.codec, ev
}

// signature reports whether the payload of a not yet confirmed RTP source
// carries a codec signature (see sniff), which confirms the source at once.
func signature(pt uint8, p []byte, partial bool) bool {
	if pt == 33 {
		return isTS(p, partial)
	}
	if !sniffable(pt) {
		return false
	}
	for _, c := range sniffCodecs {
		if c == CodecMP2T {
			if isTS(p, partial) {
				return true
			}
			continue
		}
		if ev := parsePayload(c, p, partial); ev.valid && ev.strong {
			return true
		}
	}
	return false
}
