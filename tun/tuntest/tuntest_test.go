package tuntest_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bondd/bondd/internal/testkit"
	"github.com/bondd/bondd/tun"
	"github.com/bondd/bondd/tun/tuntest"
)

const offset = 16

// blocksUntilClose runs call in a goroutine of the synctest bubble and
// checks that it blocks until d.Close, and then returns os.ErrClosed:
// synctest.Wait returns once the goroutine is durably blocked or done, so
// "not returned yet" is checked without a sleep.
func blocksUntilClose(t *testing.T, d *tuntest.Device, what string, call func() error) {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- call() }()
	synctest.Wait()
	select {
	case err := <-errc:
		t.Fatalf("%s returned %v before Close; want it to block", what, err)
	default:
	}
	d.Close()
	synctest.Wait()
	select {
	case err := <-errc:
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("blocked %s returned %v after Close, want os.ErrClosed", what, err)
		}
	default:
		t.Fatalf("Close did not unblock %s", what)
	}
}

func bufs(n, size int) ([][]byte, []int) {
	b := make([][]byte, n)
	for i := range b {
		b[i] = make([]byte, offset+size)
	}
	return b, make([]int, n)
}

func TestReadBatches(t *testing.T) {
	d := tuntest.New(1280, 4)
	defer d.Close()
	for i := range 6 {
		if err := d.Inject(bytes.Repeat([]byte{byte(i)}, 10+i)); err != nil {
			t.Fatal(err)
		}
	}
	b, sizes := bufs(4, 1280)
	n, err := d.Read(b, sizes, offset)
	if err != nil || n != 4 {
		t.Fatalf("first Read = %d, %v; want 4 packets", n, err)
	}
	for i := range n {
		want := bytes.Repeat([]byte{byte(i)}, 10+i)
		if got := b[i][offset : offset+sizes[i]]; !bytes.Equal(got, want) {
			t.Errorf("packet %d = %x, want %x", i, got, want)
		}
	}
	n, err = d.Read(b, sizes, offset)
	if err != nil || n != 2 || sizes[1] != 15 {
		t.Fatalf("second Read = %d, %v (sizes %v); want the 2 remaining packets", n, err, sizes[:2])
	}
}

func TestReadOversize(t *testing.T) {
	d := tuntest.New(1280, 2)
	defer d.Close()
	d.Inject(make([]byte, 100))
	d.Inject(make([]byte, 10))
	d.Inject(make([]byte, 100))
	d.Inject(make([]byte, 30))
	small := [][]byte{make([]byte, offset+50), make([]byte, offset+50)}
	sizes := make([]int, 2)
	if n, err := d.Read(small, sizes, offset); err == nil || n != 0 {
		t.Fatalf("oversize first packet: Read = %d, %v; want an error", n, err)
	}
	// The 10-byte packet fits; the following 100-byte one is held back.
	if n, err := d.Read(small, sizes, offset); err != nil || n != 1 || sizes[0] != 10 {
		t.Fatalf("Read = %d, %v, sizes %v; want one 10-byte packet", n, err, sizes)
	}
	big, bsizes := bufs(2, 200)
	if n, err := d.Read(big, bsizes, offset); err != nil || n != 2 || bsizes[0] != 100 || bsizes[1] != 30 {
		t.Fatalf("Read = %d, %v, sizes %v; want the held 100-byte packet then 30", n, err, bsizes)
	}
}

func TestWrite(t *testing.T) {
	d := tuntest.New(1280, 2)
	defer d.Close()
	b := [][]byte{append(make([]byte, offset), 1, 2, 3), append(make([]byte, offset), 4, 5)}
	if _, err := d.Write(b, tun.MinWriteOffset-1); !errors.Is(err, tuntest.ErrInvalidOffset) || !errors.Is(err, os.ErrInvalid) {
		t.Fatalf("Write with offset %d: %v, want ErrInvalidOffset", tun.MinWriteOffset-1, err)
	}
	n, err := d.Write(b, offset)
	if err != nil || n != 3+2+2*tun.MinWriteOffset {
		t.Fatalf("Write = %d, %v; want %d bytes", n, err, 3+2+2*tun.MinWriteOffset)
	}
	b[0][offset] = 99 // the outbound copy must not change
	for _, want := range [][]byte{{1, 2, 3}, {4, 5}} {
		if got := <-d.Outbound(); !bytes.Equal(got, want) {
			t.Errorf("outbound %x, want %x", got, want)
		}
	}
}

// TestCloseUnblocks checks that Read on an empty open device blocks, and
// that Close then makes it return os.ErrClosed. It runs in a synctest
// bubble: synctest.Wait returns once the reader is durably blocked (or has
// returned), so "has not returned yet" is checked without a sleep.
func TestCloseUnblocks(t *testing.T) {
	testkit.CheckLeaks(t)
	synctest.Test(t, func(t *testing.T) {
		d := tuntest.New(1280, 1)
		if ev := <-d.Events(); ev != tun.EventUp {
			t.Fatalf("first event %v, want EventUp", ev)
		}
		blocksUntilClose(t, d, "Read on an empty open device", func() error {
			b, s := bufs(1, 100)
			_, err := d.Read(b, s, offset)
			return err
		})
		if _, err := d.Write([][]byte{make([]byte, offset+1)}, offset); !errors.Is(err, os.ErrClosed) {
			t.Errorf("Write after Close: %v, want os.ErrClosed", err)
		}
		b, s := bufs(1, 100)
		if _, err := d.Read(b, s, offset); !errors.Is(err, os.ErrClosed) {
			t.Errorf("Read after Close: %v, want os.ErrClosed", err)
		}
		if _, ok := <-d.Events(); ok {
			t.Error("Events not closed after Close")
		}
		if err := d.Inject([]byte{1}); !errors.Is(err, os.ErrClosed) {
			t.Errorf("Inject after Close: %v", err)
		}
		tun.DrainEvents(d, nil) // returns at once on a closed device
		if err := d.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	})
}

