package emu

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Relay benchmarks on loopback. Each op is one 1200-byte datagram sent by a
// client socket, relayed up, and counted at an upstream sink socket.
//
//	go test ./emu/ -run '^$' -bench BenchmarkRelay -benchtime 200000x
//
// Reported metrics:
//   - kpps: datagrams delivered to the sink per second (thousands);
//   - lost%: datagrams sent but neither delivered nor dropped by the model
//     (socket buffer overflows: the relay or the sink fell behind);
//   - modeldrop%: datagrams the link model dropped (queue overflow when the
//     sender bursts after being descheduled);
//   - late-p50-µs, late-p99-µs, late-max-µs: the relay's release time error
//     (actual write minus the model's release time).

// benchRig is a client socket, a relay and an upstream sink on loopback.
type benchRig struct {
	client *net.UDPConn
	sink   *net.UDPConn
	relay  *Relay
	dst    netip.AddrPort
	recv   atomic.Int64
	lastNs atomic.Int64
	done   chan struct{}
	start  time.Time
}

func newBenchRig(tb testing.TB, up LinkConfig) *benchRig { return newBenchRigSpin(tb, up, 0) }

func newBenchRigSpin(tb testing.TB, up LinkConfig, spin time.Duration) *benchRig {
	tb.Helper()
	lo := netip.MustParseAddr("127.0.0.1")
	sink, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(lo, 0)))
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(lo, 0)))
	if err != nil {
		tb.Fatal(err)
	}
	client, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(lo, 0)))
	if err != nil {
		tb.Fatal(err)
	}
	for _, c := range []*net.UDPConn{sink, ln, client} {
		forceBuffers(c, 8<<20)
	}
	r, err := NewRelay(Options{
		Listen:   ln,
		Upstream: sink.LocalAddr().(*net.UDPAddr).AddrPort(),
		DialUpstream: func() (net.PacketConn, error) {
			c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(lo, 0)))
			if err == nil {
				forceBuffers(c, 8<<20)
			}
			return c, err
		},
		Up:         up,
		Seed:       1,
		SpinWindow: spin,
	})
	if err != nil {
		tb.Fatal(err)
	}
	rig := &benchRig{client: client, sink: sink, relay: r, dst: ln.LocalAddr().(*net.UDPAddr).AddrPort(), done: make(chan struct{}), start: time.Now()}
	go func() {
		defer close(rig.done)
		buf := make([]byte, 2048)
		for {
			if _, _, err := sink.ReadFromUDPAddrPort(buf); err != nil {
				return
			}
			rig.recv.Add(1)
			rig.lastNs.Store(int64(time.Since(rig.start)))
		}
	}()
	return rig
}

// forceBuffers sets large socket buffers, beyond rmem_max when root
// (SO_RCVBUFFORCE); failures are ignored.
func forceBuffers(c *net.UDPConn, size int) {
	_ = c.SetReadBuffer(size)
	_ = c.SetWriteBuffer(size)
	if rc, err := c.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, size)
			_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUFFORCE, size)
		})
	}
}

// wait waits until n datagrams arrived or none arrived for idle.
func (rig *benchRig) wait(n int64, idle time.Duration) {
	last, lastChange := rig.recv.Load(), time.Now()
	for rig.recv.Load() < n {
		time.Sleep(time.Millisecond)
		if c := rig.recv.Load(); c != last {
			last, lastChange = c, time.Now()
		} else if time.Since(lastChange) > idle {
			return
		}
	}
}

func (rig *benchRig) close() {
	rig.relay.Close()
	rig.client.Close()
	rig.sink.Close()
	<-rig.done
}

// send sends n datagrams of size bytes, paced at pps (0: as fast as
// possible) in bursts of whatever is due every millisecond.
func (rig *benchRig) send(tb testing.TB, n int, size int, pps float64) {
	buf := make([]byte, size)
	t0 := time.Now()
	for i := 0; i < n; {
		if pps > 0 {
			due := int(time.Since(t0).Seconds() * pps)
			if due <= i {
				time.Sleep(200 * time.Microsecond)
				continue
			}
			for ; i < n && i < due; i++ {
				binary.LittleEndian.PutUint64(buf, uint64(i))
				if _, err := rig.client.WriteToUDPAddrPort(buf, rig.dst); err != nil {
					tb.Fatal(err)
				}
			}
			continue
		}
		binary.LittleEndian.PutUint64(buf, uint64(i))
		if _, err := rig.client.WriteToUDPAddrPort(buf, rig.dst); err != nil {
			tb.Fatal(err)
		}
		i++
	}
}

func (rig *benchRig) report(b *testing.B, sent int, t0 time.Duration) {
	got := rig.recv.Load()
	el := time.Duration(rig.lastNs.Load()) - t0
	if el > 0 {
		b.ReportMetric(float64(got)/el.Seconds()/1000, "kpps")
	}
	st := rig.relay.Stats().Up
	model := st.DropLoss + st.DropQueue + st.DropOutage
	b.ReportMetric(100*float64(uint64(sent)-uint64(got)-model)/float64(sent), "lost%")
	b.ReportMetric(100*float64(model)/float64(sent), "modeldrop%")
	b.ReportMetric(float64(st.LateP50.Microseconds()), "late-p50-µs")
	b.ReportMetric(float64(st.LateP99.Microseconds()), "late-p99-µs")
	b.ReportMetric(float64(st.LateMax.Microseconds()), "late-max-µs")
}

// BenchmarkRelayThroughput1200 sends 1200-byte datagrams through a relay
// with a perfect link, as fast as the client can (unpaced) and paced at
// 50 kpps, and reports the delivered rate.
func BenchmarkRelayThroughput1200(b *testing.B) {
	for _, bc := range []struct {
		name string
		pps  float64
	}{{"unpaced", 0}, {"paced50k", 50000}} {
		b.Run(bc.name, func(b *testing.B) {
			rig := newBenchRig(b, LinkConfig{Delay: time.Millisecond})
			defer rig.close()
			b.ReportAllocs()
			b.ResetTimer()
			t0 := time.Since(rig.start)
			rig.send(b, b.N, 1200, bc.pps)
			rig.wait(int64(b.N), 300*time.Millisecond)
			b.StopTimer()
			rig.report(b, b.N, t0)
		})
	}
}

// BenchmarkRelayRelease20Mbps paces 1200-byte datagrams at 2000/s (19.6
// Mbit/s with headers) into a 20 Mbit/s, 5 ms link and reports the release
// time error against the model, for the default spin window and a longer
// one; run it with -benchtime of a few thousand ops (each op takes
// 0.5 ms).
func BenchmarkRelayRelease20Mbps(b *testing.B) {
	for _, spin := range []time.Duration{DefaultSpinWindow, 400 * time.Microsecond} {
		b.Run(fmt.Sprintf("spin%dus", spin.Microseconds()), func(b *testing.B) {
			rig := newBenchRigSpin(b, LinkConfig{Rate: 20 * Mbps, Delay: 5 * time.Millisecond}, spin)
			defer rig.close()
			b.ReportAllocs()
			b.ResetTimer()
			t0 := time.Since(rig.start)
			rig.send(b, b.N, 1200, 2000)
			rig.wait(int64(b.N), 300*time.Millisecond)
			b.StopTimer()
			rig.report(b, b.N, t0)
		})
	}
}
