package tunnel

// dedupeWindow is the number of sequence numbers behind the highest seen that
// the filter remembers, in packets. Paths with different delays reorder
// packets: at 100 kpps, 0.6 s of path-delay difference still fits.
const dedupeWindow = 1 << 16

// dedupe is a sliding-window filter on bond sequence numbers, in the style of
// WireGuard's replay filter (RFC 6479): a ring of bits behind the highest
// sequence number seen. It is not safe for concurrent use; the bond guards it.
//
// The window's bits (8 KiB) are allocated by the first check, so a bond
// that never receives (an idle bond on the concentrator) holds none.
type dedupe struct {
	top  uint64                     // highest sequence number seen, plus one (0: none yet)
	bits *[dedupeWindow / 64]uint64 // nil until the first check
}

// Verdicts of dedupe.check.
const (
	seqNew       = iota // first sight: deliver
	seqDuplicate        // seen before: drop
	seqTooOld           // behind the window: drop (cannot tell)
)

// check records seq and reports whether it is new, a duplicate, or too old.
func (d *dedupe) check(seq uint64) int {
	if d.bits == nil { // once per bond
		d.bits = new([dedupeWindow / 64]uint64)
	}
	s := seq + 1
	switch {
	case s > d.top:
		// Clear the bits between the old top and the new one.
		if s-d.top >= dedupeWindow {
			clear(d.bits[:])
		} else {
			for i := d.top; i < s; i++ {
				if i%64 == 0 && s-i >= 64 {
					d.bits[(i/64)%uint64(len(d.bits))] = 0
					i += 63
					continue
				}
				d.bits[(i/64)%uint64(len(d.bits))] &^= 1 << (i % 64)
			}
		}
		d.top = s
	case d.top-s >= dedupeWindow:
		return seqTooOld
	}
	w, b := (seq/64)%uint64(len(d.bits)), uint64(1)<<(seq%64)
	if d.bits[w]&b != 0 {
		return seqDuplicate
	}
	d.bits[w] |= b
	return seqNew
}

// reset forgets everything (a new bond id restarts the sequence space).
func (d *dedupe) reset() {
	d.top = 0
	if d.bits != nil {
		clear(d.bits[:])
	}
}
