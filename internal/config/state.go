package config

import (
	"go.yaml.in/yaml/v3"

	"github.com/bondd/bondd/internal/usage"
	"github.com/bondd/bondd/policy"
)

// DefaultStateDir is the default state_dir: the daemon's state, its usage
// store (usage.db). The systemd unit's StateDirectory= and the .deb create
// it, owned by the bondd user.
const DefaultStateDir = "/var/lib/bondd"

// StateDirOrDefault returns StateDir, or DefaultStateDir when it is empty.
func (c *Config) StateDirOrDefault() string {
	if c.StateDir == "" {
		return DefaultStateDir
	}
	return c.StateDir
}

// state decodes the top-level keys of the usage store.
func (d *configDecoder) state(f map[string]*yaml.Node, c *Config) {
	c.StateDir = d.str(f["state_dir"], "state_dir", "a directory path")
	c.StateFlush = d.duration(f["state_flush"], "state_flush")
	c.UsageRetentionMonths = d.integer(f["usage_retention_months"], "usage_retention_months", "a number of months from 1 to 120")
}

// budgetOptions decodes an uplink's budget_direction and budget_reset_day.
func (d *configDecoder) budgetOptions(f map[string]*yaml.Node, path string, u *UplinkConfig) {
	u.BudgetDirection = d.str(f["budget_direction"], path+".budget_direction", "up, down or both")
	u.Budget.ResetDay = d.integer(f["budget_reset_day"], path+".budget_reset_day", "a day of the month from 1 to 28")
}

// validateState checks the usage store's keys and the uplinks' budget
// options.
func (c *Config) validateState(v *configValidator) {
	if c.StateFlush != 0 && (c.StateFlush < usage.MinFlush || c.StateFlush > usage.MaxFlush) {
		v.errorf("state_flush", "expected a duration from %s to %s, got %s", usage.MinFlush, usage.MaxFlush, c.StateFlush)
	}
	if m := c.UsageRetentionMonths; m < 0 || m > usage.MaxRetentionMonths {
		v.errorf("usage_retention_months", "expected 1 to %d months, got %d", usage.MaxRetentionMonths, m)
	}
	if c.Edge == nil {
		return
	}
	for i, u := range c.Edge.Uplinks {
		path := indexField("edge.uplinks", i)
		if _, err := usage.ParseDirection(u.BudgetDirection); err != nil {
			v.errorf(path+".budget_direction", "expected up, down or both, got %q", u.BudgetDirection)
		}
		switch d := u.Budget.ResetDay; {
		case d < 0 || d > policy.MaxResetDay:
			v.errorf(path+".budget_reset_day", "expected a day of the month from 1 to %d, got %d", policy.MaxResetDay, d)
		case d > 1 && u.Budget.Period != policy.PeriodMonth:
			v.errorf(path+".budget_reset_day", "applies to a monthly budget (like budget: 20GB/month); this uplink's budget is %q", u.Budget.String())
		}
	}
}

// UsageBudget returns the usage accounting's budget of uplink u.
func (u *UplinkConfig) UsageBudget() usage.Budget {
	d, _ := usage.ParseDirection(u.BudgetDirection) // validated
	return usage.Budget{Budget: u.Budget, Direction: d}
}
