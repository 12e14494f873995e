package tunnel

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/bondd/bondd/classify"
	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/tun"
)

// Defaults applied to zero fields of PathOptions.
const (
	DefaultQueuePackets      = 256                    // per-path send queue, packets
	DefaultMaxQueueDelay     = 200 * time.Millisecond // a frame older than this is not sent
	DefaultKeepalive         = 1 * time.Second
	DefaultIdleKeepalive     = 15 * time.Second // an idle bond's keepalive: enough for NAT bindings (idle.go)
	DefaultIdleTimeout       = 5 * time.Second
	DefaultRedialMin         = 250 * time.Millisecond
	DefaultRedialMax         = 10 * time.Second
	DefaultInitialPacketSize = 1360 // bytes, QUIC InitialPacketSize: gives an inner MTU of 1280 (see MTUFor)
	DefaultHandshakeTimeout  = 5 * time.Second
	DefaultDeadAfter         = 3 * time.Second // a SUSPECT path's connection is closed after this much silence
	DefaultStaleAfter        = 1 * time.Second // a datagram older than this is not delivered
)

// quicDatagramOverhead is what a QUIC 1-RTT packet spends around a DATAGRAM
// frame's payload in quic-go v0.65, in bytes: measured payload limit 1243
// bytes for 1280-byte packets, 1415 for 1452.
const quicDatagramOverhead = 37

// MTUFor returns the inner (TUN) MTU, in bytes, that fits in one datagram
// from the first packet of a connection whose QUIC packets are
// initialPacketSize bytes: the datagram payload limit minus HeaderBudget,
// rounded down to a multiple of 8. For the default 1360 it is 1280; for
// QUIC's minimum 1200 it is 1120; for 1452 (a full 1500-byte IPv4 path) 1368.
//
// Why these figures: bondd sizes the TUN from the limit that holds from the
// first packet of every connection, not from the larger one path MTU
// discovery finds later (about 1400 bytes, varying by path and run), because
// an MTU that is only valid after discovery would drop or bounce packets on
// every fresh or re-dialled path. And it starts QUIC at 1360 bytes rather
// than 1280 so that the inner MTU reaches 1280, the IPv6 minimum (RFC 8200
// §5): Linux disables IPv6 on a device with a smaller MTU. A path whose MTU
// is below 1388 bytes (1360 + IPv4 and UDP headers) fails the handshake; set
// initial_packet_size_bytes lower for it and accept an IPv4-only tunnel.
func MTUFor(initialPacketSize int) int {
	return (initialPacketSize - quicDatagramOverhead - HeaderBudget) &^ 7
}

