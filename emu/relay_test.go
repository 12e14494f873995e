package emu

import (
	"encoding/binary"
	"errors"
	"math"
	"net"
	"net/netip"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bondd/bondd/internal/testkit"
)

// memNet is an in-process datagram network of memConns, for running the
// relay under testing/synctest. Delivery is instant; a full receive
// queue drops.
type memNet struct {
	mu    sync.Mutex
	conns map[netip.AddrPort]*memConn
	port  uint16
}

type memPkt struct {
	b    []byte
	from netip.AddrPort
}

type memConn struct {
	net    *memNet
	addr   netip.AddrPort
	in     chan memPkt
	closed chan struct{}
	once   sync.Once
}

func newMemNet() *memNet { return &memNet{conns: map[netip.AddrPort]*memConn{}, port: 1000} }

func (n *memNet) listen() *memConn {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.port++
	c := &memConn{net: n, addr: netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), n.port), in: make(chan memPkt, 1024), closed: make(chan struct{})}
	n.conns[c.addr] = c
	return c
}

func (c *memConn) ReadFrom(b []byte) (int, net.Addr, error) {
	select {
	case p := <-c.in:
		return copy(b, p.b), net.UDPAddrFromAddrPort(p.from), nil
	case <-c.closed:
		return 0, nil, net.ErrClosed
	}
}

func (c *memConn) WriteTo(b []byte, a net.Addr) (int, error) {
	select {
	case <-c.closed:
		return 0, net.ErrClosed
	default:
	}
	ua, ok := a.(*net.UDPAddr)
	if !ok {
		return 0, errors.New("memConn: not a UDP address")
	}
	c.net.mu.Lock()
	dst := c.net.conns[ua.AddrPort()]
	c.net.mu.Unlock()
	if dst != nil {
		select {
		case dst.in <- memPkt{slices.Clone(b), c.addr}:
		default:
		}
	}
	return len(b), nil
}

func (c *memConn) Close() error {
	c.once.Do(func() {
		close(c.closed)
		c.net.mu.Lock()
		delete(c.net.conns, c.addr)
		c.net.mu.Unlock()
	})
	return nil
}

func (c *memConn) LocalAddr() net.Addr              { return net.UDPAddrFromAddrPort(c.addr) }
func (c *memConn) SetDeadline(time.Time) error      { return nil }
func (c *memConn) SetReadDeadline(time.Time) error  { return nil }
func (c *memConn) SetWriteDeadline(time.Time) error { return nil }
func (c *memConn) pending() int                     { return len(c.in) }
func (c *memConn) send(t *testing.T, b []byte, to net.Addr) {
	t.Helper()
	if _, err := c.WriteTo(b, to); err != nil {
		t.Fatal(err)
	}
}

