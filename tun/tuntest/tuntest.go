// Package tuntest provides an in-memory [tun.Device] for tests and for the
// in-process demo: packets injected on one side come out of Read, and
// packets passed to Write come out of a channel, with the batch shape,
// offset rule and return values of the kernel device that tun.Open returns.
package tuntest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/bondd/bondd/tun"
)

// QueueLen is the capacity, in packets, of each direction's queue: Inject
// blocks once this many packets wait for Read, and Write drops packets once
// this many wait on Outbound.
const QueueLen = 4096

// virtioHdrLen is what the kernel device counts per written packet on top
// of the packet bytes (see tun.Device).
const virtioHdrLen = tun.MinWriteOffset

// ErrInvalidOffset is returned by Write for an offset below
// tun.MinWriteOffset (as the kernel device does) or beyond a buffer; nothing
// is written. It matches os.ErrInvalid.
var ErrInvalidOffset = fmt.Errorf("tuntest: invalid offset: %w", os.ErrInvalid)

// Device is an in-memory tun.Device. Create it with [New]. All methods are
// safe for concurrent use, except that, as for the kernel device, Read calls
// are serialised internally (one batch at a time) and so are Write calls.
type Device struct {
	mtu   int
	batch int

	in     chan []byte // injected packets, read by Read
	out    chan []byte // copies of written packets
	events chan tun.Event

	closeOnce sync.Once
	closed    chan struct{} // closed by Close

	readMu sync.Mutex
	held   []byte // guarded by readMu: a packet taken from in that did not fit the last batch

	writeMu sync.Mutex    // serialises Writes, so Outbound keeps their order
	dropped atomic.Uint64 // packets Write dropped because Outbound was full
}

var _ tun.Device = (*Device)(nil)

// New returns an open Device that reports the given MTU (bytes) and batch
// size (at most this many packets per Read; values below 1 mean 1). Its
// Events channel yields tun.EventUp once.
func New(mtu int, batch int) *Device {
	d := &Device{
		mtu:    mtu,
		batch:  max(batch, 1),
		in:     make(chan []byte, QueueLen),
		out:    make(chan []byte, QueueLen),
		events: make(chan tun.Event, 1),
		closed: make(chan struct{}),
	}
	d.events <- tun.EventUp
	return d
}

// Inject queues a copy of pkt (one IP packet) for Read. It blocks while
// [QueueLen] packets are already queued, and returns os.ErrClosed once the
// device is closed.
func (d *Device) Inject(pkt []byte) error {
	return d.InjectContext(context.Background(), pkt)
}

// InjectContext is [Device.Inject] that gives up with ctx.Err() when ctx is
// done first.
func (d *Device) InjectContext(ctx context.Context, pkt []byte) error {
	select {
	case <-d.closed:
		return os.ErrClosed
	default:
	}
	c := append([]byte(nil), pkt...)
	select {
	case d.in <- c:
		return nil
	case <-d.closed:
		return os.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Outbound returns the channel on which a copy of every packet passed to
// Write appears, in order; each slice is owned by the receiver. The channel
// is never closed: select on [Device.Done] too to notice Close.
func (d *Device) Outbound() <-chan []byte { return d.out }

// Done returns a channel that is closed when the device is closed.
func (d *Device) Done() <-chan struct{} { return d.closed }

// Read blocks until at least one injected packet is queued or the device is
// closed. It then copies queued packets into bufs[i][offset:] and their
// lengths into sizes[i], without blocking for more, until min(len(bufs),
// BatchSize()) packets are done or the queue is empty, and returns how many
// it copied: several queued packets make a real batch. A packet
// that does not fit bufs[0][offset:] is dropped with an error (n = 0), as on
// the kernel device; a later packet that does not fit its buffer is kept for
// the next Read. After Close it returns os.ErrClosed, even if packets are
// still queued. len(sizes) must be >= len(bufs).
func (d *Device) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	if len(bufs) == 0 {
		return 0, nil
	}
	if len(sizes) < len(bufs) || offset < 0 {
		return 0, fmt.Errorf("tuntest: Read with %d bufs, %d sizes, offset %d", len(bufs), len(sizes), offset)
	}
	d.readMu.Lock()
	defer d.readMu.Unlock()
	select {
	case <-d.closed:
		return 0, os.ErrClosed
	default:
	}
	first := d.held
	d.held = nil
	if first == nil {
		select {
		case first = <-d.in:
		case <-d.closed:
			return 0, os.ErrClosed
		}
	}
	if offset > len(bufs[0]) || len(first) > len(bufs[0])-offset {
		return 0, fmt.Errorf("tuntest: read len %d overflows bufs element len %d", len(first), len(bufs[0])-min(offset, len(bufs[0])))
	}
	sizes[0] = copy(bufs[0][offset:], first)
	n := 1
	for n < len(bufs) && n < d.batch {
		var p []byte
		select {
		case p = <-d.in:
		default:
			return n, nil
		}
		if offset > len(bufs[n]) || len(p) > len(bufs[n])-offset {
			d.held = p
			return n, nil
		}
		sizes[n] = copy(bufs[n][offset:], p)
		n++
	}
	return n, nil
}

// Write sends a copy of each packet bufs[i][offset:] to Outbound, in order.
// It never blocks: when [QueueLen] packets already wait on Outbound, the
// packet is dropped and counted (see [Device.Dropped]), as a congested
// kernel queue drops. offset must be >= tun.MinWriteOffset, as on the
// kernel device, or Write fails with [ErrInvalidOffset]. Like the kernel
// device it returns the number of bytes written, counting
// tun.MinWriteOffset bytes of header per packet (dropped ones included, as
// the kernel's write succeeds too), not the number of packets. After Close
// it returns os.ErrClosed. It does not modify bufs (the kernel device may,
// see tun.Device).
func (d *Device) Write(bufs [][]byte, offset int) (int, error) {
	if offset < tun.MinWriteOffset {
		return 0, ErrInvalidOffset
	}
	for _, b := range bufs {
		if offset > len(b) {
			return 0, ErrInvalidOffset
		}
	}
	d.writeMu.Lock()
	defer d.writeMu.Unlock()
	total := 0
	for _, b := range bufs {
		select {
		case <-d.closed:
			return total, os.ErrClosed
		default:
		}
		c := append([]byte(nil), b[offset:]...)
		select {
		case d.out <- c:
		default:
			d.dropped.Add(1)
		}
		total += len(c) + virtioHdrLen
	}
	return total, nil
}

// Dropped returns how many written packets were dropped because Outbound
// was full.
func (d *Device) Dropped() uint64 { return d.dropped.Load() }

// File returns nil: there is no file descriptor.
func (d *Device) File() *os.File { return nil }

// MTU returns the MTU given to New, in bytes. It never fails.
func (d *Device) MTU() (int, error) { return d.mtu, nil }

// Name returns "tuntest".
func (d *Device) Name() (string, error) { return "tuntest", nil }

// Events returns the event channel: it yields tun.EventUp once and is
// closed by Close. It never blocks the device, so draining it is optional.
func (d *Device) Events() <-chan tun.Event { return d.events }

// BatchSize returns the batch size given to New (at least 1).
func (d *Device) BatchSize() int { return d.batch }

// Close closes the device: blocked and later Read, Write and Inject calls
// return os.ErrClosed, and the Events channel is closed. Queued packets are
// discarded. Close is idempotent and always returns nil.
func (d *Device) Close() error {
	d.closeOnce.Do(func() {
		close(d.closed)
		close(d.events)
	})
	return nil
}
