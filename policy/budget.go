package policy

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Cost budgets. A path may carry a byte budget per calendar period (config
// `budget: 2GB/month`). Every datagram byte the path sends counts against
// the current period; once BudgetDegradeFraction of the budget is used the
// path reports DEGRADED, so default choices use it only when no ACTIVE path
// is left, while a rule that prefers the path (or an affinity that points
// at it) may still use it: the budget is advice like every directive, and
// delivery never blocks on it, also past 100 %.

// BudgetDegradeFraction is the share of its byte budget after which a path
// is reported DEGRADED (reason ReasonBudget): 0.9, so that default traffic
// leaves it before the budget is spent and what remains serves the rules
// that insist on the path.
const BudgetDegradeFraction = 0.9

// MaxBudgetBytes is the largest byte budget ParseBudget accepts, 2^62 bytes.
const MaxBudgetBytes = 1 << 62

// Period is the calendar period of a byte budget, in UTC.
type Period uint8

// Budget periods. Each starts at 00:00 UTC: every day, every Monday
// (ISO 8601 weeks), or on the first day of every month.
const (
	PeriodNone Period = iota // no budget
	PeriodDay
	PeriodWeek
	PeriodMonth
)

var periodNames = [...]string{PeriodNone: "", PeriodDay: "day", PeriodWeek: "week", PeriodMonth: "month"}

// String returns day, week or month, or "" for PeriodNone.
func (p Period) String() string {
	if int(p) < len(periodNames) {
		return periodNames[p]
	}
	return ""
}

// Bounds returns the UTC period holding t: [start, end). PeriodNone returns
// zero times.
func (p Period) Bounds(t time.Time) (start, end time.Time) {
	t = t.UTC()
	y, m, d := t.Date()
	switch p {
	case PeriodDay:
		start = time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 0, 1)
	case PeriodWeek:
		back := (int(t.Weekday()) + 6) % 7 // days since Monday
		start = time.Date(y, m, d-back, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 0, 7)
	case PeriodMonth:
		start = time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 1, 0)
	}
	return time.Time{}, time.Time{}
}

// Budget is a byte budget per calendar period. The zero value is no budget.
type Budget struct {
	// Bytes is the budget of one period, 1 to MaxBudgetBytes bytes.
	Bytes int64
	// Period is the calendar period the budget renews on.
	Period Period
	// ResetDay is the day of the month, 1 to MaxResetDay, on which a
	// PeriodMonth budget renews at 00:00 UTC (a plan whose month starts
	// on the 15th); 0 means the 1st. It is ignored for days and weeks.
	ResetDay int
}

// MaxResetDay is the largest Budget.ResetDay: 28, so that every month has
// the day.
const MaxResetDay = 28

// Bounds returns the UTC budget period holding t, [start, end): the
// period's calendar bounds, with a month starting on ResetDay. The zero
// Budget returns zero times.
func (b Budget) Bounds(t time.Time) (start, end time.Time) {
	if b.Period != PeriodMonth || b.ResetDay <= 1 {
		return b.Period.Bounds(t)
	}
	t = t.UTC()
	y, m, d := t.Date()
	if d < b.ResetDay {
		m--
	}
	start = time.Date(y, m, b.ResetDay, 0, 0, 0, 0, time.UTC)
	return start, start.AddDate(0, 1, 0)
}

// IsZero reports whether b is no budget.
func (b Budget) IsZero() bool { return b.Bytes == 0 || b.Period == PeriodNone }

// byteUnits are the units ParseBudget accepts, largest first within each
// family, with String's spelling.
var byteUnits = [...]struct {
	name  string
	bytes int64
}{
	{"TiB", 1 << 40}, {"TB", 1e12}, {"GiB", 1 << 30}, {"GB", 1e9},
	{"MiB", 1 << 20}, {"MB", 1e6}, {"KiB", 1 << 10}, {"KB", 1e3}, {"B", 1},
}

// String returns b in ParseBudget's form with the largest unit that divides
// it exactly ("2GB/month", "10GiB/week", "1500B/day"), or "" for no budget.
func (b Budget) String() string {
	if b.IsZero() {
		return ""
	}
	for _, u := range byteUnits {
		if b.Bytes%u.bytes == 0 {
			return strconv.FormatInt(b.Bytes/u.bytes, 10) + u.name + "/" + b.Period.String()
		}
	}
	return "" // unreachable: B divides everything
}

// ErrBudgetSyntax is wrapped by the errors of ParseBudget.
var ErrBudgetSyntax = errors.New("expected a byte budget per period, like 2GB/month, 500MB/day or 10GiB/week")

// ParseBudget parses "AMOUNT UNIT/PERIOD": AMOUNT a decimal number (a
// fraction is allowed: 1.5GB), UNIT one of B, KB (or kB), MB, GB, TB
// (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), PERIOD day,
// week or month. Units and periods are case-insensitive; spaces around
// the parts are ignored. The result is rounded to whole bytes and must be
// 1 to MaxBudgetBytes.
func ParseBudget(s string) (Budget, error) {
	amount, per, ok := strings.Cut(s, "/")
	if !ok {
		return Budget{}, fmt.Errorf("%q: %w", s, ErrBudgetSyntax)
	}
	var b Budget
	switch strings.ToLower(strings.TrimSpace(per)) {
	case "day":
		b.Period = PeriodDay
	case "week":
		b.Period = PeriodWeek
	case "month":
		b.Period = PeriodMonth
	default:
		return Budget{}, fmt.Errorf("%q: period %q is not day, week or month: %w", s, strings.TrimSpace(per), ErrBudgetSyntax)
	}
	amount = strings.TrimSpace(amount)
	i := 0
	for i < len(amount) && (amount[i] >= '0' && amount[i] <= '9' || amount[i] == '.') {
		i++
	}
	num, unit := amount[:i], strings.TrimSpace(amount[i:])
	if num == "" || strings.Count(num, ".") > 1 || num == "." {
		return Budget{}, fmt.Errorf("%q: amount %q is not a decimal number: %w", s, num, ErrBudgetSyntax)
	}
	scale := int64(0)
	for _, u := range byteUnits {
		if strings.EqualFold(unit, u.name) {
			scale = u.bytes
		}
	}
	if scale == 0 {
		return Budget{}, fmt.Errorf("%q: unit %q is not B, KB, MB, GB, TB, KiB, MiB, GiB or TiB: %w", s, unit, ErrBudgetSyntax)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return Budget{}, fmt.Errorf("%q: %w", s, ErrBudgetSyntax)
	}
	v := math.Round(f * float64(scale))
	if v < 1 || v > MaxBudgetBytes {
		return Budget{}, fmt.Errorf("%q: the budget must be 1 byte to 4EiB: %w", s, ErrBudgetSyntax)
	}
	b.Bytes = int64(v)
	return b, nil
}

