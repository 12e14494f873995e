package yamlfile

import (
	"errors"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		wantNil  bool
		wantLine int    // of the error; 0: no error
		wantMsg  string // in the error
	}{
		{"empty", "", true, 0, ""},
		{"comment", "# x\n", true, 0, ""},
		{"null", "---\n", true, 0, ""},
		{"mapping", "a: 1\n", false, 0, ""},
		{"flow list open", "a: 1\nb: [x\n", false, 2, "did not find expected ',' or ']'"},
		{"stray item", "a: 1\nb: {}\n- x\n", false, 3, "did not find expected key"},
		{"tab indent", "a:\n\tb: x\n", false, 2, "cannot start any token"},
		{"second document", "a: 1\n---\nb: 2\n", false, 2, "second YAML document"},
		{"binary", "\x00\x01\x02\xff\xfe", false, 1, ""},
		{"binary on line 3", "a: 1\nb: 2\n\x00\x01", false, 3, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, err := Parse([]byte(tt.in))
			if tt.wantLine == 0 {
				if err != nil || (root == nil) != tt.wantNil {
					t.Fatalf("Parse = %v, %v", root, err)
				}
				return
			}
			var se *SyntaxError
			var ee *ExtraDocumentError
			line := 0
			switch {
			case errors.As(err, &se):
				line = se.Line
			case errors.As(err, &ee):
				line = ee.Line
			default:
				t.Fatalf("err = %v, want a *SyntaxError or *ExtraDocumentError", err)
			}
			if line != tt.wantLine || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("err = %v (line %d), want line %d and %q", err, line, tt.wantLine, tt.wantMsg)
			}
		})
	}
}

func TestSuggest(t *testing.T) {
	known := []string{"dscp", "dst", "keepalive", "frame_type", "uplinks"}
	tests := []struct{ key, want string }{
		{"dcsp", "dscp"}, // one swap
		{"keepalive_ms", "keepalive"},
		{"frme_type", "frame_type"},
		{"uplinkz", "uplinks"},
		{"zzzzzz", ""},
		{strings.Repeat("d", 65), ""},
	}
	for _, tt := range tests {
		if got := Suggest(tt.key, known); got != tt.want {
			t.Errorf("Suggest(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"dscp", "dcsp", 1}, {"kitten", "sitting", 3}, {"ab", "ba", 1}}
	for _, tt := range tests {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

type inner struct {
	DelayMs float64 `yaml:"delay_ms"`
}

type outer struct {
	Name  string  `yaml:"name"`
	Links []inner `yaml:"links"`
}

func TestDecode(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"ok", "name: a\nlinks: [{delay_ms: 3}]\n", ""},
		{"empty", "", "F: empty file"},
		{"unknown nested", "name: a\nlinks:\n  - delay_msx: 3\n", `F:3: field delay_msx not found; did you mean "delay_ms"?`},
		{"unknown far", "nom: a\nzzzzzz: 1\n", "F:2: field zzzzzz not found"},
		{"wrong type", "name: a\nlinks:\n  - delay_ms: x\n", "F:3: cannot unmarshal str `x` into float64"},
		{"syntax", "name: a\nlinks: [\n", "F:2: "},
		{"binary", "\x00\x01\xff", "F:1: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o outer
			err := Decode("F", []byte(tt.in), &o)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Decode: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Decode = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestLineOf(t *testing.T) {
	var root yaml.Node
	if err := yaml.Unmarshal([]byte("a: 1\nb:\n  - x: 2\n  - y: 3\n"), &root); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path []any
		want int
	}{{nil, 1}, {[]any{"a"}, 1}, {[]any{"b", 1}, 4}, {[]any{"b", 1, "y"}, 4}, {[]any{"b", 5}, 2}, {[]any{"c"}, 1}, {[]any{"b", -1}, 2}}
	for _, tt := range tests {
		if got := LineOf(&root, tt.path); got != tt.want {
			t.Errorf("LineOf(%v) = %d, want %d", tt.path, got, tt.want)
		}
	}
}

// FuzzParse checks that no input makes Parse or Decode panic, and that a
// syntax error always has a line.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"a: 1\n", "a: [\n", "---\n---\n", "\x00", "a: &x [*x]\n", "links: [{delay_ms: 1}]\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4096 {
			return
		}
		_, err := Parse(data)
		var se *SyntaxError
		if errors.As(err, &se) && se.Line < 1 {
			t.Errorf("syntax error without a line: %v", err)
		}
		var o outer
		_ = Decode("F", data, &o)
	})
}
