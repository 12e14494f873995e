package usage

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// newStore opens a store in a new temporary directory.
func newStore(t *testing.T) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir, StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dir
}

func TestRecordRoundTrip(t *testing.T) {
	c := Counts{1, 2, 3, 4, 5, 6, 7, 8, 1 << 60}
	var got Counts
	if err := decodeHour(encodeHour(nil, &c), &got); err != nil || got != c {
		t.Fatalf("hour: %+v, %v; want %+v", got, err, c)
	}
	r := periodRecord{Start: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), End: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), Used: 99, Alerts: alert90, Period: c, Total: c}
	var gr periodRecord
	if err := decodePeriod(encodePeriod(nil, &r), &gr); err != nil || gr != r {
		t.Fatalf("period: %+v, %v; want %+v", gr, err, r)
	}
	for _, k := range []Key{{"van-1", "lte"}, {"", ""}, {"a\x00b", "c"}} {
		h := time.Date(2026, 12, 5, 7, 0, 0, 0, time.UTC)
		gh, gk, err := parseHourKey(hourKey(nil, h, k))
		if err != nil || gk != k || !gh.Equal(h) {
			t.Fatalf("key %q: %v %q %v", k, gh, gk, err)
		}
	}
	for _, b := range [][]byte{nil, {2}, {1}, {1, 0x80}} {
		if decodeHour(b, &got) == nil {
			t.Errorf("decodeHour(%x) accepted", b)
		}
		if decodePeriod(b, &gr) == nil {
			t.Errorf("decodePeriod(%x) accepted", b)
		}
	}
}

// FuzzRecords feeds arbitrary bytes, as a damaged file would hold, to the
// record and key decoders: errors, never panics, and what decodes
// survives encoding and decoding again unchanged.
func FuzzRecords(f *testing.F) {
	c := Counts{1, 2, 3, 4, 5, 6, 7, 8, 9}
	f.Add(encodeHour(nil, &c))
	f.Add(encodePeriod(nil, &periodRecord{Used: 5, Period: c, Total: c}))
	f.Add(hourKey(nil, time.Unix(3600, 0), Key{"b", "p"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var got, again Counts
		if decodeHour(b, &got) == nil {
			if err := decodeHour(encodeHour(nil, &got), &again); err != nil || again != got {
				t.Errorf("hour %x decoded to %+v, which does not survive a round trip: %+v %v", b, got, again, err)
			}
		}
		var r, r2 periodRecord
		if decodePeriod(b, &r) == nil {
			if err := decodePeriod(encodePeriod(nil, &r), &r2); err != nil || r2 != r {
				t.Errorf("period %x decoded to %+v, which does not survive a round trip: %+v %v", b, r, r2, err)
			}
		}
		parseHourKey(b)
		parseKey(b)
	})
}

func TestOpenCreatesAndReopens(t *testing.T) {
	s, dir := newStore(t)
	if s.Created().IsZero() {
		t.Error("no creation time")
	}
	s.Close()
	s2, err := Open(dir, StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
	if _, err := Open(t.TempDir(), StoreOptions{ReadOnly: true}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("read-only open of no store: %v", err)
	}
}

// TestOpenRefuses checks each store Open must refuse: the error names the
// file and the cause, and the file is left as it was.
func TestOpenRefuses(t *testing.T) {
	good := func(t *testing.T) string {
		s, dir := newStore(t)
		a := newTestAccountant(t, s, nil)
		a.feed(Key{"van", "lte"}, Counts{UpBytes: 5000}, StatusActive)
		a.Flush()
		s.Close()
		return dir
	}
	tests := []struct {
		name  string
		setup func(t *testing.T) string
		want  error
	}{
		{"truncated", func(t *testing.T) string {
			dir := good(t)
			f := filepath.Join(dir, FileName)
			fi, _ := os.Stat(f)
			if err := os.Truncate(f, fi.Size()/2); err != nil {
				t.Fatal(err)
			}
			return dir
		}, ErrCorrupt},
		{"empty", func(t *testing.T) string {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, FileName), nil, 0o600)
			return dir
		}, ErrCorrupt},
		{"garbage", func(t *testing.T) string {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, FileName), bytes.Repeat([]byte("not a database "), 2000), 0o600)
			return dir
		}, ErrCorrupt},
		{"newer version", func(t *testing.T) string {
			dir := good(t)
			s, err := Open(dir, StoreOptions{})
			if err != nil {
				t.Fatal(err)
			}
			s.setSchema(t, SchemaVersion+1)
			s.Close()
			return dir
		}, ErrNewerVersion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.setup(t)
			f := filepath.Join(dir, FileName)
			before, _ := os.ReadFile(f)
			_, err := Open(dir, StoreOptions{})
			if !errors.Is(err, tt.want) {
				t.Fatalf("Open: %v; want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), f) || !strings.Contains(err.Error(), "--reset-state") {
				t.Errorf("error %q does not name the file and --reset-state", err)
			}
			after, _ := os.ReadFile(f)
			if !bytes.Equal(before, after) {
				t.Error("Open changed the refused file")
			}
			to, err := MoveAside(dir, time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC))
			if err != nil || !strings.HasSuffix(to, "usage.db.20261205T080000Z.bak") {
				t.Fatalf("MoveAside: %q %v", to, err)
			}
			if moved, _ := os.ReadFile(to); !bytes.Equal(moved, before) {
				t.Error("the moved file differs")
			}
			s, err := Open(dir, StoreOptions{})
			if err != nil {
				t.Fatalf("Open after MoveAside: %v", err)
			}
			s.Close()
		})
	}
}

