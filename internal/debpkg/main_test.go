package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuild builds the package around a stand-in binary and checks its
// file list and that the units start /usr/bin/bondd.
func TestBuild(t *testing.T) {
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("skipping: dpkg-deb not found")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bondd")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho bondd test\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	deb, err := build(options{binary: bin, version: "1.2.3+gitabc", arch: "amd64", root: "../..", out: dir})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(deb) != "bondd_1.2.3+gitabc_amd64.deb" {
		t.Errorf("package file %s", deb)
	}
	out, err := exec.Command("dpkg-deb", "-c", deb).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-deb -c: %v\n%s", err, out)
	}
	for _, want := range []string{
		"./usr/bin/bondd",
		"./usr/lib/systemd/system/bondd-concentrator.service",
		"./usr/lib/systemd/system/bondd-edge.service",
		"./usr/share/bondd/examples/concentrator.yaml",
		"./usr/share/bondd/examples/edge.yaml",
		"./usr/share/bondd/examples/rules/vehicular.yaml",
		"./usr/share/bondd/examples/rules/momq-svc.yaml",
		"./etc/bondd/",
		"./var/lib/bondd/",
	} {
		if !strings.Contains(string(out), want+"\n") {
			t.Errorf("package lacks %s:\n%s", want, out)
		}
	}
	x := filepath.Join(dir, "x")
	if out, err := exec.Command("dpkg-deb", "-x", deb, x).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -x: %v\n%s", err, out)
	}
	for _, u := range units {
		b, err := os.ReadFile(filepath.Join(x, "usr/lib/systemd/system", u))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "ExecStart=/usr/bin/bondd run") || strings.Contains(string(b), "/usr/local/bin") {
			t.Errorf("%s does not start /usr/bin/bondd:\n%s", u, b)
		}
	}
}

func TestBuildErrors(t *testing.T) {
	for _, o := range []options{
		{},
		{binary: "/nonexistent/bondd", root: "../.."},
		{binary: "main.go", root: t.TempDir(), out: t.TempDir()}, // no docs/systemd there
	} {
		if _, err := build(o); err == nil {
			t.Errorf("build(%+v) succeeded", o)
		}
	}
}
