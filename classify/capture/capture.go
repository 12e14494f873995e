// Package capture reads IP packets out of pcap and pcapng files (optionally
// gzip-compressed), for `bondd classify --pcap` and for the classify tests.
// It uses gopacket's pcapgo readers and strips the link layer by hand for
// Ethernet (with VLAN tags and PPPoE), Linux cooked capture v1 and v2,
// BSD Null/Loopback and raw IP. It is tooling, not the packet path: a Reader
// is not safe for concurrent use.
package capture

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// Link types handled besides those gopacket names (LINKTYPE_* values from
// the tcpdump.org link-layer header types registry).
const (
	linkTypeRawAlt1 layers.LinkType = 12 // DLT_RAW on some BSDs
	linkTypeRawAlt2 layers.LinkType = 14 // DLT_RAW on OpenBSD
)

// Frame is one captured frame.
type Frame struct {
	// Index is the frame's 0-based position in the file, counting every
	// frame (non-IP ones too).
	Index int
	// Time is the capture timestamp.
	Time time.Time
	// LinkType is the frame's link-layer type.
	LinkType layers.LinkType
	// Data is the frame as captured. It is only valid until the next call
	// to Next.
	Data []byte
	// IP is the IP packet inside Data, nil for a frame that carries none
	// (ARP, an unsupported link type, …). Same lifetime as Data.
	IP []byte
	// Truncated is set when the capture kept fewer bytes than the wire
	// carried (snap length).
	Truncated bool
}

type packetSource interface {
	ZeroCopyReadPacketData() ([]byte, gopacket.CaptureInfo, error)
}

// Reader reads frames from a pcap or pcapng stream.
type Reader struct {
	src      packetSource
	linkType layers.LinkType // pcap: the file's; pcapng: per packet
	ng       bool
	next     int
	closer   io.Closer
}

// Open opens the capture file at path. Close it when done.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	r, err := NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r.closer = f
	return r, nil
}

// NewReader reads a pcap or pcapng stream from r, told apart by the magic
// number; gzip compression is undone first.
func NewReader(r io.Reader) (*Reader, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	magic, err := br.Peek(4)
	if err != nil {
		return nil, fmt.Errorf("capture: reading the file header: %w", err)
	}
	if magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("capture: %w", err)
		}
		br = bufio.NewReaderSize(zr, 1<<16)
		if magic, err = br.Peek(4); err != nil {
			return nil, fmt.Errorf("capture: reading the file header: %w", err)
		}
	}
	if binary.BigEndian.Uint32(magic) == 0x0a0d0d0a { // pcapng section header block
		ng, err := pcapgo.NewNgReader(br, pcapgo.NgReaderOptions{WantMixedLinkType: true})
		if err != nil {
			return nil, fmt.Errorf("capture: pcapng: %w", err)
		}
		return &Reader{src: ng, ng: true}, nil
	}
	pr, err := pcapgo.NewReader(br)
	if err != nil {
		return nil, fmt.Errorf("capture: pcap: %w", err)
	}
	return &Reader{src: pr, linkType: pr.LinkType()}, nil
}

// Close closes the file Open opened.
func (r *Reader) Close() error {
	if r.closer == nil {
		return nil
	}
	return r.closer.Close()
}

// Next reads the next frame into f. It returns io.EOF after the last frame.
func (r *Reader) Next(f *Frame) error {
	data, ci, err := r.src.ZeroCopyReadPacketData()
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("capture: frame %d: %w", r.next, err)
		}
		return err
	}
	lt := r.linkType
	if r.ng && len(ci.AncillaryData) > 0 {
		if t, ok := ci.AncillaryData[0].(layers.LinkType); ok {
			lt = t
		}
	}
	*f = Frame{
		Index:     r.next,
		Time:      ci.Timestamp,
		LinkType:  lt,
		Data:      data,
		IP:        IPPacket(lt, data),
		Truncated: ci.CaptureLength < ci.Length,
	}
	r.next++
	return nil
}

// IPPacket returns the IPv4 or IPv6 packet inside a frame of link type lt,
// or nil when the frame carries none or lt is not handled. The result
// aliases frame.
func IPPacket(lt layers.LinkType, frame []byte) []byte {
	var p []byte
	switch lt {
	case layers.LinkTypeEthernet:
		p = ethernetPayload(frame)
	case layers.LinkTypeLinuxSLL:
		// 16-byte header, protocol (an EtherType) at bytes 14–15.
		if len(frame) >= 16 {
			p = etherTypePayload(binary.BigEndian.Uint16(frame[14:]), frame[16:])
		}
	case layers.LinkTypeLinuxSLL2:
		// 20-byte header, protocol at bytes 0–1.
		if len(frame) >= 20 {
			p = etherTypePayload(binary.BigEndian.Uint16(frame), frame[20:])
		}
	case layers.LinkTypeNull, layers.LinkTypeLoop:
		// 4-byte address family: host byte order of the capturing
		// machine for Null, network order for Loop.
		if len(frame) >= 4 {
			af := binary.BigEndian.Uint32(frame)
			if lt == layers.LinkTypeNull && af > 0xffff {
				af = binary.LittleEndian.Uint32(frame)
			}
			switch af {
			case 2, 10, 24, 28, 30: // AF_INET; AF_INET6 on Linux, BSDs, Darwin
				p = frame[4:]
			}
		}
	case layers.LinkTypeRaw, linkTypeRawAlt1, linkTypeRawAlt2, layers.LinkTypeIPv4, layers.LinkTypeIPv6:
		p = frame
	}
	if len(p) == 0 || (p[0]>>4 != 4 && p[0]>>4 != 6) {
		return nil
	}
	return p
}

// maxVLANTags bounds the 802.1Q/802.1ad tags skipped in one frame.
const maxVLANTags = 4

func ethernetPayload(frame []byte) []byte {
	if len(frame) < 14 {
		return nil
	}
	et, off := binary.BigEndian.Uint16(frame[12:]), 14
	for i := 0; i < maxVLANTags && (et == 0x8100 || et == 0x88a8 || et == 0x9100); i++ {
		if len(frame) < off+4 {
			return nil
		}
		et, off = binary.BigEndian.Uint16(frame[off+2:]), off+4
	}
	if et == 0x8864 { // PPPoE session (RFC 2516): 6-byte header, PPP protocol
		if len(frame) < off+8 {
			return nil
		}
		switch binary.BigEndian.Uint16(frame[off+6:]) {
		case 0x0021, 0x0057: // IPv4, IPv6
			return frame[off+8:]
		}
		return nil
	}
	return etherTypePayload(et, frame[off:])
}

func etherTypePayload(et uint16, p []byte) []byte {
	if et == 0x0800 || et == 0x86dd {
		return p
	}
	return nil
}
