package bench

// The fault matrix's traffic: the 1 kHz probe through the tunnel, which
// records every packet's send and first arrival time (sender and receiver
// run in this process, so one-way delays are exact), and the hostile
// host's garbage sender.

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/bondd/bondd/internal/testbed"
)

// Probe parameters.
const (
	// faultsProbeInterval is the probe's period: 1 kHz.
	faultsProbeInterval = time.Millisecond
	// faultsProbeSize is the probe's UDP payload, bytes; the MTU case
	// sends faultsProbeFull.
	faultsProbeSize = 64
	// faultsProbeFull (as a faultCase's probeSize) is a payload that
	// fills the bond's MTU: inner IPv4 packets of the TUN's MTU (1280
	// bytes by default), datagrams of more than 1300 bytes on the wire.
	faultsProbeFull = -1
	// faultsRecoverBin and faultsRecoverRatio define "traffic restored":
	// the end of the last 100 ms of sending that lost more than 10 % of
	// the packets the probe sends in 100 ms (10 packets; counted against
	// the nominal rate, so that a bin where a busy machine sent few
	// packets and lost one is not an outage).
	faultsRecoverBin   = 100 * time.Millisecond
	faultsRecoverRatio = 0.9
)

// faultProbe is one case's probe: a sender in one namespace, a receiver
// on the concentrator's TUN address in the other.
type faultProbe struct {
	tag   uint32
	start time.Time

	mu       sync.Mutex
	sendAt   []time.Duration // guarded by mu: per sequence number, since start
	recvAt   []time.Duration // guarded by mu: first arrival per sequence number, -1 none
	arrivals []time.Duration // guarded by mu: first arrivals in arrival order
	dups     int             // guarded by mu

	srv, cli   *net.UDPConn
	stop       chan struct{}
	sendDone   chan struct{}
	recvDone   chan struct{}
	stopSendMu sync.Once
}

// startFaultProbe sends size-byte UDP payloads every millisecond from ns
// from to dst, received by a socket on dst's port in ns to.
func startFaultProbe(from, to *testbed.NS, dst netip.AddrPort, size int, tag uint32) (*faultProbe, error) {
	srv, err := to.ListenUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), dst.Port()).String())
	if err != nil {
		return nil, err
	}
	cli, err := from.ListenUDP("0.0.0.0:0")
	if err != nil {
		srv.Close()
		return nil, err
	}
	p := &faultProbe{tag: tag, start: time.Now(), srv: srv, cli: cli, stop: make(chan struct{}),
		sendDone: make(chan struct{}), recvDone: make(chan struct{})}
	go p.routineReceive()
	go p.routineSend(net.UDPAddrFromAddrPort(dst), max(size, 8))
	return p, nil
}

// routineReceive records first arrivals until the socket is closed.
func (p *faultProbe) routineReceive() {
	defer close(p.recvDone)
	buf := make([]byte, 2048)
	for {
		n, _, err := p.srv.ReadFrom(buf)
		if err != nil {
			return
		}
		now := time.Since(p.start)
		if n < 8 || binary.BigEndian.Uint32(buf) != p.tag {
			continue
		}
		seq := int(binary.BigEndian.Uint32(buf[4:]))
		p.mu.Lock()
		if seq < len(p.recvAt) {
			if p.recvAt[seq] < 0 {
				p.recvAt[seq] = now
				p.arrivals = append(p.arrivals, now)
			} else {
				p.dups++
			}
		}
		p.mu.Unlock()
	}
}

// routineSend sends one packet per tick until stop, catching up on ticks
// a busy machine missed (so the rate stays 1 kHz on average).
func (p *faultProbe) routineSend(dst *net.UDPAddr, size int) {
	defer close(p.sendDone)
	tick := time.NewTicker(faultsProbeInterval)
	defer tick.Stop()
	msg := make([]byte, size)
	binary.BigEndian.PutUint32(msg, p.tag)
	for seq := 0; ; {
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
		for due := int(time.Since(p.start) / faultsProbeInterval); seq <= due; seq++ {
			binary.BigEndian.PutUint32(msg[4:], uint32(seq))
			p.mu.Lock()
			p.sendAt = append(p.sendAt, time.Since(p.start))
			p.recvAt = append(p.recvAt, -1)
			p.mu.Unlock()
			p.cli.WriteTo(msg, dst) // an error is a loss like any other
		}
	}
}

// stopSending stops the sender; the receiver goes on.
func (p *faultProbe) stopSending() {
	p.stopSendMu.Do(func() { close(p.stop) })
	<-p.sendDone
}

