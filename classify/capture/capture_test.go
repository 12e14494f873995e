package capture

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

var (
	ip4 = []byte{0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2}
	ip6 = append([]byte{0x60, 0, 0, 0, 0, 0, 17, 64}, make([]byte, 32)...)
)

func ether(et uint16, tags []uint16, payload []byte) []byte {
	f := make([]byte, 12)
	for _, t := range tags {
		f = binary.BigEndian.AppendUint16(f, t)
		f = append(f, 0x00, 0x05) // VLAN id 5, then the next type
	}
	f = binary.BigEndian.AppendUint16(f, et)
	return append(f, payload...)
}

func TestIPPacket(t *testing.T) {
	sll := append(make([]byte, 14), 0x08, 0x00)
	sll2 := append([]byte{0x86, 0xdd}, make([]byte, 18)...)
	pppoe := append([]byte{0x11, 0, 0, 1, 0, 22}, 0x00, 0x21)
	tests := []struct {
		name string
		lt   layers.LinkType
		fr   []byte
		want []byte
	}{
		{"ethernet ipv4", layers.LinkTypeEthernet, ether(0x0800, nil, ip4), ip4},
		{"ethernet ipv6", layers.LinkTypeEthernet, ether(0x86dd, nil, ip6), ip6},
		{"ethernet vlan", layers.LinkTypeEthernet, ether(0x0800, []uint16{0x8100}, ip4), ip4},
		{"ethernet qinq", layers.LinkTypeEthernet, ether(0x0800, []uint16{0x88a8, 0x8100}, ip4), ip4},
		{"ethernet pppoe", layers.LinkTypeEthernet, ether(0x8864, nil, append(pppoe, ip4...)), ip4},
		{"ethernet arp", layers.LinkTypeEthernet, ether(0x0806, nil, make([]byte, 28)), nil},
		{"ethernet type says ipv4, bytes say 5", layers.LinkTypeEthernet, ether(0x0800, nil, []byte{0x50, 0}), nil},
		{"ethernet short", layers.LinkTypeEthernet, make([]byte, 13), nil},
		{"linux sll", layers.LinkTypeLinuxSLL, append(sll, ip4...), ip4},
		{"linux sll2", layers.LinkTypeLinuxSLL2, append(sll2, ip6...), ip6},
		{"null little endian", layers.LinkTypeNull, append([]byte{2, 0, 0, 0}, ip4...), ip4},
		{"null big endian ipv6 (darwin)", layers.LinkTypeNull, append([]byte{0, 0, 0, 30}, ip6...), ip6},
		{"null unknown family", layers.LinkTypeNull, append([]byte{7, 0, 0, 0}, ip4...), nil},
		{"loop", layers.LinkTypeLoop, append([]byte{0, 0, 0, 2}, ip4...), ip4},
		{"raw", layers.LinkTypeRaw, ip6, ip6},
		{"raw 12", 12, ip4, ip4},
		{"ipv4", layers.LinkTypeIPv4, ip4, ip4},
		{"ipv6", layers.LinkTypeIPv6, ip6, ip6},
		{"unhandled link type", layers.LinkTypeIEEE802_11, ip4, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IPPacket(tt.lt, tt.fr); !bytes.Equal(got, tt.want) {
				t.Errorf("got % x, want % x", got, tt.want)
			}
		})
	}
}

