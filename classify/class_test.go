package classify

import (
	"net/netip"
	"strings"
	"testing"
)

func TestNewClassSetErrors(t *testing.T) {
	many := func(n int) []Class {
		cs := make([]Class, n)
		for i := range cs {
			cs[i].Name = "c" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		}
		return cs
	}
	labels := func(n int) []Label {
		ls := make([]Label, n)
		for i := range ls {
			ls[i] = Label{Key: "k" + string(rune('a'+i)), Value: "v"}
		}
		return ls
	}
	tests := []struct {
		name    string
		classes []Class
		err     string // substring; "" = valid
	}{
		{"empty set", nil, ""},
		{"ok", []Class{{Name: "video", Match: ClassMatch{Protos: []uint8{17}, DSCP: []uint8{34}}, Labels: []Label{{"tier", "gold"}}}}, ""},
		{"no name", []Class{{}}, "name must have"},
		{"duplicate", []Class{{Name: "a"}, {Name: "a"}}, "duplicate"},
		{"dscp 64", []Class{{Name: "a", Match: ClassMatch{DSCP: []uint8{64}}}}, "DSCP 64"},
		{"bad prefix", []Class{{Name: "a", Match: ClassMatch{Src: []netip.Prefix{{}}}}}, "invalid prefix"},
		{"empty port range", []Class{{Name: "a", Match: ClassMatch{Ports: []PortRange{{10, 9}}}}}, "empty port range"},
		{"too many ranges", []Class{{Name: "a", Match: ClassMatch{SrcPorts: make([]PortRange, 9), DstPorts: make([]PortRange, 8)}}}, "port ranges"},
		{"too many prefixes", []Class{{Name: "a", Match: ClassMatch{Src: make([]netip.Prefix, 17)}}}, "prefixes"},
		{"label key syntax", []Class{{Name: "a", Labels: []Label{{"Tier", "x"}}}}, "label key"},
		{"label key builtin", []Class{{Name: "a", Labels: []Label{{"dscp", "x"}}}}, "builtin"},
		{"label key twice", []Class{{Name: "a", Labels: []Label{{"t", "x"}, {"t", "y"}}}}, "twice"},
		{"label value too long", []Class{{Name: "a", Labels: []Label{{"t", strings.Repeat("x", MaxLabelValueBytes+1)}}}}, "longer"},
		{"too many labels", []Class{{Name: "a", Labels: labels(MaxLabelsPerClass + 1)}}, "labels, at most"},
		{"too many classes", many(MaxClasses + 1), "classes, at most"},
	}
	// Too many distinct label keys across the set.
	var wide []Class
	for i := 0; i < MaxLabelKeys/MaxLabelsPerClass+1; i++ {
		cl := Class{Name: "w" + string(rune('a'+i))}
		for j := 0; j < MaxLabelsPerClass; j++ {
			cl.Labels = append(cl.Labels, Label{Key: "k" + string(rune('a'+i)) + string(rune('a'+j)), Value: "v"})
		}
		wide = append(wide, cl)
	}
	tests = append(tests, struct {
		name    string
		classes []Class
		err     string
	}{"too many label keys", wide, "distinct label keys"})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewClassSet(tt.classes)
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("err %v, want %q", err, tt.err)
			}
		})
	}
}