// TestReadBlocksUntilInject checks that Read on an empty device waits for
// the first injected packet and returns it.
func TestReadBlocksUntilInject(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := tuntest.New(1280, 4)
		defer d.Close()
		b, sizes := bufs(4, 100)
		type result struct {
			n   int
			err error
		}
		res := make(chan result, 1)
		go func() {
			n, err := d.Read(b, sizes, offset)
			res <- result{n, err}
		}()
		synctest.Wait()
		select {
		case r := <-res:
			t.Fatalf("Read on an empty device returned %d, %v before any Inject; want it to block", r.n, r.err)
		default:
		}
		if err := d.Inject([]byte{7, 8, 9}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		select {
		case r := <-res:
			if r.err != nil || r.n != 1 || !bytes.Equal(b[0][offset:offset+sizes[0]], []byte{7, 8, 9}) {
				t.Errorf("Read = %d, %v, packet %x; want 1 packet 070809", r.n, r.err, b[0][offset:offset+sizes[0]])
			}
		default:
			t.Fatal("Inject did not unblock Read")
		}
	})
}

// TestCloseUnblocksInject checks that Inject on a full queue blocks, and
// that Close then makes it return os.ErrClosed.
func TestCloseUnblocksInject(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := tuntest.New(1280, 1)
		for range tuntest.QueueLen {
			if err := d.Inject([]byte{1}); err != nil {
				t.Fatal(err)
			}
		}
		blocksUntilClose(t, d, "Inject on a full queue", func() error { return d.Inject([]byte{2}) })
	})
}

func TestWriteDropsWhenFull(t *testing.T) {
	d := tuntest.New(1280, 1)
	defer d.Close()
	pkt := [][]byte{make([]byte, offset+1)}
	for range tuntest.QueueLen + 3 {
		if n, err := d.Write(pkt, offset); err != nil || n != 1+tun.MinWriteOffset {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if got := d.Dropped(); got != 3 {
		t.Errorf("Dropped = %d, want 3", got)
	}
	if len(d.Outbound()) != tuntest.QueueLen {
		t.Errorf("%d packets on Outbound, want %d", len(d.Outbound()), tuntest.QueueLen)
	}
}

func TestReadHonoursBatchSize(t *testing.T) {
	d := tuntest.New(1280, 2)
	defer d.Close()
	for range 5 {
		d.Inject([]byte{1})
	}
	b, sizes := bufs(8, 100)
	if n, err := d.Read(b, sizes, offset); n != 2 || err != nil {
		t.Errorf("Read with 8 bufs and batch 2 = %d, %v; want 2", n, err)
	}
}

// TestInjectContext checks that InjectContext on a full queue waits until
// its context is done, then returns ctx.Err(). The synctest bubble's clock
// advances only while every goroutine is blocked, so the elapsed time is
// exactly the wait.
func TestInjectContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := tuntest.New(1280, 1)
		defer d.Close()
		for range tuntest.QueueLen {
			if err := d.Inject([]byte{1}); err != nil {
				t.Fatal(err)
			}
		}
		const timeout = 10 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		start := time.Now()
		if err := d.InjectContext(ctx, []byte{1}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("InjectContext on a full queue: %v, want DeadlineExceeded", err)
		}
		if waited := time.Since(start); waited != timeout {
			t.Errorf("InjectContext returned after %v, want %v (it must block until the deadline)", waited, timeout)
		}
	})
}

func TestConcurrent(t *testing.T) {
	testkit.CheckLeaks(t)
	const packets = 5000
	d := tuntest.New(1280, 8)
	defer d.Close()
	go func() {
		for i := range packets {
			d.Inject([]byte{byte(i), byte(i >> 8)})
		}
	}()
	done := make(chan struct{})
	go func() {
		// Write drops when Outbound is full, so count drops as delivered
		// and check only the order of what arrives.
		defer close(done)
		last, recv := -1, 0
		for recv+int(d.Dropped()) < packets {
			select {
			case p := <-d.Outbound():
				i := int(p[0]) | int(p[1])<<8
				if i <= last {
					t.Errorf("packet %d after %d: out of order", i, last)
					return
				}
				last, recv = i, recv+1
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	b, sizes := bufs(8, 1280)
	for got := 0; got < packets; {
		n, err := d.Read(b, sizes, offset)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			b[i] = b[i][:offset+sizes[i]]
		}
		if _, err := d.Write(b[:n], offset); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			b[i] = b[i][:cap(b[i])]
		}
		got += n
	}
	<-done
}
