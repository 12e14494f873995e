package config

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bondd/bondd/internal/usage"
)

func TestStateKeys(t *testing.T) {
	dir := configDir(t)
	up := func(extra string) string {
		return strings.Replace(edgeOK, "{name: cell-a, interface: wwan0}", "{name: cell-a, interface: wwan0"+extra+"}", 1)
	}
	tests := []struct{ name, in, want string }{
		{"defaults", edgeOK, ""},
		{"relative", edgeOK + "state_dir: state\n", ""},
		{"all set", up(", budget: 20GB/month, budget_direction: down, budget_reset_day: 15") + "state_dir: /srv/bondd\nstate_flush: 2s\nusage_retention_months: 24\n", ""},
		{"flush too long", edgeOK + "state_flush: 11s\n", "bondd.yaml:10: state_flush: expected a duration from 100ms to 10s, got 11s"},
		{"flush too short", edgeOK + "state_flush: 10ms\n", "state_flush: expected a duration from 100ms to 10s"},
		{"retention", edgeOK + "usage_retention_months: 121\n", "bondd.yaml:10: usage_retention_months: expected 1 to 120 months, got 121"},
		{"direction", up(", budget: 1GB/day, budget_direction: sideways"), `edge.uplinks[0].budget_direction: expected up, down or both, got "sideways"`},
		{"reset day 29", up(", budget: 1GB/month, budget_reset_day: 29"), "edge.uplinks[0].budget_reset_day: expected a day of the month from 1 to 28, got 29"},
		{"reset day of a weekly budget", up(", budget: 1GB/week, budget_reset_day: 3"), `budget_reset_day: applies to a monthly budget (like budget: 20GB/month); this uplink's budget is "1GB/week"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseWith("bondd.yaml", []byte(tc.in), Options{Dir: dir})
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if tc.name == "all set" {
					u := c.Edge.Uplinks[0]
					if c.StateDirOrDefault() != "/srv/bondd" || c.StateFlush != 2*time.Second || c.UsageRetentionMonths != 24 ||
						u.Budget.ResetDay != 15 || u.UsageBudget().Direction != usage.DirDown {
						t.Errorf("decoded %+v %+v", c, u)
					}
				} else if tc.name == "relative" {
					if c.StateDir != filepath.Join(dir, "state") {
						t.Errorf("relative state_dir: %q, want it under the config's directory", c.StateDir)
					}
				} else if c.StateDirOrDefault() != DefaultStateDir {
					t.Errorf("state_dir default %q", c.StateDirOrDefault())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error:\n%v\nwant it to contain:\n%s", err, tc.want)
			}
		})
	}
}
