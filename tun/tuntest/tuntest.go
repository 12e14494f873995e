// Package tuntest provides an in-memory TUN device for tests and for the
// in-process demo: what the application side injects is what Read returns,
// and what the bond writes appears on a channel.
package tuntest

import (
	"os"
	"sync"

	"github.com/bondd/bondd/tun"
)

// Device is an in-memory tun.Device. Inject and Outbound are the
// application's side; Read, Write and the rest are the bond's side. All
// methods are safe for concurrent use.
type Device struct {
	mtu    int
	batch  int
	in     chan []byte
	out    chan []byte
	events chan tun.Event
	closed chan struct{}
	once   sync.Once
}

// queueLen is the capacity, in packets, of each direction's channel.
const queueLen = 4096

// New returns a Device reporting mtu (bytes) whose Read returns up to batch
// packets per call.
func New(mtu, batch int) *Device {
	d := &Device{
		mtu:    mtu,
		batch:  max(batch, 1),
		in:     make(chan []byte, queueLen),
		out:    make(chan []byte, queueLen),
		events: make(chan tun.Event, 1),
		closed: make(chan struct{}),
	}
	d.events <- tun.EventUp
	return d
}

// Inject queues pkt as if an application had sent it into the TUN. It
// blocks while queueLen packets are waiting, and drops pkt once the device
// is closed. The device keeps pkt until Read copies it.
func (d *Device) Inject(pkt []byte) {
	select {
	case d.in <- pkt:
	case <-d.closed:
	}
}

// Outbound delivers a copy of every packet written to the device.
func (d *Device) Outbound() <-chan []byte { return d.out }

// Read blocks until a packet is injected, then copies it and any further
// waiting packets (up to len(bufs) and the batch size) to bufs[i][offset:].
// After Close it returns os.ErrClosed.
func (d *Device) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	select {
	case pkt := <-d.in:
		sizes[0] = copy(bufs[0][offset:], pkt)
	case <-d.closed:
		return 0, os.ErrClosed
	}
	n := 1
	for n < len(bufs) && n < d.batch {
		select {
		case pkt := <-d.in:
			sizes[n] = copy(bufs[n][offset:], pkt)
			n++
		default:
			return n, nil
		}
	}
	return n, nil
}

// Write copies each packet bufs[i][offset:] to the Outbound channel. Like
// the kernel device it returns the bytes written plus tun.MinWriteOffset per
// packet; it needs offset >= tun.MinWriteOffset. When the channel is full
// the packet is dropped, as a congested kernel queue would. After Close it
// returns os.ErrClosed.
func (d *Device) Write(bufs [][]byte, offset int) (int, error) {
	if offset < tun.MinWriteOffset {
		return 0, os.ErrInvalid
	}
	total := 0
	for _, b := range bufs {
		select {
		case <-d.closed:
			return total, os.ErrClosed
		default:
		}
		pkt := append([]byte(nil), b[offset:]...)
		select {
		case d.out <- pkt:
		default:
		}
		total += len(pkt) + tun.MinWriteOffset
	}
	return total, nil
}

// File returns nil: there is no file descriptor.
func (d *Device) File() *os.File { return nil }

// MTU returns the MTU given to New.
func (d *Device) MTU() (int, error) { return d.mtu, nil }

// Name returns "tuntest".
func (d *Device) Name() (string, error) { return "tuntest", nil }

// Events yields tun.EventUp once and is closed by Close.
func (d *Device) Events() <-chan tun.Event { return d.events }

// BatchSize returns the batch given to New.
func (d *Device) BatchSize() int { return d.batch }

// Close unblocks Read and closes the Events channel. It is idempotent.
func (d *Device) Close() error {
	d.once.Do(func() {
		close(d.closed)
		close(d.events)
	})
	return nil
}

var _ tun.Device = (*Device)(nil)
