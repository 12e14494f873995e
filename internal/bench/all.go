package bench

// bondd bench all: every run whose tables and plots docs/evaluation.md
// shows, one after the other, each into its own folder under --out, and
// an index (all.md, all.json) giving per table the folder, the command
// that reproduces it alone, the commit it ran at, how long it took and
// whether it failed. bondd-plot then draws the plots of each folder
// (docs/evaluation.md, Running it).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"
)

// All is the scenario name of the whole evaluation.
const All = "all"

// allStep is one run of the evaluation.
type allStep struct {
	dir      string        // folder under --out
	scenario string        // Options.Scenario
	duration time.Duration // traffic time per configuration (Options.Duration)
	runs     int           // Options.Runs
	sweep    bool          // Options.Sweep
	section  string        // the section of docs/evaluation.md that shows it
}

// allSteps lists the evaluation's runs in the order bench all runs them,
// with the durations and runs docs/evaluation.md reports (paper 2's
// protocol of 10 runs of 100 s would take about 4 hours for S1 alone on
// the 2-core machine; the page says where fewer were run).
func allSteps() []allStep {
	return []allStep{
		{"s1", S1, 30 * time.Second, 5, false, "S1, vehicular"},
		{"s1-sweep", S1, 15 * time.Second, 3, true, "S1 sensitivity: α × k"},
		{"s1-vary", S1Vary, 40 * time.Second, 5, false, "Adaptive against fixed FEC where loss varies"},
		{"s2", S2, DefaultDuration, 1, false, "S2, paper 2's setting"},
		{"s2-isl", S2ISL, DefaultDuration, 1, false, "S2-ISL"},
		{"lanes", Lanes, DefaultDuration, 1, false, "One lossy link (docs/performance.md)"},
		{"capacity", Capacity, 30 * time.Second, 1, false, "Capacity"},
		{"video", Video, 10 * time.Second, 1, false, "Legacy video (docs/video.md)"},
		{"scale", Scale, ScaleDefaultDuration, 1, false, "Scale (docs/performance.md)"},
		{"faults", Faults, 0, 1, false, "Fault matrix (docs/operations.md)"},
	}
}

// allEntry is one step in all.json.
type allEntry struct {
	Dir      string  `json:"dir"`
	Section  string  `json:"section"`
	Command  string  `json:"command"`
	Commit   string  `json:"commit"`
	Seconds  float64 `json:"seconds"`
	Error    string  `json:"error,omitempty"`
	Finished string  `json:"finished"`
}

// runAll runs the steps of allSteps whose folder is in o.Configs (all
// when empty) with o's seed, traces, mode and rate control; o.Duration
// and o.Runs, when set, replace every step's. A failed step is recorded
// and the next one runs; runAll returns an error naming the failed steps.
func runAll(ctx context.Context, o Options, out io.Writer) error {
	var entries []allEntry
	var failed []string
	root := o.Out
	for _, s := range allSteps() {
		if !o.selected(s.dir) {
			continue
		}
		so := o
		so.Scenario, so.Sweep, so.Configs = s.scenario, s.sweep, nil
		so.Out = filepath.Join(root, s.dir)
		so.Duration, so.Runs = s.duration, s.runs
		if o.Duration > 0 {
			so.Duration = o.Duration
		}
		if o.Runs > 0 {
			so.Runs = o.Runs
		}
		if s.scenario == S2 || s.scenario == S2ISL {
			so.Align = true
		}
		fmt.Fprintf(out, "\n=== bench all: %s (%s) ===\n", s.dir, so.commandLine())
		start := time.Now()
		err := Run(ctx, so, out)
		e := allEntry{Dir: s.dir, Section: s.section, Command: so.commandLine() + " --out " + filepath.ToSlash(so.Out), Commit: buildCommit(),
			Seconds: time.Since(start).Seconds(), Finished: time.Now().UTC().Format(time.RFC3339)}
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			e.Error = err.Error()
			failed = append(failed, s.dir)
			fmt.Fprintf(out, "  %s failed: %v\n", s.dir, err)
		}
		entries = append(entries, e)
		if err := writeAllIndex(root, entries); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("bench all: %s failed (see %s)", strings.Join(failed, ", "), filepath.Join(root, "all.md"))
	}
	return nil
}

// allStepNames lists the step folders (the names --configs takes with
// bench all).
func allStepNames() []string {
	var ns []string
	for _, s := range allSteps() {
		ns = append(ns, s.dir)
	}
	return ns
}

// writeAllIndex writes dir/all.json and dir/all.md.
func writeAllIndex(dir string, entries []allEntry) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("# bondd bench all\n\nEach folder holds results.md, results.json and plots.json; `bondd-plot FOLDER` draws its plots.\n\n")
	b.WriteString("| folder | docs/evaluation.md section | command | commit | minutes | result |\n| --- | --- | --- | --- | ---: | --- |\n")
	for _, e := range entries {
		res := "ok"
		if e.Error != "" {
			res = "failed: " + strings.ReplaceAll(e.Error, "|", "/")
		}
		fmt.Fprintf(&b, "| %s | %s | `%s` | %s | %.1f | %s |\n", e.Dir, e.Section, e.Command, e.Commit, e.Seconds/60, res)
	}
	if err := os.WriteFile(filepath.Join(dir, "all.md"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	return writeJSONFile(filepath.Join(dir, "all.json"), entries)
}

// buildCommit returns the commit the running binary was built from: the
// VCS stamp of the build (go build), else `git describe --always --dirty`
// in the working directory (go run), else "".
func buildCommit() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev, dirty string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "-dirty"
				}
			}
		}
		if rev != "" {
			return rev[:min(len(rev), 7)] + dirty
		}
	}
	b, err := exec.Command("git", "describe", "--always", "--dirty", "--abbrev=7").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// writeJSONFile writes v as indented JSON to path.
func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