// PathOptions tunes every path of a bond. The zero value is valid: each zero
// field takes the Default* constant of the same name.
type PathOptions struct {
	QueuePackets  int           // send-queue capacity per path, packets
	MaxQueueDelay time.Duration // frames waiting longer are dropped, not sent
	// Keepalive is how long the edge lets a path of a bond that carries
	// traffic go unheard before it sends a keepalive (a probe datagram,
	// liveness.go); the concentrator sends none of its own.
	Keepalive time.Duration
	// IdleKeepalive is the same for a bond that has carried no data for
	// IdleAfter (idle.go): just often enough to hold NAT bindings
	// (0: DefaultIdleKeepalive). At least Keepalive, at most 10 minutes.
	IdleKeepalive time.Duration
	// IdleTimeout is the silence, beyond the keepalive a path expects,
	// after which its connection is closed: IdleTimeout for a bond that
	// carries traffic, IdleKeepalive + IdleTimeout (QUIC's idle timeout)
	// for an idle one.
	IdleTimeout time.Duration

	RedialMin         time.Duration // first redial backoff
	RedialMax         time.Duration // backoff cap
	InitialPacketSize int           // QUIC packet size from the first packet, bytes (1200..1452)
	// RateControl is who decides each path's sending rate:
	// RateControlBondd (bondd's controller inside quic-go, pacing at the
	// target of the per-path rate estimator fed by the receiver's reports;
	// cc.go, ratectl.go) or RateControlQUIC (quic-go's own NewReno, the
	// measured baseline). Empty: RateControlBondd. Each end decides for
	// what it sends.
	RateControl string
	// SuspectRTTs and SuspectMin bound the silence after a send that makes
	// a path SUSPECT: max(SuspectRTTs × srtt, SuspectMin) (liveness.go;
	// 0: policy.DefaultSuspectRTTs, policy.DefaultSuspectMin).
	SuspectRTTs float64
	SuspectMin  time.Duration
	// DeadAfter is the silence after which a SUSPECT path's connections are
	// closed and redialled (0: DefaultDeadAfter). At most IdleTimeout.
	DeadAfter time.Duration
	// StaleAfter is the age, against the path's one-way-delay baseline,
	// past which a received datagram is dropped, not delivered (stale.go;
	// 0: DefaultStaleAfter, or MaxQueueDelay when that is longer).
	StaleAfter time.Duration
	// PMTUOff turns off path MTU discovery and black-hole detection
	// (pmtu.go): every path's datagram budget stays the bond's largest
	// datagram. Optional; default false (on).
	PMTUOff bool
	// RetransmitOff turns off the retransmission of lost data datagrams
	// (resend.go): a datagram then gets one send, and only FEC repairs
	// its loss. Optional; default false (on).
	RetransmitOff bool
	// PMTURaise is how often a path whose datagram budget fell below the
	// bond's largest datagram probes that size again (pmtu.go; RFC 8899
	// PMTU_RAISE_TIMER); 0: policy.DefaultPMTURaise (2 s).
	PMTURaise time.Duration
	// QlogDir, when set, is an existing directory where quic-go writes the
	// qlog of every path connection, one <odcid>_<client|server>.sqlog
	// file each (see qlogFile), for debugging. Optional; empty: no qlog.
	QlogDir string
}

func (o PathOptions) withDefaults() PathOptions {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if o.QueuePackets == 0 {
		o.QueuePackets = DefaultQueuePackets
	}
	def(&o.MaxQueueDelay, DefaultMaxQueueDelay)
	def(&o.Keepalive, DefaultKeepalive)
	def(&o.IdleKeepalive, max(DefaultIdleKeepalive, o.Keepalive))
	def(&o.IdleTimeout, DefaultIdleTimeout)
	def(&o.RedialMin, DefaultRedialMin)
	def(&o.RedialMax, DefaultRedialMax)
	def(&o.DeadAfter, min(DefaultDeadAfter, o.IdleTimeout))
	def(&o.StaleAfter, max(DefaultStaleAfter, o.MaxQueueDelay))
	if o.SuspectRTTs == 0 {
		o.SuspectRTTs = policy.DefaultSuspectRTTs
	}
	def(&o.SuspectMin, policy.DefaultSuspectMin)
	if o.InitialPacketSize == 0 {
		o.InitialPacketSize = DefaultInitialPacketSize
	}
	if o.RateControl == "" {
		o.RateControl = RateControlBondd
	}
	return o
}

