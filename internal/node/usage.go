package node

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/bondd/bondd/internal/config"
	"github.com/bondd/bondd/internal/usage"
	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/tunnel"
)

// ResetUsage moves the usage store in cfg's state_dir aside with a
// timestamp (bondd run --reset-state) and logs where; no store is no error.
func ResetUsage(cfg *config.Config, log *slog.Logger) error {
	to, err := usage.MoveAside(cfg.StateDirOrDefault(), time.Now())
	if to != "" {
		log.Warn("usage store moved aside; starting an empty one", "moved_to", to)
	}
	return err
}

// OpenUsage opens the usage store in cfg's state_dir (usage.db), creating
// the directory if needed. bondd run calls it before Start, so a store it
// refuses (a *usage.OpenError naming the file and what to do) stops the
// daemon before it touches the TUN.
func OpenUsage(cfg *config.Config, log *slog.Logger) (*usage.Store, error) {
	st, err := usage.Open(cfg.StateDirOrDefault(), usage.StoreOptions{})
	if err == nil {
		log.Info("usage store opened", "file", st.File())
	}
	return st, err
}

// StartUsage starts the usage accounting of daemon d into st: every path
// of every bond, the edge's uplink budgets fed back to the scheduler. The
// returned Accountant's Close takes the last sample and flushes; call it
// after d.Close.
func StartUsage(cfg *config.Config, d Daemon, st *usage.Store, log *slog.Logger) (*usage.Accountant, error) {
	budgets := make(map[usage.Key]usage.Budget)
	if e := cfg.Edge; e != nil {
		for i := range e.Uplinks {
			if u := &e.Uplinks[i]; !u.Budget.IsZero() {
				budgets[usage.Key{Bond: e.ID, Path: u.Name}] = u.UsageBudget()
			}
		}
	}
	each := bondsOf(d)
	if each == nil {
		return nil, fmt.Errorf("usage: no bonds in a %T", d)
	}
	var edge *tunnel.Bond // the edge's one bond; the concentrator has no budgets
	if cfg.Edge != nil {
		each(func(b *tunnel.Bond) { edge = b })
	}
	a, err := usage.NewAccountant(usage.Options{
		Store:           st,
		Budgets:         budgets,
		Flush:           cfg.StateFlush,
		RetentionMonths: cfg.UsageRetentionMonths,
		Logger:          log,
		Source: func(yield func(usage.Sample)) {
			now := time.Now()
			each(func(b *tunnel.Bond) {
				id := b.EdgeID()
				b.Usage(now, func(p tunnel.PathUsage) {
					yield(usage.Sample{Key: usage.Key{Bond: id, Path: p.Name}, Status: sampleStatus(p.Status), Counts: usage.Counts{
						UpBytes: p.UpBytes, DownBytes: p.DownBytes, UpPackets: p.UpPackets, DownPackets: p.DownPackets,
						DatagramBytes: p.DatagramBytes, LostPackets: p.LostPackets}})
				})
			})
		},
		OnBudget: func(k usage.Key, used int64, end time.Time) {
			if edge != nil {
				edge.SetBudgetUsage(k.Path, used, end)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	a.Start()
	log.Info("usage accounting started", "store", st.File(), "budgets", len(budgets))
	return a, nil
}

// sampleStatus maps a path status to the usage history's.
func sampleStatus(s policy.Status) usage.Status {
	switch s {
	case policy.StatusActive:
		return usage.StatusActive
	case policy.StatusDegraded:
		return usage.StatusDegraded
	}
	return usage.StatusDown
}

// bondsOf returns a function that calls yield with each bond of d, or nil
// for an unknown daemon.
func bondsOf(d Daemon) func(yield func(*tunnel.Bond)) {
	switch d := d.(type) {
	case *tunnel.Edge:
		return func(yield func(*tunnel.Bond)) { yield(d.Bond()) }
	case edgeWithDownlink:
		return func(yield func(*tunnel.Bond)) { yield(d.Bond()) }
	case fleetEdge:
		return bondsOf(d.Daemon)
	case *tunnel.Concentrator:
		return d.Bonds
	case *fleetNode:
		return d.Bonds
	}
	return nil
}
