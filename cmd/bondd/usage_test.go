package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bondd/bondd/internal/status"
	"github.com/bondd/bondd/internal/usage"
)

// fillStore writes some traffic of van-17's cell-a into a store in dir and
// returns the open store and its accountant.
func fillStore(t *testing.T, dir string) (*usage.Store, *usage.Accountant) {
	t.Helper()
	st, err := usage.Open(dir, usage.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var up uint64
	a, err := usage.NewAccountant(usage.Options{Store: st, Source: func(yield func(usage.Sample)) {
		up += 1e6
		yield(usage.Sample{Key: usage.Key{Bond: "van-17", Path: "cell-a"}, Status: usage.StatusActive,
			Counts: usage.Counts{UpBytes: up, DownBytes: up / 2, UpPackets: up / 1000}})
	}})
	if err != nil {
		t.Fatal(err)
	}
	a.Step()
	a.Step()
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	return st, a
}

func runUsage(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newUsageCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// TestUsageCmd reads a store from its directory, and from a running
// daemon's control socket when the daemon holds the store's lock.
func TestUsageCmd(t *testing.T) {
	dir := t.TempDir()
	st, a := fillStore(t, dir)
	sock := filepath.Join(t.TempDir(), "bondd.sock")
	srv, err := status.Serve(sock, func() status.Report { return status.Report{} }, nil, usageHandler(a))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, daemon := range []bool{true, false} {
		want := uint64(2e6)
		if !daemon {
			a.Close() // its last sample adds 1 MB
			st.Close()
			want = 3e6
		}
		out, err := runUsage(t, "--state-dir", dir, "--control-socket", sock, "--json", "--by", "hour")
		if err != nil {
			t.Fatalf("daemon %v: %v", daemon, err)
		}
		var rep usage.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("daemon %v: %v\n%s", daemon, err, out)
		}
		if len(rep.Rows) != 1 || rep.Rows[0].UpBytes != want || rep.Rows[0].Path != "cell-a" || len(rep.Paths) != 1 {
			t.Errorf("daemon %v: %+v", daemon, rep)
		}
	}
	out, err := runUsage(t, "--state-dir", dir, "--csv")
	if err != nil || !strings.HasPrefix(out, "start,bond,path,up_bytes,") || !strings.Contains(out, ",van-17,cell-a,3000000,1500000,") {
		t.Errorf("csv: %v\n%s", err, out)
	}
	out, err = runUsage(t, "--state-dir", dir)
	if err != nil || !strings.Contains(out, "van-17  cell-a  3.00 MB") || !strings.Contains(out, "history by day") {
		t.Errorf("text: %v\n%s", err, out)
	}
	for _, bad := range [][]string{{"--by", "week"}, {"--since", "yesterday"}, {"--since", "2026-12-02", "--until", "2026-12-01"}, {"--json", "--csv"}} {
		if _, err := runUsage(t, append([]string{"--state-dir", dir}, bad...)...); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
	if _, err := runUsage(t, "--state-dir", t.TempDir()); err == nil || !strings.Contains(err.Error(), "no usage recorded yet") {
		t.Errorf("empty state dir: %v", err)
	}
}

// TestRunStateRefused: bondd run stops at a damaged store, naming it,
// before anything else; --reset-state moves it aside and goes on (here to
// the broken rule file, before any TUN is opened).
func TestRunStateRefused(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("ca.pem", "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n", 0o644)
	write("van-17.token", strings.Repeat("t", 32), 0o600)
	write("broken-rules.yaml", "rules:\n  - id: x\n    priority: 1\n    match: {codek: h264}\n    actions: {priority: 1}\n", 0o644)
	state := filepath.Join(dir, "state")
	os.Mkdir(state, 0o750)
	damaged := bytes.Repeat([]byte("not a store "), 1000)
	if err := os.WriteFile(filepath.Join(state, usage.FileName), damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	write("bondd.yaml", "role: edge\ntun: {name: bond0, addresses: [10.77.17.1/24]}\n"+
		"edge:\n  id: van-17\n  concentrator: concentrator.example.net:4433\n  ca_file: ca.pem\n  token_file: van-17.token\n"+
		"  uplinks:\n    - {name: cell-a, interface: wwan0, budget: 1GB/month}\n"+
		"rules: broken-rules.yaml\nstate_dir: "+state+"\n", 0o644)
	run := func(args ...string) error {
		cmd := newRunCmd()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs(append([]string{"-c", filepath.Join(dir, "bondd.yaml"), "--control-socket", ""}, args...))
		return cmd.Execute()
	}
	err := run()
	if err == nil || !strings.Contains(err.Error(), filepath.Join(state, usage.FileName)) || !strings.Contains(err.Error(), "--reset-state") {
		t.Fatalf("bondd run on a damaged store: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(state, usage.FileName)); !bytes.Equal(got, damaged) {
		t.Error("the damaged store was changed")
	}
	err = run("--reset-state")
	if err == nil || !strings.Contains(err.Error(), "codek") {
		t.Fatalf("bondd run --reset-state: %v; want the rule file's error next", err)
	}
	moved, _ := filepath.Glob(filepath.Join(state, usage.FileName+".*.bak"))
	if len(moved) != 1 {
		t.Fatalf("moved aside: %v", moved)
	}
	if got, _ := os.ReadFile(moved[0]); !bytes.Equal(got, damaged) {
		t.Error("the moved file differs from the damaged store")
	}
	st, err := usage.Open(state, usage.StoreOptions{ReadOnly: true})
	if err != nil {
		t.Fatalf("the new store: %v", err)
	}
	st.Close()
}
