package policy

import (
	"errors"
	"testing"
	"time"
)

func TestParseBudget(t *testing.T) {
	tests := []struct {
		in   string
		want Budget
		err  bool
	}{
		{"2GB/month", Budget{Bytes: 2e9, Period: PeriodMonth}, false},
		{"500MB/day", Budget{Bytes: 500e6, Period: PeriodDay}, false},
		{"10GiB/week", Budget{Bytes: 10 << 30, Period: PeriodWeek}, false},
		{" 1.5 gb / Month ", Budget{Bytes: 1.5e9, Period: PeriodMonth}, false},
		{"1kB/day", Budget{Bytes: 1000, Period: PeriodDay}, false},
		{"1KiB/day", Budget{Bytes: 1024, Period: PeriodDay}, false},
		{"3TB/month", Budget{Bytes: 3e12, Period: PeriodMonth}, false},
		{"1B/day", Budget{Bytes: 1, Period: PeriodDay}, false},
		{"2GB", Budget{}, true},            // no period
		{"2GB/year", Budget{}, true},       // unknown period
		{"2/month", Budget{}, true},        // no unit
		{"2Gbit/month", Budget{}, true},    // bits are not a unit
		{"GB/month", Budget{}, true},       // no amount
		{"-2GB/month", Budget{}, true},     // negative
		{"0GB/month", Budget{}, true},      // zero
		{"0.1B/day", Budget{}, true},       // rounds to 0
		{"1.2.3GB/day", Budget{}, true},    // two points
		{"1e3GB/day", Budget{}, true},      // no exponents
		{"9999999TiB/day", Budget{}, true}, // above MaxBudgetBytes
		{"2GB/month/day", Budget{}, true},
		{"", Budget{}, true},
	}
	for _, tt := range tests {
		got, err := ParseBudget(tt.in)
		if tt.err {
			if err == nil || !errors.Is(err, ErrBudgetSyntax) {
				t.Errorf("ParseBudget(%q) = %v, %v; want an ErrBudgetSyntax error", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseBudget(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
	for _, b := range []Budget{{Bytes: 2e9, Period: PeriodMonth}, {Bytes: 10 << 30, Period: PeriodWeek}, {Bytes: 1500, Period: PeriodDay}, {Bytes: 1, Period: PeriodDay}} {
		if s := b.String(); s == "" {
			t.Errorf("%+v has no text", b)
		} else if back, err := ParseBudget(s); err != nil || back != b {
			t.Errorf("%+v → %q → %+v, %v", b, s, back, err)
		}
	}
}

// FuzzParseBudget checks that ParseBudget never panics and that what it
// accepts prints back to the same budget.
func FuzzParseBudget(f *testing.F) {
	for _, s := range []string{"2GB/month", "500MB/day", "10GiB/week", "1.5 gb/Month", "1B/day", "0.5KiB/week", "/", "9.9999999999TB/day"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseBudget(s)
		if err != nil {
			return
		}
		if b.Bytes < 1 || b.Bytes > MaxBudgetBytes || b.Period == PeriodNone {
			t.Fatalf("ParseBudget(%q) = %+v: out of range", s, b)
		}
		back, err := ParseBudget(b.String())
		if err != nil || back != b {
			t.Fatalf("ParseBudget(%q) = %+v, printed %q, parsed back %+v, %v", s, b, b.String(), back, err)
		}
	})
}

func TestPeriodBounds(t *testing.T) {
	at := time.Date(2025, 3, 5, 13, 4, 5, 0, time.FixedZone("CET", 3600)) // Wednesday 12:04:05 UTC
	tests := []struct {
		p          Period
		start, end string
	}{
		{PeriodDay, "2025-03-05T00:00:00Z", "2025-03-06T00:00:00Z"},
		{PeriodWeek, "2025-03-03T00:00:00Z", "2025-03-10T00:00:00Z"},
		{PeriodMonth, "2025-03-01T00:00:00Z", "2025-04-01T00:00:00Z"},
	}
	for _, tt := range tests {
		s, e := tt.p.Bounds(at)
		if s.Format(time.RFC3339) != tt.start || e.Format(time.RFC3339) != tt.end {
			t.Errorf("%s: [%s, %s), want [%s, %s)", tt.p, s.Format(time.RFC3339), e.Format(time.RFC3339), tt.start, tt.end)
		}
	}
	// A Sunday belongs to the week that started the Monday before.
	if s, _ := PeriodWeek.Bounds(time.Date(2025, 3, 9, 23, 0, 0, 0, time.UTC)); s.Day() != 3 {
		t.Errorf("Sunday 9 March is in the week from %v, want Monday 3 March", s)
	}
}

func TestPathBudget(t *testing.T) {
	day1 := time.Date(2025, 3, 5, 23, 59, 0, 0, time.UTC)
	p := NewPath("m", map[string]string{"cost_class": "metered"}, 8)
	p.SetConnected(true, day1)
	p.OnBytes(5000, day1) // no budget: only the total
	if used, limit := p.BudgetUsed(day1); used != 0 || limit != 0 || p.BytesSent() != 5000 {
		t.Fatalf("without a budget: used %d of %d, total %d", used, limit, p.BytesSent())
	}
	p.SetBudget(Budget{Bytes: 10_000, Period: PeriodDay})
	p.OnBytes(8999, day1)
	if p.BudgetExhausted(day1) || p.Status(day1) != StatusActive || p.StatusReason(day1) != "" {
		t.Fatalf("at 89.99 %%: exhausted %v, status %v", p.BudgetExhausted(day1), p.Status(day1))
	}
	p.OnBytes(1, day1)
	if st, why := p.StatusAndReason(day1); st != StatusDegraded || why != ReasonBudget {
		t.Fatalf("at 90 %%: StatusAndReason %v %q, want DEGRADED budget", st, why)
	}
	if !p.BudgetExhausted(day1) || p.Status(day1) != StatusDegraded || p.LinkStatus(day1) != StatusActive || p.StatusReason(day1) != ReasonBudget {
		t.Fatalf("at 90 %%: exhausted %v, status %v, link %v, reason %q", p.BudgetExhausted(day1), p.Status(day1), p.LinkStatus(day1), p.StatusReason(day1))
	}
	day2 := day1.Add(2 * time.Minute) // past midnight UTC
	p.OnReceive(day2)
	if used, _ := p.BudgetUsed(day2); used != 0 || p.Status(day2) != StatusActive {
		t.Fatalf("next day: used %d, status %v; want a fresh budget", used, p.Status(day2))
	}
	p.OnBytes(100, day2)
	if used, _ := p.BudgetUsed(day2); used != 100 || p.BytesSent() != 5000+9000+100 {
		t.Fatalf("next day: used %d, total %d", used, p.BytesSent())
	}
	if a := testing.AllocsPerRun(100, func() { p.OnBytes(1200, day2); p.Status(day2) }); a != 0 {
		t.Fatalf("OnBytes and Status allocate %v times", a)
	}
}

// TestBudgetUsedAnnotation: the rules' budget_used is the fullest connected
// budgeted path's share, in permille, fed from outside (SetBudgetUsage);
// paths without a budget or down do not count.
func TestBudgetUsedAnnotation(t *testing.T) {
	now := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
	_, end := PeriodMonth.Bounds(now)
	a, b, free := NewPath("a", nil, 8), NewPath("b", nil, 8), NewPath("free", nil, 8)
	a.SetBudget(Budget{Bytes: 1000, Period: PeriodMonth})
	b.SetBudget(Budget{Bytes: 2000, Period: PeriodMonth, ResetDay: 15})
	paths := []*Path{a, b, free}
	if _, any := BudgetUsed(paths, now); any {
		t.Error("budget_used present with every path down")
	}
	for _, p := range paths {
		p.SetConnected(true, now)
	}
	a.SetBudgetUsage(500, end)
	b.SetBudgetUsage(1700, end)
	free.OnBytes(1e9, now)
	if v, any := BudgetUsed(paths, now); !any || v != 850 {
		t.Errorf("budget_used = %d, %v; want 850 (b's 1700/2000)", v, any)
	}
	a.OnBytes(5000, now) // fed from outside: OnBytes no longer counts against it
	if u, _ := a.BudgetUsed(now); u != 500 {
		t.Errorf("a used %d after OnBytes, want the fed 500", u)
	}
	b.SetConnected(false, now)
	if v, _ := BudgetUsed(paths, now); v != 500 {
		t.Errorf("budget_used = %d with b down, want 500", v)
	}
	if v, _ := BudgetUsed(paths, end); v != 0 {
		t.Errorf("budget_used = %d in the next period, want 0", v)
	}
}
