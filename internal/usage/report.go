package usage

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// PathUsage is one path's use of its current period, for bondd status,
// bondd usage and the metrics.
type PathUsage struct {
	Bond        string    `json:"bond"`
	Path        string    `json:"path"`
	PeriodStart time.Time `json:"period_start"`
	PeriodEnd   time.Time `json:"period_end"`
	// Period are the counts of the current period; Total those since the
	// store was created (TotalSince).
	Period     Counts    `json:"period"`
	Total      Counts    `json:"total"`
	TotalSince time.Time `json:"total_since,omitzero"`
	// Budget is the configured budget ("20GB/month"), "" without one;
	// BudgetBytes its bytes; Direction what counts (up, down, both).
	Budget      string `json:"budget,omitempty"`
	BudgetBytes int64  `json:"budget_bytes,omitempty"`
	Direction   string `json:"direction,omitempty"`
	// UsedBytes are the bytes counted against the budget this period;
	// Share UsedBytes/BudgetBytes (0 without a budget).
	UsedBytes uint64  `json:"used_bytes"`
	Share     float64 `json:"share,omitempty"`
	// ProjectedBytes is UsedBytes at the period's end if the period's
	// average rate so far goes on; ProjectedShare its share of the budget.
	ProjectedBytes uint64  `json:"projected_bytes"`
	ProjectedShare float64 `json:"projected_share,omitempty"`
}

// project fills the projection of u at now.
func (u *PathUsage) project(now time.Time) {
	u.ProjectedBytes = u.UsedBytes
	if el, left := now.Sub(u.PeriodStart), u.PeriodEnd.Sub(now); el >= time.Minute && left > 0 {
		u.ProjectedBytes += uint64(float64(u.UsedBytes) / el.Seconds() * left.Seconds())
	}
	if u.BudgetBytes > 0 {
		u.Share = float64(u.UsedBytes) / float64(u.BudgetBytes)
		u.ProjectedShare = float64(u.ProjectedBytes) / float64(u.BudgetBytes)
	}
}

// usageOf returns e's PathUsage at now. a.mu is held.
func (a *Accountant) usageOf(e *entry, now time.Time) PathUsage {
	return pathUsage(e.key, e.rec, e.budget, a.o.Store.Created(), now)
}

// pathUsage builds the PathUsage of record r under budget b at now; a
// period that has ended counts as a new, empty one.
func pathUsage(k Key, r periodRecord, b Budget, since, now time.Time) PathUsage {
	u := PathUsage{Bond: k.Bond, Path: k.Path, PeriodStart: r.Start, PeriodEnd: r.End, Period: r.Period, Total: r.Total,
		TotalSince: since, UsedBytes: r.Used}
	if !b.IsZero() {
		u.Budget, u.BudgetBytes, u.Direction = b.String(), b.Bytes, b.Direction.String()
	}
	if s, e := b.bounds(now); (!now.Before(r.End) || !s.Equal(r.Start)) && !now.Before(plausibleSince) {
		u.PeriodStart, u.PeriodEnd, u.Period, u.UsedBytes = s, e, Counts{}, 0
	}
	u.project(now)
	return u
}

// Usage returns every path's PathUsage now, sorted by bond and path.
func (a *Accountant) Usage() []PathUsage {
	now := a.o.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]PathUsage, 0, len(a.entries))
	for _, e := range a.entries {
		out = append(out, a.usageOf(e, now))
	}
	sortUsage(out)
	return out
}

func sortUsage(us []PathUsage) {
	slices.SortFunc(us, func(x, y PathUsage) int {
		return cmp.Or(strings.Compare(x.Bond, y.Bond), strings.Compare(x.Path, y.Path))
	})
}

// Query selects the history of bondd usage: [Since, Until), grouped By
// hour, day or month (UTC).
type Query struct {
	Since, Until time.Time
	By           string // hour, day or month
}

// ParseBy checks a Query.By value ("" is day).
func ParseBy(s string) (string, error) {
	switch s {
	case "":
		return "day", nil
	case "hour", "day", "month":
		return s, nil
	}
	return "", fmt.Errorf("--by %q: expected hour, day or month", s)
}

