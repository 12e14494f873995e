package rules

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/bondd/bondd/classify"
)

// TestExamples compiles every example rule file: no errors, no warnings.
func TestExamples(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(examplesDir, "*.yaml"))
	if err != nil || len(paths) < 2 {
		t.Fatalf("examples %v: %v", paths, err)
	}
	for _, p := range paths {
		s, err := Load(p, Options{})
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if len(s.Warnings()) > 0 {
			t.Errorf("%s: warnings %v", p, s.Warnings())
		}
	}
}

// TestVehicularExample checks what the vehicular default does to control,
// keyframe, TCP and bulk packets.
func TestVehicularExample(t *testing.T) {
	s, err := Load(filepath.Join(examplesDir, "vehicular.yaml"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		p    pkt
		want string
	}{
		{"EF voice", pkt{proto: 17, src: edgeV4, dst: peerV4, sport: 7000, dport: 7000, dscp: 46},
			"priority=255 prefer=cost_class=free duplicate=2 deadline_ms=150"},
		{"CS6 control", pkt{proto: 6, src: edgeV4, dst: peerV4, sport: 179, dport: 179, dscp: 48},
			"priority=255 balancing=multi_path prefer=cost_class=free duplicate=2"},
		{"keyframe", videoPkt(0x65, 1), "priority=200 prefer=cost_class=free fec=adaptive,k=20,alpha=2"},
		{"delta frame", videoPkt(0x41, 2), "prefer=cost_class=free"},
		{"TCP bulk", pkt{proto: 6, src: edgeV4, dst: peerV4, sport: 5000, dport: 443},
			"balancing=multi_path prefer=cost_class=free"},
	} {
		var d Directive
		s.Evaluate(metadata(t, nil, tt.p), nil, &d)
		if got := d.String(); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}

// TestDoc checks docs/rules.md: its sections, that every key and action is
// documented, that the limits it states are the code's, and that every
// YAML example compiles.
func TestDoc(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "rules.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	last := -1
	for _, sec := range []string{"Syntax", "Keys", "Actions", "Merge", "Limits", "Errors", "Examples"} {
		i := strings.Index(doc, "\n## "+sec+"\n")
		if i < 0 || i < last {
			t.Errorf("section %q missing or out of order", sec)
		}
		last = i
	}
	var names []string
	for _, k := range classify.BuiltinKeys() {
		names = append(names, k.String())
	}
	names = append(names, AnnotationKeys()...)
	names = append(names, actPriority, actBalancing, actPrefer, actAffinity, actFEC, actDuplicate, actDeadline, actResequence,
		"single_path", "multi_path", "adaptive", "off", "highest", "lowest")
	for _, n := range names {
		if !strings.Contains(doc, "`"+n+"`") {
			t.Errorf("docs/rules.md does not mention `%s`", n)
		}
	}
	if !strings.Contains(doc, "`key: {exists: true}`") {
		t.Error("docs/rules.md does not show EXISTS")
	}
	limits := section(doc, "Limits")
	for _, want := range []string{
		"| " + strconv.Itoa(MaxRules) + " |", "| " + strconv.Itoa(MaxMatchEntries) + " |", "| " + strconv.Itoa(MaxActions) + " |",
		"| " + strconv.Itoa(MaxKeyBytes) + " bytes |", "| " + strconv.Itoa(MaxValueBytes) + " bytes |",
		"| " + strconv.Itoa(MaxInstallsPerSecond) + " |", "| 1 MiB |",
	} {
		if !strings.Contains(limits, want) {
			t.Errorf("Limits section lacks %q", want)
		}
	}
	if MaxFileBytes != 1<<20 || MaxPreferences != 8 || MaxDuplicate != 8 || DefaultDebounce.Milliseconds() != 100 {
		t.Error("docs/rules.md states MaxFileBytes 1 MiB, 8 preferences, duplicate 1-8 and a 100 ms debounce: update it")
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(doc, -1)
	if len(blocks) < 2 {
		t.Fatalf("%d yaml blocks", len(blocks))
	}
	for _, m := range blocks {
		s, err := CompileBytes("docs/rules.md", []byte(m[1]), Options{})
		if err != nil {
			t.Errorf("example does not compile:\n%s\n%v", m[1], err)
		} else if len(s.Warnings()) > 0 {
			t.Errorf("example has warnings %v", s.Warnings())
		}
	}
}

// section returns the text of a "## name" section.
func section(doc, name string) string {
	i := strings.Index(doc, "\n## "+name+"\n")
	if i < 0 {
		return ""
	}
	rest := doc[i+1:]
	if j := strings.Index(rest[3:], "\n## "); j >= 0 {
		return rest[:j+3]
	}
	return rest
}