func (o PathOptions) validate() error {
	switch {
	case o.QueuePackets < 1:
		return errors.New("queue size must be at least 1 packet")
	case o.InitialPacketSize < 1200 || o.InitialPacketSize > 1452:
		return fmt.Errorf("initial packet size %d bytes is outside 1200..1452", o.InitialPacketSize)
	case o.RedialMax < o.RedialMin:
		return errors.New("redial_max is below redial_min")
	case o.RateControl != RateControlQUIC && o.RateControl != RateControlBondd:
		return fmt.Errorf("rate control %q is neither %q nor %q", o.RateControl, RateControlBondd, RateControlQUIC)
	case o.SuspectRTTs < 1 || o.SuspectRTTs > 100:
		return fmt.Errorf("suspect_rtts %g is outside 1..100", o.SuspectRTTs)
	case o.SuspectMin < 10*time.Millisecond:
		return fmt.Errorf("suspect_min %s is below 10ms", o.SuspectMin)
	case o.Keepalive >= o.IdleTimeout:
		return fmt.Errorf("keepalive %s is not below idle_timeout %s", o.Keepalive, o.IdleTimeout)
	case o.IdleKeepalive < o.Keepalive || o.IdleKeepalive > MaxIdleKeepalive:
		return fmt.Errorf("idle_keepalive %s is outside keepalive (%s)..%s", o.IdleKeepalive, o.Keepalive, MaxIdleKeepalive)
	case o.DeadAfter <= o.SuspectMin:
		return fmt.Errorf("dead_after %s is not above suspect_min %s", o.DeadAfter, o.SuspectMin)
	case o.PMTURaise < 0 || o.PMTURaise > 10*time.Minute:
		return fmt.Errorf("pmtu_raise %s is outside 0..10m", o.PMTURaise)
	case o.StaleAfter < o.MaxQueueDelay:
		return fmt.Errorf("stale_after %s is below the queue-delay limit %s", o.StaleAfter, o.MaxQueueDelay)
	}
	return nil
}

// UplinkOptions describes one uplink of an edge.
type UplinkOptions struct {
	Name      string            // required, unique within the edge
	Bind      netip.Addr        // local source address; optional if Interface is set
	Interface string            // SO_BINDTODEVICE target; optional if Bind is set
	Labels    map[string]string // optional path labels (cost_class, link_type, …)
	// Remote, when set, is the concentrator address (host:port) this uplink
	// dials instead of EdgeOptions.Concentrator: for a concentrator with one
	// public address per carrier, or a link emulator in front of it.
	Remote string
	// LEOReconf, when set, marks the uplink as a LEO satellite path with a
	// reconfiguration schedule (Starlink: seconds 12, 27, 42, 57 of each
	// UTC minute, ±100 ms): inside a danger zone the rules see
	// leo_state=reconf (policy.LEOState; MoMQ §4.1 R2), and around each
	// scheduled second the path hands nothing to QUIC for its Hold
	// (policy.LEOReconf.HoldFor): the frames wait in the path's send
	// queue. Optional.
	LEOReconf *policy.LEOReconf
	// Budget is the uplink's byte budget per UTC day, week or month (the
	// zero value: none). At 90 % of it the path turns DEGRADED for traffic
	// no rule prefers it for (policy.Path.SetBudget). Counted from the
	// start of the process: a restart starts the count over. Optional.
	Budget policy.Budget
}

// ListenFunc opens the UDP socket of one uplink. The tunnel hands the socket
// to a quic.Transport and closes it when the connection ends.
type ListenFunc func(ctx context.Context, u UplinkOptions) (net.PacketConn, error)