// TestReadFormats writes the same frames as pcap, pcapng (one interface per
// link type) and gzip-compressed pcap with pcapgo, and reads them back.
func TestReadFormats(t *testing.T) {
	frames := []struct {
		lt   layers.LinkType
		data []byte
		ip   []byte
	}{
		{layers.LinkTypeEthernet, ether(0x0800, nil, ip4), ip4},
		{layers.LinkTypeEthernet, ether(0x0806, nil, make([]byte, 28)), nil},
		{layers.LinkTypeEthernet, ether(0x86dd, []uint16{0x8100}, ip6), ip6},
	}
	ts := time.Unix(1700000000, 0).UTC()
	ci := func(n int) gopacket.CaptureInfo {
		return gopacket.CaptureInfo{Timestamp: ts, CaptureLength: n, Length: n}
	}
	var pcap bytes.Buffer
	pw := pcapgo.NewWriter(&pcap)
	if err := pw.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	for _, f := range frames {
		if err := pw.WritePacket(ci(len(f.data)), f.data); err != nil {
			t.Fatal(err)
		}
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(pcap.Bytes())
	zw.Close()

	// pcapng with a second interface of another link type (raw IP).
	var ng bytes.Buffer
	nw, err := pcapgo.NewNgWriter(&ng, layers.LinkTypeEthernet)
	if err != nil {
		t.Fatal(err)
	}
	rawIf, err := nw.AddInterface(pcapgo.NgInterface{LinkType: layers.LinkTypeRaw, SnapLength: 65535})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range frames {
		if err := nw.WritePacket(ci(len(f.data)), f.data); err != nil {
			t.Fatal(err)
		}
	}
	raw := ci(len(ip4))
	raw.InterfaceIndex = rawIf
	if err := nw.WritePacket(raw, ip4); err != nil {
		t.Fatal(err)
	}
	nw.Flush()

	for _, tt := range []struct {
		name  string
		data  []byte
		extra bool // the raw-IP frame of the second pcapng interface
	}{{"pcap", pcap.Bytes(), false}, {"pcap.gz", gz.Bytes(), false}, {"pcapng", ng.Bytes(), true}} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewReader(bytes.NewReader(tt.data))
			if err != nil {
				t.Fatal(err)
			}
			var f Frame
			n := 0
			for ; ; n++ {
				err := r.Next(&f)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if f.Index != n || !f.Time.Equal(ts) {
					t.Errorf("frame %d: index %d time %v", n, f.Index, f.Time)
				}
				if n < len(frames) {
					if f.LinkType != frames[n].lt || !bytes.Equal(f.IP, frames[n].ip) {
						t.Errorf("frame %d: link %v ip % x", n, f.LinkType, f.IP)
					}
				} else if f.LinkType != layers.LinkTypeRaw || !bytes.Equal(f.IP, ip4) {
					t.Errorf("raw frame: link %v ip % x", f.LinkType, f.IP)
				}
			}
			want := len(frames)
			if tt.extra {
				want++
			}
			if n != want {
				t.Errorf("%d frames, want %d", n, want)
			}
		})
	}
}

func TestReadErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"text", []byte("hello, world")},
		{"bad gzip", []byte{0x1f, 0x8b, 0, 0, 0}},
	} {
		if _, err := NewReader(bytes.NewReader(tt.data)); err == nil {
			t.Errorf("%s: no error", tt.name)
		}
	}
	if _, err := Open("no/such/file.pcap"); err == nil {
		t.Error("Open of a missing file: no error")
	}
}

// FuzzReader reads arbitrary bytes as a capture: errors are fine, panics
// and frames whose IP slice is not inside the frame are not.
func FuzzReader(f *testing.F) {
	var pcap bytes.Buffer
	pw := pcapgo.NewWriter(&pcap)
	pw.WriteFileHeader(65535, layers.LinkTypeEthernet)
	d := ether(0x0800, nil, ip4)
	pw.WritePacket(gopacket.CaptureInfo{CaptureLength: len(d), Length: len(d)}, d)
	f.Add(pcap.Bytes())
	var ng bytes.Buffer
	nw, _ := pcapgo.NewNgWriter(&ng, layers.LinkTypeLinuxSLL)
	s := append(append(make([]byte, 14), 0x08, 0x00), ip4...)
	nw.WritePacket(gopacket.CaptureInfo{CaptureLength: len(s), Length: len(s)}, s)
	nw.Flush()
	f.Add(ng.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(bytes.NewReader(data))
		if err != nil {
			return
		}
		var fr Frame
		for i := 0; i < 1000; i++ {
			if r.Next(&fr) != nil {
				return
			}
			if fr.IP != nil && (len(fr.IP) > len(fr.Data) || fr.IP[0]>>4 != 4 && fr.IP[0]>>4 != 6) {
				t.Fatalf("IP slice % x outside frame % x", fr.IP, fr.Data)
			}
		}
	})
}

// FuzzIPPacket strips link layers of arbitrary frames.
func FuzzIPPacket(f *testing.F) {
	f.Add(uint16(layers.LinkTypeEthernet), ether(0x0800, []uint16{0x8100}, ip4))
	f.Add(uint16(layers.LinkTypeLinuxSLL2), append(append([]byte{0x86, 0xdd}, make([]byte, 18)...), ip6...))
	f.Add(uint16(layers.LinkTypeNull), append([]byte{2, 0, 0, 0}, ip4...))
	f.Fuzz(func(t *testing.T, lt uint16, frame []byte) {
		if p := IPPacket(layers.LinkType(lt), frame); p != nil && (len(p) > len(frame) || p[0]>>4 != 4 && p[0]>>4 != 6) {
			t.Fatalf("bad IP slice % x", p)
		}
	})
}
