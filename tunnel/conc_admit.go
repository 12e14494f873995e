package tunnel

import (
	"context"
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"golang.org/x/time/rate"
)

// Admission of new path connections on the concentrator: how many
// handshakes it takes on, from whom, and what a returning edge skips.
//
//   - Rate: the node accepts at most HandshakeOptions.Rate new connections
//     a second (a token bucket of HandshakeOptions.Burst). An attempt
//     above it is refused at once, statelessly, with QUIC's
//     CONNECTION_REFUSED (RFC 9000 §20.1): "busy". The edge backs off
//     with jitter, or a fleet edge tries its next node ([ErrBusy]),
//     rather than letting a handshake time out.
//   - Per source: at most HandshakeOptions.PerSource a second from one IP
//     address. Attempts whose address is proven (a Retry or NEW_TOKEN
//     token, RFC 9000 §8.1) and unproven ones draw from separate buckets,
//     so a spoofed flood in a victim's name cannot use up the victim's.
//   - Retry under load: while more than HandshakeOptions.RetryAbove
//     handshakes are in progress, or more token-less Initial packets
//     arrived in the last second than Rate and Burst admit, or the source's bucket of unproven
//     attempts is empty, an Initial without a valid token is answered
//     with a Retry (RFC 9000 §8.1.2; quic-go's Transport.VerifySourceAddress)
//     and the node keeps no state for it. A spoofed source never
//     returns; a real edge returns within one round trip.
//   - Resumption: the node's TLS session-ticket keys and QUIC token key
//     are derived from its certificate's private key, so tickets and
//     address tokens stay valid across a restart (RFC 8446 §2.2; RFC 9000
//     §8.1.3): a returning edge skips the certificate signature and the
//     Retry. A resumed edge still sends its hello with id and token, which
//     is checked as on every connection; a resumed client certificate is
//     verified again against the node's current CA pool.

// Defaults applied to zero fields of [HandshakeOptions].
const (
	DefaultHandshakeRate      = 500 // new path connections accepted per second, node-wide
	DefaultHandshakeBurst     = 100 // connections above the rate accepted at once
	DefaultHandshakePerSource = 20  // new path connections per second from one IP address
	DefaultPerSourceBurst     = 40  // connections above it from one address at once
	DefaultRetryAbove         = 256 // handshakes in progress above which Initials must pass a Retry
)

// maxSources bounds the per-source table: past it, addresses whose
// buckets are full again are forgotten, and if that is not enough the
// table starts over (admitting, never refusing, the forgotten ones).
const maxSources = 1 << 16

// HandshakeOptions bound the new path connections a concentrator takes
// on. The zero value is valid: each zero field takes the Default*
// constant of the same name; a negative Rate, PerSource or RetryAbove
// turns that bound off.
type HandshakeOptions struct {
	// Rate is the number of new path connections accepted per second
	// (token bucket); above it a connection attempt is refused at once as
	// busy (CONNECTION_REFUSED). 0: DefaultHandshakeRate; < 0: no limit.
	Rate float64
	// Burst is how many connections above Rate are accepted at once.
	// 0: DefaultHandshakeBurst.
	Burst int
	// PerSource is the number of new path connections accepted per second
	// from one IP address, proven and unproven addresses counted apart.
	// 0: DefaultHandshakePerSource; < 0: no limit.
	PerSource float64
	// PerSourceBurst is how many above PerSource one address may open at
	// once. 0: DefaultPerSourceBurst.
	PerSourceBurst int
	// RetryAbove is the number of handshakes in progress above which an
	// Initial without an address token is answered with a QUIC Retry.
	// 0: DefaultRetryAbove; < 0: never for that reason (the attempt rate
	// and an empty per-source bucket still turn Retry on); RetryAlways
	// sends every new attempt through a Retry.
	RetryAbove int
}

// RetryAlways, as HandshakeOptions.RetryAbove, validates every new
// connection's address with a Retry.
const RetryAlways = -2

