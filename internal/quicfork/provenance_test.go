package quicfork

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// upstreamVersion is the quic-go release third_party/quic-go comes from.
const upstreamVersion = "v0.65.0"

// maxPatchLines bounds the lines the patch adds or removes.
const maxPatchLines = 300

// root returns the repository root, two levels above this package.
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// upstreamDir downloads the released module into the module cache (the go
// command checks it against go.sum and the checksum database) and returns
// its directory.
func upstreamDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", "github.com/quic-go/quic-go@"+upstreamVersion).Output()
	if err != nil {
		t.Fatalf("go mod download quic-go@%s: %v", upstreamVersion, err)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("go mod download quic-go@%s: %s %v", upstreamVersion, m.Error, err)
	}
	return m.Dir
}

var patchFile = regexp.MustCompile(`(?m)^diff --git a/(\S+) b/(\S+)$`)

// TestProvenance requires every file under third_party/quic-go to be the
// released module's, byte for byte, except the files third_party/quic-go.patch
// names, which must be exactly the released file (or nothing, for a file
// the patch adds) with the patch applied.
func TestProvenance(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is needed to apply the patch: install it")
	}
	repo := root(t)
	tree := filepath.Join(repo, "third_party", "quic-go")
	patch, err := os.ReadFile(filepath.Join(repo, "third_party", "quic-go.patch"))
	if err != nil {
		t.Fatal(err)
	}
	patched := map[string]bool{}
	for _, m := range patchFile.FindAllStringSubmatch(string(patch), -1) {
		if m[1] != m[2] {
			t.Errorf("the patch renames %s to %s: keep upstream's names", m[1], m[2])
		}
		patched[m[2]] = true
	}
	if len(patched) == 0 {
		t.Fatal("the patch names no file")
	}
	changed := 0
	for line := range strings.SplitSeq(string(patch), "\n") {
		if (strings.HasPrefix(line, "+") && !strings.HasPrefix(line, "+++")) ||
			(strings.HasPrefix(line, "-") && !strings.HasPrefix(line, "---")) {
			changed++
		}
	}
	if changed > maxPatchLines {
		t.Errorf("the patch changes %d lines, more than %d: keep it small", changed, maxPatchLines)
	}

	up := upstreamDir(t)
	// The released files the patch names, patched in a scratch copy.
	scratch := t.TempDir()
	for name := range patched {
		src, err := os.ReadFile(filepath.Join(up, name))
		if os.IsNotExist(err) {
			continue // added by the patch
		} else if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(scratch, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("git", "apply", "--unsafe-paths", "--directory=.", "-")
	cmd.Dir = scratch
	cmd.Stdin = bytes.NewReader(patch)
	cmd.Env = append(os.Environ(), "GIT_DIR="+filepath.Join(scratch, ".nogit"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the patch does not apply to quic-go %s: %v\n%s", upstreamVersion, err, out)
	}

	files := 0
	err = filepath.WalkDir(tree, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		rel, _ := filepath.Rel(tree, path)
		rel = filepath.ToSlash(rel)
		got, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		want, err := os.ReadFile(filepath.Join(up, rel))
		if patched[rel] {
			want, err = os.ReadFile(filepath.Join(scratch, rel))
		}
		switch {
		case os.IsNotExist(err):
			t.Errorf("third_party/quic-go/%s is neither in quic-go %s nor added by the patch", rel, upstreamVersion)
		case err != nil:
			return err
		case !bytes.Equal(got, want) && patched[rel]:
			t.Errorf("third_party/quic-go/%s differs from quic-go %s with the patch applied: regenerate the patch (third_party/README.md)", rel, upstreamVersion)
		case !bytes.Equal(got, want):
			t.Errorf("third_party/quic-go/%s differs from quic-go %s and the patch does not name it", rel, upstreamVersion)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range patched {
		if _, err := os.Stat(filepath.Join(tree, name)); err != nil {
			t.Errorf("the patch names %s, which third_party/quic-go lacks", name)
		}
	}
	if files < 100 {
		t.Errorf("third_party/quic-go holds only %d files", files)
	}
	t.Logf("%d files: %d patched (%d lines changed), the rest as released in quic-go %s", files, len(patched), changed, upstreamVersion)
}