// truncate returns the start of t's group.
func (q Query) truncate(t time.Time) time.Time {
	t = t.UTC()
	switch q.By {
	case "hour":
		return t.Truncate(time.Hour)
	case "month":
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// Row is one group of the history: one path's counts from Start.
type Row struct {
	Start time.Time `json:"start"`
	Bond  string    `json:"bond"`
	Path  string    `json:"path"`
	Counts
}

// Report is what bondd usage prints: the history rows and every path's
// current period.
type Report struct {
	Generated time.Time   `json:"generated"`
	By        string      `json:"by"`
	Rows      []Row       `json:"rows"`
	Paths     []PathUsage `json:"paths"`
}

// rowKey groups rows.
type rowKey struct {
	start time.Time
	k     Key
}

// addRow adds c at hour h of k to the groups of q within [Since, Until).
func (q Query) addRow(groups map[rowKey]*Row, h time.Time, k Key, c Counts) {
	if h.Before(q.Since.Truncate(time.Hour)) || !h.Before(q.Until) {
		return
	}
	rk := rowKey{q.truncate(h), k}
	r := groups[rk]
	if r == nil {
		r = &Row{Start: rk.start, Bond: k.Bond, Path: k.Path}
		groups[rk] = r
	}
	r.Counts.Add(c)
}

// sortedRows returns the groups by time, bond and path.
func sortedRows(groups map[rowKey]*Row) []Row {
	rows := make([]Row, 0, len(groups))
	for _, r := range groups {
		rows = append(rows, *r)
	}
	slices.SortFunc(rows, func(x, y Row) int {
		return cmp.Or(x.Start.Compare(y.Start), strings.Compare(x.Bond, y.Bond), strings.Compare(x.Path, y.Path))
	})
	return rows
}

// Report returns the store's history for q and the current period of each
// path (with the budgets given, nil for none), as read from the store
// alone: for bondd usage while no daemon runs.
func (s *Store) Report(q Query, budgets map[Key]Budget, now time.Time) (*Report, error) {
	groups := make(map[rowKey]*Row)
	add := func(r hourRow) { q.addRow(groups, r.Hour, r.Key, r.C) }
	if err := s.hours(q.Since, q.Until, add); err != nil {
		return nil, err
	}
	if err := s.openHours(q.Since, q.Until, add); err != nil {
		return nil, err
	}
	recs, err := s.loadPeriods()
	if err != nil {
		return nil, err
	}
	rep := &Report{Generated: now.UTC(), By: q.By, Rows: sortedRows(groups)}
	for k, r := range recs {
		rep.Paths = append(rep.Paths, pathUsage(k, r, budgets[k], s.Created(), now))
	}
	sortUsage(rep.Paths)
	return rep, nil
}

// Report is Store.Report for a running daemon: the store's history plus
// the counts not yet flushed, and the live period of each path.
func (a *Accountant) Report(q Query) (*Report, error) {
	now := a.o.Now()
	a.mu.Lock()
	groups := make(map[rowKey]*Row)
	for _, e := range a.order {
		for _, p := range e.pend {
			q.addRow(groups, p.Hour, p.Key, p.C)
		}
		e.rec.recordHours(e.key, q.Since, q.Until, func(r hourRow) { q.addRow(groups, r.Hour, r.Key, r.C) })
	}
	a.mu.Unlock()
	if err := a.o.Store.hours(q.Since, q.Until, func(r hourRow) { q.addRow(groups, r.Hour, r.Key, r.C) }); err != nil {
		return nil, err
	}
	return &Report{Generated: now.UTC(), By: q.By, Rows: sortedRows(groups), Paths: a.Usage()}, nil
}

// Write prints rep as a text table, or with format "json" or "csv". CSV
// has the history rows only, one per line, with a header.
func Write(w io.Writer, rep *Report, format string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	case "csv":
		cw := csv.NewWriter(w)
		cw.Write([]string{"start", "bond", "path", "up_bytes", "down_bytes", "up_packets", "down_packets", "datagram_bytes", "lost_packets", "active_s", "degraded_s", "down_s"})
		for _, r := range rep.Rows {
			cw.Write([]string{r.Start.Format(time.RFC3339), r.Bond, r.Path, u(r.UpBytes), u(r.DownBytes), u(r.UpPackets), u(r.DownPackets),
				u(r.DatagramBytes), u(r.LostPackets), u(r.ActiveMs / 1000), u(r.DegradedMs / 1000), u(r.DownMs / 1000)})
		}
		cw.Flush()
		return cw.Error()
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "period\tbond\tpath\tup\tdown\tbudget\tused\tshare\tprojected\tperiod end")
	for _, p := range rep.Paths {
		budget, share, proj := "-", "-", FormatBytes(p.ProjectedBytes)
		if p.BudgetBytes > 0 {
			budget = p.Budget + " (" + p.Direction + ")"
			share = fmt.Sprintf("%.1f %%", 100*p.Share)
			proj += fmt.Sprintf(" (%.0f %%)", 100*p.ProjectedShare)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.PeriodStart.Format(time.DateOnly), p.Bond, p.Path,
			FormatBytes(p.Period.UpBytes), FormatBytes(p.Period.DownBytes), budget, FormatBytes(p.UsedBytes), share, proj, p.PeriodEnd.Format(time.DateOnly))
	}
	tw.Flush()
	if len(rep.Rows) == 0 {
		fmt.Fprintln(w, "\nno history in the range")
		return nil
	}
	fmt.Fprintf(w, "\nhistory by %s (UTC), wire bytes:\n", rep.By)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "start\tbond\tpath\tup\tdown\tpackets up/down\tdatagram\tlost\tactive\tdegraded\tdown")
	layout := map[string]string{"hour": "2006-01-02 15:00", "day": time.DateOnly, "month": "2006-01"}[rep.By]
	for _, r := range rep.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\t%d\t%s\t%s\t%s\n", r.Start.Format(layout), r.Bond, r.Path, FormatBytes(r.UpBytes),
			FormatBytes(r.DownBytes), r.UpPackets, r.DownPackets, FormatBytes(r.DatagramBytes), r.LostPackets,
			ms(r.ActiveMs), ms(r.DegradedMs), ms(r.DownMs))
	}
	return tw.Flush()
}

func u(v uint64) string { return strconv.FormatUint(v, 10) }

func ms(v uint64) string { return (time.Duration(v) * time.Millisecond).Round(time.Second).String() }

// FormatBytes is n in B, kB, MB, GB or TB (powers of 1000, as carriers
// bill), three significant digits.
func FormatBytes(n uint64) string {
	if n < 1000 {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/1000, 0
	for v >= 1000 && i < 3 {
		v /= 1000
		i++
	}
	prec := 2
	if v >= 100 {
		prec = 0
	} else if v >= 10 {
		prec = 1
	}
	return fmt.Sprintf("%.*f %s", prec, v, [...]string{"kB", "MB", "GB", "TB"}[i])
}
