package timerheap

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bondd/bondd/internal/testkit"
)

// firing is one callback run: the timer's name, when it ran and its
// deadline, as offsets from the test's start.
type firing struct {
	name     string
	now, due time.Duration
}

// op is one step of a scenario: at offset at (from the start), do it.
type op struct {
	at   time.Duration
	name string
	kind string // "reset", "earlier", "stop"
	to   time.Duration
}

func TestHeapOrder(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name string
		ops  []op
		want []string // names in firing order
	}{
		{"one", []op{{0, "a", "reset", 10 * ms}}, []string{"a"}},
		{"in deadline order", []op{{0, "a", "reset", 30 * ms}, {0, "b", "reset", 10 * ms}, {0, "c", "reset", 20 * ms}},
			[]string{"b", "c", "a"}},
		{"reset moves later", []op{{0, "a", "reset", 10 * ms}, {0, "b", "reset", 20 * ms}, {5 * ms, "a", "reset", 30 * ms}},
			[]string{"b", "a"}},
		{"reset moves earlier", []op{{0, "a", "reset", 50 * ms}, {0, "b", "reset", 20 * ms}, {5 * ms, "a", "reset", 10 * ms}},
			[]string{"a", "b"}},
		{"earlier keeps an earlier deadline", []op{{0, "a", "reset", 10 * ms}, {0, "b", "reset", 20 * ms}, {1 * ms, "a", "earlier", 30 * ms}},
			[]string{"a", "b"}},
		{"earlier moves a later deadline", []op{{0, "a", "reset", 30 * ms}, {0, "b", "reset", 20 * ms}, {1 * ms, "a", "earlier", 10 * ms}},
			[]string{"a", "b"}},
		{"earlier schedules an idle timer", []op{{0, "b", "reset", 20 * ms}, {1 * ms, "a", "earlier", 10 * ms}},
			[]string{"a", "b"}},
		{"stop", []op{{0, "a", "reset", 10 * ms}, {0, "b", "reset", 20 * ms}, {5 * ms, "a", "stop", 0}},
			[]string{"b"}},
		{"past deadline runs at once", []op{{0, "b", "reset", 20 * ms}, {5 * ms, "a", "reset", -10 * ms}},
			[]string{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := New()
				h.Start()
				defer h.Close()
				start := time.Now()
				var mu sync.Mutex
				var got []firing
				timers := map[string]*Timer{}
				timer := func(name string) *Timer {
					if timers[name] == nil {
						timers[name] = h.NewTimer(func(now, due time.Time) {
							mu.Lock()
							got = append(got, firing{name, now.Sub(start), due.Sub(start)})
							mu.Unlock()
						})
					}
					return timers[name]
				}
				for _, o := range tt.ops {
					time.Sleep(start.Add(o.at).Sub(time.Now()))
					tm := timer(o.name)
					switch o.kind {
					case "reset":
						tm.Reset(time.Now().Add(o.to))
					case "earlier":
						tm.ResetEarlier(time.Now().Add(o.to))
					case "stop":
						if !tm.Stop() {
							t.Errorf("Stop of %s: not scheduled", o.name)
						}
					}
				}
				time.Sleep(time.Second)
				synctest.Wait()
				mu.Lock()
				defer mu.Unlock()
				var names []string
				for _, f := range got {
					names = append(names, f.name)
					if late := f.now - f.due; f.due >= 0 && (late < 0 || late > Coalesce) {
						t.Errorf("%s ran %v after its deadline, want 0..%v", f.name, late, Coalesce)
					}
				}
				if !slices.Equal(names, tt.want) {
					t.Errorf("fired %v, want %v", names, tt.want)
				}
				if n := h.Len(); n != 0 {
					t.Errorf("%d timers left scheduled", n)
				}
			})
		})
	}
}