// TestRelayVirtualTime runs a relay over memConns under testing/synctest:
// with the fake clock, release times are exact, so the test checks each
// packet's delay to the nanosecond.
func TestRelayVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mn := newMemNet()
		client, server, ln := mn.listen(), mn.listen(), mn.listen()
		r, err := NewRelay(Options{
			Listen:       ln,
			Upstream:     server.addr,
			DialUpstream: func() (net.PacketConn, error) { return mn.listen(), nil },
			// 97-byte payloads are 125-byte IPv4 packets: 1 ms at 1 Mbit/s.
			Up:           LinkConfig{Rate: 1 * Mbps, Delay: 50 * time.Millisecond},
			Down:         LinkConfig{Delay: 10 * time.Millisecond},
			CoarseTimers: true,
			IdleTimeout:  10 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		payload := make([]byte, 97)
		for i := range 10 {
			binary.BigEndian.PutUint32(payload, uint32(i))
			client.send(t, payload, ln.LocalAddr())
		}
		buf := make([]byte, 2048)
		var via net.Addr
		for i := range 10 {
			n, from, err := server.ReadFrom(buf)
			if err != nil {
				t.Fatal(err)
			}
			got := time.Since(start)
			want := 50*time.Millisecond + time.Duration(i+1)*time.Millisecond
			if n != 97 || binary.BigEndian.Uint32(buf) != uint32(i) || got != want {
				t.Fatalf("packet %d: %d bytes, seq %d at %v; want 97 bytes, seq %d at %v", i, n, binary.BigEndian.Uint32(buf), got, i, want)
			}
			if i == 0 {
				via = from
			} else if from.String() != via.String() {
				t.Fatalf("upstream saw source %v, then %v", via, from)
			}
		}
		if via.String() == client.LocalAddr().String() {
			t.Fatal("upstream saw the client's own address, not the relay's socket")
		}

		// Down: the server answers; the client gets it 10 ms later.
		t0 := time.Now()
		server.send(t, []byte("pong"), via)
		n, from, err := client.ReadFrom(buf)
		if err != nil || string(buf[:n]) != "pong" || from.String() != ln.LocalAddr().String() || time.Since(t0) != 10*time.Millisecond {
			t.Fatalf("reply %q from %v after %v (err %v); want pong from the relay after 10ms", buf[:n], from, time.Since(t0), err)
		}
		// Datagrams from strangers on the session socket are dropped.
		mn.listen().send(t, []byte("stranger"), via)

		// A second client gets its own upstream socket.
		client2 := mn.listen()
		client2.send(t, payload, ln.LocalAddr())
		_, from2, err := server.ReadFrom(buf)
		if err != nil || from2.String() == via.String() {
			t.Fatalf("second client relayed from %v (first %v), err %v", from2, via, err)
		}

		// Down: nothing passes, in either direction.
		r.SetDown(true)
		client.send(t, payload, ln.LocalAddr())
		server.send(t, []byte("x"), via)
		time.Sleep(time.Second)
		synctest.Wait()
		if server.pending() != 0 || client.pending() != 0 {
			t.Fatal("datagrams crossed a link that is down")
		}
		r.SetDown(false)

		// A new config applies from now on.
		if err := r.SetConfig(Up, LinkConfig{Delay: 5 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		t1 := time.Now()
		client.send(t, payload, ln.LocalAddr())
		if _, _, err := server.ReadFrom(buf); err != nil || time.Since(t1) != 5*time.Millisecond {
			t.Fatalf("after SetConfig: delay %v, err %v; want 5ms", time.Since(t1), err)
		}
		if err := r.SetConfig(Up, LinkConfig{Loss: 2}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("SetConfig with a bad config: %v", err)
		}

		st := r.Stats()
		wantUp := DirStats{Packets: 13, Bytes: 13 * 97, Delivered: 12, DeliveredBytes: 12 * 97, DropOutage: 1}
		wantDown := DirStats{Packets: 3, Bytes: 4 + 8 + 1, Delivered: 1, DeliveredBytes: 4, DropOutage: 1, DropOther: 1}
		if !sameCounters(st.Up, wantUp) || !sameCounters(st.Down, wantDown) || st.Clients != 2 {
			t.Errorf("stats\n up   %+v\n down %+v\n clients %d\nwant\n up   %+v\n down %+v\n clients 2", st.Up, st.Down, st.Clients, wantUp, wantDown)
		}
		// Exact fake-clock releases: zero lateness.
		if st.Up.LateMax != 0 {
			t.Errorf("lateness %v under the fake clock", st.Up.LateMax)
		}

		// Idle sessions expire.
		time.Sleep(15 * time.Second)
		synctest.Wait()
		if c := r.Stats().Clients; c != 0 {
			t.Errorf("%d sessions after the idle timeout", c)
		}
		if err := r.Close(); err != nil {
			t.Error(err)
		}
		if err := r.SetConfig(Up, LinkConfig{}); !errors.Is(err, net.ErrClosed) {
			t.Errorf("SetConfig after Close: %v", err)
		}
		client.Close()
		client2.Close()
		server.Close()
		// synctest.Test fails if any relay goroutine is still running.
	})
}

func sameCounters(a, b DirStats) bool {
	a.LateP50, a.LateP99, a.LateMax, a.Scheduled = 0, 0, 0, 0
	b.LateP50, b.LateP99, b.LateMax, b.Scheduled = 0, 0, 0, 0
	return a == b
}

// TestRelayReorderVirtualTime checks that with Reorder and jitter, the
// release routine sends packets in release order, not arrival order.
func TestRelayReorderVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mn := newMemNet()
		client, server, ln := mn.listen(), mn.listen(), mn.listen()
		up := LinkConfig{Delay: 20 * time.Millisecond, Jitter: 15 * time.Millisecond, Reorder: true}
		r, err := NewRelay(Options{Listen: ln, Upstream: server.addr, DialUpstream: func() (net.PacketConn, error) { return mn.listen(), nil }, Up: up, Seed: 5, CoarseTimers: true})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		// The relay's up model: same config, seed derivation as the relay.
		model, _ := NewLink(up, seedFor(5, "up#0"))
		start := time.Now()
		const n = 50
		type arrival struct {
			i  int
			at time.Duration
		}
		got := make(chan arrival, n)
		go func() {
			buf := make([]byte, 2048)
			for range n {
				if _, _, err := server.ReadFrom(buf); err != nil {
					return
				}
				got <- arrival{int(binary.BigEndian.Uint32(buf)), time.Since(start)}
			}
		}()
		payload := make([]byte, 100)
		want := make([]time.Duration, n)
		for i := range n {
			binary.BigEndian.PutUint32(payload, uint32(i))
			client.send(t, payload, ln.LocalAddr())
			want[i], _ = model.Send(time.Duration(i)*time.Millisecond, 128)
			time.Sleep(time.Millisecond)
		}
		reordered := false
		prev := -1
		for range n {
			a := <-got
			if a.at != want[a.i] {
				t.Fatalf("packet %d released at %v, model says %v", a.i, a.at, want[a.i])
			}
			if a.i < prev {
				reordered = true
			}
			prev = a.i
		}
		if !reordered {
			t.Error("no reordering with Reorder and jitter ≫ packet gap")
		}
		client.Close()
		server.Close()
	})
}