// close stops both sides.
func (p *faultProbe) close() {
	p.stopSending()
	p.srv.Close()
	p.cli.Close()
	<-p.recvDone
}

// since is t as the probe's clock.
func (p *faultProbe) since(t time.Time) time.Duration { return t.Sub(p.start) }

// received returns the packets received (first arrivals) so far.
func (p *faultProbe) received() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.arrivals)
}

// lastArrival returns the latest first arrival, -1 before any.
func (p *faultProbe) lastArrival() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.arrivals) == 0 {
		return -1
	}
	return p.arrivals[len(p.arrivals)-1]
}

// counts returns the packets sent and received.
func (p *faultProbe) counts() (sent, received int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sendAt), len(p.arrivals)
}

// longestGap returns the longest time between consecutive arrivals whose
// later one falls in [from, to], counting a silence still open at to.
func (p *faultProbe) longestGap(from, to time.Duration) time.Duration {
	return p.gap(from, to, false)
}

// longestGapStarting is longestGap for the silences that start at or
// after from (a silence already open at from is not counted).
func (p *faultProbe) longestGapStarting(from, to time.Duration) time.Duration {
	return p.gap(from, to, true)
}

func (p *faultProbe) gap(from, to time.Duration, startAfter bool) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var gap time.Duration
	prev := time.Duration(-1)
	for _, a := range p.arrivals {
		if a > to {
			return gap
		}
		if prev >= 0 && a >= from && (!startAfter || prev >= from) {
			gap = max(gap, a-prev)
		}
		prev = a
	}
	if prev >= 0 && to > prev {
		gap = max(gap, to-max(prev, from))
	}
	return gap
}

// restoredAfter returns the end of the last faultsRecoverBin of sending
// in [from, to) that lost more than 1 − faultsRecoverRatio of the
// packets the probe sends in a bin, measured from from; 0 when no bin
// lost that many.
func (p *faultProbe) restoredAfter(from, to time.Duration) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var last time.Duration
	for lo := from; lo+faultsRecoverBin <= to; lo += faultsRecoverBin {
		hi := lo + faultsRecoverBin
		sent, got := 0, 0
		for i, s := range p.sendAt { // a few 10 k entries: fast enough
			if s >= lo && s < hi {
				sent++
				if p.recvAt[i] >= 0 {
					got++
				}
			}
		}
		if float64(sent-got) > (1-faultsRecoverRatio)*float64(faultsRecoverBin/faultsProbeInterval) {
			last = hi - from
		}
	}
	return last
}

// maxDelay returns the largest one-way delay of a delivered packet.
func (p *faultProbe) maxDelay() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var d time.Duration
	for i, r := range p.recvAt {
		if r >= 0 {
			d = max(d, r-p.sendAt[i])
		}
	}
	return d
}

// Garbage flood parameters (the target: 2,000 datagrams/s).
const (
	faultsGarbageRate = 2000
	// garbageResetTriggerMin is the size from which a short-header packet
	// for no connection draws a stateless reset (RFC 9000 §10.3).
	garbageResetTriggerMin = 42
)

// sendGarbage sends faultsGarbageRate datagrams a second from c to dst
// for d, in four kinds in turn: not QUIC (first bits 00), short headers
// for no connection below and above the stateless-reset size, and long
// headers of an unknown version. It returns the datagrams sent.
func sendGarbage(ctx context.Context, c *net.UDPConn, dst *net.UDPAddr, d time.Duration) uint64 {
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 1200)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	var sent uint64
	for i := 0; ; {
		select {
		case <-ctx.Done():
			return sent
		case <-tick.C:
		}
		el := time.Since(start)
		if el >= d {
			return sent
		}
		for ; i < int(el*faultsGarbageRate/time.Second); i++ {
			n := 40 + rng.IntN(1100)
			for k := range buf[:n] {
				buf[k] = byte(rng.Uint32())
			}
			switch i % 4 {
			case 0:
				buf[0] &^= 0xc0
			case 1:
				buf[0] = buf[0]&^0x80 | 0x40
				n = 20 + n%(garbageResetTriggerMin-20)
			case 2:
				buf[0] = buf[0]&^0x80 | 0x40
				n = max(n, garbageResetTriggerMin+1)
			case 3:
				buf[0] |= 0xc0
				binary.BigEndian.PutUint32(buf[1:], 0x0a0a0a0a)
			}
			if _, err := c.WriteTo(buf[:n], dst); err == nil {
				sent++
			}
		}
	}
}
