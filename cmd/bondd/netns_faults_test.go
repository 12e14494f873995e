package main

import (
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bondd/bondd/internal/testbed"
)

// probe is a 1 kHz UDP probe from one namespace through the tunnel to a
// receiver in another, which records every arrival's time.
type probe struct {
	mu       sync.Mutex
	arrivals []time.Time
	sent     int
	stop     chan struct{}
	wg       sync.WaitGroup
}

// startProbe sends a 64-byte datagram every millisecond from ns from to dst
// (the receiver listens on dst's port in ns to, any address).
func startProbe(t *testing.T, from, to *testbed.NS, dst string) *probe {
	t.Helper()
	ap := netip.MustParseAddrPort(dst)
	srv, err := to.ListenUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), ap.Port()).String())
	if err != nil {
		t.Fatal(err)
	}
	cli, err := from.ListenUDP("0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &probe{stop: make(chan struct{})}
	p.wg.Go(func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := srv.ReadFrom(buf); err != nil {
				return
			}
			p.mu.Lock()
			p.arrivals = append(p.arrivals, time.Now())
			p.mu.Unlock()
		}
	})
	p.wg.Go(func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		msg := make([]byte, 64)
		raddr := net.UDPAddrFromAddrPort(ap)
		for seq := uint32(0); ; seq++ {
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
			binary.BigEndian.PutUint32(msg, seq)
			cli.WriteTo(msg, raddr) // errors while the tunnel is down are the loss we measure
			p.mu.Lock()
			p.sent++
			p.mu.Unlock()
		}
	})
	t.Cleanup(func() {
		close(p.stop)
		srv.Close()
		cli.Close()
		p.wg.Wait()
	})
	return p
}

func (p *probe) count() int { p.mu.Lock(); defer p.mu.Unlock(); return len(p.arrivals) }

// gapAround returns the last arrival before t0 and the first at or after
// it; ok is false while nothing arrived after t0.
func (p *probe) gapAround(t0 time.Time) (before, after time.Time, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.arrivals {
		if a.Before(t0) {
			before = a
			continue
		}
		return before, a, true
	}
	return before, time.Time{}, false
}

// TestNetnsConcRestart stops the concentrator with SIGTERM and then with
// SIGKILL, restarting it each time, under a 1 kHz probe from the edge. It
// checks the targets: SIGTERM exit within 0.5 s, and probes flowing again
// within 1 s of the new process listening (the restarted node's stateless
// resets and the edge's fast redial).
func TestNetnsConcRestart(t *testing.T) {
	requireNetns(t)
	b := newITBed(t)
	pin := b.writeCreds(t)
	b.start(t, b.conc, "concentrator", b.concConfig(), b.concSock)
	status(t, b.concSock)
	b.start(t, b.edge, "edge", b.edgeConfig("bondd0", "10.77.0.2/24", "van.token", pin), b.edgeSock)
	waitCond(t, "three active paths at the concentrator", 15*time.Second, func() bool { return activePaths(status(t, b.concSock)) == 3 })
	p := startProbe(t, b.edge, b.conc, "10.78.0.1:9")
	waitCond(t, "the probe to flow", 5*time.Second, func() bool { return p.count() > 100 })

	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			conc := b.procs[0]
			killed := time.Now()
			conc.Process.Signal(sig)
			conc.Wait()
			exited := time.Now()
			exit := exited.Sub(killed)
			if sig == syscall.SIGTERM && exit > 500*time.Millisecond {
				t.Errorf("SIGTERM → exit took %s, want ≤ 500ms", exit.Round(time.Millisecond))
			}
			os.Remove(b.concSock) // a killed daemon leaves it
			b.procs = b.procs[1:]
			b.start(t, b.conc, "concentrator-"+sig.String(), b.concConfig(), b.concSock)
			n := len(b.procs) // keep the concentrator first
			b.procs = append([]*exec.Cmd{b.procs[n-1]}, b.procs[:n-1]...)
			status(t, b.concSock)
			listening := time.Now()
			waitCond(t, "the probe through the new concentrator", 10*time.Second, func() bool {
				_, _, ok := p.gapAround(killed)
				return ok
			})
			before, after, _ := p.gapAround(killed)
			gap, back := after.Sub(before), after.Sub(listening)
			t.Logf("%s: exit %s, restart (signal → status socket answers) %s, probe gap %s, back %s after listening",
				sig, exit.Round(time.Millisecond), listening.Sub(killed).Round(time.Millisecond), gap.Round(time.Millisecond), back.Round(time.Millisecond))
			if restart := listening.Sub(killed); gap > restart+time.Second {
				t.Errorf("probe gap %s, want ≤ restart %s + 1s", gap.Round(time.Millisecond), restart.Round(time.Millisecond))
			}
			if back > time.Second {
				t.Errorf("probe back %s after the new concentrator listened, want ≤ 1s", back.Round(time.Millisecond))
			}
		})
	}
}
