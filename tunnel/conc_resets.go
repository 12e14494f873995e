package tunnel

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/quic-go/quic-go"
	"golang.org/x/time/rate"
)

// Counting the short-header packets for no connection that the
// concentrator's QUIC transport answers with a stateless reset.
//
// quic-go answers a short-header packet it can route to no connection,
// when it is longer than statelessResetSize, with a stateless reset (RFC
// 9000 §10.3) and reports it nowhere: no qlog event, no counter. (When its
// queue of resets to send is full it sends none and reports the packet:
// qlog PacketDropped, unknown connection ID, counted by transportCounters.)
// So the concentrator hands quic-go its socket wrapped: every write is
// checked for a reset's shape, a short header of exactly
// statelessResetSize bytes, sent to an address that no connection of the
// concentrator talks to; each such write counts one packet as
// TransportUnknownConn. A connection's own packets of that size go to its
// peer's address and are not counted. The wrapper changes nothing else:
// quic-go still sees a *net.UDPConn's methods (an OOBCapablePacketConn and
// a net.Conn), so it keeps the Don't Fragment bit, ECN, recvmmsg batches
// and GSO.

// statelessResetSize is the size of the stateless resets quic-go sends,
// its protocol.MinStatelessResetSize (1 + 20 + 4 + 1 + 16 bytes: a packet
// at least as long as the longest short header with the smallest payload,
// RFC 9000 §10.3). quic-go answers only packets longer than this, so that
// no reset draws a reset.
const statelessResetSize = 42

// peerGrace is how long an address stays a connection's after the
// connection ended: quic-go answers the late packets of a closed
// connection with its CONNECTION_CLOSE for 3 PTOs, and these are no
// resets.
const peerGrace = 10 * time.Second

// missCacheFor is how long an address found in no connection is trusted
// to be in none: one scan of the bonds (resetCounter.lookup) per address
// and period, however fast a flood from it draws resets.
const missCacheFor = time.Second

// Scans of the bonds for a reset's address (resetCounter.lookup) are
// bounded node-wide to maxScansPerS a second (burst maxScansBurst). A scan
// reads every path of every bond, about 12 ms at 10,000 bonds (a cache
// miss or two a path), on the goroutine that wrote the reset (quic-go's
// send queue), and resets to many addresses at once are ordinary: 10,000
// edges redialling drew thousands a second and the scans took half the
// node's CPU; a flood from spoofed sources draws one per packet. At 4 a
// second they cost about 5 % of a core at 10,000 bonds. Past the bound a
// reset-shaped datagram to an address no connection started from counts
// without a scan. What that can miscount: the 42-byte packets of a live
// connection whose peer migrated (RFC 9000 §9, a NAT rebinding) before
// the path's liveness check makes the new address a peer's
// (Concentrator.peerMoved: within a tick of an awake bond, at the next
// keepalive of an asleep one) or a free scan finds it.
const (
	maxScansPerS  = 4
	maxScansBurst = 4
)

// resetCounter counts the stateless resets sent to addresses of no
// connection (see above). The set of peer addresses is kept from the
// connections' starts (ConnContext) and ends, and from the migrations the
// paths' liveness checks see (Concentrator.peerMoved); a peer that
// migrated before that is found by lookup on the first reset-shaped
// packet to its new address, within the scan bound. Safe for concurrent
// use.
type resetCounter struct {
	count func() // counts one reset sent
	// lookup returns the context of a live connection whose peer is at
	// addr, or nil.
	lookup func(addr netip.AddrPort) context.Context

	scans *rate.Limiter // bounds the calls of lookup (maxScansPerS)

	mu     sync.RWMutex
	peers  map[netip.AddrPort]int // connections per peer address, each until peerGrace after its end
	miss   netip.AddrPort         // the last address lookup found in no connection
	missAt time.Time
}

func newResetCounter(count func(), lookup func(netip.AddrPort) context.Context) *resetCounter {
	return &resetCounter{count: count, lookup: lookup, peers: map[netip.AddrPort]int{},
		scans: rate.NewLimiter(maxScansPerS, maxScansBurst)}
}

// addPeer makes addr a peer address until peerGrace after ctx ends.
func (r *resetCounter) addPeer(addr netip.AddrPort, ctx context.Context) {
	addr = unmapAddrPort(addr)
	r.mu.Lock()
	r.peers[addr]++
	r.mu.Unlock()
	context.AfterFunc(ctx, func() {
		time.AfterFunc(peerGrace, func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.peers[addr]--; r.peers[addr] <= 0 {
				delete(r.peers, addr)
			}
		})
	})
}

