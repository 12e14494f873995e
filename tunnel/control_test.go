package tunnel

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/bondd/bondd/tunnel/ctrlmsg"
)

// unreadStream opens a stream on a raw QUIC pair whose peer never reads
// it; ctx bounds the test (15 s).
func unreadStream(t *testing.T) (r *rawQUIC, str *quic.Stream, ctx context.Context) {
	t.Helper()
	r = newRawQUIC(t)
	t.Cleanup(r.close)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	str, err := r.client.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return r, str, ctx
}

// writeUntilError writes msg on str with writeControl until a write fails
// (at most max writes) and returns the number of writes before it, how
// long it took and its error.
func writeUntilError(conn *quic.Conn, str *quic.Stream, msg any, max int) (n int, took time.Duration, err error) {
	var wmu sync.Mutex
	for ; n < max; n++ {
		start := time.Now()
		err = writeControl(conn, str, &wmu, msg)
		took = time.Since(start)
		if err != nil {
			break
		}
	}
	return n, took, err
}

// TestWriteControlStalled: a control stream whose peer stops reading takes
// messages until its flow-control window is full. A write of which part
// went on the stream before the window closed gets a second
// ctrlWriteTimeout for the rest, then closes the connection with
// codeControlStalled. A message too large to encode is not written and
// leaves the connection alone.
func TestWriteControlStalled(t *testing.T) {
	r, str, ctx := unreadStream(t)
	huge := map[string]string{"type": "filler", "pad": strings.Repeat("x", ctrlmsg.MaxMessageLen)}
	if _, _, err := writeUntilError(r.client, str, huge, 1); !errors.Is(err, ctrlmsg.ErrEncode) {
		t.Fatalf("a message over MaxMessageLen: %v, want ErrEncode", err)
	}
	if r.client.Context().Err() != nil {
		t.Fatal("a message that was not written closed the connection")
	}
	msg := map[string]string{"type": "filler", "pad": strings.Repeat("x", ctrlmsg.MaxMessageLen-40)}
	n, took, err := writeUntilError(r.client, str, msg, 10_000)
	if !errors.Is(err, errControlStalled) {
		t.Fatalf("after %d messages to a peer that reads none: %v, want errControlStalled", n, err)
	}
	if took < 2*ctrlWriteTimeout {
		t.Errorf("the write failed after %v, before two %v timeouts", took, ctrlWriteTimeout)
	}
	select {
	case <-r.client.Context().Done():
	case <-ctx.Done():
		t.Fatal("the connection was not closed")
	}
	var appErr *quic.ApplicationError
	if cause := context.Cause(r.client.Context()); !errors.As(cause, &appErr) || appErr.ErrorCode != codeControlStalled {
		t.Errorf("connection closed with %v, want code %#x", cause, codeControlStalled)
	}
}

// TestWriteControlBusy: on a stream whose flow-control window is full, a
// small message that cannot be buffered is dropped after ctrlWriteTimeout
// with nothing of it on the stream, and the connection stays up.
func TestWriteControlBusy(t *testing.T) {
	r, str, _ := unreadStream(t)
	msg := map[string]string{"type": "filler", "pad": strings.Repeat("x", 900)}
	n, _, err := writeUntilError(r.client, str, msg, 100_000)
	if !errors.Is(err, errControlBusy) {
		t.Fatalf("after %d small messages to a peer that reads none: %v, want errControlBusy", n, err)
	}
	time.Sleep(100 * time.Millisecond)
	if r.client.Context().Err() != nil {
		t.Fatalf("a dropped message closed the connection: %v", context.Cause(r.client.Context()))
	}
}
