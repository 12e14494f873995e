package main

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bondd/bondd/internal/config"
	"github.com/bondd/bondd/internal/status"
)

// TestDemoControlSocket: while the demo runs, its edge's status is on the
// control socket, as bondd run's is, so that bondd status shows its paths;
// the socket is gone once the demo ends, and so is the folder the demo
// made for it.
func TestDemoControlSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "run", "demo.sock")
	cmd := newDemoCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--inprocess", "--traces", "", "--duration", "4s", "--rate", "1", "--control-socket", sock})
	done := make(chan error, 1)
	go func() { done <- cmd.Execute() }()

	var rep *status.Report
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		r, err := status.Fetch(ctx, sock)
		cancel()
		if err == nil && len(r.Bonds) == 1 && len(r.Bonds[0].Paths) == 3 {
			rep = r
			break
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	if rep == nil {
		t.Fatalf("no status with the demo's 3 paths on %s while it ran; its output:\n%s", sock, out.String())
	}
	if rep.Role != config.RoleEdge || !strings.Contains(rep.Version, "demo") {
		t.Errorf("status role %q version %q, want the demo's edge", rep.Role, rep.Version)
	}
	if !strings.Contains(out.String(), "bondd status --socket "+sock) {
		t.Errorf("the demo does not say how to see its status; output:\n%s", out.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := status.Fetch(ctx, sock); err == nil {
		t.Error("the control socket still answers after the demo ended")
	}
	if _, err := os.Stat(filepath.Dir(sock)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the socket's folder, made by the demo, is still there after it ended (%v)", err)
	}
}
