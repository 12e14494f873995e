package tunnel

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/bondd/bondd/tun/tuntest"
)

func TestAdmissionDecisions(t *testing.T) {
	addr := func(s string) *net.UDPAddr { return net.UDPAddrFromAddrPort(netip.MustParseAddrPort(s)) }
	for _, tc := range []struct {
		name string
		opts HandshakeOptions
		// steps: each is an attempt from src, proven or not; want is
		// the admission's answer ("ok", "busy", "source").
		steps []struct {
			src    string
			proven bool
			want   string
		}
	}{
		{"node rate: burst then busy", HandshakeOptions{Rate: 0.001, Burst: 2, PerSource: -1, RetryAbove: -1}.withDefaults(),
			[]struct {
				src    string
				proven bool
				want   string
			}{{"10.0.0.1:1", false, "ok"}, {"10.0.0.2:1", false, "ok"}, {"10.0.0.3:1", false, "busy"}}},
		{"per source: one address limited, another not", HandshakeOptions{Rate: -1, PerSource: 0.001, PerSourceBurst: 1, RetryAbove: -1}.withDefaults(),
			[]struct {
				src    string
				proven bool
				want   string
			}{{"10.0.0.1:1", false, "ok"}, {"10.0.0.1:2", false, "source"}, {"10.0.0.2:1", false, "ok"}}},
		{"per source: proven and unproven apart", HandshakeOptions{Rate: -1, PerSource: 0.001, PerSourceBurst: 1, RetryAbove: -1}.withDefaults(),
			[]struct {
				src    string
				proven bool
				want   string
			}{{"10.0.0.1:1", false, "ok"}, {"10.0.0.1:2", false, "source"}, {"10.0.0.1:3", true, "ok"}, {"10.0.0.1:4", true, "source"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAdmission(tc.opts)
			for i, s := range tc.steps {
				err := a.admit(&quic.ClientInfo{RemoteAddr: addr(s.src), AddrVerified: s.proven})
				got := map[error]string{nil: "ok", errBusy: "busy", errSourceRate: "source"}[err]
				if got != s.want {
					t.Errorf("step %d from %s (proven %v): %q (%v), want %q", i, s.src, s.proven, got, err, s.want)
				}
			}
		})
	}
}

func TestAdmissionRetryUnderLoad(t *testing.T) {
	var retries atomic.Uint64
	a := newAdmission(HandshakeOptions{Rate: 10, Burst: 5, PerSource: 1, PerSourceBurst: 1, RetryAbove: 2}.withDefaults())
	src := net.UDPAddrFromAddrPort(netip.MustParseAddrPort("10.0.0.1:1"))
	if a.verify(src, &retries) {
		t.Fatal("an idle node asked a new address for a Retry")
	}
	// The address's unproven bucket is used up: its next Initial must
	// prove the address; another address's need not.
	if err := a.admit(&quic.ClientInfo{RemoteAddr: src}); err != nil {
		t.Fatal(err)
	}
	if !a.verify(src, &retries) {
		t.Error("an address whose unproven bucket is empty was not asked for a Retry")
	}
	other := net.UDPAddrFromAddrPort(netip.MustParseAddrPort("10.0.0.2:1"))
	if a.verify(other, &retries) {
		t.Error("another address was asked for a Retry")
	}
	// More handshakes in progress than RetryAbove: everyone retries.
	a.inProgress.Store(3)
	if !a.verify(other, &retries) {
		t.Error("no Retry with 3 handshakes in progress, RetryAbove 2")
	}
	a.inProgress.Store(0)
	// More attempts in a second than rate + burst: everyone retries.
	for range 20 {
		a.verify(net.UDPAddrFromAddrPort(netip.MustParseAddrPort("10.0.9.9:1")), &retries)
	}
	if !a.verify(other, &retries) {
		t.Error("no Retry after 20 attempts in a second at a rate of 10 + 5")
	}
	if got := retries.Load(); got < 3 {
		t.Errorf("%d retries counted, want at least 3", got)
	}
}

// TestAdmissionEndToEnd dials a real concentrator: a returning edge
// resumes its TLS session, also after the node restarts with the same
// certificate; with Retry always on a new edge still connects (one
// Retry), and a returning one skips it with its NEW_TOKEN token; over
// the node's rate an edge is refused at once as busy.
func TestAdmissionEndToEnd(t *testing.T) {
	cert, pin, err := SelfSignedCert("concentrator.test")
	if err != nil {
		t.Fatal(err)
	}
	start := func(addr string, ho HandshakeOptions) (*Concentrator, string) {
		t.Helper()
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c, err := NewConcentrator(ConcentratorOptions{Device: tuntest.New(testMTU, 8), MTU: testMTU, Conn: pc, TLS: ServerTLS(cert, nil),
			Edges: []EdgeAuth{{ID: "e", Token: token, AllowedPrefixes: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32")}}}, Handshakes: ho})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		return c, pc.LocalAddr().String()
	}
	conc, addr := start("127.0.0.1:0", HandshakeOptions{RetryAbove: RetryAlways})
	ctls, err := ClientTLS("concentrator.test", nil, pin, nil)
	if err != nil {
		t.Fatal(err)
	}
	edev := tuntest.New(testMTU, 8)
	defer edev.Close()
	e, err := NewEdge(EdgeOptions{ID: "e", Device: edev, MTU: testMTU, Concentrator: addr, TLS: ctls, Token: token,
		Uplinks: []UplinkOptions{{Name: "a", Bind: netip.MustParseAddr("127.0.0.1")}}})
	if err != nil {
		t.Fatal(err)
	}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	defer func() { e.cancel(); e.wg.Wait() }()
	dial := func() (resumed bool, err error) {
		conn, closeConn, _, err := e.dial(context.Background(), e.opts.Uplinks[0], 2*time.Second, nil)
		if err != nil {
			return false, err
		}
		resumed = conn.ConnectionState().TLS.DidResume
		time.Sleep(50 * time.Millisecond) // the session ticket and NEW_TOKEN arrive after the handshake
		conn.CloseWithError(codeShutdown, "")
		closeConn()
		return resumed, nil
	}
	if r, err := dial(); err != nil || r {
		t.Fatalf("first dial: resumed %v, %v; want a full handshake", r, err)
	}
	// One Retry per Initial packet of the attempt (a ClientHello with a
	// post-quantum key share takes two).
	retried := conc.Handshakes().Retries
	if retried == 0 {
		t.Error("first dial with Retry always on: no Retry")
	}
	if r, err := dial(); err != nil || !r {
		t.Fatalf("second dial: resumed %v, %v; want a resumed session", r, err)
	}
	if n := conc.Handshakes().Retries; n != retried {
		t.Errorf("second dial: %d retries in all, want still %d (its NEW_TOKEN token proves the address)", n, retried)
	}
	// An attempt that takes the token and fails leaves it for the next.
	store := e.res.tokenStore(addr)
	if tok := store.Pop("concentrator.test"); tok == nil || store.Pop("concentrator.test") != tok {
		t.Errorf("the edge's token store gave %v, then another; want the same token for every attempt", tok)
	}
	// Restart on the same address with the same certificate: the ticket
	// and token keys are the same.
	conc.Close()
	conc, _ = start(addr, HandshakeOptions{Rate: 0.001, Burst: 1, RetryAbove: -1})
	defer conc.Close()
	if r, err := dial(); err != nil || !r {
		t.Fatalf("after a restart: resumed %v, %v; want a resumed session", r, err)
	}
	_, err = dial()
	if !errors.Is(fleetErr(err), ErrBusy) || !IsRefusal(fleetErr(err)) {
		t.Fatalf("over the rate: %v, want ErrBusy", err)
	}
	h := conc.Handshakes()
	if h.Busy == 0 || h.Accepted != 1 || h.InProgress != 0 {
		t.Errorf("counters %+v, want busy Initials, 1 accepted, none in progress", h)
	}
	if n := conc.TransportDropCounts()["busy"]; n != h.Busy {
		t.Errorf("transport drops: busy %d, want %d", n, h.Busy)
	}
}

// TestFloodOfInitials replays real first flights (InitialFlights) at a
// concentrator from one socket that never answers: with Retry on, each
// is answered with a Retry and the node starts no handshake; with it off
// (and no rate bound), the node starts one per flight, which is the
// state a spoofed flood would make it keep.
func TestFloodOfInitials(t *testing.T) {
	flights, err := InitialFlights(context.Background(), 20, "concentrator.test")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range flights {
		if len(f) == 0 || len(f[0]) < 1200 || f[0][0]&0xf0 != 0xc0 { // long header, Initial (RFC 9000 §17.2.2)
			t.Fatalf("flight %v: want Initial packets of at least 1200 bytes", len(f))
		}
	}
	for _, tc := range []struct {
		name      string
		ho        HandshakeOptions
		wantRetry bool
	}{
		{"retry", HandshakeOptions{RetryAbove: RetryAlways}, true},
		{"no retry", HandshakeOptions{Rate: -1, PerSource: -1, RetryAbove: -1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cert, _, err := SelfSignedCert("concentrator.test")
			if err != nil {
				t.Fatal(err)
			}
			pc, err := net.ListenPacket("udp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			c, err := NewConcentrator(ConcentratorOptions{Device: tuntest.New(testMTU, 8), MTU: testMTU, Conn: pc, TLS: ServerTLS(cert, nil),
				Edges: []EdgeAuth{{ID: "e", Token: token, AllowedPrefixes: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32")}}}, Handshakes: tc.ho})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			src, err := net.ListenPacket("udp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			for _, f := range flights {
				for _, p := range f {
					src.WriteTo(p, pc.LocalAddr())
				}
			}
			deadline := time.Now().Add(5 * time.Second)
			for time.Now().Before(deadline) {
				h := c.Handshakes()
				if (tc.wantRetry && h.Retries >= uint64(len(flights))) || (!tc.wantRetry && h.InProgress >= int64(len(flights))) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			h := c.Handshakes()
			if tc.wantRetry && (h.Retries < uint64(len(flights)) || h.InProgress != 0) {
				t.Errorf("with Retry: %+v; want a Retry per flight and no handshake started", h)
			}
			if !tc.wantRetry && (h.Retries != 0 || h.InProgress < int64(len(flights))) {
				t.Errorf("without Retry: %+v; want a handshake started per flight", h)
			}
		})
	}
}
