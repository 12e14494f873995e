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

// TestWriteControlStalled: a control stream whose peer stops reading takes
// messages until its flow-control window is full; the write that then
// waits ctrlWriteTimeout fails and closes the connection with
// codeControlStalled, since part of its message may be on the stream.
func TestWriteControlStalled(t *testing.T) {
	r := newRawQUIC(t)
	defer r.close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	str, err := r.client.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	msg := map[string]string{"type": "filler", "pad": strings.Repeat("x", ctrlmsg.MaxMessageLen-40)}
	var wmu sync.Mutex
	start := time.Now()
	n := 0
	for ; n < 10_000; n++ {
		if err = writeControl(r.client, str, &wmu, msg); err != nil {
			break
		}
	}
	if err == nil {
		t.Fatalf("%d messages written to a peer that reads none", n)
	}
	if d := time.Since(start); d < ctrlWriteTimeout {
		t.Errorf("the write failed after %v, before the %v timeout: %v", d, ctrlWriteTimeout, err)
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
