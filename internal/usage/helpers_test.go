package usage

import (
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

type boltTx = bolt.Tx

var syscallENOSPC = syscall.ENOSPC

func itoa(i int) string { return strconv.Itoa(i) }

// testAccountant is an Accountant over a fake source whose cumulative
// counters the test sets, on a fake clock.
type testAccountant struct {
	*Accountant
	mu      sync.Mutex
	now     time.Time
	samples map[Key]Sample
}

func newTestAccountant(t *testing.T, s *Store, budgets map[Key]Budget) *testAccountant {
	return newTestAccountantAt(t, s, budgets, time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC))
}

func newTestAccountantAt(t *testing.T, s *Store, budgets map[Key]Budget, now time.Time) *testAccountant {
	t.Helper()
	ta := &testAccountant{now: now, samples: make(map[Key]Sample)}
	a, err := NewAccountant(Options{Store: s, Budgets: budgets, Now: ta.clock,
		Source: func(yield func(Sample)) {
			ta.mu.Lock()
			defer ta.mu.Unlock()
			for _, smp := range ta.samples {
				yield(smp)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	ta.Accountant = a
	return ta
}

func (ta *testAccountant) clock() time.Time {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	return ta.now
}

// set moves the clock to t.
func (ta *testAccountant) set(t time.Time) {
	ta.mu.Lock()
	ta.now = t
	ta.mu.Unlock()
}

// feed adds c to k's cumulative counters and takes a Step.
func (ta *testAccountant) feed(k Key, c Counts, st Status) {
	ta.mu.Lock()
	s := ta.samples[k]
	s.Key, s.Status = k, st
	s.Counts.Add(c)
	ta.samples[k] = s
	ta.mu.Unlock()
	ta.Step()
}