// TestRelayLoopback relays real UDP on loopback: delays, one upstream
// source per client, SetDown, and no goroutine left behind.
func TestRelayLoopback(t *testing.T) {
	testkit.CheckLeaks(t)
	lo := netip.MustParseAddr("127.0.0.1")
	listenLo := func() *net.UDPConn {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(lo, 0)))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	server, ln := listenLo(), listenLo()
	defer server.Close()
	// Echo server; remembers the sources it saw.
	var mu sync.Mutex
	sources := map[netip.AddrPort]bool{}
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := server.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			mu.Lock()
			sources[from] = true
			mu.Unlock()
			server.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	const upDelay, downDelay = 20 * time.Millisecond, 10 * time.Millisecond
	r, err := NewRelay(Options{
		Listen:   ln,
		Upstream: server.LocalAddr().(*net.UDPAddr).AddrPort(),
		Up:       LinkConfig{Delay: upDelay},
		Down:     LinkConfig{Delay: downDelay},
	})
	if err != nil {
		t.Fatal(err)
	}
	relayAddr := ln.LocalAddr().(*net.UDPAddr).AddrPort()
	c1, c2 := listenLo(), listenLo()
	defer c1.Close()
	defer c2.Close()

	ping := func(c *net.UDPConn, seq uint32) (time.Duration, bool) {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], seq)
		t0 := time.Now()
		if _, err := c.WriteToUDPAddrPort(b[:], relayAddr); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		buf := make([]byte, 64)
		for {
			n, _, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return 0, false
			}
			if n == 4 && binary.BigEndian.Uint32(buf) == seq {
				return time.Since(t0), true
			}
		}
	}
	const want = upDelay + downDelay
	for i := range 5 {
		for _, c := range []*net.UDPConn{c1, c2} {
			rtt, ok := ping(c, uint32(i))
			// The relay adds exactly 30 ms; scheduling on a busy machine
			// may add some, never subtract.
			if !ok || rtt < want || rtt > want+50*time.Millisecond {
				t.Errorf("ping %d: rtt %v (ok %v), want %v + a little", i, rtt, ok, want)
			}
		}
	}
	mu.Lock()
	nsrc := len(sources)
	mu.Unlock()
	if nsrc != 2 {
		t.Errorf("upstream saw %d sources for 2 clients", nsrc)
	}

	// While down, the datagram is dropped as it is read: wait for that
	// drop to be counted rather than for a reply that must not come. The
	// final stats check that it was not delivered as well.
	r.SetDown(true)
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], 100)
	if _, err := c1.WriteToUDPAddrPort(b[:], relayAddr); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); r.Stats().Up.DropOutage == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if st := r.Stats().Up; st.DropOutage != 1 {
		t.Errorf("ping while down: up stats %+v, want 1 outage drop", st)
	}
	r.SetDown(false)
	if _, ok := ping(c1, 101); !ok {
		t.Error("no ping after the link came back up")
	}
	// The relay counts a delivery after its write returns, which may be
	// after the client has read the datagram: let the counters settle.
	st := r.Stats()
	for deadline := time.Now().Add(time.Second); st.Down.Delivered < 11 && time.Now().Before(deadline); st = r.Stats() {
		time.Sleep(time.Millisecond)
	}
	if st.Up.Delivered != 11 || st.Down.Delivered != 11 || st.Up.DropOutage != 1 || st.Clients != 2 {
		t.Errorf("stats %+v", st)
	}
	if err := r.Close(); err != nil {
		t.Error(err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestRelayAllocs checks that relaying does not allocate per packet: over
// 2000 datagrams the process allocates less than 0.1 objects per datagram
// (one allocation per packet would show as ≥ 1).
func TestRelayAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	testkit.CheckLeaks(t)
	rig := newBenchRig(t, LinkConfig{Delay: time.Millisecond})
	defer rig.close()
	// A garbage collection empties sync.Pools, and the buffers taken
	// after it are new allocations that say nothing about the relay's
	// steady state; on a loaded machine one lands inside the window.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	rig.send(t, 500, 1200, 20000) // warm the pools
	rig.wait(500, time.Second)
	// A round on a loaded machine can back up deeper than the rounds
	// before it and grow the pools to that depth; those allocations stop
	// once the pools hold it. A per-packet allocation shows in every
	// round, so the test takes the best of three.
	const n = 2000
	total, best := int64(500), math.Inf(1)
	for range 3 {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		rig.send(t, n, 1200, 20000)
		total += n
		rig.wait(total, time.Second)
		runtime.ReadMemStats(&m1)
		if got := rig.recv.Load(); got < total-n/10 {
			t.Fatalf("only %d of %d datagrams arrived", got, total)
		}
		best = min(best, float64(m1.Mallocs-m0.Mallocs)/n)
		if best <= 0.1 {
			return
		}
	}
	t.Errorf("%.2f allocations per relayed datagram in the best of three rounds", best)
}

func TestNewRelayOptions(t *testing.T) {
	mn := newMemNet()
	tests := []struct {
		name string
		opts Options
	}{
		{"no listen", Options{Upstream: netip.MustParseAddrPort("127.0.0.1:1")}},
		{"no upstream", Options{Listen: mn.listen()}},
		{"no port", Options{Listen: mn.listen(), Upstream: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 0)}},
		{"bad up", Options{Listen: mn.listen(), Upstream: netip.MustParseAddrPort("127.0.0.1:1"), Up: LinkConfig{Delay: -1}}},
		{"bad down", Options{Listen: mn.listen(), Upstream: netip.MustParseAddrPort("127.0.0.1:1"), Down: LinkConfig{Loss: -1}}},
	}
	for _, tc := range tests {
		if _, err := NewRelay(tc.opts); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", tc.name, err)
		}
	}
}

