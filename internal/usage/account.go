package usage

import (
	"bytes"
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bondd/bondd/policy"
)

// Defaults and bounds of Options.
const (
	// DefaultFlush is how often the counters are written to the store.
	DefaultFlush = 10 * time.Second
	// MaxFlush is the longest flush interval: a SIGKILL loses at most
	// this much counting.
	MaxFlush = 10 * time.Second
	// MinFlush is the shortest flush interval.
	MinFlush = 100 * time.Millisecond
	// DefaultSample is how often the tunnel's counters are read, so that
	// budgets and alerts follow within a second.
	DefaultSample = time.Second
	// DefaultRetentionMonths is how long the hourly history is kept.
	DefaultRetentionMonths = 13
	// MaxRetentionMonths is the longest retention accepted.
	MaxRetentionMonths = 120
	// historyPerFlush is how many closed hours one flush adds to the
	// history: when an hour ends on a concentrator with 16,000 paths,
	// writing all of them at once takes about 150 ms of CPU; at 1,000 a
	// flush (about 15 ms) they go in over under 3 minutes, each kept in
	// its path's record until then, so a crash loses none.
	historyPerFlush = 1000
)

// plausibleSince is the earliest wall clock time taken as set: a device
// without a battery-backed clock boots in 1970 until NTP or GPS sets it,
// and a step back to before this keeps the current budget period.
var plausibleSince = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Status is a path's state in a Sample, for the seconds ACTIVE, DEGRADED
// and down of the history.
type Status uint8

// Path states.
const (
	StatusDown Status = iota // UNAVAILABLE, or not known
	StatusActive
	StatusDegraded
)

// Sample is one path's counters as the tunnel reports them: cumulative
// since the tunnel created the path (a counter lower than the previous
// sample's is taken as restarted from 0). The *Ms fields are ignored: the
// Accountant times the states from Status.
type Sample struct {
	Key    Key
	Counts Counts
	Status Status
}

// Direction says which wire bytes count against a budget.
type Direction uint8

// Directions; the zero value counts both.
const (
	DirBoth Direction = iota
	DirUp
	DirDown
)

// String returns both, up or down.
func (d Direction) String() string { return [...]string{"both", "up", "down"}[min(d, 2)] }

// ParseDirection parses up, down or both ("" is both).
func ParseDirection(s string) (Direction, error) {
	switch strings.ToLower(s) {
	case "", "both":
		return DirBoth, nil
	case "up":
		return DirUp, nil
	case "down":
		return DirDown, nil
	}
	return DirBoth, fmt.Errorf("%q: expected up, down or both", s)
}

// bytes returns the wire bytes of c that count in direction d.
func (d Direction) bytes(c Counts) uint64 {
	switch d {
	case DirUp:
		return c.UpBytes
	case DirDown:
		return c.DownBytes
	}
	return c.UpBytes + c.DownBytes
}

// Budget is a path's byte budget and the direction it counts.
type Budget struct {
	policy.Budget
	Direction Direction
}

// bounds returns the period holding t: the budget's, or the calendar
// month without one (the period the status reports).
func (b Budget) bounds(t time.Time) (time.Time, time.Time) {
	if b.IsZero() {
		return policy.PeriodMonth.Bounds(t)
	}
	return b.Bounds(t)
}

// Options configure an Accountant.
type Options struct {
	// Store is where the counts are kept. Required; the Accountant does
	// not close it.
	Store *Store
	// Source calls yield with every path's Sample. Required; it is called
	// from one goroutine at a time, every Sample interval.
	Source func(yield func(Sample))
	// Budgets are the paths' byte budgets; a path not in it has none.
	Budgets map[Key]Budget
	// OnBudget, if not nil, gets after every sample each budgeted path's
	// bytes used in the period ending at end (policy.Path.SetBudgetUsage).
	OnBudget func(k Key, used int64, end time.Time)
	// Flush is how often the counts are written, MinFlush to MaxFlush.
	// Default DefaultFlush.
	Flush time.Duration
	// Sample is how often Source is read. Default DefaultSample, at most
	// Flush.
	Sample time.Duration
	// RetentionMonths is how long hourly history is kept, 1 to
	// MaxRetentionMonths. Default DefaultRetentionMonths.
	RetentionMonths int
	// Logger gets the alerts and flush failures; nil discards.
	Logger *slog.Logger
	// Now is the wall clock; default time.Now. For tests.
	Now func() time.Time
}

