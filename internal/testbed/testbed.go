package testbed

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
)

// Testbed owns a set of namespaces and links and removes all of them on
// Close. Its methods are safe for concurrent use.
type Testbed struct {
	prefix string

	mu     sync.Mutex
	nss    []*NS       // guarded by mu, in creation order
	links  []ownedLink // guarded by mu, in creation order
	closed bool        // guarded by mu
}

type ownedLink struct {
	ns   *NS
	name string
}

// New returns an empty Testbed whose namespaces are named with prefix (see
// [NewNS]). Call [Cleanup] with the same prefix first to remove leftovers of
// crashed runs if wanted.
func New(prefix string) *Testbed { return &Testbed{prefix: prefix} }

// NewNS creates a namespace owned by the testbed (see [NewNS]).
func (tb *Testbed) NewNS() (*NS, error) {
	ns, err := NewNS(tb.prefix)
	if err != nil {
		return nil, err
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.closed {
		ns.Close()
		return nil, errors.New("testbed: NewNS after Close")
	}
	tb.nss = append(tb.nss, ns)
	return ns, nil
}

// Veth creates a veth pair owned by the testbed (see [Veth]).
func (tb *Testbed) Veth(a *NS, aName string, aAddr netip.Prefix, b *NS, bName string, bAddr netip.Prefix) error {
	if err := Veth(a, aName, aAddr, b, bName, bAddr); err != nil {
		return err
	}
	tb.mu.Lock()
	tb.links = append(tb.links, ownedLink{a, aName})
	tb.mu.Unlock()
	return nil
}

// Close deletes every link and then every namespace the testbed created,
// newest first, carrying on past failures, and returns all errors joined.
// It is idempotent.
func (tb *Testbed) Close() error {
	tb.mu.Lock()
	links, nss := tb.links, tb.nss
	tb.links, tb.nss, tb.closed = nil, nil, true
	tb.mu.Unlock()
	var errs []error
	for _, l := range slices.Backward(links) {
		// A namespace closed by hand took its links with it.
		if err := l.ns.DeleteLink(l.name); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	for _, ns := range slices.Backward(nss) {
		if err := ns.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("testbed: close: %w", err)
	}
	return nil
}

// UplinkVeth is one veth pair [Testbed.Uplinks] created: its name (the same
// on both sides) and the addresses of its two ends.
type UplinkVeth struct {
	Name string
	A, B netip.Prefix // a's end 10.net.I.2/24, b's end 10.net.I.1/24
}

// Uplinks joins a and b with n veth pairs owned by the testbed, the uplinks
// of a bond between them: pair I is named "upI" on both sides, with
// 10.net.I.2/24 on a and 10.net.I.1/24 on b. It returns the pairs in order,
// or the first error (what it created is removed by Close).
func (tb *Testbed) Uplinks(a, b *NS, n int, net byte) ([]UplinkVeth, error) {
	out := make([]UplinkVeth, n)
	for i := range out {
		u := UplinkVeth{
			Name: fmt.Sprintf("up%d", i),
			A:    netip.PrefixFrom(netip.AddrFrom4([4]byte{10, net, byte(i), 2}), 24),
			B:    netip.PrefixFrom(netip.AddrFrom4([4]byte{10, net, byte(i), 1}), 24),
		}
		if err := tb.Veth(a, u.Name, u.A, b, u.Name, u.B); err != nil {
			return nil, err
		}
		out[i] = u
	}
	return out, nil
}
