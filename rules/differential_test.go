package rules

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bondd/bondd/classify"
	"github.com/bondd/bondd/classify/capture"
)

// This file checks compiled evaluation against a naive interpreter of the
// rules as written: it matches by comparing the canonical text of each key
// (classify.Metadata.AppendValue, the annotations' documented values) with
// the rule's value byte for byte, as MoMQ's EQUALS is defined, and merges
// with maps and sorts instead of the compiled merge.

// naiveRule is a random rule: what the naive interpreter reads, and what
// yaml renders for the compiler.
type naiveRule struct {
	id         string
	priority   int
	match      []naiveMatch
	prio       int // action priority; -1: none
	balancing  string
	prefs      [][2]string
	affinity   string
	fec        int // index into fecForms; -1: none
	duplicate  int
	deadline   int
	resequence int
}

type naiveMatch struct {
	key    string
	exists bool
	value  string
}

// fecForms are the fec argument forms and the FEC each means.
var fecForms = []struct {
	yaml string
	fec  FEC
}{
	{"adaptive", FEC{Mode: FECAdaptive}},
	{"off", FEC{Mode: FECOff}},
	{"3", FEC{Mode: FECFixed, Parity: 3}},
	{"{mode: adaptive, k: 16, alpha: 1.5}", FEC{Mode: FECAdaptive, K: 16, Alpha: 1.5}},
	{"{mode: fixed, k: 10, parity: 2}", FEC{Mode: FECFixed, K: 10, Parity: 2}},
}

var affinityKeys = []string{"frame_id", "rtp_ssrc", "src_port", "icmp_type", "dscp", "rtp_ts", "temporal_layer"}

func (r *naiveRule) yaml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "  - id: %s\n    priority: %d\n", r.id, r.priority)
	if len(r.match) > 0 {
		b.WriteString("    match:\n")
		for _, m := range r.match {
			if m.exists {
				fmt.Fprintf(&b, "      %s: {exists: true}\n", m.key)
			} else {
				fmt.Fprintf(&b, "      %s: %s\n", m.key, strconv.Quote(m.value))
			}
		}
	}
	b.WriteString("    actions:\n")
	if r.prio >= 0 {
		fmt.Fprintf(&b, "      priority: %d\n", r.prio)
	}
	if r.balancing != "" {
		fmt.Fprintf(&b, "      balancing: %s\n", r.balancing)
	}
	if len(r.prefs) > 0 {
		b.WriteString("      prefer:\n")
		for _, p := range r.prefs {
			fmt.Fprintf(&b, "        %s: %s\n", p[0], p[1])
		}
	}
	if r.affinity != "" {
		fmt.Fprintf(&b, "      affinity: %s\n", r.affinity)
	}
	if r.fec >= 0 {
		fmt.Fprintf(&b, "      fec: %s\n", fecForms[r.fec].yaml)
	}
	if r.duplicate > 0 {
		fmt.Fprintf(&b, "      duplicate: %d\n", r.duplicate)
	}
	if r.deadline > 0 {
		fmt.Fprintf(&b, "      deadline_ms: %d\n", r.deadline)
	}
	if r.resequence > 0 {
		fmt.Fprintf(&b, "      resequence_ms: %d\n", r.resequence)
	}
	b.WriteString("      x_unknown: 1\n") // every rule has an action
	return b.String()
}

// naiveValue is the canonical text of key name in md and ann.
func naiveValue(cs *classify.ClassSet, md *classify.Metadata, ann *Annotations, name string) (string, bool) {
	switch name {
	case KeyPendingIFrame:
		return "true", ann.PendingIFrame
	case KeyLEOState:
		return "reconf", ann.LEOState == LEOReconf
	}
	k, ok := cs.KeyByName(name)
	if !ok {
		panic("unknown key " + name)
	}
	v, ok := md.AppendValue(nil, k)
	return string(v), ok
}

