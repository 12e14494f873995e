package bondd_test

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestPackageTables checks that the package tables of README.md and
// docs/design.md (the table headed "| package | what it owns |") name
// exactly the packages of `go list ./...`, in their first column, as paths
// relative to the module root ("." for the root package itself).
func TestPackageTables(t *testing.T) {
	out, err := exec.Command("go", "list", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var want []string
	for _, p := range strings.Fields(string(out)) {
		if rel, ok := strings.CutPrefix(p, module); ok {
			want = append(want, rel)
		} else if p+"/" == module {
			want = append(want, ".")
		}
	}
	slices.Sort(want)
	for _, file := range []string{"README.md", "docs/design.md"} {
		doc, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		got, err := packageTable(string(doc))
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: package table lists\n  %s\ngo list ./... has\n  %s", file, strings.Join(got, " "), strings.Join(want, " "))
		}
	}
}

// packageTable returns the first-column entries (backquotes removed) of
// the table headed "| package | what it owns |" in doc.
func packageTable(doc string) ([]string, error) {
	_, rest, ok := strings.Cut(doc, "| package | what it owns |\n| --- | --- |\n")
	if !ok {
		return nil, os.ErrNotExist
	}
	var names []string
	for _, line := range strings.Split(rest, "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cell, _, _ := strings.Cut(strings.TrimPrefix(line, "|"), "|")
		names = append(names, strings.Trim(strings.TrimSpace(cell), "`"))
	}
	return names, nil
}

func TestPackageTable(t *testing.T) {
	doc := "x\n| package | what it owns |\n| --- | --- |\n| `.` | root |\n| `tun/tuntest` | a |b| |\n\nmore\n"
	got, err := packageTable(doc)
	if err != nil || !slices.Equal(got, []string{".", "tun/tuntest"}) {
		t.Errorf("packageTable = %q, %v", got, err)
	}
	if _, err := packageTable("no table"); err == nil {
		t.Error("a document without the table passed")
	}
}
