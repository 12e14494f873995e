package tunnel

import (
	"context"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// TestServeEndedConnection checks that a connection which ended before
// its serve ran — its goroutine overtaken by a newer connection's for the
// same path — is not served and does not close the newer one as
// replaced (a concentrator under load; TestControlNotNegotiated met it).
func TestServeEndedConnection(t *testing.T) {
	cert, pin, err := SelfSignedCert("bondd-test")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := quic.ListenAddr("127.0.0.1:0", ServerTLS(cert, nil), &quic.Config{EnableDatagrams: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctls, err := ClientTLS("bondd-test", nil, pin, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	accept := func() (client, server *quic.Conn) {
		t.Helper()
		c, err := quic.DialAddr(ctx, ln.Addr().String(), ctls, &quic.Config{EnableDatagrams: true})
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return c, s
	}
	oldC, oldS := accept()
	newC, newS := accept()
	defer newC.CloseWithError(0, "")

	p, _ := resendBond(t, PathOptions{})
	pc := &p.pc
	stopCtx, stop := context.WithCancel(ctx)
	served := make(chan struct{})
	go func() {
		p.serve(stopCtx, newS, &recorder{})
		close(served)
	}()
	deadline := time.Now().Add(2 * time.Second)
	for pc.conn.Load() != newS {
		if time.Now().After(deadline) {
			t.Fatal("the newer connection was not served")
		}
		time.Sleep(time.Millisecond)
	}

	// The older connection ends (a protocol violation, its peer gone),
	// then its serve runs late.
	oldC.CloseWithError(codeProtocol, "test")
	<-oldS.Context().Done()
	done := make(chan struct{})
	go func() {
		p.serve(stopCtx, oldS, &recorder{})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("serve of an ended connection did not return")
	}
	if err := newS.Context().Err(); err != nil {
		t.Fatalf("the newer connection was closed: %v", context.Cause(newS.Context()))
	}
	if pc.conn.Load() != newS {
		t.Fatal("the path no longer holds the newer connection")
	}
	stop()
	<-served
}
