package rules

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/bondd/bondd/classify"
)

// Load reads and compiles a rule file of at most MaxFileBytes. Errors are
// *Error with path as File (Line 0 when the file cannot be read).
func Load(path string, opts Options) (*Set, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return CompileBytes(path, data, opts)
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{File: path, Msg: unwrapPath(err)}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, &Error{File: path, Msg: unwrapPath(err)}
	}
	if len(data) > MaxFileBytes {
		return nil, &Error{File: path, Msg: fmt.Sprintf("file larger than %d bytes", MaxFileBytes)}
	}
	return data, nil
}

func unwrapPath(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// WatcherOptions configure a Watcher.
type WatcherOptions struct {
	// Path is the rule file. Required.
	Path string
	// Compile are the compile options. Optional; SetClasses changes the
	// classes later.
	Compile Options
	// Logger receives lifecycle events (debug), each installed set (info),
	// warnings (warn) and failed reloads (error, with file:line). Optional;
	// nil discards.
	Logger *slog.Logger
	// OnReload, if set, is called after every reload attempt (not the
	// first load) with the set now in force (the new one, or the old one
	// when err is non-nil) and the error. It runs on the goroutine that
	// reloaded, with the reload lock held: it must not call Reload or
	// SetClasses. Optional.
	OnReload func(s *Set, err error)
	// Debounce is how long to wait after the last file event before
	// reloading. Optional; default DefaultDebounce.
	Debounce time.Duration
	// NoWatch turns file watching off: the set changes only on Reload and
	// SetClasses. Optional.
	NoWatch bool
}

// Watcher keeps the current rule Set of a rule file and publishes it
// through an atomic pointer. It reloads the file when it changes (fsnotify
// on the file's directory, so editors that write a new file and rename it
// over the old one are seen; and Kubernetes-style symlink swaps) and when
// Reload is called (the daemon calls it on SIGHUP). File events are
// debounced; an event that leaves the contents unchanged, or the file
// empty (a writer that truncated it and has not written yet), does not
// reload. A file written in place in several pieces may still be read
// half-written if the pieces are further apart than Debounce: replace the
// file by renaming a finished one over it. A reload that fails
// keeps the running set and reports the error with file:line to the logger
// and OnReload. Sessions are not disturbed either way: packets in flight
// finish with the set they loaded.
//
// Current is lock-free and safe for concurrent use; so are the other
// methods. One goroutine, routineWatch, runs until Close.
type Watcher struct {
	path     string
	log      *slog.Logger
	onReload func(*Set, error)
	debounce time.Duration

	cur atomic.Pointer[Set] // the set in force; never nil after NewWatcher

	// mu guards all following, and is held across a reload so that reloads
	// do not interleave.
	mu       sync.Mutex
	classes  *classify.ClassSet
	lastSum  [sha256.Size]byte // contents of the last load attempt
	attempts uint64            // reloads tried (not the first load)
	failures uint64            // reloads that kept the old set

	fsw       *fsnotify.Watcher // nil when not watching
	done      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// NewWatcher loads opts.Path and, unless opts.NoWatch, starts watching
// it. A file that does not load is an error (the daemon should not start
// without its rules); a directory that cannot be watched is logged, and the
// Watcher then reloads only on Reload.
func NewWatcher(opts WatcherOptions) (*Watcher, error) {
	if opts.Path == "" {
		return nil, errors.New("rules: WatcherOptions.Path is required")
	}
	w := &Watcher{
		path:     opts.Path,
		log:      opts.Logger,
		onReload: opts.OnReload,
		debounce: opts.Debounce,
		classes:  opts.Compile.Classes,
		done:     make(chan struct{}),
	}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	if w.debounce <= 0 {
		w.debounce = DefaultDebounce
	}
	data, err := readFile(w.path)
	if err != nil {
		return nil, err
	}
	s, err := CompileBytes(w.path, data, Options{Classes: w.classes})
	if err != nil {
		return nil, err
	}
	w.lastSum = sha256.Sum256(data)
	w.install(s)
	if opts.NoWatch {
		return w, nil
	}
	fsw, err := fsnotify.NewWatcher()
	if err == nil {
		if err = fsw.Add(filepath.Dir(w.path)); err != nil {
			fsw.Close()
		}
	}
	if err != nil {
		w.log.Warn("rules: cannot watch the rule file; it reloads only on SIGHUP", "file", w.path, "err", err)
		return w, nil
	}
	w.fsw = fsw
	w.wg.Add(1)
	go w.routineWatch()
	return w, nil
}

// Current returns the set in force. It never returns nil and takes no
// lock: call it once per packet batch (or per packet).
func (w *Watcher) Current() *Set { return w.cur.Load() }

// Reload reads and compiles the file now and installs the result. On
// failure the running set stays and the error (*Error values with
// file:line, joined) is returned, logged and passed to OnReload.
func (w *Watcher) Reload() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reloadLocked(nil)
}

// SetClasses compiles the file against new traffic classes (label keys are
// numbered per ClassSet) and installs the result. On failure the running
// set stays, compiled against the old classes, so its class and label
// entries may not match as intended until the file is fixed; the error is
// returned.
func (w *Watcher) SetClasses(cs *classify.ClassSet) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.classes = cs
	return w.reloadLocked(nil)
}