func TestClassMatch(t *testing.T) {
	cs, err := NewClassSet([]Class{
		{Name: "voice", Match: ClassMatch{Protos: []uint8{17}, DSCP: []uint8{46}}, Labels: []Label{{"tier", "gold"}, {"media", "audio"}}},
		{Name: "video", Match: ClassMatch{Protos: []uint8{17}, DstPorts: []PortRange{{5004, 5010}}}, Labels: []Label{{"media", "video"}}},
		{Name: "lan", Match: ClassMatch{Src: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}, Dst: []netip.Prefix{netip.MustParsePrefix("10.0.0.2/32")}, Ports: []PortRange{{22, 22}}}},
		{Name: "v6", Match: ClassMatch{Dst: []netip.Prefix{netip.MustParsePrefix("2001:db8::/32")}}},
		{Name: "icmp", Match: ClassMatch{Protos: []uint8{1, 58}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		pkt  []byte
		want string
	}{
		{"ef udp is voice (first match wins)", ipv4(46<<2, 17, 1, 0, udp(1, 5004, nil)), "voice"},
		{"rtp port is video", ipv4(0, 17, 1, 0, udp(1, 5006, nil)), "video"},
		{"port out of range", ipv4(0, 17, 1, 0, udp(1, 5011, nil)), ""},
		{"ssh either direction", ipv4(0, 6, 1, 0, tcp(22, 50000, nil)), "lan"},
		{"ssh to other port", ipv4(0, 6, 1, 0, tcp(23, 50000, nil)), ""},
		{"ipv6 prefix", ipv6(0, 6, tcp(1, 2, nil)), "v6"},
		{"icmp", ipv4(0, 1, 1, 0, []byte{8, 0, 0, 0}), "icmp"},
		{"fragment without ports misses port classes", ipv4(0, 17, 1, 5, make([]byte, 8)), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustNew(t, Options{Classes: cs})
			var md Metadata
			c.Parse(tt.pkt, &md)
			if md.Class() != tt.want || md.Has(KeyClass) != (tt.want != "") {
				t.Errorf("class %q, want %q", md.Class(), tt.want)
			}
			if i := cs.Match(&md); (i >= 0) != (tt.want != "") || (i >= 0 && cs.Index(tt.want) != i) {
				t.Errorf("Match = %d, Index(%q) = %d", i, tt.want, cs.Index(tt.want))
			}
		})
	}
}

// TestClassLabels checks label keys: found through the ClassSet, valued
// through Metadata like builtin keys.
func TestClassLabels(t *testing.T) {
	cs, err := NewClassSet([]Class{
		{Name: "voice", Match: ClassMatch{DSCP: []uint8{46}}, Labels: []Label{{"tier", "gold"}, {"media", "audio"}}},
		{Name: "bulk", Labels: []Label{{"tier", "bronze"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	tier, ok := cs.KeyByName("tier")
	media, ok2 := cs.KeyByName("media")
	if !ok || !ok2 || !tier.IsLabel() || cs.KeyName(tier) != "tier" || cs.KeyName(media) != "media" {
		t.Fatalf("label keys %v %v", tier, media)
	}
	if k, ok := cs.KeyByName("dscp"); !ok || k != KeyDSCP {
		t.Error("builtin key through ClassSet")
	}
	if _, ok := cs.KeyByName("nope"); ok {
		t.Error("unknown key found")
	}
	if len(cs.LabelKeys()) != 2 || cs.Len() != 2 {
		t.Errorf("LabelKeys %v Len %d", cs.LabelKeys(), cs.Len())
	}
	c := mustNew(t, Options{Classes: cs})
	var md Metadata
	c.Parse(ipv4(46<<2, 17, 1, 0, udp(1, 2, nil)), &md)
	for k, want := range map[Key]string{KeyClass: "voice", tier: "gold", media: "audio"} {
		if v, ok := md.AppendValue(nil, k); !ok || string(v) != want {
			t.Errorf("%s = %q, %v; want %q", cs.KeyName(k), v, ok, want)
		}
	}
	if u, ok := md.Uint(KeyClass); !ok || u != 0 {
		t.Errorf("class integer form %d %v", u, ok)
	}
	if _, ok := md.Uint(tier); ok {
		t.Error("label has an integer form")
	}
	c.Parse(ipv4(0, 17, 1, 0, udp(1, 2, nil)), &md)
	if v, _ := md.AppendValue(nil, tier); string(v) != "bronze" || md.Has(media) {
		t.Errorf("bulk: tier %q, media present %v", v, md.Has(media))
	}
}
