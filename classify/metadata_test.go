package classify

import (
	"strings"
	"testing"
	"unsafe"
)

func TestKeyNames(t *testing.T) {
	keys := BuiltinKeys()
	if len(keys) != int(numBuiltinKeys)-1 {
		t.Fatalf("%d builtin keys", len(keys))
	}
	if numBuiltinKeys > 64 {
		t.Fatal("the present bit set holds 64 keys")
	}
	seen := map[string]bool{}
	for _, k := range keys {
		name := k.String()
		if name == "" || name == "invalid" || seen[name] {
			t.Errorf("key %d: name %q", k, name)
		}
		seen[name] = true
		if got, ok := KeyByName(name); !ok || got != k {
			t.Errorf("KeyByName(%q) = %v, %v", name, got, ok)
		}
		if k.IsLabel() {
			t.Errorf("%s is a label key", k)
		}
	}
	// The keys docs/classify.md and docs/rules.md name.
	for _, name := range []string{"proto", "src_port", "dst_port", "dscp", "rtp_ssrc", "rtp_pt", "frame_type", "frame_id", "temporal_layer", "codec", "class"} {
		if _, ok := KeyByName(name); !ok {
			t.Errorf("no key %q", name)
		}
	}
	if _, ok := KeyByName("pending_iframe"); ok {
		t.Error("annotation keys belong to rules, not classify")
	}
	if KeyInvalid.String() != "invalid" || (keyLabelBase+3).String() != "label#3" {
		t.Error("String of invalid/label keys")
	}
}

// TestAppendValue checks the canonical value forms rules compare against.
func TestAppendValue(t *testing.T) {
	c := mustNew(t, Options{PayloadTypes: map[uint8]Codec{96: CodecH264}})
	var md Metadata
	c.Parse(ipv4(46<<2|2, 17, 1, 0, udp(40000, 5004, rtpPkt{pt: 96, marker: true, seq: 513, ts: 90000, ssrc: 0xdeadbeef,
		payload: stapA(nalSPS, nalPPS, nalIDR)}.bytes())), &md)
	want := map[Key]string{
		KeyIPVersion: "4", KeyProto: "udp", KeySrcIP: "10.0.0.1", KeyDstIP: "10.0.0.2",
		KeySrcPort: "40000", KeyDstPort: "5004", KeyDSCP: "46", KeyECN: "2", KeyLength: "66",
		KeyRTPSSRC: "3735928559", KeyRTPPayloadType: "96", KeyRTPSeq: "513", KeyRTPTimestamp: "90000",
		KeyRTPMarker: "true", KeyCodec: "h264", KeyFrameType: "IDR", KeyFrameID: "deadbeef00015f90",
	}
	for _, k := range BuiltinKeys() {
		got, ok := md.AppendValue([]byte("x"), k)
		w, present := want[k]
		if ok != present {
			t.Errorf("%s: present %v, want %v", k, ok, present)
			continue
		}
		if !ok {
			if string(got) != "x" {
				t.Errorf("%s absent but dst changed to %q", k, got)
			}
			continue
		}
		if string(got) != "x"+w {
			t.Errorf("%s = %q, want %q", k, got[1:], w)
		}
		// The integer form agrees with ParseValue of the string form.
		if u, ok := md.Uint(k); ok {
			if pv, err := k.ParseValue(w); err != nil || pv != u {
				t.Errorf("%s: ParseValue(%q) = %d, %v; Uint = %d", k, w, pv, err, u)
			}
		} else if k != KeySrcIP && k != KeyDstIP {
			t.Errorf("%s has no integer form", k)
		}
	}
	var m6 Metadata
	ParseIP(ipv6(0, 17, udp(1, 2, nil)), &m6)
	if v, _ := m6.AppendValue(nil, KeySrcIP); string(v) != "2001:db8::1" {
		t.Errorf("IPv6 src_ip %q", v)
	}
	if _, ok := m6.Uint(KeySrcIP); ok {
		t.Error("IPv6 address has an integer form")
	}
	var frag Metadata
	ParseIP(ipv4(0, 17, 3, 0x2000|4, make([]byte, 8)), &frag)
	if v, _ := frag.AppendValue(nil, KeyFragment); string(v) != "middle" {
		t.Errorf("fragment %q", v)
	}
	var icmp Metadata
	ParseIP(ipv4(0, 99, 3, 0, nil), &icmp)
	if v, _ := icmp.AppendValue(nil, KeyProto); string(v) != "99" {
		t.Errorf("unnamed proto %q", v)
	}
}

