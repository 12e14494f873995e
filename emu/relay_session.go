package emu

// Client sessions and the readers that feed the schedule: routineReadClients
// (Listen → up), routineReadUpstream (a session socket → down) and
// routineExpire.

import (
	"errors"
	"net"
	"net/netip"
	"sync/atomic"
	"time"
)

// session is one client: its address and its upstream-facing socket.
type session struct {
	client     netip.AddrPort
	clientAddr net.Addr // for a Listen that is not a *net.UDPConn
	conn       net.PacketConn
	udp        *net.UDPConn // conn, if it is one
	overhead   [2]int       // IP+UDP header bytes per direction
	lastSeen   atomic.Int64 // relay time (ns) of the last datagram
	closed     atomic.Bool
}

func (s *session) close() {
	if s.closed.CompareAndSwap(false, true) {
		s.conn.Close()
	}
}

// routineReadClients reads datagrams from Listen and schedules them on the
// up direction.
func (r *Relay) routineReadClients() {
	defer r.wg.Done()
	r.log.Debug("routineReadClients started")
	defer r.log.Debug("routineReadClients stopped")
	buf := make([]byte, maxDatagram)
	var cur *session // last session seen, to skip the map lookup
	for {
		var (
			n    int
			from netip.AddrPort
			addr net.Addr
			err  error
		)
		if r.listenUDP != nil {
			n, from, err = r.listenUDP.ReadFromUDPAddrPort(buf)
		} else {
			n, addr, err = r.listen.ReadFrom(buf)
			if ua, ok := addr.(*net.UDPAddr); ok && err == nil {
				from = ua.AddrPort()
			}
		}
		if err != nil {
			if r.isClosed() || errors.Is(err, net.ErrClosed) {
				return
			}
			readErrorPause()
			continue
		}
		now := r.now()
		if !from.IsValid() {
			r.dirs[Up].stats.foreign(n)
			continue
		}
		if cur == nil || cur.client != from || cur.closed.Load() {
			cur = r.session(from, addr)
			if cur == nil {
				r.dirs[Up].stats.foreign(n)
				continue
			}
		}
		cur.lastSeen.Store(int64(now))
		r.schedule(&r.dirs[Up], cur, buf[:n], now)
	}
}

// session returns the session of client from, creating it (and its
// upstream socket and reader) if needed; nil if the relay is closed, full,
// or the socket cannot be opened.
func (r *Relay) session(from netip.AddrPort, addr net.Addr) *session {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	if s := r.sessions[from]; s != nil {
		return s
	}
	if len(r.sessions) >= r.opts.MaxClients {
		return nil
	}
	conn, err := r.opts.DialUpstream()
	if err != nil {
		r.log.Warn("emu relay: cannot open upstream socket", "client", from.String(), "err", err)
		return nil
	}
	s := &session{client: from, clientAddr: addr, conn: conn}
	s.udp, _ = conn.(*net.UDPConn)
	if s.clientAddr == nil {
		s.clientAddr = net.UDPAddrFromAddrPort(from)
	}
	s.overhead[Up] = ipUDPOverhead(r.upstream.Addr())
	s.overhead[Down] = ipUDPOverhead(from.Addr())
	s.lastSeen.Store(int64(r.now()))
	r.sessions[from] = s
	r.wg.Add(1)
	go r.routineReadUpstream(s)
	r.log.Info("emu relay: new client", "client", from.String(), "via", conn.LocalAddr().String())
	return s
}

// ipUDPOverhead returns the IP+UDP header bytes for address a.
func ipUDPOverhead(a netip.Addr) int {
	if a.Unmap().Is4() {
		return 20 + 8
	}
	return 40 + 8
}

// routineReadUpstream reads one session's socket and schedules datagrams
// from Upstream on the down direction.
func (r *Relay) routineReadUpstream(s *session) {
	defer r.wg.Done()
	r.log.Debug("routineReadUpstream started", "client", s.client.String())
	defer r.log.Debug("routineReadUpstream stopped", "client", s.client.String())
	buf := make([]byte, maxDatagram)
	for {
		var (
			n    int
			from netip.AddrPort
			err  error
		)
		if s.udp != nil {
			n, from, err = s.udp.ReadFromUDPAddrPort(buf)
		} else {
			var addr net.Addr
			n, addr, err = s.conn.ReadFrom(buf)
			if ua, ok := addr.(*net.UDPAddr); ok && err == nil {
				from = ua.AddrPort()
			}
		}
		if err != nil {
			if s.closed.Load() || r.isClosed() || errors.Is(err, net.ErrClosed) {
				return
			}
			readErrorPause()
			continue
		}
		now := r.now()
		if from.Port() != r.upstream.Port() || from.Addr().Unmap() != r.upstream.Addr() {
			r.dirs[Down].stats.foreign(n)
			continue
		}
		s.lastSeen.Store(int64(now))
		r.schedule(&r.dirs[Down], s, buf[:n], now)
	}
}

// routineExpire closes sessions idle for longer than IdleTimeout.
func (r *Relay) routineExpire() {
	defer r.wg.Done()
	r.log.Debug("routineExpire started")
	defer r.log.Debug("routineExpire stopped")
	every := max(r.opts.IdleTimeout/4, 100*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-r.done:
			return
		case <-t.C:
		}
		now := r.now()
		r.mu.Lock()
		for k, s := range r.sessions {
			if now-time.Duration(s.lastSeen.Load()) > r.opts.IdleTimeout {
				delete(r.sessions, k)
				s.close()
				r.log.Info("emu relay: client idle, session closed", "client", k.String())
			}
		}
		r.mu.Unlock()
	}
}

// readErrorPause slows a reader down after a socket error that is not a
// close (none is expected on UDP), so that a persistent one cannot spin.
func readErrorPause() { time.Sleep(time.Millisecond) }
