// Package yamlfile holds what the project's three YAML readers share (the
// daemon config, internal/config; rule files, rules/parse.go; the emulator
// config, internal/emuconfig): parsing one document with the line of a
// syntax error, strict decoding into Go values with "FILE:LINE: problem"
// errors, the line of a field, and the "did you mean" suggestion for a
// misspelt key.
package yamlfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"

	"strings"

	"go.yaml.in/yaml/v3"
)

// SyntaxError is data that is not YAML. Line is the first line at which the
// data stops being a YAML prefix (1-based, always set); Msg is yaml.v3's
// description without its "yaml: line N:" prefix.
type SyntaxError struct {
	Line int
	Msg  string
}

// Error returns "line N: problem".
func (e *SyntaxError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// ExtraDocumentError is a second YAML document where one is expected; Line
// is where it starts.
type ExtraDocumentError struct{ Line int }

// Error returns "line N: a second YAML document".
func (e *ExtraDocumentError) Error() string {
	return fmt.Sprintf("line %d: a second YAML document", e.Line)
}

// yamlLineRE matches yaml.v3's "yaml: line N: problem" messages.
var yamlLineRE = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// Parse parses data as at most one YAML document and returns the
// document's root node (aliases not resolved), or nil when data holds no
// document or only null. Errors are *SyntaxError or *ExtraDocumentError.
// data is not retained.
func Parse(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, nil
	} else if err != nil {
		return nil, syntaxError(data, err)
	}
	var next yaml.Node
	if err := dec.Decode(&next); err == nil {
		return nil, &ExtraDocumentError{Line: next.Line}
	} else if !errors.Is(err, io.EOF) {
		return nil, syntaxError(data, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || IsNull(doc.Content[0]) {
		return nil, nil
	}
	return doc.Content[0], nil
}

// syntaxError returns err as a *SyntaxError at data's failing line.
func syntaxError(data []byte, err error) *SyntaxError {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		msg = m[2]
	}
	return &SyntaxError{Line: failingLine(data), Msg: msg}
}

// failingLine returns the smallest n such that the first n lines of data do
// not decode as YAML, by bisection (decoding is taken to fail for every
// longer prefix too), or 1 when data as a whole decodes. yaml.v3 often
// reports the line where the enclosing block starts (0-based for parser
// errors), or no line at all (control characters), hence the search.
func failingLine(data []byte) int {
	starts := []int{0} // starts[i]: offset of line i+1
	for i, c := range data {
		if c == '\n' && i+1 < len(data) {
			starts = append(starts, i+1)
		}
	}
	prefix := func(n int) []byte { // the first n lines
		if n >= len(starts) {
			return data
		}
		return data[:starts[n]]
	}
	if decodes(data) {
		return 1
	}
	lo, hi := 0, len(starts) // decodes(prefix(lo)), !decodes(prefix(hi))
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if decodes(prefix(mid)) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// decodes reports whether data decodes as a stream of YAML documents.
func decodes(data []byte) bool {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return true
		}
		if err != nil {
			return false
		}
	}
}

// IsNull reports whether n is absent or a YAML null.
func IsNull(n *yaml.Node) bool {
	return n == nil || n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// ErrEmpty is wrapped by Decode's error for data without a document.
var ErrEmpty = errors.New("empty file")

// yamlTypeRE matches the Go type names in yaml.v3's decoding messages.
var (
	yamlTypeRE    = regexp.MustCompile(` in type [\w.]+`)
	yamlUnknownRE = regexp.MustCompile(`^field (\S+) not found in type ([\w.]+)$`)
)

// Decode decodes the single YAML document in data into v (a pointer), with
// unknown fields as errors. Errors are joined "NAME:LINE: problem" lines,
// without Go type names; an unknown field gets the nearest known one
// (Suggest) from v's yaml tags. For data without a document the error
// wraps ErrEmpty.
func Decode(name string, data []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(v)
	if err == nil {
		return nil
	}
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: %w", name, ErrEmpty)
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return fmt.Errorf("%s:%d: %s", name, failingLine(data), syntaxError(data, err).Msg)
	}
	fields := knownFields(reflect.TypeOf(v), map[string][]string{})
	msgs := make([]string, len(te.Errors))
	for i, e := range te.Errors {
		line := ""
		if m := yamlLineRE.FindStringSubmatch(e); m != nil {
			line, e = m[1], m[2]
		}
		if m := yamlUnknownRE.FindStringSubmatch(e); m != nil {
			if s := Suggest(m[1], fields[m[2]]); s != "" {
				e = fmt.Sprintf("field %s not found; did you mean %q?", m[1], s)
			}
		}
		e = strings.ReplaceAll(yamlTypeRE.ReplaceAllString(e, ""), "!!", "")
		if line != "" {
			msgs[i] = fmt.Sprintf("%s:%s: %s", name, line, e)
		} else {
			msgs[i] = fmt.Sprintf("%s: %s", name, e)
		}
	}
	return errors.New(strings.Join(msgs, "\n"))
}

// knownFields adds to by, for t and every struct type reachable from it,
// the type's name as yaml.v3 prints it and its fields' YAML keys.
func knownFields(t reflect.Type, by map[string][]string) map[string][]string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return by
	}
	if _, seen := by[t.String()]; seen {
		return by
	}
	by[t.String()] = nil
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if key == "-" {
			continue
		}
		if key == "" {
			key = strings.ToLower(f.Name)
		}
		keys = append(keys, key)
		knownFields(f.Type, by)
	}
	by[t.String()] = keys
	return by
}

// LineOf returns the line of the node at path (mapping keys as strings,
// list indexes as ints) under root (a document or its root node): the line
// of the last key or item found, so that a path whose end is missing gives
// the line of its deepest existing ancestor.
func LineOf(root *yaml.Node, path []any) int {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := n.Line
	for _, k := range path {
		var next *yaml.Node
		switch k := k.(type) {
		case string:
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if n.Content[i].Value == k {
						next = n.Content[i+1]
						line = n.Content[i].Line
						break
					}
				}
			}
		case int:
			if n.Kind == yaml.SequenceNode && k >= 0 && k < len(n.Content) {
				next = n.Content[k]
				line = next.Line
			}
		}
		if next == nil {
			return line
		}
		n = next
	}
	return line
}

// maxSuggestBytes bounds the keys Suggest compares, so that a long key in a
// hostile file costs no more than a short one.
const maxSuggestBytes = 64

// Suggest returns the key of known nearest to key when key is a likely typo
// of it: at most two edits away (editDistance), or the known key followed
// by "_" and a suffix (keepalive_ms for keepalive). It returns "" when
// nothing is that near, or key is longer than 64 bytes.
func Suggest(key string, known []string) string {
	if len(key) > maxSuggestBytes {
		return ""
	}
	best, bestDist := "", 3
	for _, k := range known {
		if strings.HasPrefix(key, k+"_") {
			return k
		}
		if dist := editDistance(key, k); dist < bestDist {
			best, bestDist = k, dist
		}
	}
	return best
}

// editDistance is the edit distance of a and b in bytes, counting a swap of
// two adjacent bytes as one edit (optimal string alignment distance, the
// restricted Damerau-Levenshtein distance), so that dcsp is nearer to dscp
// than to dst.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