// Stats returns the number of reloads tried after the first load and how
// many of them failed.
func (w *Watcher) Stats() (attempts, failures uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.attempts, w.failures
}

// Close stops watching and waits for routineWatch to return. The last set
// stays readable through Current. Close is idempotent.
func (w *Watcher) Close() error {
	var err error
	w.closeOnce.Do(func() {
		close(w.done)
		if w.fsw != nil {
			err = w.fsw.Close()
		}
		w.wg.Wait()
	})
	return err
}

// reloadLocked reloads the file; with onlyIfChanged, it does nothing when
// the contents hash to the last attempt's (a file event that changed
// nothing, such as a chmod or another file in the directory).
func (w *Watcher) reloadLocked(onlyIfChanged *bool) error {
	data, err := readFile(w.path)
	if err == nil && len(data) == 0 && onlyIfChanged != nil {
		// Most likely a writer that truncated the file and has not written
		// it yet; its write will send another event. Reload installs an
		// empty file when asked to.
		w.log.Debug("rules: rule file is empty; waiting for the write to finish", "file", w.path)
		*onlyIfChanged = false
		return nil
	}
	if err == nil {
		sum := sha256.Sum256(data)
		if onlyIfChanged != nil && sum == w.lastSum {
			w.log.Debug("rules: rule file unchanged; nothing to reload", "file", w.path)
			*onlyIfChanged = false
			return nil
		}
		w.lastSum = sum
		var s *Set
		if s, err = CompileBytes(w.path, data, Options{Classes: w.classes}); err == nil {
			w.attempts++
			w.install(s)
			if w.onReload != nil {
				w.onReload(s, nil)
			}
			return nil
		}
	} else {
		w.lastSum = [sha256.Size]byte{} // retry when the file reappears
	}
	w.attempts++
	w.failures++
	attrs := []any{"file", w.path, "err", err}
	var e *Error
	if errors.As(err, &e) && e.Line > 0 {
		attrs = append(attrs, "line", e.Line)
	}
	w.log.Error("rules: reload failed; the running rule set stays in force", attrs...)
	if w.onReload != nil {
		w.onReload(w.cur.Load(), err)
	}
	return err
}

// install publishes s and logs it with its warnings.
func (w *Watcher) install(s *Set) {
	w.cur.Store(s)
	w.log.Info("rules: rule set installed", "file", w.path, "rules", s.Len(), "warnings", len(s.warnings))
	for _, wn := range s.warnings {
		w.log.Warn("rules: "+wn.Msg, "file", wn.File, "line", wn.Line)
	}
}

// routineWatch turns file events into debounced reloads until Close.
func (w *Watcher) routineWatch() {
	defer w.wg.Done()
	w.log.Debug("rules: watcher started", "file", w.path)
	defer w.log.Debug("rules: watcher stopped", "file", w.path)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-w.done:
			return
		case ev, ok := <-w.fsw.Events:
			if !ok {
				return
			}
			if w.relevant(ev) {
				timer.Reset(w.debounce)
			}
		case err, ok := <-w.fsw.Errors:
			if !ok {
				return
			}
			w.log.Warn("rules: file watch error", "file", w.path, "err", err)
		case <-timer.C:
			changed := true
			w.mu.Lock()
			w.reloadLocked(&changed)
			w.mu.Unlock()
		}
	}
}

// relevant reports whether ev may have changed the rule file: an event on
// the file's own name, or on a Kubernetes-style "..data" symlink swap. A
// Chmod alone changes no contents.
func (w *Watcher) relevant(ev fsnotify.Event) bool {
	if ev.Op == fsnotify.Chmod {
		return false
	}
	base := filepath.Base(ev.Name)
	return base == filepath.Base(w.path) || strings.HasPrefix(base, "..")
}
