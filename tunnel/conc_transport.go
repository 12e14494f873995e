package tunnel

import (
	"context"
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlog"
	"github.com/quic-go/quic-go/qlogwriter"
)

// The concentrator's QUIC transport: its stateless-reset key and the
// counting of what it drops.

// resetKeyInfo is the HKDF info string of the stateless-reset key.
const resetKeyInfo = "bondd stateless reset key v1"

// StatelessResetKeyFrom derives a QUIC stateless-reset key (RFC 9000
// §10.3) from secret with HKDF-SHA256 (RFC 5869; no salt, info "bondd
// stateless reset key v1"). The same secret gives the same key, so a
// restarted concentrator answers the packets of its predecessor's
// connections with a stateless reset the edges accept, and they redial at
// once instead of waiting for their idle timeout. It returns an error only
// for an empty secret.
func StatelessResetKeyFrom(secret []byte) (*quic.StatelessResetKey, error) {
	if len(secret) == 0 {
		return nil, errors.New("tunnel: empty secret for the stateless reset key")
	}
	b, err := hkdf.Key(sha256.New, secret, nil, resetKeyInfo, len(quic.StatelessResetKey{}))
	if err != nil {
		return nil, err
	}
	var k quic.StatelessResetKey
	copy(k[:], b)
	return &k, nil
}

// resetKeyFromTLS derives the stateless-reset key from the private key of
// the first certificate of cfg (its PKCS #8 DER encoding), which is stable
// across restarts and secret. nil when cfg has no usable key (then quic-go
// sends no stateless resets).
func resetKeyFromTLS(cfg *tls.Config) *quic.StatelessResetKey {
	if cfg == nil || len(cfg.Certificates) == 0 || cfg.Certificates[0].PrivateKey == nil {
		return nil
	}
	der, err := x509.MarshalPKCS8PrivateKey(cfg.Certificates[0].PrivateKey)
	if err != nil {
		return nil
	}
	k, err := StatelessResetKeyFrom(der)
	if err != nil {
		return nil
	}
	return k
}

// TransportDrop says why the concentrator's QUIC transport dropped a UDP
// packet or a connection before any bond saw it.
type TransportDrop uint8

// Transport drop reasons, from quic-go's qlog PacketDropped triggers
// (draft-ietf-quic-qlog-quic-events "packet_dropped") and bondd's own
// accounting.
const (
	TransportNotQUIC         TransportDrop = iota // first two bits 00: not a QUIC packet (RFC 9443)
	TransportBadHeader                            // QUIC header unparsable, unexpected packet type or version
	TransportUnknownConn                          // short-header packet for no connection, whether quic-go answered it with a stateless reset (conc_resets.go) or not
	TransportDecryptFailed                        // payload failed to decrypt, or keys unavailable
	TransportDOS                                  // dropped by quic-go's flood protection (queues full)
	TransportDuplicate                            // duplicate packet
	TransportHandshakeFailed                      // a connection that never completed its handshake
	TransportRefused                              // a connection refused at the hello (bad hello, unknown edge, wrong credential)
	TransportBusy                                 // a connection attempt refused over the node's handshake rate (conc_admit.go)
	TransportSourceRate                           // a connection attempt refused over its source address's handshake rate
	TransportRetry                                // an Initial answered with a Retry: the node keeps no state until the address is proven

	numTransportDrops
)

var transportDropNames = [numTransportDrops]string{
	"not_quic", "bad_header", "unknown_connection", "decrypt_failed", "dos_prevention", "duplicate",
	"handshake_failed", "refused", "busy", "source_rate", "retry",
}

// String returns the reason's name in status and metrics, like "not_quic".
func (r TransportDrop) String() string {
	if r < numTransportDrops {
		return transportDropNames[r]
	}
	return "unknown"
}

// TransportDrops returns the names of the transport drop reasons, in order.
func TransportDrops() []string { return transportDropNames[:] }

// transportCounters count the concentrator transport's drops; it is the
// transport's qlogwriter.Recorder. RecordEvent runs on quic-go's
// goroutines and only adds to atomics.
type transportCounters struct {
	n      [numTransportDrops]atomic.Uint64
	resets *resetCounter // the stateless resets (conc_resets.go); set by transportConn
}

func (t *transportCounters) RecordEvent(ev qlogwriter.Event) {
	e, ok := ev.(qlog.PacketDropped)
	if !ok {
		return
	}
	t.n[transportReason(e.Trigger)].Add(1)
}

func (t *transportCounters) Close() error { return nil }

// transportReason maps a qlog drop trigger to its TransportDrop.
func transportReason(tr qlog.PacketDropReason) TransportDrop {
	switch tr {
	case qlog.PacketDropUnknownConnectionID:
		return TransportUnknownConn
	case qlog.PacketDropPayloadDecryptError, qlog.PacketDropKeysUnavailable:
		return TransportDecryptFailed
	case qlog.PacketDropDOSPrevention:
		return TransportDOS
	case qlog.PacketDropDuplicate:
		return TransportDuplicate
	}
	return TransportBadHeader
}

// TransportDropCounts returns the concentrator transport's drops by reason
// name (every reason, zeros included), in packets, or connections for
// handshake_failed, refused, busy and source_rate.
func (c *Concentrator) TransportDropCounts() map[string]uint64 {
	out := make(map[string]uint64, numTransportDrops)
	for i := range numTransportDrops {
		out[i.String()] = c.tdrops.n[i].Load()
	}
	out[TransportRefused.String()] += c.authFailed.Load()
	return out
}

// routineNonQUIC reads the packets quic-go sets aside as not QUIC and counts
// them: without a reader quic-go drops them uncounted.
func (c *Concentrator) routineNonQUIC() {
	buf := make([]byte, 2048)
	for {
		if _, _, err := c.tr.ReadNonQUICPacket(c.ctx, buf); err != nil {
			return
		}
		c.tdrops.n[TransportNotQUIC].Add(1)
	}
}

// routineGarbageLog logs the transport's drops at most once a second, when
// they grew.
func (c *Concentrator) routineGarbageLog() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last [numTransportDrops]uint64
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-tick.C:
		}
		var attrs []any
		for i := range numTransportDrops {
			n := c.tdrops.n[i].Load()
			if n != last[i] {
				attrs = append(attrs, i.String(), n-last[i])
				last[i] = n
			}
		}
		if attrs != nil {
			c.log.Warn("QUIC transport dropped packets in the last second", attrs...)
		}
	}
}

// transportConn returns the socket the transport reads and writes:
// opts.Conn, with the stateless resets it sends counted as
// TransportUnknownConn (conc_resets.go).
func (c *Concentrator) transportConn() net.PacketConn {
	c.tdrops.resets = newResetCounter(func() { c.tdrops.n[TransportUnknownConn].Add(1) }, c.peerConn)
	return countResets(c.opts.Conn, c.tdrops.resets)
}

// watchConn is called for each new connection (ctx, from ConnContext):
// it makes the client's address a peer address for the reset count while
// the connection lives, and counts the connection as a failed handshake
// if it ends before the accept loop takes it (rec.accepted).
func (c *Concentrator) watchConn(ctx context.Context, rec *recorder, info *quic.ClientInfo) {
	if info != nil && c.tdrops.resets != nil {
		if a := udpAddrPort(info.RemoteAddr); a.IsValid() {
			c.tdrops.resets.addPeer(a, ctx)
		}
	}
	context.AfterFunc(ctx, func() {
		c.handshakeDone(rec)
		if !rec.accepted.Load() {
			c.tdrops.n[TransportHandshakeFailed].Add(1)
		}
	})
}