func naiveEvaluate(cs *classify.ClassSet, rules []naiveRule, md *classify.Metadata, ann *Annotations) Directive {
	sorted := append([]naiveRule(nil), rules...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].priority > sorted[j].priority })
	var d Directive
	maxPrio := -1
	var single, multi bool
	seenPref := map[string]bool{}
	for i, r := range sorted {
		ok := true
		for _, m := range r.match {
			v, present := naiveValue(cs, md, ann, m.key)
			if !present || !m.exists && v != m.value {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		d.Rules[i/64] |= 1 << (i % 64)
		if r.prio > maxPrio {
			maxPrio = r.prio
		}
		switch r.balancing {
		case "single_path":
			single = true
		case "multi_path":
			multi = true
		}
		for _, p := range r.prefs {
			if !seenPref[p[0]] && d.NumPreferences < MaxPreferences {
				d.Preferences[d.NumPreferences] = Preference{p[0], p[1]}
				d.NumPreferences++
			}
			seenPref[p[0]] = true
		}
		if r.affinity != "" && d.Fields&FieldAffinity == 0 {
			if v, present := naiveValue(cs, md, ann, r.affinity); present {
				base := 10
				if r.affinity == "frame_id" {
					base = 16
				}
				id, err := strconv.ParseUint(v, base, 64)
				if err != nil {
					panic(err)
				}
				k, _ := classify.KeyByName(r.affinity)
				d.Affinity, d.AffinityID = k, id
				d.Fields |= FieldAffinity
			}
		}
		if r.fec >= 0 && d.Fields&FieldFEC == 0 {
			d.FEC = fecForms[r.fec].fec
			d.Fields |= FieldFEC
		}
		if r.duplicate > 0 && d.Fields&FieldDuplicate == 0 {
			d.Duplicate = uint8(r.duplicate)
			d.Fields |= FieldDuplicate
		}
		if r.deadline > 0 && d.Fields&FieldDeadline == 0 {
			d.Deadline = time.Duration(r.deadline) * time.Millisecond
			d.Fields |= FieldDeadline
		}
		if r.resequence > 0 && d.Fields&FieldResequence == 0 {
			d.Resequence = time.Duration(r.resequence) * time.Millisecond
			d.Fields |= FieldResequence
		}
	}
	if maxPrio >= 0 {
		d.Priority = uint8(maxPrio)
		d.Fields |= FieldPriority
	}
	if single || multi {
		d.Fields |= FieldBalancing
		if !single {
			d.Balancing = MultiPath
		}
	}
	if d.NumPreferences > 0 {
		d.Fields |= FieldPreferences
	}
	return d
}

// sample is one packet's metadata and annotations.
type sample struct {
	md  classify.Metadata
	ann Annotations
}

// randomPackets classifies n random packets: IPv4 and IPv6; UDP, TCP and
// ICMP; RTP H.264 keyframe and delta packets on ports 5004-5005; a few DSCP
// values, so that the two test classes match some of them.
func randomPackets(t testing.TB, rng *rand.Rand, cs *classify.ClassSet, n int) []sample {
	c := newClassifier(t, cs)
	addrs4 := []netip.Addr{edgeV4, peerV4, netip.MustParseAddr("192.0.2.7")}
	addrs6 := []netip.Addr{edgeV6, peerV6}
	ports := []uint16{5004, 5005, 443, 7000, 40000}
	out := make([]sample, 0, n)
	for len(out) < n {
		p := pkt{
			v6:    rng.IntN(5) == 0,
			proto: []uint8{17, 17, 17, 6, 1}[rng.IntN(5)],
			sport: ports[rng.IntN(len(ports))], dport: ports[rng.IntN(len(ports))],
			dscp: []uint8{0, 46, 48, 10}[rng.IntN(4)], ecn: uint8(rng.IntN(4)),
			icmpType: uint8(rng.IntN(3)), payloadLen: rng.IntN(40),
		}
		if p.v6 {
			p.src, p.dst = addrs6[rng.IntN(2)], addrs6[rng.IntN(2)]
		} else {
			p.src, p.dst = addrs4[rng.IntN(3)], addrs4[rng.IntN(3)]
		}
		if p.proto == 17 && rng.IntN(3) > 0 {
			p.rtp, p.dport, p.pt = true, 5004, 96
			p.nal = []byte{0x65, 0x41, 0x41, 0x67}[rng.IntN(4)]
			p.ssrc = []uint32{0x6a5cc848, 7}[rng.IntN(2)]
			p.ts = uint32(rng.IntN(3)) * 3000
			p.seq, p.marker = uint16(rng.Uint32()), rng.IntN(2) == 0
		}
		var s sample
		c.Parse(p.bytes(), &s.md)
		s.ann = Annotations{PendingIFrame: rng.IntN(2) == 0, LEOState: LEOState(rng.IntN(2))}
		out = append(out, s)
	}
	return out
}

// keyNames are every key a random rule may match.
func keyNames(cs *classify.ClassSet) []string {
	var names []string
	for _, k := range classify.BuiltinKeys() {
		names = append(names, k.String())
	}
	for _, k := range cs.LabelKeys() {
		names = append(names, cs.KeyName(k))
	}
	return append(names, KeyPendingIFrame, KeyLEOState)
}

// valuePools collects the canonical values each key takes in samples.
func valuePools(cs *classify.ClassSet, samples []sample) map[string][]string {
	pools := map[string][]string{}
	seen := map[string]bool{}
	for i := range samples {
		for _, name := range keyNames(cs) {
			if v, ok := naiveValue(cs, &samples[i].md, &samples[i].ann, name); ok && !seen[name+"\x00"+v] {
				seen[name+"\x00"+v] = true
				pools[name] = append(pools[name], v)
			}
		}
	}
	return pools
}

func randomRules(rng *rand.Rand, names []string, pools map[string][]string) []naiveRule {
	n := 1 + rng.IntN(12)
	if rng.IntN(10) == 0 {
		n = MaxRules
	}
	rules := make([]naiveRule, n)
	for i := range rules {
		r := naiveRule{id: "r" + strconv.Itoa(i), priority: rng.IntN(6), prio: -1, fec: -1}
		used := map[string]bool{}
		for range rng.IntN(4) {
			key := names[rng.IntN(len(names))]
			if used[key] {
				continue
			}
			used[key] = true
			m := naiveMatch{key: key}
			if pool := pools[key]; len(pool) == 0 || rng.IntN(4) == 0 {
				m.exists = true
			} else {
				m.value = pool[rng.IntN(len(pool))]
			}
			r.match = append(r.match, m)
		}
		if rng.IntN(2) == 0 {
			r.prio = rng.IntN(256)
		}
		r.balancing = []string{"", "", "single_path", "multi_path"}[rng.IntN(4)]
		for j := range rng.IntN(3) {
			r.prefs = append(r.prefs, [2]string{"k" + strconv.Itoa((j+rng.IntN(4))%4), "v" + strconv.Itoa(i)})
			if j == 1 && r.prefs[0][0] == r.prefs[1][0] {
				r.prefs = r.prefs[:1]
			}
		}
		if rng.IntN(3) == 0 {
			r.affinity = affinityKeys[rng.IntN(len(affinityKeys))]
		}
		if rng.IntN(3) == 0 {
			r.fec = rng.IntN(len(fecForms))
		}
		if rng.IntN(3) == 0 {
			r.duplicate = 1 + rng.IntN(MaxDuplicate)
		}
		if rng.IntN(3) == 0 {
			r.deadline = 1 + rng.IntN(1000)
		}
		if rng.IntN(3) == 0 {
			r.resequence = 1 + rng.IntN(500)
		}
		rules[i] = r
	}
	return rules
}

// differential compiles random rule sets over the values of samples and
// compares Evaluate with naiveEvaluate on every sample.
func differential(t *testing.T, rng *rand.Rand, cs *classify.ClassSet, samples []sample, sets int) {
	names := keyNames(cs)
	pools := valuePools(cs, samples)
	matched := 0
	for range sets {
		rules := randomRules(rng, names, pools)
		var src strings.Builder
		src.WriteString("rules:\n")
		for i := range rules {
			src.WriteString(rules[i].yaml())
		}
		s, err := CompileBytes("random.yaml", []byte(src.String()), Options{Classes: cs})
		if err != nil {
			t.Fatalf("compile:\n%s\n%v", src.String(), err)
		}
		for i := range samples {
			var got Directive
			s.Evaluate(&samples[i].md, &samples[i].ann, &got)
			want := naiveEvaluate(cs, rules, &samples[i].md, &samples[i].ann)
			if got != want {
				var kv []string
				for _, name := range names {
					if v, ok := naiveValue(cs, &samples[i].md, &samples[i].ann, name); ok {
						kv = append(kv, name+"="+v)
					}
				}
				t.Fatalf("rules:\n%s\npacket: %s\n got  %v %x\n want %v %x", src.String(), strings.Join(kv, " "), &got, got.Rules, &want, want.Rules)
			}
			matched += got.Rules.Count()
		}
	}
	if matched == 0 {
		t.Fatal("no rule ever matched: the generator is broken")
	}
	t.Logf("%d rule sets × %d packets, %d rule matches", sets, len(samples), matched)
}

// TestDifferential compares compiled and naive evaluation on random rules
// over random synthetic packets.
func TestDifferential(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cs := testClasses(t)
	differential(t, rng, cs, randomPackets(t, rng, cs, 200), 600)
}

// TestDifferentialCaptures does the same over the real captures of the
// shared data folder, when it is there.
func TestDifferentialCaptures(t *testing.T) {
	names := []string{"video/str0m-h264.pcap", "video/str0m-vp9.pcap", "video/tau-wilson-h265.pcap",
		"dscp-and-webrtc/ndpi-wa_video.pcap", "mpegts/tsduck-test-162-ts-over-rtp.pcap"}
	cs := testClasses(t)
	rng := rand.New(rand.NewPCG(3, 4))
	var samples []sample
	for _, name := range names {
		path := filepath.Join(dataDir, name)
		if _, err := os.Stat(path); err != nil {
			t.Skipf("real capture %s not found (the shared data folder beside the repository is absent)", path)
		}
		samples = append(samples, readSamples(t, rng, cs, path, 300)...)
	}
	differential(t, rng, cs, samples, 150)
}

// readSamples classifies up to max packets of a capture, with random
// annotations.
func readSamples(t testing.TB, rng *rand.Rand, cs *classify.ClassSet, path string, max int) []sample {
	r, err := capture.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c := newClassifier(t, cs)
	var out []sample
	var fr capture.Frame
	for len(out) < max {
		err := r.Next(&fr)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if fr.IP == nil {
			continue
		}
		var s sample
		c.Parse(fr.IP, &s.md)
		s.ann = Annotations{PendingIFrame: rng.IntN(2) == 0, LEOState: LEOState(rng.IntN(2))}
		out = append(out, s)
	}
	return out
}
