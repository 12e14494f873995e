package status

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/bondd/bondd/internal/usage"
)

func TestPrintUsage(t *testing.T) {
	day := func(d int) time.Time { return time.Date(2026, 12, d, 0, 0, 0, 0, time.UTC) }
	r := &Report{Role: "edge", Usage: &Usage{File: "/var/lib/bondd/usage.db", Paths: []usage.PathUsage{
		{Bond: "van-17", Path: "cell-a", PeriodStart: day(1), PeriodEnd: day(31).AddDate(0, 0, 1), Period: usage.Counts{UpBytes: 9.12e9, DownBytes: 3.31e9},
			Budget: "20GB/month", BudgetBytes: 20e9, Direction: "both", UsedBytes: 12.43e9, Share: 0.6215, ProjectedBytes: 15.3e9, ProjectedShare: 0.765},
		{Bond: "van-17", Path: "starlink", PeriodStart: day(1), PeriodEnd: day(31).AddDate(0, 0, 1), Period: usage.Counts{UpBytes: 41.2e9}},
	}, Stats: usage.Stats{LastError: "no space left on device"}}}
	var b bytes.Buffer
	Print(&b, r, time.Now())
	for _, want := range []string{
		"usage (wire bytes, /var/lib/bondd/usage.db):",
		"van-17/cell-a: period 2026-12-01 to 2027-01-01: up 9.12 GB, down 3.31 GB; budget 20GB/month (both): 12.4 GB used, 62.2 %, projected 15.3 GB (76 %) at the period's end",
		"van-17/starlink: period 2026-12-01 to 2027-01-01: up 41.2 GB, down 0 B\n",
		"writing the store fails (counts kept in memory): no space left on device",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in:\n%s", want, b.String())
		}
	}
}
