package emu

import (
	"net"
	"net/netip"
	"testing"
	"time"
)

// TestStartRelays starts two relays in front of one UDP sink and
// checks that each forwards to it from its own address, and that Close
// stops them all.
func TestStartRelays(t *testing.T) {
	sink, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	rs, err := StartRelays(netip.MustParseAddrPort(sink.LocalAddr().String()), []RelayLink{{}, {Up: LinkConfig{Delay: time.Millisecond}}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	addrs := rs.Addrs()
	if len(addrs) != 2 || addrs[0] == addrs[1] {
		t.Fatalf("addresses %v", addrs)
	}
	for _, a := range addrs {
		c, err := net.Dial("udp", a)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte(a))
		c.Close()
	}
	got := map[string]bool{}
	buf := make([]byte, 64)
	sink.SetReadDeadline(time.Now().Add(5 * time.Second))
	for len(got) < 2 {
		n, _, err := sink.ReadFrom(buf)
		if err != nil {
			t.Fatalf("sink got %v: %v", got, err)
		}
		got[string(buf[:n])] = true
	}
	if err := rs.Close(); err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if !r.isClosed() {
			t.Error("a relay still open after Close")
		}
	}
}