// wrote checks one datagram the transport wrote to addr and counts it when
// it is a stateless reset to an address of no connection. It does not
// allocate; only a reset-shaped datagram takes a (read) lock, and one to
// an address neither known nor just scanned for also the scan limiter's.
func (r *resetCounter) wrote(b []byte, addr netip.AddrPort) {
	if len(b) != statelessResetSize || b[0]&0xc0 != 0x40 { // not a short header of a reset's size
		return
	}
	addr = unmapAddrPort(addr)
	r.mu.RLock()
	known := r.peers[addr] > 0
	cached := addr == r.miss && time.Since(r.missAt) < missCacheFor
	r.mu.RUnlock()
	switch {
	case known:
		return
	case !cached && r.scans.Allow():
		if ctx := r.lookup(addr); ctx != nil { // a connection that migrated there
			r.addPeer(addr, ctx)
			return
		}
		r.mu.Lock()
		r.miss, r.missAt = addr, time.Now()
		r.mu.Unlock()
	}
	r.count()
}

// unmapAddrPort turns an IPv4-mapped IPv6 address (a dual-stack socket's
// view of an IPv4 peer) into the IPv4 one.
func unmapAddrPort(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}

// udpAddrPort is addr's address and port, the zero value for a nil or
// non-UDP address.
func udpAddrPort(addr net.Addr) netip.AddrPort {
	if a, ok := addr.(*net.UDPAddr); ok && a != nil {
		return a.AddrPort()
	}
	return netip.AddrPort{}
}

// resetCountingUDPConn is a *net.UDPConn whose writes r checks. quic-go
// writes with WriteMsgUDP (WriteTo without OOB support); everything else,
// reads included, is the socket's own.
type resetCountingUDPConn struct {
	*net.UDPConn
	r *resetCounter
}

// WriteMsgUDP writes as net.UDPConn.WriteMsgUDP and checks what it wrote.
func (c *resetCountingUDPConn) WriteMsgUDP(b, oob []byte, addr *net.UDPAddr) (n, oobn int, err error) {
	n, oobn, err = c.UDPConn.WriteMsgUDP(b, oob, addr)
	if err == nil {
		c.r.wrote(b, udpAddrPort(addr))
	}
	return n, oobn, err
}

// WriteTo writes as net.UDPConn.WriteTo and checks what it wrote.
func (c *resetCountingUDPConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	n, err := c.UDPConn.WriteTo(b, addr)
	if err == nil {
		c.r.wrote(b, udpAddrPort(addr))
	}
	return n, err
}

// resetCountingPacketConn is a net.PacketConn other than a socket (a test
// double, an emulated link) whose writes r checks.
type resetCountingPacketConn struct {
	net.PacketConn
	r *resetCounter
}

// WriteTo writes as the PacketConn's WriteTo and checks what it wrote.
func (c *resetCountingPacketConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	n, err := c.PacketConn.WriteTo(b, addr)
	if err == nil {
		c.r.wrote(b, udpAddrPort(addr))
	}
	return n, err
}

// countResets returns pc for the transport, its writes checked by r. A
// socket of another kind (syscall.Conn but not *net.UDPConn), whose
// optimisations a wrapper could hide from quic-go, is returned as it is,
// and its resets go uncounted.
func countResets(pc net.PacketConn, r *resetCounter) net.PacketConn {
	switch c := pc.(type) {
	case *net.UDPConn:
		return &resetCountingUDPConn{UDPConn: c, r: r}
	case syscall.Conn:
		return pc
	}
	return &resetCountingPacketConn{PacketConn: pc, r: r}
}

// Compile-time checks that quic-go (OOBCapablePacketConn: DF, ECN, GSO)
// and golang.org/x/net (net.Conn with SyscallConn and ReadMsgUDP:
// recvmmsg batches) see a socket.
var (
	_ quic.OOBCapablePacketConn = (*resetCountingUDPConn)(nil)
	_ net.Conn                  = (*resetCountingUDPConn)(nil)
)

// peerMoved makes addr, the new address of a path connection's peer that
// migrated, a peer address for the reset count while conn (the
// connection's context) lives: the count then needs no scan to know it.
// Called by the path's liveness check (checkPeer) within a tick of the
// bond noticing, or at the next keepalive of an asleep bond.
func (c *Concentrator) peerMoved(addr netip.AddrPort, conn context.Context) {
	if r := c.tdrops.resets; r != nil && addr.IsValid() {
		r.addPeer(addr, conn)
	}
}

// peerConn returns the context of a live connection of c whose peer is at
// addr, or nil: a scan of every path of every bond (resetCounter bounds
// how often it runs).
func (c *Concentrator) peerConn(addr netip.AddrPort) context.Context {
	for _, e := range c.tab.Load().edges {
		for _, p := range e.bond.paths.Load().paths {
			conn := p.pc.conn.Load()
			if conn != nil && unmapAddrPort(udpAddrPort(conn.RemoteAddr())) == addr && conn.Context().Err() == nil {
				return conn.Context()
			}
		}
	}
	return nil
}