// Accountant adds the tunnel's counters to the store: see the package doc.
// Its methods are safe for concurrent use.
type Accountant struct {
	o    Options
	log  *slog.Logger
	stop chan struct{}
	wg   sync.WaitGroup

	// mu guards all following.
	mu        sync.Mutex
	entries   map[Key]*entry
	order     []*entry // entries sorted by encoded key, for the flush
	lastPrune time.Time
	failing   bool // the last flush failed (logged once until one succeeds)

	alerts90, alerts100 atomic.Uint64
	flushes, flushFails atomic.Uint64
	flushNs             atomic.Int64           // duration of the last successful flush
	lastErr             atomic.Pointer[string] // the last flush's error; nil after a success
}

// entry is one path's state in the Accountant.
type entry struct {
	key    Key
	kb     []byte // appendKey(key)
	budget Budget
	last   Counts    // the last cumulative Sample
	lastAt time.Time // when it was taken; zero before the first
	status Status
	rec    periodRecord // the period, totals and open hour, unflushed counts included
	pend   []hourRow    // closed hours not yet in the store's history
	dirty  bool         // rec or pend changed since the last flush
}

// NewAccountant returns an Accountant resuming from the store's period
// records. It returns an error for missing or out-of-range options or when
// the store cannot be read.
func NewAccountant(o Options) (*Accountant, error) {
	if o.Store == nil || o.Source == nil {
		return nil, fmt.Errorf("usage: Store and Source are required")
	}
	if o.Flush == 0 {
		o.Flush = DefaultFlush
	}
	if o.Flush < MinFlush || o.Flush > MaxFlush {
		return nil, fmt.Errorf("usage: flush interval %s out of range %s to %s", o.Flush, MinFlush, MaxFlush)
	}
	if o.Sample <= 0 || o.Sample > o.Flush {
		o.Sample = min(DefaultSample, o.Flush)
	}
	if o.RetentionMonths == 0 {
		o.RetentionMonths = DefaultRetentionMonths
	}
	if o.RetentionMonths < 1 || o.RetentionMonths > MaxRetentionMonths {
		return nil, fmt.Errorf("usage: retention %d months out of range 1 to %d", o.RetentionMonths, MaxRetentionMonths)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	recs, err := o.Store.loadPeriods()
	if err != nil { // a page Open's check did not reach or read differently
		return nil, &OpenError{File: o.Store.File(), Cause: ErrCorrupt, Err: err, Hint: hints[ErrCorrupt]}
	}
	a := &Accountant{o: o, log: log, stop: make(chan struct{}), entries: make(map[Key]*entry, len(recs))}
	for k, r := range recs {
		a.add(&entry{key: k, budget: o.Budgets[k], rec: r})
	}
	for k, b := range o.Budgets {
		if a.entries[k] == nil {
			a.add(&entry{key: k, budget: b})
		}
	}
	now := o.Now()
	for _, e := range a.entries {
		a.roll(e, now) // a period that ended while the daemon was down
		if e.budget.Bytes > 0 && o.OnBudget != nil {
			o.OnBudget(e.key, int64(e.rec.Used), e.rec.End)
		}
	}
	return a, nil
}

// add adds e to entries and order. a.mu is held (or a is new).
func (a *Accountant) add(e *entry) {
	e.kb = appendKey(nil, e.key)
	a.entries[e.key] = e
	i, _ := slices.BinarySearchFunc(a.order, e.kb, func(x *entry, kb []byte) int { return bytes.Compare(x.kb, kb) })
	a.order = slices.Insert(a.order, i, e)
}

// Start samples and flushes in the background until Close.
func (a *Accountant) Start() {
	a.wg.Go(a.routineTick)
}

// routineTick samples every Sample interval and flushes every Flush.
func (a *Accountant) routineTick() {
	sample := time.NewTicker(a.o.Sample)
	defer sample.Stop()
	last := time.Now()
	for {
		select {
		case <-a.stop:
			return
		case <-sample.C:
		}
		a.Step()
		if time.Since(last) >= a.o.Flush-a.o.Sample/2 {
			last = time.Now()
			a.Flush()
		}
	}
}

// Close stops the background work, takes a last sample and flushes it
// (SIGTERM). It returns the flush's error; the store stays open.
func (a *Accountant) Close() error {
	select {
	case <-a.stop:
	default:
		close(a.stop)
	}
	a.wg.Wait()
	a.Step()
	return a.Flush()
}

// Step reads the Source once and adds what changed since the last Step.
func (a *Accountant) Step() {
	now := a.o.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.o.Source(func(s Sample) { a.observe(s, now) })
}

// observe adds sample s taken at now. a.mu is held.
func (a *Accountant) observe(s Sample, now time.Time) {
	e := a.entries[s.Key]
	if e == nil {
		e = &entry{key: s.Key, budget: a.o.Budgets[s.Key]}
		a.add(e)
	}
	d := delta(e.last, s.Counts)
	d.ActiveMs, d.DegradedMs, d.DownMs = 0, 0, 0
	if !e.lastAt.IsZero() && now.After(e.lastAt) {
		ms := uint64(now.Sub(e.lastAt).Milliseconds())
		switch e.status {
		case StatusActive:
			d.ActiveMs = ms
		case StatusDegraded:
			d.DegradedMs = ms
		default:
			d.DownMs = ms
		}
	}
	e.last, e.lastAt, e.status = s.Counts, now, s.Status
	a.roll(e, now)
	if d.IsZero() {
		a.budgetFeed(e)
		return
	}
	e.rec.Period.Add(d)
	e.rec.Total.Add(d)
	e.rec.Used += e.budget.Direction.bytes(d)
	if hour := now.UTC().Truncate(time.Hour); !hour.Equal(e.rec.HourStart) {
		if !e.rec.Hour.IsZero() { // the hour closes: it stays in the record until the history has it
			if !e.rec.Prev.IsZero() { // the previous one is still waiting (the store failing): memory only
				e.pend = append(e.pend, hourRow{Hour: e.rec.PrevStart, Key: e.key, C: e.rec.Prev})
			}
			e.rec.PrevStart, e.rec.Prev = e.rec.HourStart, e.rec.Hour
		}
		e.rec.HourStart, e.rec.Hour = hour, Counts{}
	}
	e.rec.Hour.Add(d)
	e.dirty = true
	a.alert(e, now)
	a.budgetFeed(e)
}

// delta returns cur - last per counter, or cur where it went down (the
// tunnel's counter restarted).
func delta(last, cur Counts) Counts {
	var d Counts
	f, l, c := d.fields(), last.fields(), cur.fields()
	for i := range f {
		if *c[i] >= *l[i] {
			*f[i] = *c[i] - *l[i]
		} else {
			*f[i] = *c[i]
		}
	}
	return d
}

// budgetFeed passes e's budget count to OnBudget.
func (a *Accountant) budgetFeed(e *entry) {
	if e.budget.Bytes > 0 && a.o.OnBudget != nil {
		a.o.OnBudget(e.key, int64(e.rec.Used), e.rec.End)
	}
}

// roll moves e to the period holding now when it is not in it. Forward
// past the end of the period, the count restarts (the counts of a new
// period so far, after clock steps back and forth, come from the
// history). A step back to before the period's start moves to the earlier
// period and takes its count from the history, unless the clock is not
// plausible (before plausibleSince: not set yet), when e stays put. A
// change of the configured period does as a step back. a.mu is held.
func (a *Accountant) roll(e *entry, now time.Time) {
	start, end := e.budget.bounds(now)
	if start.Equal(e.rec.Start) && end.Equal(e.rec.End) {
		return
	}
	if !e.rec.End.IsZero() && now.Before(e.rec.Start) && now.Before(plausibleSince) {
		return
	}
	fresh := e.rec.End.IsZero()
	e.rec.Start, e.rec.End, e.rec.Period, e.rec.Used, e.rec.Alerts = start, end, Counts{}, 0, 0
	e.dirty = true
	if fresh || e.budget.Bytes == 0 {
		return // no budget: the period is only for the report; no history scan
	}
	sum, err := a.o.Store.sumHours(e.key, start, end)
	if err != nil {
		a.log.Warn("usage: reading the history for the new budget period", "path", e.key.Path, "err", err)
	}
	for _, p := range slices.Concat(e.pend, []hourRow{{Hour: e.rec.HourStart, C: e.rec.Hour}, {Hour: e.rec.PrevStart, C: e.rec.Prev}}) {
		if !p.Hour.Before(start) && p.Hour.Before(end) {
			sum.Add(p.C)
		}
	}
	e.rec.Period, e.rec.Used = sum, e.budget.Direction.bytes(sum)
	if e.budget.Bytes > 0 { // the alerts of this period were logged before
		if s := float64(e.rec.Used) / float64(e.budget.Bytes); s >= 1 {
			e.rec.Alerts = alert90 | alert100
		} else if s >= policy.BudgetDegradeFraction {
			e.rec.Alerts = alert90
		}
	}
}

// alert logs, once per period, e's budget crossing 90 % and 100 %. a.mu is
// held.
func (a *Accountant) alert(e *entry, now time.Time) {
	if e.budget.Bytes <= 0 {
		return
	}
	share := float64(e.rec.Used) / float64(e.budget.Bytes)
	for _, t := range []struct {
		bit   uint8
		level float64
		n     *atomic.Uint64
	}{{alert90, policy.BudgetDegradeFraction, &a.alerts90}, {alert100, 1, &a.alerts100}} {
		if share < t.level || e.rec.Alerts&t.bit != 0 {
			continue
		}
		e.rec.Alerts |= t.bit
		e.dirty = true
		t.n.Add(1)
		u := a.usageOf(e, now)
		a.log.Warn("budget threshold crossed", "bond", e.key.Bond, "path", e.key.Path, "threshold_pct", int(100*t.level),
			"used_bytes", u.UsedBytes, "budget_bytes", u.BudgetBytes, "budget", e.budget.String(), "direction", e.budget.Direction.String(),
			"period_end", e.rec.End, "projected_bytes", u.ProjectedBytes)
	}
}

// Flush writes the counts not yet in the store, in one transaction, and
// prunes history older than the retention about once an hour. On an error
// (a full file system) nothing is lost: the counts stay in memory and the
// next Flush tries again; the first failure is logged, and the recovery.
func (a *Accountant) Flush() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.o.Now()
	w := &write{periods: make([]keyedRecord, 0, len(a.order))}
	var moved []*entry // whose closed hour goes to the history in this flush
	for _, e := range a.order {
		if !e.dirty {
			continue
		}
		w.hours = append(w.hours, e.pend...)
		if !e.rec.Prev.IsZero() && len(moved) < historyPerFlush {
			w.hours = append(w.hours, hourRow{Hour: e.rec.PrevStart, Key: e.key, C: e.rec.Prev})
			moved = append(moved, e)
		}
		w.periods = append(w.periods, keyedRecord{e.kb, &e.rec}) // a.mu is held until apply returns
	}
	saved := make([]hourRow, len(moved))
	for i, e := range moved { // written without it, in the same transaction as its history row
		saved[i] = hourRow{Hour: e.rec.PrevStart, C: e.rec.Prev}
		e.rec.PrevStart, e.rec.Prev = time.Time{}, Counts{}
	}
	if now.Sub(a.lastPrune) >= time.Hour {
		w.prune = now.UTC().AddDate(0, -a.o.RetentionMonths, 0).Truncate(time.Hour)
	}
	if len(w.hours) == 0 && len(w.periods) == 0 && w.prune.IsZero() {
		return nil
	}
	slices.SortFunc(w.hours, func(x, y hourRow) int {
		if c := x.Hour.Compare(y.Hour); c != 0 {
			return c
		}
		return cmp.Or(strings.Compare(x.Key.Bond, y.Key.Bond), strings.Compare(x.Key.Path, y.Key.Path))
	})
	t0 := time.Now()
	if err := a.o.Store.apply(w); err != nil {
		for i, e := range moved {
			e.rec.PrevStart, e.rec.Prev = saved[i].Hour, saved[i].C
		}
		a.flushFails.Add(1)
		msg := err.Error()
		a.lastErr.Store(&msg)
		if !a.failing {
			a.failing = true
			a.log.Error("usage: writing the store failed; counts are kept in memory and written when it works again", "file", a.o.Store.File(), "err", err)
		}
		return fmt.Errorf("usage store %s: %w", a.o.Store.File(), err)
	}
	a.flushNs.Store(int64(time.Since(t0)))
	a.lastErr.Store(nil)
	a.flushes.Add(1)
	if a.failing {
		a.failing = false
		a.log.Info("usage: writing the store works again", "file", a.o.Store.File())
	}
	if !w.prune.IsZero() {
		a.lastPrune = now
	}
	for _, e := range a.order {
		e.pend, e.dirty = e.pend[:0], !e.rec.Prev.IsZero() // a closed hour still to write
	}
	return nil
}

// Stats are the Accountant's own counters, for the metrics.
type Stats struct {
	Alerts90   uint64        `json:"alerts_90"`  // 90 % crossings logged
	Alerts100  uint64        `json:"alerts_100"` // 100 % crossings logged
	Flushes    uint64        `json:"flushes"`    // flushes written
	FlushFails uint64        `json:"flush_failures"`
	LastFlush  time.Duration `json:"last_flush_ns"`        // duration of the last successful flush
	LastError  string        `json:"last_error,omitempty"` // the last flush's error, "" after a success
}

// File returns the store's file.
func (a *Accountant) File() string { return a.o.Store.File() }

// Since returns when the store was created, the start of the totals.
func (a *Accountant) Since() time.Time { return a.o.Store.Created() }

// Stats returns the Accountant's counters.
func (a *Accountant) Stats() Stats {
	st := Stats{Alerts90: a.alerts90.Load(), Alerts100: a.alerts100.Load(), Flushes: a.flushes.Load(),
		FlushFails: a.flushFails.Load(), LastFlush: time.Duration(a.flushNs.Load())}
	if e := a.lastErr.Load(); e != nil {
		st.LastError = *e
	}
	return st
}
