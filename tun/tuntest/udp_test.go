package tuntest

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// TestAppendUDP4 compares the hand-written IPv4/UDP builder with
// gopacket's serialisation (a slow truth), and checks that it does not
// allocate into a buffer with room.
func TestAppendUDP4(t *testing.T) {
	tests := []struct {
		name     string
		src, dst string
		n        int
	}{
		{"empty", "10.77.0.2:9000", "10.78.0.1:9000", 0},
		{"odd", "10.77.0.2:1", "10.78.0.1:65535", 1171},
		{"full", "192.168.1.1:5004", "8.8.8.8:5006", 1172},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, dst := netip.MustParseAddrPort(tt.src), netip.MustParseAddrPort(tt.dst)
			payload := make([]byte, tt.n)
			for i := range payload {
				payload[i] = byte(i*7 + 3)
			}
			got, err := AppendUDP4([]byte{0xaa}, src, dst, payload)
			if err != nil {
				t.Fatal(err)
			}
			ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, Flags: layers.IPv4DontFragment,
				SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice()}
			udp := &layers.UDP{SrcPort: layers.UDPPort(src.Port()), DstPort: layers.UDPPort(dst.Port())}
			udp.SetNetworkLayerForChecksum(ip)
			buf := gopacket.NewSerializeBuffer()
			if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ip, udp, gopacket.Payload(payload)); err != nil {
				t.Fatal(err)
			}
			if got[0] != 0xaa || !bytes.Equal(got[1:], buf.Bytes()) {
				t.Errorf("AppendUDP4:\n%x\ngopacket:\n%x", got, buf.Bytes())
			}
		})
	}
	if _, err := AppendUDP4(nil, netip.MustParseAddrPort("[::1]:1"), netip.MustParseAddrPort("10.0.0.1:1"), nil); err == nil {
		t.Error("IPv6 source accepted")
	}
	if _, err := AppendUDP4(nil, netip.MustParseAddrPort("10.0.0.1:1"), netip.MustParseAddrPort("10.0.0.2:1"), make([]byte, 0xffff)); err == nil {
		t.Error("a packet over 65535 bytes accepted")
	}
	buf := make([]byte, 0, 1200)
	payload := make([]byte, 1172)
	if n := testing.AllocsPerRun(100, func() {
		buf, _ = AppendUDP4(buf[:0], netip.MustParseAddrPort("10.0.0.1:1"), netip.MustParseAddrPort("10.0.0.2:2"), payload)
	}); n != 0 {
		t.Errorf("AppendUDP4 allocates %v times per packet", n)
	}
}