func TestParseValue(t *testing.T) {
	tests := []struct {
		key  Key
		in   string
		want uint64
		err  bool
	}{
		{KeyProto, "udp", 17, false},
		{KeyProto, "TCP", 6, false},
		{KeyProto, "17", 17, false},
		{KeyProto, "256", 0, true},
		{KeyDSCP, "46", 46, false},
		{KeyDSCP, "046", 46, false}, // not octal
		{KeyDSCP, "0x2e", 46, false},
		{KeyDSCP, "64", 0, true},
		{KeyECN, "4", 0, true},
		{KeySrcPort, "65535", 65535, false},
		{KeyDstPort, "65536", 0, true},
		{KeyRTPSSRC, "0x6A5CC848", 0x6a5cc848, false},
		{KeyRTPPayloadType, "128", 0, true},
		{KeyRTPMarker, "true", 1, false},
		{KeyRTPMarker, "0", 0, false},
		{KeyRTPMarker, "yes", 0, true},
		{KeyFrameType, "IDR", uint64(FrameKey), false},
		{KeyFrameType, "key", uint64(FrameKey), false},
		{KeyFrameType, "P", uint64(FrameDelta), false},
		{KeyFrameType, "B", 0, true},
		{KeyCodec, "H264", uint64(CodecH264), false},
		{KeyCodec, "mpeg5", 0, true},
		{KeyFragment, "last", uint64(FragmentLast), false},
		{KeyFrameID, "6a5cc848aa2a80e2", 0x6a5cc848aa2a80e2, false},
		{KeyFrameID, "0x6A5CC848AA2A80E2", 0x6a5cc848aa2a80e2, false},
		{KeySrcIP, "10.0.0.1", 0x0a000001, false},
		{KeyDstIP, "2001:db8::1", 0, true},
		{KeyClass, "video", 0, true},
		{keyLabelBase, "x", 0, true},
		{KeyTemporalLayer, "8", 0, true},
		{KeyIPVersion, "6", 6, false},
	}
	for _, tt := range tests {
		got, err := tt.key.ParseValue(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("%s.ParseValue(%q) = %d, %v; want %d, err %v", tt.key, tt.in, got, err, tt.want, tt.err)
		}
	}
}

// TestMetadataShape guards the "fixed-size, no pointers into the packet"
// promise: the only pointers are netip.Addr's zone handles and the ClassSet.
func TestMetadataShape(t *testing.T) {
	if s := unsafe.Sizeof(Metadata{}); s > 128 {
		t.Errorf("Metadata is %d bytes; keep it within two cache lines", s)
	}
	pkt := ipv4(0, 17, 1, 0, udp(1, 5004, rtpPkt{pt: 96, ssrc: 1, payload: nalIDR}.bytes()))
	c := mustNew(t, Options{RTPPorts: []PortRange{{5004, 5004}}})
	var md Metadata
	c.Parse(pkt, &md)
	before := md
	for i := range pkt {
		pkt[i] = 0xff // the caller reuses its buffer
	}
	if md != before {
		t.Error("Metadata changed when the packet buffer was overwritten")
	}
	if !strings.Contains(md.Src.String(), "10.0.0.1") {
		t.Errorf("src %v", md.Src)
	}
}

func TestReasonNames(t *testing.T) {
	seen := map[string]bool{}
	for r := ReasonNone + 1; r < numReasons; r++ {
		if s := r.String(); s == "" || seen[s] {
			t.Errorf("reason %d: %q", r, s)
		} else {
			seen[s] = true
		}
	}
	if ReasonNone.String() != "" || numReasons.String() != "unknown" {
		t.Error("ReasonNone or out-of-range names")
	}
}
