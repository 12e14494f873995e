package rules

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bondd/bondd/internal/testkit"
)

// reloads records OnReload calls.
type reloads struct {
	mu   sync.Mutex
	errs []error
	sets []*Set
}

func (r *reloads) record(s *Set, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sets, r.errs = append(r.sets, s), append(r.errs, err)
}

func (r *reloads) last() (*Set, error, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.sets) == 0 {
		return nil, nil, 0
	}
	return r.sets[len(r.sets)-1], r.errs[len(r.errs)-1], len(r.sets)
}

const (
	ruleA = "rules:\n  - {id: a, priority: 1, actions: {priority: 1}}\n"
	ruleB = "rules:\n  - {id: b, priority: 1, actions: {priority: 2}}\n"
	ruleC = "rules:\n  - {id: c, priority: 1, actions: {priority: 3}}\n"
	// broken fails at line 3.
	broken = "rules:\n  - id: x\n    priority: nope\n    actions: {priority: 1}\n"
)

// write writes a file in place (truncate, then write).
func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// replace writes a file atomically: a temporary file renamed over it.
func replace(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	write(t, tmp, content)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// settle rewrites path with the contents it already has and waits until
// the watcher has looked at them and logged that nothing changed: every
// file event before it has been handled by then.
func settle(t *testing.T, log *testkit.SyncBuffer, path, content string) {
	t.Helper()
	const unchanged = "rule file unchanged"
	before := strings.Count(log.String(), unchanged)
	replace(t, path, content)
	testkit.WaitFor(t, "the watcher to see unchanged contents", 5*time.Second, func() bool { return strings.Count(log.String(), unchanged) > before })
}

func TestWatcherReloads(t *testing.T) {
	testkit.CheckLeaks(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	write(t, path, ruleA)
	var log testkit.SyncBuffer
	var rl reloads
	w, err := NewWatcher(WatcherOptions{
		Path:     path,
		Logger:   slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnReload: rl.record,
		Debounce: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.Current().Rule(0).ID != "a" {
		t.Fatal("initial set")
	}
	current := func(id string) func() bool {
		return func() bool { return w.Current().Rule(0).ID == id }
	}

	// A write in place.
	write(t, path, ruleB)
	testkit.WaitFor(t, "in-place write", 5*time.Second, current("b"))

	// An editor's rename-write: a new file renamed over the old one.
	tmp := filepath.Join(dir, ".rules.yaml.swp")
	write(t, tmp, ruleC)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "rename-write", 5*time.Second, current("c"))

	// A broken file keeps the running set and reports file:line.
	_, _, n := rl.last()
	replace(t, path, broken)
	testkit.WaitFor(t, "failed reload", 5*time.Second, func() bool { _, _, m := rl.last(); return m > n })
	s, err, _ := rl.last()
	var e *Error
	if !errors.As(err, &e) || e.Line != 3 || !strings.HasPrefix(err.Error(), path+":3: ") {
		t.Errorf("reload error %v", err)
	}
	if s != w.Current() || w.Current().Rule(0).ID != "c" {
		t.Error("the old set did not stay in force")
	}
	testkit.WaitFor(t, "error log", 5*time.Second, func() bool {
		return strings.Contains(log.String(), "reload failed") && strings.Contains(log.String(), "line=3")
	})

	// Explicit reloads (SIGHUP).
	if err := w.Reload(); err == nil {
		t.Error("Reload of a broken file succeeded")
	}
	replace(t, path, ruleA)
	testkit.WaitFor(t, "fixed file", 5*time.Second, current("a"))
	if err := w.Reload(); err != nil {
		t.Error(err)
	}

	// Events that change nothing do not reload.
	_, _, n = rl.last()
	write(t, filepath.Join(dir, "other.txt"), "x")
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(path, time.Now(), time.Now())
	settle(t, &log, path, ruleA)
	if _, _, m := rl.last(); m != n {
		t.Errorf("%d reloads for unchanged contents", m-n)
	}

	// Removing the file keeps the set; putting it back reloads.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "reload of a removed file", 5*time.Second, func() bool { _, err, m := rl.last(); return m > n && err != nil })
	replace(t, path, ruleB)
	testkit.WaitFor(t, "restored file", 5*time.Second, current("b"))

	// An empty file seen on an event is a write in progress; Reload
	// installs it.
	_, _, n = rl.last()
	empties := strings.Count(log.String(), "rule file is empty")
	write(t, path, "")
	testkit.WaitFor(t, "the watcher to see the empty file", 5*time.Second, func() bool { return strings.Count(log.String(), "rule file is empty") > empties })
	if _, _, m := rl.last(); m != n || w.Current().Len() != 1 {
		t.Error("an empty file was installed on a file event")
	}
	if err := w.Reload(); err != nil || w.Current().Len() != 0 {
		t.Errorf("Reload of an empty file: %v", err)
	}

	attempts, failures := w.Stats()
	if attempts < 7 || failures < 3 {
		t.Errorf("stats: %d attempts, %d failures", attempts, failures)
	}
	for _, want := range []string{"rules: watcher started", "rules: rule set installed"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}
	if err := w.Close(); err != nil {
		t.Error(err)
	}
	w.Close() // idempotent
	if !strings.Contains(log.String(), "rules: watcher stopped") {
		t.Error("no stop log")
	}
	if w.Current() == nil {
		t.Error("Current after Close")
	}
}

// TestWatcherDebounce checks that a burst of writes reloads once or
// twice, not once per write, and ends on the last contents.
func TestWatcherDebounce(t *testing.T) {
	testkit.CheckLeaks(t)
	path := filepath.Join(t.TempDir(), "rules.yaml")
	write(t, path, ruleA)
	var rl reloads
	var log testkit.SyncBuffer
	w, err := NewWatcher(WatcherOptions{Path: path, OnReload: rl.record, Debounce: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := 0; i < 10; i++ {
		write(t, path, []string{ruleB, ruleC}[i%2])
	}
	testkit.WaitFor(t, "burst", 5*time.Second, func() bool { return w.Current().Rule(0).ID == "c" })
	settle(t, &log, path, ruleC)
	if _, _, n := rl.last(); n > 3 {
		t.Errorf("%d reloads for a burst of 10 writes", n)
	}
}

func TestWatcherStart(t *testing.T) {
	dir := t.TempDir()
	_, err := NewWatcher(WatcherOptions{Path: filepath.Join(dir, "missing.yaml")})
	var e *Error
	if !errors.As(err, &e) || !strings.Contains(err.Error(), "missing.yaml: no such file") {
		t.Errorf("missing file: %v", err)
	}
	path := filepath.Join(dir, "r.yaml")
	write(t, path, broken)
	if _, err := NewWatcher(WatcherOptions{Path: path}); err == nil || !strings.Contains(err.Error(), path+":3:") {
		t.Errorf("broken file: %v", err)
	}
	if _, err := NewWatcher(WatcherOptions{}); err == nil {
		t.Error("no path accepted")
	}
	write(t, path, strings.Repeat("#", MaxFileBytes+1))
	if _, err := NewWatcher(WatcherOptions{Path: path}); err == nil || !strings.Contains(err.Error(), "file larger than") {
		t.Errorf("large file: %v", err)
	}
}

// TestWatcherSetClasses recompiles against new traffic classes.
func TestWatcherSetClasses(t *testing.T) {
	cs := testClasses(t)
	path := filepath.Join(t.TempDir(), "r.yaml")
	write(t, path, rule1("    priority: 1", "    match: {tier: gold}", "    actions: {duplicate: 2}"))
	w, err := NewWatcher(WatcherOptions{Path: path, Compile: Options{Classes: cs}, NoWatch: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	first := w.Current()
	if err := w.SetClasses(nil); err == nil || !strings.Contains(err.Error(), `unknown key "tier"`) {
		t.Errorf("SetClasses(nil): %v", err)
	}
	if w.Current() != first {
		t.Error("a failed SetClasses replaced the set")
	}
	if err := w.SetClasses(cs); err != nil || w.Current() == first || w.Current().Classes() != cs {
		t.Errorf("SetClasses(cs): %v", err)
	}
}

// TestWatcherConcurrentReaders reads the set from several goroutines while
// it is reloaded (meaningful under -race).
func TestWatcherConcurrentReaders(t *testing.T) {
	testkit.CheckLeaks(t)
	path := filepath.Join(t.TempDir(), "r.yaml")
	write(t, path, ruleA)
	w, err := NewWatcher(WatcherOptions{Path: path, NoWatch: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	md := metadata(t, nil, videoPkt(0x41, 1))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var d Directive
			for {
				select {
				case <-stop:
					return
				default:
				}
				w.Current().Evaluate(md, nil, &d)
				if d.Priority < 1 || d.Priority > 3 {
					t.Errorf("directive %v", &d)
					return
				}
			}
		}()
	}
	for i := 0; i < 50; i++ {
		write(t, path, []string{ruleA, ruleB, ruleC}[i%3])
		if err := w.Reload(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
}