func TestLateHist(t *testing.T) {
	var h lateHist
	for i := range 98 {
		h.add(time.Duration(i%10) * time.Microsecond) // 0–9 µs
	}
	h.add(500 * time.Microsecond)
	h.add(30 * time.Millisecond)
	p50, p99, mx := h.quantiles()
	if p50 != 5*time.Microsecond || p99 != 505*time.Microsecond || mx != 30*time.Millisecond {
		t.Errorf("p50 %v p99 %v max %v", p50, p99, mx)
	}
}

// TestRelayMaxPacket: with SetMaxPacket a direction drops the datagrams
// whose IP packet is larger than the limit (counted as DropTooBig) and
// relays the others, until the limit is removed.
func TestRelayMaxPacket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mn := newMemNet()
		client, server, ln := mn.listen(), mn.listen(), mn.listen()
		r, err := NewRelay(Options{Listen: ln, Upstream: server.addr, CoarseTimers: true,
			DialUpstream: func() (net.PacketConn, error) { return mn.listen(), nil }})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		buf := make([]byte, 2048)
		r.SetMaxPacket(Up, 1300)
		for _, c := range []struct {
			payload int
			pass    bool
		}{{1272, true}, {1273, false}, {100, true}, {1400, false}} { // + 28 bytes of IPv4 and UDP headers
			client.send(t, make([]byte, c.payload), ln.LocalAddr())
			synctest.Wait()
			if got := server.pending() == 1; got != c.pass {
				t.Fatalf("%d-byte payload under a 1300-byte limit: relayed %v, want %v", c.payload, got, c.pass)
			}
			if c.pass {
				server.ReadFrom(buf)
			}
		}
		r.SetMaxPacket(Up, 0)
		client.send(t, make([]byte, 1400), ln.LocalAddr())
		synctest.Wait()
		if server.pending() != 1 {
			t.Fatal("a 1400-byte payload was not relayed once the limit was removed")
		}
		if st := r.Stats().Up; st.DropTooBig != 2 || st.Delivered != 3 {
			t.Fatalf("up stats %+v, want 2 too-big drops and 3 delivered", st)
		}
	})
}