func (o HandshakeOptions) withDefaults() HandshakeOptions {
	if o.Rate == 0 {
		o.Rate = DefaultHandshakeRate
	}
	if o.Burst == 0 {
		o.Burst = DefaultHandshakeBurst
	}
	if o.PerSource == 0 {
		o.PerSource = DefaultHandshakePerSource
	}
	if o.PerSourceBurst == 0 {
		o.PerSourceBurst = DefaultPerSourceBurst
	}
	if o.RetryAbove == 0 {
		o.RetryAbove = DefaultRetryAbove
	}
	return o
}

func (o HandshakeOptions) validate() error {
	switch {
	case o.Burst < 1 || o.PerSourceBurst < 1:
		return fmt.Errorf("handshake bursts %d and %d must be at least 1", o.Burst, o.PerSourceBurst)
	case o.RetryAbove < RetryAlways:
		return fmt.Errorf("retry_above %d is below %d", o.RetryAbove, RetryAlways)
	}
	return nil
}

// errBusy is ConnContext's refusal of a connection over the node's rate;
// errSourceRate over its source's. quic-go answers either with
// CONNECTION_REFUSED and keeps no state.
var (
	errBusy       = errors.New("tunnel: handshake rate reached")
	errSourceRate = errors.New("tunnel: handshake rate of the source address reached")
)

// admission holds the concentrator's handshake bounds and counts. Safe for
// concurrent use: quic-go calls verify and admit from its packet handling
// goroutine, done from the connections'.
type admission struct {
	opts HandshakeOptions
	all  *rate.Limiter // nil: no node-wide limit

	inProgress atomic.Int64 // admitted, handshake not yet done or failed
	// attempts counts the connection attempts of the current second
	// (second, the Unix second they were counted in); lastAttempts is the
	// previous second's count.
	second, attempts, lastAttempts atomic.Int64

	srcMu   sync.Mutex
	sources map[sourceKey]*rate.Limiter // nil when PerSource < 0
}

type sourceKey struct {
	addr   netip.Addr
	proven bool
}

func newAdmission(o HandshakeOptions) *admission {
	a := &admission{opts: o}
	if o.Rate > 0 {
		a.all = rate.NewLimiter(rate.Limit(o.Rate), o.Burst)
	}
	if o.PerSource > 0 {
		a.sources = make(map[sourceKey]*rate.Limiter)
	}
	return a
}

// countAttempt counts one connection attempt in the current second.
func (a *admission) countAttempt(now time.Time) {
	s := now.Unix()
	if old := a.second.Load(); old != s && a.second.CompareAndSwap(old, s) {
		n := a.attempts.Swap(0)
		if s-old > 1 {
			n = 0
		}
		a.lastAttempts.Store(n)
	}
	a.attempts.Add(1)
}

// loaded reports whether the node is under load: more handshakes in
// progress than RetryAbove, or more Initial packets without a token in the
// last second (or this one so far) than the rate and burst admit (4 ×
// RetryAbove without a rate bound).
//
// Retry is for floods, not for crowds of real edges: quic-go queues at
// most 8 Retry packets (and 4 refusals) for sending and drops the rest
// unanswered, so in a burst most senders hear nothing and try again after
// their probe timeout (measured: 100 new edges dialling at once took 3.1 s
// with Retry against 0.47 s without). Edges that were connected before
// carry an address token and are not counted.
func (a *admission) loaded() bool {
	if a.opts.RetryAbove == RetryAlways {
		return true
	}
	if a.opts.RetryAbove > 0 && a.inProgress.Load() > int64(a.opts.RetryAbove) {
		return true
	}
	var limit int64
	switch {
	case a.opts.Rate > 0:
		limit = int64(a.opts.Rate) + int64(a.opts.Burst)
	case a.opts.RetryAbove > 0:
		limit = 4 * int64(a.opts.RetryAbove)
	default:
		return false
	}
	return a.attempts.Load() > limit || a.lastAttempts.Load() > limit
}