// TestHeapRearm checks that a callback re-arming its own timer runs
// periodically, and that Stop ends it.
func TestHeapRearm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := New()
		h.Start()
		defer h.Close()
		n := 0
		var tm *Timer
		tm = h.NewTimer(func(now, _ time.Time) {
			n++
			tm.Reset(now.Add(10 * time.Millisecond))
		})
		tm.Reset(time.Now())
		time.Sleep(95 * time.Millisecond)
		synctest.Wait()
		if !tm.Stop() {
			t.Error("Stop: the periodic timer was not scheduled")
		}
		time.Sleep(time.Second)
		synctest.Wait()
		// Runs at 0, then every 10 ms plus at most Coalesce: 9 or 10 runs
		// in 95 ms.
		if n < 9 || n > 10 {
			t.Errorf("ran %d times in 95 ms at a 10 ms period, want 9 or 10", n)
		}
		fired, wakes := h.Stats()
		if fired != uint64(n) || wakes == 0 || wakes > fired {
			t.Errorf("Stats() = %d fired, %d wakes; want %d fired, 1..%d wakes", fired, wakes, n, n)
		}
	})
}

// TestHeapRandom schedules, moves and stops many timers at random and
// checks the outcome against a plain list: every timer left scheduled
// fires once, at or just after its last deadline, in deadline order.
func TestHeapRandom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		h := New()
		h.Start()
		defer h.Close()
		start := time.Now()
		const n = 2000
		var mu sync.Mutex
		var got []firing
		timers := make([]*Timer, n)
		want := map[int]time.Duration{} // timer → its last deadline
		for i := range n {
			name := string(rune('A'+i%26)) + string(rune('0'+i/26%10)) + string(rune('a'+i/260))
			timers[i] = h.NewTimer(func(now, due time.Time) {
				mu.Lock()
				got = append(got, firing{name, now.Sub(start), due.Sub(start)})
				mu.Unlock()
			})
		}
		for range 3 * n {
			i := rng.IntN(n)
			switch d := time.Duration(100+rng.IntN(900)) * time.Millisecond; rng.IntN(4) {
			case 0:
				timers[i].Stop()
				delete(want, i)
			case 1:
				timers[i].ResetEarlier(start.Add(d))
				if w, ok := want[i]; !ok || d < w {
					want[i] = d
				}
			default:
				timers[i].Reset(start.Add(d))
				want[i] = d
			}
		}
		if h.Len() != len(want) {
			t.Fatalf("Len() = %d, want %d", h.Len(), len(want))
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(got) != len(want) {
			t.Fatalf("%d timers fired, want %d", len(got), len(want))
		}
		var dues []time.Duration
		for _, d := range want {
			dues = append(dues, d)
		}
		slices.Sort(dues)
		for i, f := range got {
			if f.due != dues[i] {
				t.Fatalf("firing %d had deadline %v, want %v (deadline order)", i, f.due, dues[i])
			}
			if late := f.now - f.due; late < 0 || late > Coalesce {
				t.Errorf("firing %d ran %v after its deadline", i, late)
			}
		}
	})
}

// TestHeapClose checks that Close stops the goroutine (no leak) and that
// a timer scheduled after it never fires; Close without Start returns.
func TestHeapClose(t *testing.T) {
	testkit.CheckLeaks(t)
	New().Close()
	h := New()
	h.Start()
	fired := make(chan struct{}, 1)
	tm := h.NewTimer(func(_, _ time.Time) { fired <- struct{}{} })
	h.Close()
	h.Close() // idempotent
	tm.Reset(time.Now())
	select {
	case <-fired:
		t.Error("a timer fired after Close")
	case <-time.After(50 * time.Millisecond): // the outcome awaited is that nothing happens
	}
}

// TestHeapWallStep: a deadline taken from time.Now after the wall clock
// stepped (NTP or GPS setting a vehicle's clock after boot) runs when its
// monotonic time comes, not an hour early or late.
func TestHeapWallStep(t *testing.T) {
	for _, step := range []time.Duration{time.Hour, -time.Hour} {
		h := New()
		h.Start()
		fired := make(chan time.Duration, 1)
		start := time.Now()
		tm := h.NewTimer(func(now, _ time.Time) { fired <- now.Sub(start) })
		tm.Reset(testkit.StepWall(t, start.Add(50*time.Millisecond), step))
		select {
		case d := <-fired:
			if d < 50*time.Millisecond {
				t.Errorf("step %v: ran after %v, before its deadline (50 ms)", step, d)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("step %v: did not run within 10 s of its 50-ms deadline", step)
		}
		h.Close()
	}
}
