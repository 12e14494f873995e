package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/bondd/bondd/internal/config"
	"github.com/bondd/bondd/internal/status"
	"github.com/bondd/bondd/internal/usage"
)

// usageQuery parses the --since, --until and --by of bondd usage (or the
// same query parameters of GET /usage on the control socket). since and
// until are RFC 3339 times or dates (2026-12-01); the defaults are the
// last 31 days up to now.
func usageQuery(since, until, by string, now time.Time) (usage.Query, error) {
	q := usage.Query{Since: now.AddDate(0, 0, -31), Until: now.Add(time.Hour)}
	var err error
	if q.By, err = usage.ParseBy(by); err != nil {
		return q, err
	}
	for _, f := range []struct {
		flag, v string
		t       *time.Time
	}{{"--since", since, &q.Since}, {"--until", until, &q.Until}} {
		if f.v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, f.v)
		if err != nil {
			if t, err = time.Parse(time.DateOnly, f.v); err != nil {
				return q, fmt.Errorf("%s %q: expected a date (2026-12-01) or an RFC 3339 time (2026-12-01T08:00:00Z)", f.flag, f.v)
			}
		}
		*f.t = t.UTC()
	}
	if !q.Until.After(q.Since) {
		return q, fmt.Errorf("--until %s is not after --since %s", q.Until.Format(time.RFC3339), q.Since.Format(time.RFC3339))
	}
	return q, nil
}

// usageHandler serves GET /usage?since=&until=&by= on the control socket:
// the running daemon's usage.Report as JSON, for bondd usage while the
// daemon holds the store's lock.
func usageHandler(a *usage.Accountant) status.Handler {
	return status.Handler{Pattern: "GET /usage", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := r.URL.Query()
		q, err := usageQuery(v.Get("since"), v.Get("until"), v.Get("by"), time.Now())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rep, err := a.Report(q)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(rep)
	})}
}

// usageStatus is the status report's usage section.
func usageStatus(a *usage.Accountant) *status.Usage {
	if a == nil {
		return nil
	}
	return &status.Usage{File: a.File(), Since: a.Since(), Paths: a.Usage(), Stats: a.Stats()}
}

func newUsageCmd() *cobra.Command {
	var stateDir, cfgPath, sock, since, until, by string
	var asJSON, asCSV bool
	cmd := &cobra.Command{
		Use:   "usage [--state-dir DIR | --config FILE] [--since T] [--until T] [--by hour|day|month] [--json|--csv]",
		Short: "Show each uplink's wire bytes, budget use and history",
		Long: "Usage reads the usage store (usage.db in the state directory: --state-dir, else\n" +
			"the config's state_dir, else /var/lib/bondd) and prints, per path, this period's\n" +
			"bytes up and down on the wire, the budget, the share used and the projected use\n" +
			"at the period's end, then the history grouped --by hour, day (default) or month\n" +
			"(UTC) from --since to --until (default: the last 31 days). While bondd runs it\n" +
			"holds the store's lock: usage then asks it over its control socket. --config\n" +
			"also supplies the budgets. See docs/operations.md, \"Budgets and usage\".",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if asJSON && asCSV {
				return errors.New("--json and --csv exclude each other")
			}
			format := ""
			if asJSON {
				format = "json"
			} else if asCSV {
				format = "csv"
			}
			now := time.Now()
			q, err := usageQuery(since, until, by, now)
			if err != nil {
				return err
			}
			budgets := map[usage.Key]usage.Budget{}
			if cfgPath != "" {
				cfg, err := config.Load(cfgPath)
				if err != nil {
					return err
				}
				if stateDir == "" {
					stateDir = cfg.StateDirOrDefault()
				}
				if e := cfg.Edge; e != nil {
					for i := range e.Uplinks {
						if u := &e.Uplinks[i]; !u.Budget.IsZero() {
							budgets[usage.Key{Bond: e.ID, Path: u.Name}] = u.UsageBudget()
						}
					}
				}
			}
			if stateDir == "" {
				stateDir = config.DefaultStateDir
			}
			st, err := usage.Open(stateDir, usage.StoreOptions{ReadOnly: true})
			if errors.Is(err, usage.ErrInUse) { // a running daemon: ask it
				ctx, cancel := context.WithTimeout(cmd.Context(), status.Timeout)
				defer cancel()
				v := url.Values{"since": {q.Since.Format(time.RFC3339)}, "until": {q.Until.Format(time.RFC3339)}, "by": {q.By}}
				var rep usage.Report
				if err := status.Get(ctx, sock, "/usage?"+v.Encode(), &rep); err != nil {
					return fmt.Errorf("the usage store in %s is locked by a running bondd, which did not answer: %w", stateDir, err)
				}
				return usage.Write(cmd.OutOrStdout(), &rep, format)
			}
			if err != nil {
				return err
			}
			defer st.Close()
			rep, err := st.Report(q, budgets, now)
			if err != nil {
				return err
			}
			return usage.Write(cmd.OutOrStdout(), rep, format)
		},
	}
	f := cmd.Flags()
	f.StringVar(&stateDir, "state-dir", "", "directory of usage.db (default: the config's state_dir, else "+config.DefaultStateDir+")")
	f.StringVarP(&cfgPath, "config", "c", "", "config file: its state_dir and budgets")
	f.StringVar(&sock, "control-socket", defaultControlSocket, "control socket of the running bondd, asked when it holds the store")
	f.StringVar(&since, "since", "", "start of the history: a date (2026-12-01) or RFC 3339 time; default 31 days ago")
	f.StringVar(&until, "until", "", "end of the history (exclusive); default now")
	f.StringVar(&by, "by", "day", "group the history by hour, day or month (UTC)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.BoolVar(&asCSV, "csv", false, "print the history as CSV")
	return cmd
}