// setSchema overwrites the schema version, as a newer bondd would.
func (s *Store) setSchema(t *testing.T, v int) {
	t.Helper()
	if err := s.db.Update(func(tx *boltTx) error {
		return tx.Bucket(bucketMeta).Put(keySchema, []byte(itoa(v)))
	}); err != nil {
		t.Fatal(err)
	}
}

func TestOpenInUse(t *testing.T) {
	_, dir := newStore(t)
	for _, ro := range []bool{false, true} {
		if _, err := Open(dir, StoreOptions{ReadOnly: ro}); !errors.Is(err, ErrInUse) {
			t.Errorf("second Open (read-only %v): %v; want ErrInUse", ro, err)
		}
	}
}

// tmpfs mounts a small tmpfs for the file system cases (root only).
func tmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: mounting a tmpfs for a full or read-only file system needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("skipping: mount tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

func TestOpenReadOnlyFS(t *testing.T) {
	dir := tmpfs(t, "4m")
	s, err := Open(dir, StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	before, _ := os.ReadFile(filepath.Join(dir, FileName))
	if out, err := exec.Command("mount", "-o", "remount,ro", dir).CombinedOutput(); err != nil {
		t.Fatalf("remount ro: %v %s", err, out)
	}
	_, err = Open(dir, StoreOptions{})
	if !errors.Is(err, ErrReadOnly) || !strings.Contains(err.Error(), filepath.Join(dir, FileName)) {
		t.Fatalf("Open on a read-only file system: %v; want ErrReadOnly naming the file", err)
	}
	after, _ := os.ReadFile(filepath.Join(dir, FileName))
	if !bytes.Equal(before, after) {
		t.Error("the file changed")
	}
	// bondd usage can still read it.
	s, err = Open(dir, StoreOptions{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only Open on a read-only file system: %v", err)
	}
	s.Close()
}

func TestOpenFullFS(t *testing.T) {
	dir := tmpfs(t, "256k")
	fill(t, dir)
	_, err := Open(dir, StoreOptions{})
	if !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "free space") {
		t.Fatalf("Open on a full file system: %v; want ErrNoSpace", err)
	}
	if _, err := os.Stat(filepath.Join(dir, FileName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed create left %s behind: %v", FileName, err)
	}
}

// TestFlushFullFS runs a store until its file system fills: the flush
// fails and is counted, and no count is lost once there is space again.
func TestFlushFullFS(t *testing.T) {
	dir := tmpfs(t, "1m")
	s, err := Open(dir, StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := newTestAccountant(t, s, nil)
	ballast := fill(t, dir)
	var want uint64
	for i := range 2000 { // many paths: the flush must grow the file
		k := Key{"van", "p" + itoa(i)}
		a.feed(k, Counts{UpBytes: 1000}, StatusActive)
		want += 1000
	}
	if err := a.Flush(); !errors.Is(err, syscallENOSPC) {
		t.Fatalf("flush on a full file system: %v; want ENOSPC", err)
	}
	if a.Stats().FlushFails != 1 {
		t.Errorf("flush failures %d", a.Stats().FlushFails)
	}
	os.Remove(ballast)
	if err := a.Flush(); err != nil {
		t.Fatalf("flush after freeing space: %v", err)
	}
	recs, _ := s.loadPeriods()
	var got uint64
	for _, r := range recs {
		got += r.Total.UpBytes
	}
	if got != want {
		t.Errorf("stored %d bytes, want %d", got, want)
	}
}

// fill writes a file until dir's file system is full; it returns its path.
func fill(t *testing.T, dir string) string {
	t.Helper()
	name := filepath.Join(dir, "ballast")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			return name
		}
	}
}

// TestOpenDamagedBytes damages a good store at random places, one byte
// each time: Open (or the accountant's first read) either refuses it
// (ErrCorrupt, with the advice) or opens it, and nothing crashes; a flush
// to a store it opened works or fails with ErrCorrupt.
func TestOpenDamagedBytes(t *testing.T) {
	s, dir := newStore(t)
	a := newTestAccountant(t, s, nil)
	for i := range 200 {
		a.feed(Key{"van", "p" + itoa(i)}, Counts{UpBytes: 1000}, StatusActive)
	}
	a.Flush()
	s.Close()
	good, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	refused := 0
	for range 300 {
		b := bytes.Clone(good)
		b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
		d := t.TempDir()
		os.WriteFile(filepath.Join(d, FileName), b, 0o600)
		s, err := Open(d, StoreOptions{})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("damaged store: %v; want ErrCorrupt", err)
			}
			refused++
			continue
		}
		if _, err := s.loadPeriods(); err != nil {
			t.Logf("opened, then: %v", err)
		}
		a, err := NewAccountant(Options{Store: s, Source: func(yield func(Sample)) {
			yield(Sample{Key: Key{"van", "p7"}, Counts: Counts{UpBytes: 1}})
		}})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "--reset-state") {
				t.Fatalf("opened, then: %v; want ErrCorrupt", err)
			}
			refused++
			s.Close()
			continue
		}
		a.Step()
		if err := a.Flush(); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Errorf("opened, then the flush: %v", err)
		}
		s.Close()
	}
	t.Logf("%d of 300 damaged stores refused", refused)
}
