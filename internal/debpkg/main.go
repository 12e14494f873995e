// Command debpkg builds bondd's Debian package with nfpm used as a library
// (github.com/goreleaser/nfpm/v2): the binary as /usr/bin/bondd, the
// systemd units of docs/systemd (ExecStart rewritten from /usr/local/bin,
// where a manual install puts it, to /usr/bin), the example configs and
// rules under /usr/share/bondd/examples, and a postinst that creates the
// system user bondd. The package's layout is nfpm.yaml beside this file.
//
// It lives under internal/ because it is a build tool, not part of bondd:
// nothing imports it, so nfpm stays out of the bondd binary's dependencies.
//
// Usage, from the repository root:
//
//	go build -o bondd ./cmd/bondd
//	go run ./internal/debpkg --binary bondd --version 1.2.3 --out dist
//
// It prints the path of the .deb it wrote.
package main

import (
	"bytes"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
)

//go:embed nfpm.yaml
var nfpmConfig []byte

//go:embed postinst.sh
var postinst []byte

// units are the systemd units shipped, from docs/systemd.
var units = []string{"bondd-concentrator.service", "bondd-edge.service"}

func main() {
	var o options
	flag.StringVar(&o.binary, "binary", "", "the bondd binary to package (required)")
	flag.StringVar(&o.version, "version", "0.0.0", "package version (semver; +metadata allowed)")
	flag.StringVar(&o.arch, "arch", runtime.GOARCH, "Go architecture of the binary")
	flag.StringVar(&o.root, "root", ".", "the repository root (docs/ is read from it)")
	flag.StringVar(&o.out, "out", ".", "directory to write the .deb into")
	flag.Parse()
	path, err := build(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "debpkg:", err)
		os.Exit(1)
	}
	fmt.Println(path)
}

type options struct{ binary, version, arch, root, out string }

// build writes the package into o.out and returns its path.
func build(o options) (string, error) {
	if o.binary == "" {
		return "", errors.New("--binary is required")
	}
	if _, err := os.Stat(o.binary); err != nil {
		return "", err
	}
	root, err := filepath.Abs(o.root)
	if err != nil {
		return "", err
	}
	bin, err := filepath.Abs(o.binary)
	if err != nil {
		return "", err
	}
	stage, err := os.MkdirTemp("", "bondd-debpkg-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(stage)
	for _, u := range units {
		b, err := os.ReadFile(filepath.Join(root, "docs", "systemd", u))
		if err != nil {
			return "", err
		}
		if !bytes.Contains(b, []byte("/usr/local/bin/bondd")) {
			return "", fmt.Errorf("docs/systemd/%s: no /usr/local/bin/bondd to rewrite", u)
		}
		b = bytes.ReplaceAll(b, []byte("/usr/local/bin/bondd"), []byte("/usr/bin/bondd"))
		if err := os.WriteFile(filepath.Join(stage, u), b, 0o644); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(filepath.Join(stage, "postinst.sh"), postinst, 0o755); err != nil {
		return "", err
	}
	vars := map[string]string{"ARCH": o.arch, "VERSION": o.version, "BINARY": bin, "ROOT": root, "STAGE": stage}
	// Expand the whole file (nfpm itself expands only some fields), and
	// refuse an unknown variable rather than leave it empty.
	var unknown []string
	text := os.Expand(string(nfpmConfig), func(k string) string {
		v, ok := vars[k]
		if !ok {
			unknown = append(unknown, k)
		}
		return v
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("nfpm.yaml: unknown variables %v", unknown)
	}
	cfg, err := nfpm.ParseWithEnvMapping(strings.NewReader(text), func(k string) string { return "$" + k })
	if err != nil {
		return "", fmt.Errorf("nfpm.yaml: %w", err)
	}
	info, err := cfg.Get("deb")
	if err != nil {
		return "", err
	}
	info = nfpm.WithDefaults(info)
	if err := nfpm.PrepareForPackager(info, "deb"); err != nil {
		return "", err
	}
	pkg, err := nfpm.Get("deb")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return "", err
	}
	target := filepath.Join(o.out, pkg.ConventionalFileName(info))
	f, err := os.Create(target)
	if err != nil {
		return "", err
	}
	info.Target = target
	if err := pkg.Package(info, f); err != nil {
		f.Close()
		os.Remove(target)
		return "", fmt.Errorf("package: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return strings.TrimPrefix(target, "./"), nil
}