// budgetState counts a path's bytes and holds its budget. All atomics: the
// path's writers count and the scheduler and stats read concurrently.
type budgetState struct {
	limit  atomic.Int64  // bytes per period; 0: no budget
	period atomic.Int32  // Period
	used   atomic.Int64  // bytes counted in the period that ends at end
	end    atomic.Int64  // unix ns: end of used's period; 0 before the first byte
	total  atomic.Uint64 // bytes since NewPath
	// fed is set once SetBudgetUsage has fed the count from outside (the
	// wire-byte accounting of internal/usage): OnBytes then no longer
	// counts against the budget.
	fed      atomic.Bool
	resetDay atomic.Int32 // Budget.ResetDay
}

// SetBudget sets the path's byte budget (the zero Budget removes it) and
// starts its count at 0. Call it before the path carries traffic; it is
// safe for concurrent use but a concurrent OnBytes may be lost.
func (p *Path) SetBudget(b Budget) {
	if b.IsZero() {
		b = Budget{}
	}
	p.budget.period.Store(int32(b.Period))
	p.budget.resetDay.Store(int32(b.ResetDay))
	p.budget.limit.Store(b.Bytes)
	p.budget.end.Store(0)
	p.budget.used.Store(0)
}

// Budget returns the path's byte budget; the zero Budget when it has none.
func (p *Path) Budget() Budget {
	return Budget{Bytes: p.budget.limit.Load(), Period: Period(p.budget.period.Load()), ResetDay: int(p.budget.resetDay.Load())}
}

// SetBudgetUsage sets the bytes counted against the budget in the period
// ending at end, from a count kept outside the path (the wire bytes of
// both directions that internal/usage keeps across restarts). From the
// first call on, OnBytes no longer counts against the budget. Safe for
// concurrent use; used below 0 is taken as 0.
func (p *Path) SetBudgetUsage(used int64, end time.Time) {
	p.budget.fed.Store(true)
	p.budget.end.Store(end.UnixNano())
	p.budget.used.Store(max(used, 0))
}

// BudgetUsedFraction returns the share of the byte budget used in the
// period holding now: 0 without a budget, above 1 past it.
func (p *Path) BudgetUsedFraction(now time.Time) float64 {
	used, limit := p.BudgetUsed(now)
	if limit <= 0 {
		return 0
	}
	return float64(used) / float64(limit)
}

// OnBytes counts n bytes sent on the path at now: against the budget's
// current UTC period, which starts over at each calendar boundary, and in
// the path's total. The tunnel counts datagram payload bytes (bondd header
// plus inner packet, parity included), not QUIC and UDP overhead. Safe for
// concurrent use; allocation-free.
func (p *Path) OnBytes(n int, now time.Time) {
	p.budget.total.Add(uint64(n))
	if p.budget.limit.Load() == 0 || p.budget.fed.Load() {
		return
	}
	if e := p.budget.end.Load(); now.UnixNano() >= e {
		_, end := p.Budget().Bounds(now)
		if p.budget.end.CompareAndSwap(e, end.UnixNano()) {
			p.budget.used.Store(0) // a byte counted by a racing writer may be lost here
		}
	}
	p.budget.used.Add(int64(n))
}

// BytesSent returns the bytes counted by OnBytes since NewPath.
func (p *Path) BytesSent() uint64 { return p.budget.total.Load() }

// BudgetUsed returns the bytes counted in the budget period holding now and
// the budget of that period (0, 0 without a budget).
func (p *Path) BudgetUsed(now time.Time) (used, limit int64) {
	limit = p.budget.limit.Load()
	if limit == 0 || now.UnixNano() >= p.budget.end.Load() {
		return 0, limit
	}
	return p.budget.used.Load(), limit
}

// BudgetExhausted reports whether the path has used BudgetDegradeFraction
// of its byte budget in the period holding now (false without a budget).
// Such a path is DEGRADED (reason ReasonBudget).
func (p *Path) BudgetExhausted(now time.Time) bool {
	used, limit := p.BudgetUsed(now)
	return limit > 0 && float64(used) >= BudgetDegradeFraction*float64(limit)
}

// BudgetUsed returns the rules' budget_used annotation at now: the largest
// share of its byte budget, in permille, that a connected path with a
// budget has used in its period, and whether any connected path has a
// budget. Allocation-free; it reads a few atomics per path.
func BudgetUsed(paths []*Path, now time.Time) (permille uint64, any bool) {
	for _, p := range paths {
		if p.budget.limit.Load() == 0 || p.LinkStatus(now) == StatusUnavailable {
			continue
		}
		any = true
		permille = max(permille, uint64(math.Round(1000*p.BudgetUsedFraction(now))))
	}
	return permille, any
}
