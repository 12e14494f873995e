// Package timerheap runs many timers on one goroutine: a binary min-heap
// of deadlines, served by a single routine that sleeps until the earliest
// one. A node holding thousands of bonds keeps every per-bond and per-path
// timer here (liveness checks, keepalives, FEC block expiry) instead of
// one ticking goroutine each, so that an idle timer costs a heap entry
// (about 48 bytes) and nothing while it waits, and the whole node wakes
// once per batch of deadlines rather than once per timer.
//
// Callbacks run on the heap's goroutine, one at a time: they must be short
// and must not block (hand slow work to a goroutine of its own). A
// callback may re-arm its own timer. The heap wakes at most Coalesce after
// a deadline, and runs together every timer due by then.
package timerheap

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/bondd/bondd/internal/monoclock"
)

// Coalesce is how late, at most, the heap runs a timer beyond its
// deadline on an unloaded host: it sleeps until the earliest deadline plus
// Coalesce and then runs every timer due, so that deadlines close together
// share one wake-up.
const Coalesce = time.Millisecond

// Heap is a set of timers served by one goroutine (Start). Safe for
// concurrent use. The zero value is not usable; use [New].
type Heap struct {
	mu sync.Mutex // guards q and each scheduled Timer's at and i
	q  []*Timer

	bell    chan struct{} // capacity 1: the earliest deadline moved earlier
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	started atomic.Bool

	fired atomic.Uint64 // callbacks run
	wakes atomic.Uint64 // times the goroutine woke with work
}

// Timer is one deadline and its callback. Create it with [Heap.NewTimer].
type Timer struct {
	h  *Heap
	fn func(now, due time.Time)
	at int64 // monoclock ns of the deadline; guarded by h.mu
	i  int   // index in h.q; -1 when not scheduled; guarded by h.mu
}

// New returns a heap whose goroutine is not yet running; see Start.
func New() *Heap {
	return &Heap{bell: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// Start starts the heap's goroutine. It runs until Close.
func (h *Heap) Start() {
	if h.started.CompareAndSwap(false, true) {
		go h.routine()
	}
}

// Close stops the heap's goroutine and waits for it (and any callback it
// is running) to return. Timers scheduled later never fire. Close is
// idempotent; it must not be called from a callback.
func (h *Heap) Close() {
	h.once.Do(func() { close(h.stop) })
	if h.started.Load() {
		<-h.done
	}
}

// NewTimer returns a timer, not scheduled, that calls fn on the heap's
// goroutine at its deadline, with the time the heap woke (now) and the
// deadline (due): now − due tells how late it ran.
func (h *Heap) NewTimer(fn func(now, due time.Time)) *Timer {
	return &Timer{h: h, fn: fn, i: -1}
}

// Reset schedules t at at, replacing any deadline it had. A deadline in
// the past runs at the heap's next wake-up.
func (t *Timer) Reset(at time.Time) { t.reset(monoclock.Nanos(at), false) }

// ResetEarlier schedules t at at unless it is already scheduled no later.
func (t *Timer) ResetEarlier(at time.Time) { t.reset(monoclock.Nanos(at), true) }

func (t *Timer) reset(at int64, earlierOnly bool) {
	h := t.h
	h.mu.Lock()
	if t.i >= 0 {
		if earlierOnly && t.at <= at {
			h.mu.Unlock()
			return
		}
		t.at = at
		h.fix(t.i)
	} else {
		t.at = at
		t.i = len(h.q)
		h.q = append(h.q, t)
		h.up(t.i)
	}
	first := h.q[0] == t
	h.mu.Unlock()
	if first {
		select {
		case h.bell <- struct{}{}:
		default:
		}
	}
}

// Stop unschedules t and reports whether it was scheduled. A callback
// already taken off the heap may still run once after Stop returns.
func (t *Timer) Stop() bool {
	h := t.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if t.i < 0 {
		return false
	}
	h.remove(t.i)
	return true
}

// Scheduled reports whether t has a deadline pending.
func (t *Timer) Scheduled() bool {
	t.h.mu.Lock()
	defer t.h.mu.Unlock()
	return t.i >= 0
}

// Len returns the number of timers scheduled.
func (h *Heap) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.q)
}

// Stats returns how many callbacks the heap has run and how many times its
// goroutine woke with timers due.
func (h *Heap) Stats() (fired, wakes uint64) { return h.fired.Load(), h.wakes.Load() }

// routine serves the heap until Close.
func (h *Heap) routine() {
	defer close(h.done)
	sleep := time.NewTimer(time.Hour)
	defer sleep.Stop()
	var batch []*Timer
	var dues []int64
	for {
		now := time.Now()
		ns := monoclock.Nanos(now)
		batch, dues = batch[:0], dues[:0]
		h.mu.Lock()
		for len(h.q) > 0 && h.q[0].at <= ns {
			t := h.q[0]
			batch, dues = append(batch, t), append(dues, t.at)
			h.remove(0)
		}
		next := int64(-1)
		if len(h.q) > 0 {
			next = h.q[0].at
		}
		h.mu.Unlock()
		if len(batch) > 0 {
			h.wakes.Add(1)
			for i, t := range batch {
				t.fn(now, monoclock.Time(dues[i]))
				batch[i] = nil
			}
			h.fired.Add(uint64(len(batch)))
			continue // time passed while the callbacks ran
		}
		wait := time.Hour
		if next >= 0 {
			wait = time.Duration(next-ns) + Coalesce
		}
		sleep.Reset(wait)
		select {
		case <-sleep.C:
		case <-h.bell:
		case <-h.stop:
			return
		}
	}
}

// Heap order on at, with each timer's index kept in i (container/heap's
// algorithm, without its interface calls).

func (h *Heap) less(a, b int) bool { return h.q[a].at < h.q[b].at }

func (h *Heap) swap(a, b int) {
	h.q[a], h.q[b] = h.q[b], h.q[a]
	h.q[a].i, h.q[b].i = a, b
}

func (h *Heap) up(j int) {
	for j > 0 {
		p := (j - 1) / 2
		if !h.less(j, p) {
			return
		}
		h.swap(j, p)
		j = p
	}
}

func (h *Heap) down(j int) bool {
	j0, n := j, len(h.q)
	for {
		l := 2*j + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && h.less(r, l) {
			c = r
		}
		if !h.less(c, j) {
			break
		}
		h.swap(j, c)
		j = c
	}
	return j > j0
}

func (h *Heap) fix(j int) {
	if !h.down(j) {
		h.up(j)
	}
}

// remove takes the timer at index j off the heap.
func (h *Heap) remove(j int) {
	t := h.q[j]
	last := len(h.q) - 1
	if j != last {
		h.swap(j, last)
	}
	h.q[last] = nil
	h.q = h.q[:last]
	if j != last {
		h.fix(j)
	}
	t.i = -1
}