// EdgeOptions configures an [Edge]. Fields marked required must be set.
type EdgeOptions struct {
	ID           string           // required: edge id known to the concentrator
	Device       tun.Device       // required: opened and configured TUN
	MTU          int              // required: the TUN's MTU in bytes (see MTUFor)
	Concentrator string           // required: host:port
	TLS          *tls.Config      // required: verifies the concentrator; client certificate for mutual TLS
	Token        []byte           // optional: token credential (else the client certificate identifies the edge)
	Uplinks      []UplinkOptions  // required, at least one
	Paths        PathOptions      // optional tuning
	FEC          FECOptions       // optional: default adaptive FEC, k = 20, α = 2
	Rules        RuleSource       // optional: rules for uplink traffic (nil: none)
	Classify     classify.Options // optional: how the classifier reads packets for the rules
	Picker       policy.Picker    // optional: default policy.LowestRTT
	Listen       ListenFunc       // optional: default binds Bind / Interface
	Logger       *slog.Logger     // optional: nil discards

	// DownlinkRules, optional, are rules for the concentrator's traffic to
	// this edge, which the edge installs in its session on the
	// concentrator (PATH_MAPPING_RULE, docs/design.md "Control plane")
	// and keeps in line with the set in force. The concentrator must allow
	// it (EdgeAuth.AllowEdgeRules). nil: none.
	DownlinkRules RuleSource

	// OnPathEnd, optional, is called each time an uplink's dial fails or its
	// connection ends while the edge runs, with the uplink's name, the
	// node it dialled (host:port, see [Edge.Concentrator]) and the reason;
	// [IsRefusal] tells a refusal (credentials, draining node) from an
	// outage. The fleet's failover uses it (docs/design.md "Fleet"). It
	// must not block.
	OnPathEnd func(path, node string, err error)

	// SetTUNMTU, optional, sets the MTU of Device, bytes. The bond calls it
	// (from a goroutine of its own, one call at a time) when path MTU
	// discovery lowers its send MTU because no path carries full-size
	// datagrams, and when it rises again (pmtu.go); it never asks for more
	// than MTU. nil: the device keeps MTU, and only the ICMP answers to
	// oversize packets tell senders.
	SetTUNMTU func(mtu int) error
}

// EdgeAuth is one edge a concentrator accepts.
type EdgeAuth struct {
	ID              string         // required
	Token           []byte         // the edge's token; or
	CertCN          string         // the CommonName of its client certificate
	AllowedPrefixes []netip.Prefix // required: inner source prefixes; also route downlink traffic to it
	// AllowEdgeRules lets the edge install downlink rules for its own
	// session over the control plane (PATH_MAPPING_RULE); they are added
	// to ConcentratorOptions.Rules for this edge only and discarded when
	// the session ends. Optional; default false: every install is answered
	// NOT_AUTHORIZED.
	AllowEdgeRules bool
	// PolicyLabelKeys are path label keys, besides cost_class, that the
	// edge's PATH_LABEL_UPDATE may not change: the labels its hello gave
	// stay. Optional.
	PolicyLabelKeys []string
}

// ConcentratorOptions configures a [Concentrator].
type ConcentratorOptions struct {
	Device tun.Device     // required: opened and configured TUN
	MTU    int            // required: the TUN's MTU in bytes
	Conn   net.PacketConn // required: the listening UDP socket; the concentrator owns it
	TLS    *tls.Config    // required: certificate; ClientCAs when edges use client certificates
	Edges  []EdgeAuth     // required, at least one
	Paths  PathOptions    // optional tuning
	FEC    FECOptions     // optional: FEC on downlink traffic; default adaptive
	Rules  RuleSource     // optional: rules for downlink traffic (nil: none)
	// Classify is how the classifier reads downlink packets for the rules.
	Classify classify.Options
	Picker   policy.Picker // optional: default policy.LowestRTT
	Logger   *slog.Logger  // optional: nil discards
	// StatelessResetKey is the QUIC stateless-reset key (RFC 9000 §10.3)
	// of the listening transport. Optional; nil derives it from the TLS
	// certificate's private key with StatelessResetKeyFrom, so that a
	// restarted concentrator resets its predecessor's connections.
	StatelessResetKey *quic.StatelessResetKey
	// Handshakes bounds the new path connections the concentrator takes
	// on: a node-wide and a per-source rate, and QUIC Retry under load
	// (conc_admit.go). Optional; the zero value takes the defaults.
	Handshakes HandshakeOptions

	// OnBondUp, optional, is called when an edge's first path connection
	// has been accepted (its bond is up on this node), with the edge's id
	// and allowed prefixes; OnBondDown when its last one has ended. Calls
	// for one edge come in order, from the connection's goroutine; a
	// fleet node announces and withdraws the prefixes over BGP with them.
	OnBondUp   func(edgeID string, prefixes []netip.Prefix)
	OnBondDown func(edgeID string)
}

var discardLogger = slog.New(slog.DiscardHandler)

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return discardLogger
	}
	return l
}
