package bondd_test

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackageDocs checks that every package has exactly one package doc
// comment.
func TestPackageDocs(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", "./...").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range strings.Fields(string(out)) {
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			t.Fatal(err)
		}
		for name, pkg := range pkgs {
			var docs []string
			for fname, f := range pkg.Files {
				if f.Doc != nil {
					docs = append(docs, filepath.Base(fname))
				}
			}
			if len(docs) != 1 {
				t.Errorf("package %s in %s has %d package docs %v, want 1", name, dir, len(docs), docs)
			}
		}
	}
}

// TestGofmt checks that every Go file is gofmt-formatted.
func TestGofmt(t *testing.T) {
	gofmt := filepath.Join(strings.TrimSpace(goEnv(t, "GOROOT")), "bin", "gofmt")
	// third_party/ is upstream's code, held to its release by the
	// provenance test (internal/quicfork), not reformatted by us.
	var dirs []string
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "third_party" && !strings.HasPrefix(e.Name(), ".") && (e.IsDir() || strings.HasSuffix(e.Name(), ".go")) {
			dirs = append(dirs, e.Name())
		}
	}
	out, err := exec.Command(gofmt, append([]string{"-l"}, dirs...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("gofmt: %v\n%s", err, out)
	}
	if len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("gofmt would change:\n%s", out)
	}
}

func goEnv(t *testing.T, key string) string {
	out, err := exec.Command("go", "env", key).Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