// verify is quic-go's Transport.VerifySourceAddress: called for each
// Initial without a valid token, it returns true when the attempt must
// first prove its address with a Retry. It keeps no state per address.
func (a *admission) verify(addr net.Addr, retries *atomic.Uint64) bool {
	now := time.Now()
	a.countAttempt(now)
	retry := a.loaded() || !a.sourceHas(udpAddrPort(addr).Addr(), now)
	if retry {
		retries.Add(1)
	}
	return retry
}

// sourceHas reports whether the unproven bucket of addr has a token left
// (an address never seen has a full bucket), without taking it.
func (a *admission) sourceHas(addr netip.Addr, now time.Time) bool {
	if a.sources == nil {
		return true
	}
	a.srcMu.Lock()
	defer a.srcMu.Unlock()
	l := a.sources[sourceKey{addr.Unmap(), false}]
	return l == nil || l.TokensAt(now) >= 1
}

// admit decides on a new connection attempt from info (quic-go's
// ConnContext): nil admits it and counts it in progress until done is
// called; errSourceRate or errBusy refuses it.
func (a *admission) admit(info *quic.ClientInfo) error {
	now := time.Now()
	if info != nil && a.sources != nil {
		if !a.takeSource(sourceKey{udpAddrPort(info.RemoteAddr).Addr().Unmap(), info.AddrVerified}, now) {
			return errSourceRate
		}
	}
	if a.all != nil && !a.all.AllowN(now, 1) {
		return errBusy
	}
	a.inProgress.Add(1)
	return nil
}

// done ends an admitted handshake (completed or failed).
func (a *admission) done() { a.inProgress.Add(-1) }

// takeSource takes a token from k's bucket, creating it full.
func (a *admission) takeSource(k sourceKey, now time.Time) bool {
	a.srcMu.Lock()
	defer a.srcMu.Unlock()
	l := a.sources[k]
	if l == nil {
		if len(a.sources) >= maxSources {
			a.pruneLocked(now)
		}
		l = rate.NewLimiter(rate.Limit(a.opts.PerSource), a.opts.PerSourceBurst)
		a.sources[k] = l
	}
	return l.AllowN(now, 1)
}

// pruneLocked forgets the addresses whose buckets are full again (they
// would be created full), and everything if that leaves the table full.
func (a *admission) pruneLocked(now time.Time) {
	for k, l := range a.sources {
		if l.TokensAt(now) >= float64(a.opts.PerSourceBurst) {
			delete(a.sources, k)
		}
	}
	if len(a.sources) >= maxSources {
		clear(a.sources)
	}
}

// Key derivation for resumption across restarts (HKDF-SHA256, RFC 5869,
// from the certificate's private key in PKCS #8 DER, as the stateless
// reset key).
const (
	ticketKeyInfo = "bondd session ticket key v1 day "
	tokenKeyInfo  = "bondd address token key v1"
	// ticketKeyDays is how many days' keys decrypt a ticket: today's
	// encrypts, yesterday's still decrypts.
	ticketKeyDays = 2
)

// serverKeys derives the node's session-ticket keys and address-token key.
type serverKeys struct {
	secret []byte // nil: no stable keys (crypto/tls and quic-go use random ones)
	day    atomic.Int64
}

func newServerKeys(cfg *tls.Config) *serverKeys {
	k := &serverKeys{}
	if cfg != nil && len(cfg.Certificates) > 0 && cfg.Certificates[0].PrivateKey != nil {
		if der, err := x509.MarshalPKCS8PrivateKey(cfg.Certificates[0].PrivateKey); err == nil {
			k.secret = der
		}
	}
	k.day.Store(-1)
	return k
}

// tokenKey returns the QUIC address-token key, or nil.
func (k *serverKeys) tokenKey() *quic.TokenGeneratorKey {
	if k.secret == nil {
		return nil
	}
	b, err := hkdf.Key(sha256.New, k.secret, nil, tokenKeyInfo, len(quic.TokenGeneratorKey{}))
	if err != nil {
		return nil
	}
	var t quic.TokenGeneratorKey
	copy(t[:], b)
	return &t
}

