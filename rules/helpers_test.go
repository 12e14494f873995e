package rules

import (
	"encoding/binary"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bondd/bondd/classify"
)

// dataDir is where the real captures live: the shared data folder beside
// the repository, not in it.
var dataDir = filepath.Join("..", "..", "shared", "data", "pcap")

// examplesDir holds the example rule files that docs/rules.md refers to.
var examplesDir = filepath.Join("..", "docs", "examples", "rules")

// pkt describes a synthetic IP packet for the classifier.
type pkt struct {
	v6         bool
	proto      uint8 // 6, 17 or 1
	src, dst   netip.Addr
	sport      uint16
	dport      uint16
	dscp       uint8
	ecn        uint8
	rtp        bool
	pt         uint8
	seq        uint16
	ts, ssrc   uint32
	marker     bool
	nal        byte // H.264 NAL header byte: 0x65 IDR slice, 0x41 P slice
	icmpType   uint8
	payloadLen int
}

// bytes builds the packet: IPv4 or IPv6, then UDP (with RTP and one H.264
// NAL unit when rtp), TCP or ICMP.
func (p pkt) bytes() []byte {
	var l4 []byte
	switch p.proto {
	case 17:
		var pay []byte
		if p.rtp {
			pay = make([]byte, 12, 12+1+p.payloadLen)
			pay[0] = 0x80
			pay[1] = p.pt & 0x7f
			if p.marker {
				pay[1] |= 0x80
			}
			binary.BigEndian.PutUint16(pay[2:], p.seq)
			binary.BigEndian.PutUint32(pay[4:], p.ts)
			binary.BigEndian.PutUint32(pay[8:], p.ssrc)
			pay = append(pay, p.nal)
			for i := 0; i < p.payloadLen; i++ {
				pay = append(pay, byte(0x88+i))
			}
		} else {
			pay = make([]byte, p.payloadLen)
		}
		l4 = make([]byte, 8, 8+len(pay))
		binary.BigEndian.PutUint16(l4[0:], p.sport)
		binary.BigEndian.PutUint16(l4[2:], p.dport)
		binary.BigEndian.PutUint16(l4[4:], uint16(8+len(pay)))
		l4 = append(l4, pay...)
	case 6:
		l4 = make([]byte, 20+p.payloadLen)
		binary.BigEndian.PutUint16(l4[0:], p.sport)
		binary.BigEndian.PutUint16(l4[2:], p.dport)
		l4[12] = 5 << 4
		l4[13] = 0x18
	default:
		l4 = make([]byte, 8+p.payloadLen)
		l4[0] = p.icmpType
	}
	tos := p.dscp<<2 | p.ecn
	if p.v6 {
		h := make([]byte, 40, 40+len(l4))
		h[0] = 0x60 | tos>>4
		h[1] = tos << 4
		binary.BigEndian.PutUint16(h[4:], uint16(len(l4)))
		h[6] = p.proto
		if p.proto == 1 {
			h[6] = 58
		}
		h[7] = 64
		s, d := p.src.As16(), p.dst.As16()
		copy(h[8:], s[:])
		copy(h[24:], d[:])
		return append(h, l4...)
	}
	h := make([]byte, 20, 20+len(l4))
	h[0] = 0x45
	h[1] = tos
	binary.BigEndian.PutUint16(h[2:], uint16(20+len(l4)))
	h[8] = 64
	h[9] = p.proto
	s, d := p.src.As4(), p.dst.As4()
	copy(h[12:], s[:])
	copy(h[16:], d[:])
	return append(h, l4...)
}

var (
	edgeV4 = netip.MustParseAddr("10.1.1.1")
	peerV4 = netip.MustParseAddr("10.2.2.2")
	edgeV6 = netip.MustParseAddr("2001:db8::1")
	peerV6 = netip.MustParseAddr("2001:db8::2")
)

// videoPkt is an RTP H.264 packet of SSRC 0x6a5cc848 to port 5004; nal 0x65
// makes a keyframe packet, 0x41 a delta-frame one.
func videoPkt(nal byte, ts uint32) pkt {
	return pkt{proto: 17, src: edgeV4, dst: peerV4, sport: 40000, dport: 5004,
		rtp: true, pt: 96, seq: 1, ts: ts, ssrc: 0x6a5cc848, nal: nal, payloadLen: 100}
}

// testClasses are two traffic classes with labels, for label and class
// matches: video (UDP to 5004-5010; tier=gold, app=conf) and voice (DSCP
// 46; tier=silver).
func testClasses(t testing.TB) *classify.ClassSet {
	t.Helper()
	cs, err := classify.NewClassSet([]classify.Class{
		{Name: "video", Match: classify.ClassMatch{Protos: []uint8{17}, Ports: []classify.PortRange{{Lo: 5004, Hi: 5010}}},
			Labels: []classify.Label{{Key: "tier", Value: "gold"}, {Key: "app", Value: "conf"}}},
		{Name: "voice", Match: classify.ClassMatch{DSCP: []uint8{46}},
			Labels: []classify.Label{{Key: "tier", Value: "silver"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// newClassifier returns a classifier that knows port 5004 carries H.264 on
// payload type 96, with classes cs (may be nil).
func newClassifier(t testing.TB, cs *classify.ClassSet) *classify.Classifier {
	t.Helper()
	c, err := classify.New(classify.Options{
		RTPPorts:     []classify.PortRange{{Lo: 5004, Hi: 5005}},
		PayloadTypes: map[uint8]classify.Codec{96: classify.CodecH264},
		Classes:      cs,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// metadata classifies p with a fresh classifier.
func metadata(t testing.TB, cs *classify.ClassSet, p pkt) *classify.Metadata {
	t.Helper()
	md := new(classify.Metadata)
	if r := newClassifier(t, cs).Parse(p.bytes(), md); r != classify.ReasonNone {
		t.Fatalf("classify: %v", r)
	}
	return md
}

// mustCompile compiles src or fails the test.
func mustCompile(t testing.TB, src string, opts Options) *Set {
	t.Helper()
	s, err := CompileBytes("test.yaml", []byte(src), opts)
	if err != nil {
		t.Fatalf("compile:\n%s\n%v", src, err)
	}
	return s
}

// readExample returns an example rule file, which must exist.
func readExample(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(examplesDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// momqSVC is the four MoMQ rules (docs/examples/rules/momq-svc.yaml).
func momqSVC(t testing.TB) *Set {
	t.Helper()
	s, err := CompileBytes("momq-svc.yaml", readExample(t, "momq-svc.yaml"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// lines joins lines with newlines, for YAML snippets in tables.
func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }
