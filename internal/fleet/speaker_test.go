package fleet

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

func validConfig() Config {
	return Config{
		LocalAS:   65001,
		RouterID:  netip.MustParseAddr("10.91.1.2"),
		NextHop4:  netip.MustParseAddr("10.91.1.2"),
		NextHop6:  netip.MustParseAddr("fd91:1::2"),
		Neighbors: []Neighbor{{Address: netip.MustParseAddr("10.91.1.1"), AS: 65000}},
	}
}

func TestConfigValidate(t *testing.T) {
	a := netip.MustParseAddr
	tests := []struct {
		name string
		mod  func(*Config)
		want string // substring of the error; "" = valid
	}{
		{"valid", func(*Config) {}, ""},
		{"valid iBGP, password, timers, port", func(c *Config) {
			c.ListenPort = 1179
			c.Neighbors[0] = Neighbor{Address: a("fd91::1"), AS: 65001, Port: 1179, Password: "x", HoldTime: 9 * time.Second, ConnectRetry: 2 * time.Second}
		}, ""},
		{"no local AS", func(c *Config) { c.LocalAS = 0 }, "local_as: required"},
		{"AS_TRANS", func(c *Config) { c.LocalAS = 23456 }, "local_as: 23456 is AS_TRANS"},
		{"no router id", func(c *Config) { c.RouterID = netip.Addr{} }, "router_id: required"},
		{"IPv6 router id", func(c *Config) { c.RouterID = a("fd00::1") }, "not an IPv4 address"},
		{"zero router id", func(c *Config) { c.RouterID = a("0.0.0.0") }, "0.0.0.0 is not a router id"},
		{"bad port", func(c *Config) { c.ListenPort = 70000 }, "listen_port: 70000"},
		{"v6 next hop4", func(c *Config) { c.NextHop4 = a("fd00::1") }, "next_hop4"},
		{"link-local next hop6", func(c *Config) { c.NextHop6 = a("fe80::1") }, "next_hop6"},
		{"no neighbours", func(c *Config) { c.Neighbors = nil }, "neighbors: at least one"},
		{"neighbour without address", func(c *Config) { c.Neighbors[0].Address = netip.Addr{} }, "neighbors[0].address: required"},
		{"multicast neighbour", func(c *Config) { c.Neighbors[0].Address = a("224.0.0.5") }, "not a unicast address"},
		{"duplicate neighbour", func(c *Config) {
			c.Neighbors = append(c.Neighbors, Neighbor{Address: a("::ffff:10.91.1.1"), AS: 65000})
		}, "neighbors[1].address: 10.91.1.1 is also neighbors[0]"},
		{"neighbour without AS", func(c *Config) { c.Neighbors[0].AS = 0 }, "neighbors[0].as: required"},
		{"long password", func(c *Config) { c.Neighbors[0].Password = strings.Repeat("x", 81) }, "81 bytes, at most 80"},
		{"hold time 2s", func(c *Config) { c.Neighbors[0].HoldTime = 2 * time.Second }, "neighbors[0].hold_time: 2s"},
		{"hold time fractional", func(c *Config) { c.Neighbors[0].HoldTime = 3500 * time.Millisecond }, "hold_time"},
		{"hold time too long", func(c *Config) { c.Neighbors[0].HoldTime = 70000 * time.Second }, "hold_time"},
		{"connect retry 500ms", func(c *Config) { c.Neighbors[0].ConnectRetry = 500 * time.Millisecond }, "connect_retry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.mod(&c)
			err := c.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want it to contain %q", err, tt.want)
			}
			if _, err := New(c); err == nil {
				t.Fatal("New accepted an invalid config")
			}
		})
	}
	// Every problem is reported, not only the first.
	err := (&Config{}).Validate()
	for _, want := range []string{"local_as", "router_id", "neighbors"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("empty config: %v lacks %s", err, want)
		}
	}
}

// fakePeer listens on loopback as the speaker's neighbour and hands each
// connection the speaker opens to the test.
func fakePeer(t *testing.T) (netip.AddrPort, <-chan net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ch := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			ch <- c
		}
	}()
	return netip.MustParseAddrPort(l.Addr().String()), ch
}

func startSpeaker(t *testing.T, cfg Config) *Speaker {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background(), false) })
	return s
}

// goroutineLeakCheck fails the test if goroutines started during it are
// still running a few seconds after it ends.
func goroutineLeakCheck(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<16)
				t.Errorf("goroutine leak: %d running, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

func TestSpeakerAPIErrors(t *testing.T) {
	goroutineLeakCheck(t)
	ap, _ := fakePeer(t)
	cfg := validConfig()
	cfg.NextHop6 = netip.Addr{}
	cfg.Neighbors[0] = Neighbor{Address: ap.Addr(), AS: 65000, Port: ap.Port(), ConnectRetry: time.Second}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := netip.MustParsePrefix
	if err := s.Announce("van-17", []netip.Prefix{p("10.77.17.0/24")}); !errors.Is(err, ErrNotStarted) {
		t.Errorf("Announce before Start = %v", err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background(), false)
	if err := s.Start(t.Context()); !errors.Is(err, ErrStarted) {
		t.Errorf("second Start = %v", err)
	}
	for _, tt := range []struct {
		edge string
		ps   []netip.Prefix
		want string
	}{
		{"", []netip.Prefix{p("10.77.17.0/24")}, "empty edge id"},
		{"van-17", []netip.Prefix{{}}, "invalid prefix"},
		{"van-17", []netip.Prefix{p("10.77.17.1/24")}, "host bits set"},
		{"van-17", []netip.Prefix{p("::ffff:10.77.17.0/120")}, "IPv4-mapped"},
		{"van-17", []netip.Prefix{p("fd77::/64")}, ErrNoNextHop.Error()},
	} {
		if err := s.Announce(tt.edge, tt.ps); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Announce(%q, %v) = %v, want %q", tt.edge, tt.ps, err, tt.want)
		}
	}
	if err := s.Announce("van-17", []netip.Prefix{p("10.77.17.0/24"), p("10.77.17.0/24")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Announce("van-18", []netip.Prefix{p("10.77.17.0/24")}); !errors.Is(err, ErrPrefixOwned) {
		t.Errorf("Announce of another edge's prefix = %v", err)
	}
	// Replacing the list withdraws what is no longer in it.
	if err := s.Announce("van-17", []netip.Prefix{p("10.77.117.0/24")}); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.Prefixes != 1 || st.Edges != 1 || st.AnnouncedTotal != 2 || st.WithdrawnTotal != 1 || !st.Running {
		t.Errorf("stats after replace: %+v", st)
	}
	if err := s.Announce("van-18", []netip.Prefix{p("10.77.17.0/24")}); err != nil {
		t.Errorf("prefix freed by van-17 not announceable by van-18: %v", err)
	}
	if err := s.Withdraw("nobody"); err != nil {
		t.Errorf("Withdraw of an unknown edge: %v", err)
	}
	if err := s.WithdrawAll(); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Prefixes != 0 || st.Edges != 0 || st.WithdrawnTotal != 3 {
		t.Errorf("stats after WithdrawAll: %+v", st)
	}
	if err := s.Stop(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	if err := s.Withdraw("van-17"); !errors.Is(err, ErrNotStarted) {
		t.Errorf("Withdraw after Stop = %v", err)
	}
	if err := s.Start(t.Context()); !errors.Is(err, ErrNotStarted) {
		t.Errorf("Start after Stop = %v", err)
	}
}

// TestMalformedPeer: a neighbour that answers with garbage, or with an
// OPEN of the wrong AS, is refused (the connection closed, the refusal
// counted) and retried; the speaker keeps running.
func TestMalformedPeer(t *testing.T) {
	goroutineLeakCheck(t)
	ap, conns := fakePeer(t)
	cfg := validConfig()
	cfg.Neighbors[0] = Neighbor{Address: ap.Addr(), AS: 65000, Port: ap.Port(), ConnectRetry: time.Second}
	cfg.Logger = slog.New(slog.NewTextHandler(tlog{t}, nil))
	s := startSpeaker(t, cfg)
	replies := [][]byte{
		[]byte("GET / HTTP/1.1\r\nHost: bondd\r\n\r\n"), // not BGP at all
		append(marker(), 0x00, 0x13, 0x09),              // unknown message type
		append(marker(), 0x00, 0x05, 0x04),              // length below the header's
		// OPEN from AS 64999 where 65000 is expected
		append(marker(), 0x00, 0x1d, 0x01, 0x04, 0xfd, 0xe7, 0x00, 0x5a, 0x0a, 0x5b, 0x01, 0x01, 0x00),
	}
	for i, reply := range replies {
		var c net.Conn
		select {
		case c = <-conns:
		case <-time.After(10 * time.Second):
			t.Fatalf("reply %d: the speaker did not (re)connect", i)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		c.Write(reply)
		// The speaker answers with a NOTIFICATION or just closes: read to EOF.
		if _, err := io.Copy(io.Discard, c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("reply %d: the speaker did not close the session: %v", i, err)
		}
		c.Close()
	}
	st := s.Stats()
	if !st.Running || st.Neighbors[0].Established != 0 {
		t.Fatalf("after malformed peers: %+v", st)
	}
	if st.Neighbors[0].NotificationsSent < uint64(len(replies)) {
		t.Errorf("refusals not counted: %+v", st.Neighbors[0])
	}
	t.Logf("neighbour: %+v", st.Neighbors[0])
}

// tlog writes log lines to the test's log.
type tlog struct{ t *testing.T }

func (w tlog) Write(b []byte) (int, error) { w.t.Log(strings.TrimSpace(string(b))); return len(b), nil }

func marker() []byte {
	b := make([]byte, 16)
	for i := range b {
		b[i] = 0xff
	}
	return b
}

// TestUnknownPeerRefused: with a listening port, a connection from an
// address that is not a neighbour is closed at once.
func TestUnknownPeerRefused(t *testing.T) {
	goroutineLeakCheck(t)
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // a free port for the speaker
	cfg := validConfig()
	cfg.ListenPort = port
	cfg.Neighbors[0].Address = netip.MustParseAddr("192.0.2.1") // not us
	startSpeaker(t, cfg)
	var c net.Conn
	deadline := time.Now().Add(5 * time.Second)
	for {
		if c, err = net.Dial("tcp4", l.Addr().String()); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("speaker not listening on %d: %v", port, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write(append(marker(), 0x00, 0x13, 0x04))
	if n, err := io.Copy(io.Discard, c); err != nil && !errors.Is(err, syscall.ECONNRESET) || n != 0 {
		t.Errorf("unknown peer: read %d bytes, %v; want the connection closed without a word", n, err)
	}
}
