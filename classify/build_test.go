package classify

import "encoding/binary"

// Builders for synthetic packets in table tests and fuzz seeds. They fill
// lengths but leave checksums zero: the classifier does not check them (the
// kernel did, before the packet reached the TUN device).

var (
	addrA  = [4]byte{10, 0, 0, 1}
	addrB  = [4]byte{10, 0, 0, 2}
	addr6A = [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}
	addr6B = [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 2}
)

// ipv4 builds an IPv4 header (no options) around payload. fragField is the
// flags+offset word (MF = 0x2000, offset in 8-byte units).
func ipv4(tos, proto byte, id, fragField uint16, payload []byte) []byte {
	p := make([]byte, 20, 20+len(payload))
	p[0], p[1] = 0x45, tos
	binary.BigEndian.PutUint16(p[2:], uint16(20+len(payload)))
	binary.BigEndian.PutUint16(p[4:], id)
	binary.BigEndian.PutUint16(p[6:], fragField)
	p[8], p[9] = 64, proto
	copy(p[12:], addrA[:])
	copy(p[16:], addrB[:])
	return append(p, payload...)
}

// ipv6 builds an IPv6 header with traffic class tc and next header nh.
func ipv6(tc, nh byte, payload []byte) []byte {
	p := make([]byte, 40, 40+len(payload))
	binary.BigEndian.PutUint32(p, 6<<28|uint32(tc)<<20|0x12345)
	binary.BigEndian.PutUint16(p[4:], uint16(len(payload)))
	p[6], p[7] = nh, 64
	copy(p[8:], addr6A[:])
	copy(p[24:], addr6B[:])
	return append(p, payload...)
}

// ext6 builds an IPv6 extension header of the 8-octet-unit kind (hop-by-hop,
// routing, destination options) with padding to size bytes (a multiple of 8).
func ext6(nh byte, size int) []byte {
	h := make([]byte, size)
	h[0], h[1] = nh, byte(size/8-1)
	if size > 2 {
		h[2] = 1 // PadN option covering the rest
		h[3] = byte(size - 4)
	}
	return h
}

// frag6 builds an IPv6 fragment header.
func frag6(nh byte, offset8 uint16, more bool, id uint32) []byte {
	h := make([]byte, 8)
	h[0] = nh
	v := offset8 << 3
	if more {
		v |= 1
	}
	binary.BigEndian.PutUint16(h[2:], v)
	binary.BigEndian.PutUint32(h[4:], id)
	return h
}

func udp(sport, dport uint16, payload []byte) []byte {
	p := make([]byte, 8, 8+len(payload))
	binary.BigEndian.PutUint16(p, sport)
	binary.BigEndian.PutUint16(p[2:], dport)
	binary.BigEndian.PutUint16(p[4:], uint16(8+len(payload)))
	return append(p, payload...)
}

func tcp(sport, dport uint16, payload []byte) []byte {
	p := make([]byte, 20, 20+len(payload))
	binary.BigEndian.PutUint16(p, sport)
	binary.BigEndian.PutUint16(p[2:], dport)
	p[12] = 5 << 4
	p[13] = 0x18 // PSH ACK
	return append(p, payload...)
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// rtpPkt builds an RTP packet (RFC 3550 §5.1).
type rtpPkt struct {
	pt      byte
	marker  bool
	seq     uint16
	ts      uint32
	ssrc    uint32
	csrcs   int
	ext     []byte // header extension body, a multiple of 4 bytes
	padding int
	payload []byte
}

func (r rtpPkt) bytes() []byte {
	p := make([]byte, 12)
	p[0] = 0x80 | byte(r.csrcs)
	if r.marker {
		p[1] = 0x80
	}
	p[1] |= r.pt
	binary.BigEndian.PutUint16(p[2:], r.seq)
	binary.BigEndian.PutUint32(p[4:], r.ts)
	binary.BigEndian.PutUint32(p[8:], r.ssrc)
	for i := 0; i < r.csrcs; i++ {
		p = append(p, 0, 0, 0, byte(i+1))
	}
	if r.ext != nil {
		p[0] |= 0x10
		p = append(p, 0xbe, 0xde, byte(len(r.ext)/4>>8), byte(len(r.ext)/4))
		p = append(p, r.ext...)
	}
	p = append(p, r.payload...)
	if r.padding > 0 {
		p[0] |= 0x20
		for i := 0; i < r.padding-1; i++ {
			p = append(p, 0)
		}
		p = append(p, byte(r.padding))
	}
	return p
}

// rtpUDP wraps an RTP packet in UDP/IPv4 between ports 40000 → 5004.
func rtpUDP(r rtpPkt) []byte { return ipv4(0, 17, 1, 0, udp(40000, 5004, r.bytes())) }

// stapA builds an H.264 STAP-A payload from NAL units.
func stapA(nals ...[]byte) []byte {
	p := []byte{0x78} // F=0 NRI=3 type 24
	for _, n := range nals {
		p = append(p, byte(len(n)>>8), byte(len(n)))
		p = append(p, n...)
	}
	return p
}

// h264 NAL units for tests: header byte then filler.
var (
	nalSPS    = []byte{0x67, 0x42, 0xc0, 0x1f, 0xda, 0x01, 0x40, 0x16, 0xe8}
	nalPPS    = []byte{0x68, 0xce, 0x3c, 0x80}
	nalIDR    = []byte{0x65, 0x88, 0x84, 0x00, 0x33, 0xff}
	nalNonIDR = []byte{0x41, 0x9a, 0x02, 0x0c}
	nalSEI    = []byte{0x06, 0x05, 0x01, 0xff}
)

// fuA builds an H.264 FU-A payload for a NAL of type t (NRI 3).
func fuA(t byte, start, end bool, body []byte) []byte {
	fh := t
	if start {
		fh |= 0x80
	}
	if end {
		fh |= 0x40
	}
	return append([]byte{0x7c, fh}, body...)
}

// tsPacket builds one 188-byte MPEG-TS packet. With pesStreamID ≠ 0 and pusi
// the payload starts a PES with that stream_id.
func tsPacket(pid uint16, pusi, rai bool, pesStreamID byte) []byte {
	p := make([]byte, tsPacketSize)
	for i := range p {
		p[i] = 0xff
	}
	p[0] = 0x47
	p[1] = byte(pid >> 8 & 0x1f)
	if pusi {
		p[1] |= 0x40
	}
	p[2] = byte(pid)
	off := 4
	if rai {
		p[3] = 0x30 // adaptation field and payload
		p[4], p[5] = 1, 0x40
		off = 6
	} else {
		p[3] = 0x10
	}
	if pusi && pesStreamID != 0 {
		copy(p[off:], []byte{0, 0, 1, pesStreamID, 0, 0, 0x80, 0x80, 5})
	}
	return p
}