// refreshTickets sets cfg's session-ticket keys for the UTC day of now
// (first, encrypting) and the day before, once per day; cheap otherwise.
func (k *serverKeys) refreshTickets(cfg *tls.Config, now time.Time) {
	if k.secret == nil || cfg.SessionTicketsDisabled {
		return
	}
	day := now.Unix() / 86400
	old := k.day.Load()
	if old == day || !k.day.CompareAndSwap(old, day) {
		return
	}
	keys := make([][32]byte, 0, ticketKeyDays)
	for d := day; d > day-ticketKeyDays; d-- {
		b, err := hkdf.Key(sha256.New, k.secret, nil, fmt.Sprint(ticketKeyInfo, d), 32)
		if err != nil {
			return
		}
		keys = append(keys, [32]byte(b))
	}
	cfg.SetSessionTicketKeys(keys)
}

// serverTLS returns the concentrator's TLS configuration: a clone of cfg
// with stable session-ticket keys and, when it verifies client
// certificates, their verification again on a resumed connection (a
// ticket holds the chain verified when it was issued, possibly against a
// CA pool since replaced).
func serverTLS(cfg *tls.Config, keys *serverKeys) *tls.Config {
	c := cfg.Clone()
	if c.ClientCAs != nil {
		prev := c.VerifyConnection
		pool := c.ClientCAs
		c.VerifyConnection = func(cs tls.ConnectionState) error {
			if cs.DidResume && len(cs.PeerCertificates) > 0 {
				inter := x509.NewCertPool()
				for _, ic := range cs.PeerCertificates[1:] {
					inter.AddCert(ic)
				}
				if _, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter,
					KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
					return fmt.Errorf("resumed client certificate: %w", err)
				}
			}
			if prev != nil {
				return prev(cs)
			}
			return nil
		}
	}
	keys.refreshTickets(c, time.Now())
	return c
}

// HandshakeCounts are the concentrator's admission counters since start.
// Retries, Busy and SourceRate count Initial packets: an attempt whose
// ClientHello spans two packets (bondd's post-quantum key share does)
// counts twice.
type HandshakeCounts struct {
	InProgress int64  // handshakes admitted and not yet done
	Retries    uint64 // Initial packets answered with a Retry (address not yet proven)
	Busy       uint64 // Initial packets refused over the node's rate
	SourceRate uint64 // Initial packets refused over their source address's rate
	Accepted   uint64 // connections that completed the handshake (before the hello)
	Resumed    uint64 // of those, the ones that resumed a TLS session
}

// Handshakes returns the admission counters.
func (c *Concentrator) Handshakes() HandshakeCounts {
	return HandshakeCounts{InProgress: c.admit.inProgress.Load(), Retries: c.tdrops.n[TransportRetry].Load(),
		Busy: c.tdrops.n[TransportBusy].Load(), SourceRate: c.tdrops.n[TransportSourceRate].Load(), Accepted: c.accepted.Load(), Resumed: c.resumed.Load()}
}

// connContext is the transport's ConnContext: admission, then the
// connection's recorder and watch (conc_transport.go).
func (c *Concentrator) connContext(ctx context.Context, info *quic.ClientInfo) (context.Context, error) {
	if err := c.admit.admit(info); err != nil {
		reason := TransportBusy
		if err == errSourceRate {
			reason = TransportSourceRate
		}
		c.tdrops.n[reason].Add(1)
		return nil, err
	}
	c.keys.refreshTickets(c.tls, time.Now())
	rec := &recorder{}
	rec.handshaking.Store(true)
	ctx = context.WithValue(ctx, recorderKey{}, rec)
	c.watchConn(ctx, rec, info)
	return ctx, nil
}

// handshakeDone ends rec's handshake in the admission count, once.
func (c *Concentrator) handshakeDone(rec *recorder) {
	if rec != nil && rec.handshaking.CompareAndSwap(true, false) {
		c.admit.done()
	}
}
