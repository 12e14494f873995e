package tunnel

import (
	"crypto/tls"
	"sync"

	"github.com/quic-go/quic-go"
)

// What an edge keeps between connections so that a returning path is
// cheap for the node: the TLS session tickets of each node (RFC 8446
// §2.2: the next handshake skips the node's certificate signature and the
// edge's verification of it) and the QUIC address tokens from NEW_TOKEN
// frames (RFC 9000 §8.1.3: the next connection skips the node's Retry
// under load). Both are kept per node, so that the edge of a fleet offers
// each node its own ticket and token; all uplinks of the edge share them.
// The hello after the handshake still carries the edge's id and token on
// every connection.

// sessionCacheSize is the number of TLS sessions ClientTLS keeps (one per
// node and server name).
const sessionCacheSize = 64

// maxResumeNodes bounds the nodes an edge keeps tickets and tokens for;
// past it, all are forgotten and the next handshakes are full ones.
const maxResumeNodes = 64

// resumeState holds an edge's per-node TLS configurations and its QUIC
// token store. Safe for concurrent use.
type resumeState struct {
	tokens *reusableTokens

	mu     sync.Mutex
	byNode map[string]*tls.Config
}

func newResumeState() *resumeState {
	return &resumeState{tokens: &reusableTokens{m: map[string]*quic.ClientToken{}}, byNode: map[string]*tls.Config{}}
}

// tlsFor returns base for dialling node: a clone whose session cache keys
// are prefixed with node, built once per node. base without a session
// cache is returned as it is (every handshake is a full one).
func (r *resumeState) tlsFor(base *tls.Config, node string) *tls.Config {
	if base.ClientSessionCache == nil {
		return base
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.byNode[node]; c != nil {
		return c
	}
	if len(r.byNode) >= maxResumeNodes {
		clear(r.byNode)
	}
	c := base.Clone()
	c.ClientSessionCache = &nodeSessionCache{node: node, c: base.ClientSessionCache, fails: map[string]int{}}
	r.byNode[node] = c
	return c
}

// tokenStore returns the QUIC token store for node.
func (r *resumeState) tokenStore(node string) quic.TokenStore {
	return nodeTokenStore{node: node, s: r.tokens}
}

// reusableTokens is a quic.TokenStore that keeps the newest token of each
// key and hands it to every connection attempt until a newer one comes,
// rather than once (quic-go's LRU store pops it): after a node restart an
// edge's first attempt may be refused as busy or time out, and its next
// one must still skip the Retry. RFC 9000 §8.1.3 asks clients not to
// reuse a token so that their connections cannot be linked; an edge names
// itself in every hello, so there is nothing to hide. At most
// maxResumeNodes keys. Safe for concurrent use.
type reusableTokens struct {
	mu sync.Mutex
	m  map[string]*quic.ClientToken
}

func (r *reusableTokens) Pop(key string) *quic.ClientToken {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[key]
}

func (r *reusableTokens) Put(key string, t *quic.ClientToken) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.m[key]; !ok && len(r.m) >= maxResumeNodes {
		clear(r.m)
	}
	r.m[key] = t
}

// ticketKeepFailures is how many handshakes in a row may fail while
// resuming before an edge lets crypto/tls forget the node's session
// ticket (nodeSessionCache).
const ticketKeepFailures = 3

// nodeSessionCache prefixes the keys of a shared session cache with a
// node, and keeps the node's ticket through handshakes that fail.
// crypto/tls deletes the session (a Put of nil) after any error of a
// handshake that offered it (RFC 5077 §3.2), a dial that timed out or was
// cancelled included, so the next handshake is a full one: under load,
// where handshakes time out, every failure made the next one costlier for
// the node (a 10,000-edge redial on one node resumed 0.27 of its
// handshakes, docs/performance.md). A deletion takes effect only at the
// ticketKeepFailures-th in a row without a new ticket between: a ticket
// the node does refuse (RFC 8446 §4.2.11: a server aborts on a binder it
// cannot verify) is still dropped after that many. Safe for concurrent
// use.
type nodeSessionCache struct {
	node string
	c    tls.ClientSessionCache

	mu    sync.Mutex
	fails map[string]int // deletions asked in a row, by key
}

func (n *nodeSessionCache) Get(key string) (*tls.ClientSessionState, bool) {
	return n.c.Get(n.node + "\x00" + key)
}

func (n *nodeSessionCache) Put(key string, cs *tls.ClientSessionState) {
	k := n.node + "\x00" + key
	n.mu.Lock()
	keep := false // a deletion to ignore: crypto/tls checks the ticket's expiry at each use
	if cs == nil {
		n.fails[k]++
		keep = n.fails[k] < ticketKeepFailures
	}
	if !keep {
		delete(n.fails, k)
	}
	n.mu.Unlock()
	if !keep {
		n.c.Put(k, cs)
	}
}

// nodeTokenStore prefixes the keys of a shared token store with a node.
type nodeTokenStore struct {
	node string
	s    quic.TokenStore
}

func (n nodeTokenStore) Pop(key string) *quic.ClientToken { return n.s.Pop(n.node + "\x00" + key) }

func (n nodeTokenStore) Put(key string, t *quic.ClientToken) { n.s.Put(n.node+"\x00"+key, t) }
