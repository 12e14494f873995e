package tunnel

import (
	"net"
	"sync"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/bondd/bondd/policy"
)

// Header bytes a carrier bills around each QUIC packet, on top of the UDP
// payload quic-go counts (ConnectionStats): the IP header without options
// and the UDP header. Link-layer framing (Ethernet, PPP, the radio's) is
// not counted; carriers bill IP bytes.
const (
	IPv4HeaderBytes = 20
	IPv6HeaderBytes = 40
	UDPHeaderBytes  = 8
)

// WireUsage is a path's traffic as a carrier bills it, cumulative since the
// path was created: every QUIC packet of every connection the path served
// (handshake, acks, probes, keepalives, retransmissions and the connection
// close included), in both directions, each counted with its UDP payload
// plus UDPHeaderBytes and IPv4HeaderBytes or IPv6HeaderBytes. Packets are
// QUIC packets: a UDP datagram that coalesces several (only during a
// handshake) counts its IP and UDP headers once per packet, a few bytes
// too many. Received bytes include datagrams quic-go could not decrypt.
type WireUsage struct {
	UpBytes, DownBytes     uint64 // bytes sent and received on the wire
	UpPackets, DownPackets uint64 // QUIC packets sent and received
	// DatagramBytes are the bondd datagram bytes sent (policy.Path.OnBytes:
	// header and inner packet, parity included); LostPackets the QUIC
	// packets declared lost (RFC 9002).
	DatagramBytes, LostPackets uint64
}

// PathUsage is one path's WireUsage and its status now.
type PathUsage struct {
	Name   string
	Status policy.Status
	WireUsage
}

// wireMeter adds up the wire bytes of a path's QUIC connections. quic-go
// counts each connection's bytes and packets with atomics as it sends and
// receives; the meter reads those counters when asked (and a last time
// when a connection ends), so the per-packet path of bondd does nothing
// for it.
type wireMeter struct {
	// mu guards all following.
	mu    sync.Mutex
	live  []meteredConn // connections being served
	ended WireUsage     // the final counts of the connections that ended
}

// meteredConn is a live connection and its header bytes per packet.
type meteredConn struct {
	c   *quic.Conn
	hdr uint64
}

// headerBytes is the IP and UDP header bytes per packet of conn.
func headerBytes(conn *quic.Conn) uint64 {
	if a, ok := conn.LocalAddr().(*net.UDPAddr); ok && a.AddrPort().Addr().Unmap().Is6() {
		return IPv6HeaderBytes + UDPHeaderBytes
	}
	return IPv4HeaderBytes + UDPHeaderBytes
}

// connUsage returns conn's wire counts so far.
func connUsage(m meteredConn) WireUsage {
	cs := m.c.ConnectionStats()
	return WireUsage{UpBytes: cs.BytesSent + m.hdr*cs.PacketsSent, DownBytes: cs.BytesReceived + m.hdr*cs.PacketsReceived,
		UpPackets: cs.PacketsSent, DownPackets: cs.PacketsReceived}
}

func (w *WireUsage) add(o WireUsage) {
	w.UpBytes += o.UpBytes
	w.DownBytes += o.DownBytes
	w.UpPackets += o.UpPackets
	w.DownPackets += o.DownPackets
}

// attach starts counting conn (path.serve).
func (m *wireMeter) attach(conn *quic.Conn) {
	m.mu.Lock()
	m.live = append(m.live, meteredConn{conn, headerBytes(conn)})
	m.mu.Unlock()
}

// detach moves conn's final counts to the ended ones, once it has closed.
func (m *wireMeter) detach(conn *quic.Conn) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, mc := range m.live {
		if mc.c == conn {
			m.ended.add(connUsage(mc))
			m.live = append(m.live[:i], m.live[i+1:]...)
			return
		}
	}
}

// read returns the path's counts: the ended connections' and the live
// ones' so far.
func (m *wireMeter) read() WireUsage {
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.ended
	for _, mc := range m.live {
		u.add(connUsage(mc))
	}
	return u
}

// Usage calls yield with every path's usage at now, for internal/usage.
func (b *Bond) Usage(now time.Time, yield func(PathUsage)) {
	for _, p := range b.paths.Load().paths {
		u := PathUsage{Name: p.name, Status: p.state.Status(now), WireUsage: p.wire.read()}
		u.DatagramBytes, u.LostPackets = p.state.BytesSent(), p.state.PacketsLost()
		yield(u)
	}
}

// EdgeID returns the id of the bond's edge.
func (b *Bond) EdgeID() string { return b.edgeID }

// SetBudgetUsage sets the bytes counted against the byte budget of the
// path named path in the period ending at end (policy.Path.SetBudgetUsage);
// it does nothing for a path the bond does not have.
func (b *Bond) SetBudgetUsage(path string, used int64, end time.Time) {
	for _, p := range b.paths.Load().paths {
		if p.name == path {
			p.state.SetBudgetUsage(used, end)
		}
	}
}

// Bonds calls yield with the bond of every configured edge.
func (c *Concentrator) Bonds(yield func(*Bond)) {
	for _, e := range c.tab.Load().edges {
		yield(e.bond)
	}
}
