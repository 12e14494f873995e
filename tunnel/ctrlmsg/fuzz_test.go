package ctrlmsg

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/bondd/bondd/rules"
)

// Version and lanes are what the tests of this package check hellos
// against (the tunnel passes its Version and 1: a path has one connection,
// lane 0; a larger bound exercises Check's range).
const (
	Version = 1
	lanes   = 8
)

// FuzzControlMessage feeds framed bytes to Read and the parse function
// of the type found. It must never panic, and a message that parses must
// marshal to bytes that parse to the same message and marshal to the same
// bytes again.
func FuzzControlMessage(f *testing.F) {
	for _, s := range ctrlSeeds {
		f.Add(binary.BigEndian.AppendUint16(nil, uint16(len(s))), []byte(s))
	}
	f.Add([]byte{0, 2}, []byte("{}"))
	hello := `{"type":"hello","version":1,"edge_id":"van-1","path":"sat","leo":{"seconds":[12,27,42,57],"window_ms":100,"hold_ms":-1}}`
	f.Add(binary.BigEndian.AppendUint16(nil, uint16(len(hello))), []byte(hello))
	f.Fuzz(func(t *testing.T, prefix, body []byte) {
		in := append(append([]byte(nil), prefix...), body...)
		typ, b, err := Read(bytes.NewReader(in))
		if err != nil {
			return
		}
		if typ == TypeHello {
			var h Hello
			if json.Unmarshal(b, &h) == nil {
				h.Check(Version, lanes)
			}
			return
		}
		m, err := Parse(typ, b)
		if err != nil {
			return
		}
		checkRoundTrip(t, typ, m)
	})
}

// FuzzMappingRule parses PATH_MAPPING_RULE bodies and, for an install that
// parses, converts it to a rule and compiles it, as the concentrator does.
// It must never panic, and the message → rule → message trip must give
// the message back.
func FuzzMappingRule(f *testing.F) {
	for _, s := range ctrlSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := ParseMappingRule(body)
		if err != nil {
			return
		}
		checkRoundTrip(t, TypeMappingRule, m)
		if m.Op != OpInstall {
			return
		}
		r := m.Rule()
		rules.Compile(&rules.File{Name: "fuzz", Rules: []rules.Rule{r}}, rules.Options{})
		back := InstallOf(m.Request, &r)
		if !reflect.DeepEqual(back, m) {
			t.Fatalf("rule trip changed the message:\n%+v\n%+v", m, back)
		}
	})
}

// FuzzLabels checks the label validation every message shares against a
// plain reading of its rules.
func FuzzLabels(f *testing.F) {
	f.Add("link_type", "cellular")
	f.Add("-x", "v")
	f.Add("a b", "")
	f.Fuzz(func(t *testing.T, k, v string) {
		err := CheckLabels(map[string]string{k: v})
		okKey := len(k) >= 1 && len(k) <= MaxLabelKey
		for i, c := range []byte(k) {
			alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
			if !alnum && (i == 0 || !bytes.ContainsRune([]byte("_.:/-"), rune(c))) {
				okKey = false
			}
		}
		okVal := len(v) >= 1 && len(v) <= MaxLabelValue && validUTF8(v)
		if (err == nil) != (okKey && okVal) {
			t.Fatalf("CheckLabels(%q: %q) = %v", k, v, err)
		}
	})
}

// validUTF8 is utf8.ValidString the slow way.
func validUTF8(s string) bool { return string([]rune(s)) == s }

// FuzzRateFeedback parses PATH_RATE_FEEDBACK bodies: never a panic, and a
// report that parses keeps the checks' invariants and round-trips.
func FuzzRateFeedback(f *testing.F) {
	for _, s := range ctrlSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := ParseRateFeedback(body)
		if err != nil {
			return
		}
		if m.EndUs < m.StartUs || m.OWDMeanUs < m.OWDMinUs || m.Lost > MaxRateDatagrams {
			t.Fatalf("accepted %+v", m)
		}
		checkRoundTrip(t, TypeRateFeedback, m)
	})
}
