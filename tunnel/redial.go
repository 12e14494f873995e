package tunnel

import (
	"context"
	"time"
)

// Redialling a dead path: how long an uplink waits between dials
// (Edge.routineDial), and how the daemon cuts the wait short when the
// uplink's network comes back (Edge.Kick, called by its watcher of the
// uplinks' interfaces).

// Kick tells the edge that the network of the named uplink came (back):
// its interface turned up or gained an address. If that uplink's path is
// not connected it dials at once, with its backoff back at RedialMin: a
// path waiting out its redial backoff stops waiting, and a
// QUIC handshake under way since before the kick starts over on a new
// socket (its Initial packets went into the dead link, and quic-go would
// send them again only at its next probe timeout, seconds later after a
// long outage). The hello of a completed handshake is not cut. A
// connected path is not touched. Kick returns false when the edge has no uplink of
// that name. It never blocks; safe for concurrent use. Call it once per
// change of the interface (a burst of netlink messages is one change):
// each kick restarts the handshakes under way.
func (e *Edge) Kick(uplink string) bool {
	for i, u := range e.opts.Uplinks {
		if u.Name == uplink {
			e.kicks[i].fire()
			return true
		}
	}
	return false
}

// redialBackoff returns the backoff that follows backoff after another
// failed dial: twice backoff, at most maxB. For a path that was connected
// before (downFor ≥ 0, the time since its connection ended) it is also at
// most a quarter of downFor, and never below minB: a path that worked a
// moment ago likely works again soon, so its dials stay close together and
// a return after an outage of d is found within about d/4, even where no
// interface changes (a modem that keeps its Ethernet link up while its
// radio is out). The cap grows with the outage, so a long one backs off to
// maxB as before. downFor < 0: the path was never connected (no cap).
func redialBackoff(backoff, minB, maxB, downFor time.Duration) time.Duration {
	b := min(2*backoff, maxB)
	if downFor >= 0 {
		b = min(b, max(downFor/4, minB))
	}
	return b
}

// busyBackoff returns the backoff after a busy node's refusal ([ErrBusy]):
// twice backoff, at least twice minB, at most maxB, whatever the path's
// history, since the node asked for fewer handshakes. The dial loop
// sleeps a uniformly random time up to it ("full jitter": Brooker,
// "Exponential Backoff And Jitter", AWS Architecture Blog, 2015), which
// spreads a crowd of edges refused in the same moment, such as after a
// node restart, over the whole interval.
func busyBackoff(backoff, minB, maxB time.Duration) time.Duration {
	return min(2*max(backoff, minB), maxB)
}

// sinceOrNever returns the time since t, or -1 when t is zero (never).
func sinceOrNever(t time.Time) time.Duration {
	if t.IsZero() {
		return -1
	}
	return time.Since(t)
}

// cancelWhen calls cancel when ch is closed, until the returned stop is
// called.
func cancelWhen(ch <-chan struct{}, cancel context.CancelFunc) (stop func()) {
	done := make(chan struct{})
	go func() {
		select {
		case <-ch:
			cancel()
		case <-done:
		}
	}()
	return func() { close(done) }
}

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
