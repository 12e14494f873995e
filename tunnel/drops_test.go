package tunnel

import (
	"encoding/json"
	"net/netip"
	"testing"

	"github.com/bondd/bondd/tun/tuntest"
)

func TestDropReasonNames(t *testing.T) {
	seen := map[string]bool{}
	for r := range numDropReasons {
		name := r.String()
		if name == "" || seen[name] || dropInfo[r].scope == 0 {
			t.Errorf("reason %d: name %q empty or repeated, or no scope", r, name)
		}
		seen[name] = true
		var back DropReason
		if err := back.UnmarshalText([]byte(name)); err != nil || back != r {
			t.Errorf("%s: UnmarshalText = %v, %v", name, back, err)
		}
	}
	if len(BondDropReasons)+len(PathDropReasons) < int(numDropReasons)-1 {
		t.Errorf("%d bond and %d path reasons of %d", len(BondDropReasons), len(PathDropReasons), numDropReasons)
	}
	var r DropReason
	if r.UnmarshalText([]byte("no_such_reason")) == nil {
		t.Error("an unknown name parsed")
	}
}

func TestDropCountsJSON(t *testing.T) {
	var c dropCounters
	c.add(DropSpoofed)
	c.addN(DropDuplicate, 3)
	b, err := json.Marshal(c.snapshot(BondDropReasons))
	if err != nil {
		t.Fatal(err)
	}
	var back DropCounts
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back[DropSpoofed] != 1 || back[DropDuplicate] != 3 || len(back) != len(BondDropReasons) {
		t.Fatalf("%s → %v", b, back)
	}
	// A newer daemon's reason is skipped, not an error.
	if err := json.Unmarshal([]byte(`{"spoofed":2,"from_the_future":9}`), &back); err != nil || back[DropSpoofed] != 2 || len(back) != 1 {
		t.Fatalf("unknown reason: %v, %v", back, err)
	}
}

// TestBadFECCountedOnce sends a concentrator bond an FEC data packet whose
// k contradicts the block's first packet: it is dropped once, as bad_fec,
// and not also as bad_header.
func TestBadFECCountedOnce(t *testing.T) {
	b, err := newBond("van-1", tuntest.New(testMTU, 8), bondOptions{mtu: testMTU, paths: PathOptions{}.withDefaults(),
		fec: FECOptions{Mode: FECOff}, log: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	pkt := udp4(netip.MustParseAddrPort("10.0.0.1:1"), netip.MustParseAddrPort("10.0.0.2:2"), []byte("x"))
	wbuf, rec := make([][]byte, 1), newRecovered(testMTU)
	for i, k := range []uint16{4, 5} {
		h := Header{Type: TypeData, Flags: FlagFEC, Seq: uint64(i), Block: 1, Index: uint16(i), K: k}
		b.receive(append(AppendHeader(nil, &h), pkt...), wbuf, rec)
	}
	d := b.Stats().Drops
	if d[DropBadFEC] != 1 || d[DropBadHeader] != 0 {
		t.Fatalf("bad_fec %d, bad_header %d; want 1 and 0", d[DropBadFEC], d[DropBadHeader])
	}
	if s := b.Stats(); s.RxPackets != 1 {
		t.Fatalf("%d packets delivered, want the first", s.RxPackets)
	}
}
