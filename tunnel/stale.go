package tunnel

import (
	"time"

	"github.com/quic-go/quic-go/quicvarint"
)

// Stale datagrams. A datagram that reaches the receiver long after it was
// sent (held in a queue on the way, or inside a QUIC stack while a path
// was black-holed) is worth nothing to the applications bondd carries and
// confuses the ones that reorder, so the receiver drops it (DropStale)
// rather than write it to the TUN. The sender's clock is not the
// receiver's: the age is the datagram's one-way delay (receive time minus
// the header's send timestamp) minus the path's baseline, the smallest
// one-way delay seen on the path's connection, so the clock offset cancels (the same
// trick as LEDBAT's base delay, RFC 6817 §3.4.2). The baseline is the
// minimum over the current and the previous staleWindow, so that it follows
// a path whose delay grows for good. A run of stale datagrams longer than
// StaleAfter itself (a clock step on the sender, a much longer route) resets
// the baseline instead of dropping everything.

// staleWindow is the length of one baseline window.
const staleWindow = 10 * time.Second

// staleFilter is one path connection's one-way-delay baseline. Only the
// connection's receive routine uses it.
type staleFilter struct {
	cur, prev  int64 // minimum one-way delay (µs, clock offset included) in the current and previous window; 0: none
	winStart   int64 // µs, receiver clock
	staleSince int64 // µs: the first datagram of the current stale run; 0: none
}

// stale reports whether a datagram stamped ts (sender µs) and received at
// now (receiver µs) is older than limit against the baseline, and updates
// the baseline.
func (f *staleFilter) stale(ts, now int64, limit time.Duration) bool {
	owd := now - ts
	if f.winStart == 0 || now-f.winStart >= staleWindow.Microseconds() {
		f.prev, f.cur, f.winStart = f.cur, 0, now
	}
	if f.cur == 0 || owd < f.cur {
		f.cur = owd
	}
	base := f.cur
	if f.prev != 0 && f.prev < base {
		base = f.prev
	}
	if owd-base <= limit.Microseconds() {
		f.staleSince = 0
		return false
	}
	if f.staleSince == 0 {
		f.staleSince = now
	} else if now-f.staleSince > limit.Microseconds() {
		// Stale for longer than the limit: the baseline is wrong, not the
		// datagrams.
		f.prev, f.cur, f.winStart, f.staleSince = 0, owd, now, 0
		return false
	}
	return true
}

// peekTimestamp returns the send timestamp of a bondd datagram (header.go)
// without parsing the rest; ok is false when the header is too short.
func peekTimestamp(dg []byte) (ts uint64, ok bool) {
	if len(dg) < 2 {
		return 0, false
	}
	off := 2
	if dg[1]&FlagPathSeq != 0 {
		off += PathSeqLen // the per-path sequence number comes first (header.go)
	}
	if len(dg) < off {
		return 0, false
	}
	_, n, err := quicvarint.Parse(dg[off:])
	if err != nil {
		return 0, false
	}
	ts, _, err = quicvarint.Parse(dg[off+n:])
	return ts, err == nil
}
