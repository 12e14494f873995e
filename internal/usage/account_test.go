package usage

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bondd/bondd/policy"
)

var lte = Key{"van-1", "lte"}

func date(y int, m time.Month, d, h int) time.Time { return time.Date(y, m, d, h, 0, 0, 0, time.UTC) }

func month(gb int64) Budget {
	return Budget{Budget: policy.Budget{Bytes: gb * 1e9, Period: policy.PeriodMonth}}
}

// TestResume: a restart resumes the period's count, its totals and its
// history from the store; the new process's counters start at 0.
func TestResume(t *testing.T) {
	s, dir := newStore(t)
	budgets := map[Key]Budget{lte: month(20)}
	a := newTestAccountant(t, s, budgets)
	a.feed(lte, Counts{UpBytes: 3e9, DownBytes: 1e9, UpPackets: 10}, StatusActive)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err := Open(dir, StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var fedUsed int64
	b := newTestAccountant(t, s, budgets)
	b.o.OnBudget = func(_ Key, used int64, _ time.Time) { fedUsed = used }
	b.feed(lte, Counts{UpBytes: 1e9}, StatusActive) // a new process: its counters from 0
	u := b.Usage()
	if len(u) != 1 || u[0].UsedBytes != 5e9 || u[0].Total.UpBytes != 4e9 || u[0].Period.DownBytes != 1e9 {
		t.Fatalf("after restart: %+v", u)
	}
	if fedUsed != 5e9 {
		t.Errorf("budget fed %d, want 5e9", fedUsed)
	}
	if u[0].Share != 0.25 {
		t.Errorf("share %v", u[0].Share)
	}
}

// TestRollOver walks one path through period boundaries, restarts and
// clock steps; each step gives the period and its count.
func TestRollOver(t *testing.T) {
	reset15 := Budget{Budget: policy.Budget{Bytes: 1e9, Period: policy.PeriodMonth, ResetDay: 15}}
	day := Budget{Budget: policy.Budget{Bytes: 1e9, Period: policy.PeriodDay}, Direction: DirDown}
	type step struct {
		at      time.Time
		restart bool
		add     Counts
		start   time.Time // want
		used    uint64
	}
	tests := []struct {
		name   string
		budget Budget
		steps  []step
	}{
		{"month forward", month(1), []step{
			{at: date(2026, 11, 30, 23), add: Counts{UpBytes: 100}, start: date(2026, 11, 1, 0), used: 100},
			{at: date(2026, 12, 1, 0), add: Counts{UpBytes: 7}, start: date(2026, 12, 1, 0), used: 7},
		}},
		{"month roll while stopped", month(1), []step{
			{at: date(2026, 11, 20, 10), add: Counts{UpBytes: 100}, start: date(2026, 11, 1, 0), used: 100},
			{at: date(2027, 1, 3, 10), restart: true, add: Counts{DownBytes: 5}, start: date(2027, 1, 1, 0), used: 5},
		}},
		{"reset day 15 across a restart", reset15, []step{
			{at: date(2026, 12, 14, 23), add: Counts{UpBytes: 100}, start: date(2026, 11, 15, 0), used: 100},
			{at: date(2026, 12, 14, 23), restart: true, add: Counts{UpBytes: 1}, start: date(2026, 11, 15, 0), used: 101},
			{at: date(2026, 12, 15, 0), restart: true, add: Counts{UpBytes: 2}, start: date(2026, 12, 15, 0), used: 2},
			{at: date(2027, 1, 10, 0), add: Counts{UpBytes: 3}, start: date(2026, 12, 15, 0), used: 5},
		}},
		{"clock step forward and back", month(1), []step{
			{at: date(2026, 12, 5, 8), add: Counts{UpBytes: 100}, start: date(2026, 12, 1, 0), used: 100},
			{at: date(2027, 3, 1, 8), add: Counts{UpBytes: 10}, start: date(2027, 3, 1, 0), used: 10},   // a wrong step forward
			{at: date(2026, 12, 5, 9), add: Counts{UpBytes: 1}, start: date(2026, 12, 1, 0), used: 101}, // corrected: December's count is back
			{at: date(2026, 12, 5, 9), restart: true, add: Counts{UpBytes: 1}, start: date(2026, 12, 1, 0), used: 102},
		}},
		{"clock not set at boot", month(1), []step{
			{at: date(2026, 12, 5, 8), add: Counts{UpBytes: 100}, start: date(2026, 12, 1, 0), used: 100},
			{at: date(1970, 1, 1, 0), restart: true, add: Counts{UpBytes: 5}, start: date(2026, 12, 1, 0), used: 105},
			{at: date(2026, 12, 5, 9), add: Counts{UpBytes: 5}, start: date(2026, 12, 1, 0), used: 110},
		}},
		{"day, downlink only", day, []step{
			{at: date(2026, 12, 5, 23), add: Counts{UpBytes: 100, DownBytes: 50}, start: date(2026, 12, 5, 0), used: 50},
			{at: date(2026, 12, 6, 0), add: Counts{DownBytes: 1}, start: date(2026, 12, 6, 0), used: 1},
			{at: date(2026, 12, 5, 23), add: Counts{DownBytes: 1}, start: date(2026, 12, 5, 0), used: 51},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, dir := newStore(t)
			budgets := map[Key]Budget{lte: tt.budget}
			a := newTestAccountantAt(t, s, budgets, tt.steps[0].at)
			for i, st := range tt.steps {
				if st.restart {
					a.Close()
					s.Close()
					var err error
					if s, err = Open(dir, StoreOptions{}); err != nil {
						t.Fatal(err)
					}
					defer s.Close()
					a = newTestAccountantAt(t, s, budgets, st.at)
				}
				a.set(st.at)
				a.feed(lte, st.add, StatusActive)
				a.Flush()
				u := a.Usage()[0]
				if !u.PeriodStart.Equal(st.start) || u.UsedBytes != st.used {
					t.Fatalf("step %d at %s: period %s used %d; want %s used %d", i, st.at, u.PeriodStart, u.UsedBytes, st.start, st.used)
				}
			}
		})
	}
}

func TestBudgetBoundsResetDay(t *testing.T) {
	b := policy.Budget{Bytes: 1, Period: policy.PeriodMonth, ResetDay: 15}
	for _, tt := range []struct{ at, start, end time.Time }{
		{date(2026, 12, 14, 23), date(2026, 11, 15, 0), date(2026, 12, 15, 0)},
		{date(2026, 12, 15, 0), date(2026, 12, 15, 0), date(2027, 1, 15, 0)},
		{date(2027, 1, 2, 0), date(2026, 12, 15, 0), date(2027, 1, 15, 0)},
	} {
		if s, e := b.Bounds(tt.at); !s.Equal(tt.start) || !e.Equal(tt.end) {
			t.Errorf("Bounds(%s) = %s, %s; want %s, %s", tt.at, s, e, tt.start, tt.end)
		}
	}
}

// TestAlertsOnce: 90 % and 100 % are logged once per period, also across
// a restart, and counted.
func TestAlertsOnce(t *testing.T) {
	s, dir := newStore(t)
	var logs bytes.Buffer
	budgets := map[Key]Budget{lte: {Budget: policy.Budget{Bytes: 1000, Period: policy.PeriodMonth}}}
	a := newTestAccountant(t, s, budgets)
	a.log = slog.New(slog.NewJSONHandler(&logs, nil))
	for range 12 {
		a.feed(lte, Counts{UpBytes: 100}, StatusActive)
	}
	if st := a.Stats(); st.Alerts90 != 1 || st.Alerts100 != 1 {
		t.Fatalf("alerts %+v", st)
	}
	if n := strings.Count(logs.String(), `"msg":"budget threshold crossed"`); n != 2 {
		t.Fatalf("%d alert lines:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), `"threshold_pct":90`) || !strings.Contains(logs.String(), `"path":"lte"`) {
		t.Errorf("alert fields missing:\n%s", logs.String())
	}
	a.Close()
	s.Close()
	s, _ = Open(dir, StoreOptions{})
	defer s.Close()
	b := newTestAccountant(t, s, budgets)
	b.feed(lte, Counts{UpBytes: 100}, StatusActive)
	if st := b.Stats(); st.Alerts90+st.Alerts100 != 0 {
		t.Errorf("alerts logged again after a restart: %+v", st)
	}
}

// TestCounterRestart: a tunnel counter that goes down (a path recreated)
// counts from 0 again rather than wrapping.
func TestCounterRestart(t *testing.T) {
	s, _ := newStore(t)
	a := newTestAccountant(t, s, nil)
	a.feed(lte, Counts{UpBytes: 1000}, StatusActive)
	a.mu.Lock()
	a.samples[lte] = Sample{Key: lte, Counts: Counts{UpBytes: 10}}
	a.mu.Unlock()
	a.Step()
	if u := a.Usage()[0]; u.Total.UpBytes != 1010 {
		t.Errorf("total %d, want 1010", u.Total.UpBytes)
	}
}

// TestReport groups the history by hour, day and month, from the store
// alone and from the running accountant (with unflushed counts).
func TestReport(t *testing.T) {
	s, _ := newStore(t)
	a := newTestAccountantAt(t, s, map[Key]Budget{lte: month(1)}, date(2026, 11, 30, 22))
	for _, at := range []time.Time{date(2026, 11, 30, 22), date(2026, 11, 30, 23), date(2026, 12, 1, 0), date(2026, 12, 2, 5)} {
		a.set(at)
		a.feed(lte, Counts{UpBytes: 100, DownBytes: 10}, StatusActive)
		a.feed(Key{"van-1", "sat"}, Counts{UpBytes: 1}, StatusDegraded)
	}
	a.Flush()
	a.feed(lte, Counts{UpBytes: 5}, StatusActive) // not flushed
	q := Query{Since: date(2026, 11, 1, 0), Until: date(2027, 1, 1, 0)}
	for _, tt := range []struct {
		by      string
		rows    int
		lteUp   uint64 // the first lte row's
		running bool
	}{{"hour", 8, 100, false}, {"day", 6, 200, false}, {"month", 4, 200, false}, {"month", 4, 200, true}} {
		q.By = tt.by
		var rep *Report
		var err error
		if tt.running {
			rep, err = a.Report(q)
		} else {
			rep, err = s.Report(q, map[Key]Budget{lte: month(1)}, a.clock())
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Rows) != tt.rows || rep.Rows[0].Path != "lte" || rep.Rows[0].UpBytes != tt.lteUp {
			t.Errorf("by %s (running %v): %+v", tt.by, tt.running, rep.Rows)
		}
		if tt.running && rep.Rows[2].UpBytes != 205 {
			t.Errorf("running report misses the unflushed bytes: %+v", rep.Rows)
		}
		for _, f := range []string{"", "json", "csv"} {
			var out bytes.Buffer
			if err := Write(&out, rep, f); err != nil || out.Len() == 0 {
				t.Errorf("Write %q: %v", f, err)
			}
			if f == "json" && !json.Valid(out.Bytes()) {
				t.Errorf("invalid JSON")
			}
			if f == "csv" && strings.Count(out.String(), "\n") != tt.rows+1 {
				t.Errorf("csv:\n%s", out.String())
			}
		}
	}
	u := a.Usage()
	if u[0].Path != "lte" || u[0].UsedBytes != 225 || !u[0].PeriodStart.Equal(date(2026, 12, 1, 0)) {
		t.Errorf("usage %+v", u[0])
	}
	if u[0].ProjectedBytes <= u[0].UsedBytes {
		t.Errorf("projection %d not above the use %d early in the month", u[0].ProjectedBytes, u[0].UsedBytes)
	}
}

// TestPrune: history older than the retention is removed at a flush.
func TestPrune(t *testing.T) {
	s, _ := newStore(t)
	a := newTestAccountantAt(t, s, nil, date(2025, 1, 1, 0))
	a.feed(lte, Counts{UpBytes: 1}, StatusActive)
	a.Flush()
	a.set(date(2026, 1, 15, 0))
	a.feed(lte, Counts{UpBytes: 1}, StatusActive)
	a.Flush() // 12.5 months: kept
	a.set(date(2026, 2, 15, 0))
	a.feed(lte, Counts{UpBytes: 1}, StatusActive)
	a.Flush()
	var n int
	s.hours(time.Time{}, date(2030, 1, 1, 0), func(hourRow) { n++ })
	s.openHours(time.Time{}, date(2030, 1, 1, 0), func(hourRow) { n++ })
	if n != 2 {
		t.Errorf("%d hours kept, want 2 (the 2025-01 hour pruned after 13 months)", n)
	}
}

// BenchmarkFlush16x1000 is a concentrator's flush: 16 paths of 1000 bonds,
// each with new counts in the current hour.
func BenchmarkFlush16x1000(b *testing.B) {
	dir := b.TempDir()
	s, err := Open(dir, StoreOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	keys := make([]Key, 0, 16000)
	for bond := range 1000 {
		for p := range 16 {
			keys = append(keys, Key{"edge-" + itoa(bond), "path-" + itoa(p)})
		}
	}
	samples := make([]Sample, len(keys))
	for i, k := range keys {
		samples[i].Key = k
	}
	now := date(2026, 12, 5, 8)
	a, err := NewAccountant(Options{Store: s, Now: func() time.Time { return now }, Source: func(yield func(Sample)) {
		for i := range samples {
			yield(samples[i])
		}
	}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		for i := range samples {
			samples[i].Counts.UpBytes += 1500
			samples[i].Counts.DownBytes += 80
		}
		a.Step()
		now = now.Add(time.Second)
		b.StartTimer()
		c0 := cpuTime()
		if err := a.Flush(); err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - c0
	}
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/flush")
}

// BenchmarkStep16x1000 is one sample of a concentrator's 16 paths of 1000
// bonds (taken once a second), the source's own cost aside.
func BenchmarkStep16x1000(b *testing.B) {
	s, err := Open(b.TempDir(), StoreOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	samples := make([]Sample, 0, 16000)
	for bond := range 1000 {
		for p := range 16 {
			samples = append(samples, Sample{Key: Key{"edge-" + itoa(bond), "path-" + itoa(p)}, Status: StatusActive})
		}
	}
	now := date(2026, 12, 5, 8)
	a, err := NewAccountant(Options{Store: s, Now: func() time.Time { return now }, Source: func(yield func(Sample)) {
		for i := range samples {
			samples[i].Counts.UpBytes += 1500
			yield(samples[i])
		}
	}})
	if err != nil {
		b.Fatal(err)
	}
	a.Step()
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Second)
		a.Step()
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestClosedHoursSpread: when an hour ends, a flush moves at most
// historyPerFlush closed hours to the history; the others stay in their
// records, so a crash right after loses none, and reports see them all.
func TestClosedHoursSpread(t *testing.T) {
	s, dir := newStore(t)
	a := newTestAccountantAt(t, s, nil, date(2026, 12, 5, 8))
	n := historyPerFlush + 200
	for i := range n {
		a.feed(Key{"edge", "p" + itoa(i)}, Counts{UpBytes: 10}, StatusActive)
	}
	a.Flush()
	a.set(date(2026, 12, 5, 9))
	for i := range n {
		a.feed(Key{"edge", "p" + itoa(i)}, Counts{UpBytes: 1}, StatusActive)
	}
	a.Flush() // moves historyPerFlush closed hours; then a crash
	s.Close()
	s, err := Open(dir, StoreOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var history int
	s.hours(date(2026, 12, 5, 8), date(2026, 12, 5, 9), func(hourRow) { history++ })
	if history != historyPerFlush {
		t.Errorf("%d closed hours in the history after one flush, want %d", history, historyPerFlush)
	}
	rep, err := s.Report(Query{Since: date(2026, 12, 5, 0), Until: date(2026, 12, 6, 0), By: "hour"}, nil, date(2026, 12, 5, 9))
	if err != nil {
		t.Fatal(err)
	}
	var at8, up8 int
	for _, r := range rep.Rows {
		if r.Start.Equal(date(2026, 12, 5, 8)) {
			at8++
			up8 += int(r.UpBytes)
		}
	}
	if at8 != n || up8 != 10*n {
		t.Errorf("hour 8 in the report: %d rows, %d bytes; want %d rows, %d bytes", at8, up8, n, 10*n)
	}
}
