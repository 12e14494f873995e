package fleet

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"slices"
)

// Order returns nodes sorted by rendezvous (highest random weight) hashing
// on edgeID: the edge's home node first, then the node it moves to when
// home is unavailable, and so on. Thaler and Ravishankar, "Using name-based
// mappings to increase hit rates", IEEE/ACM ToN 6(1), 1998: each node's
// weight for an edge is a hash of (node, edge), and the edge goes to the
// highest weight.
//
// Every edge computes the same order from the same list, whatever the
// list's own order, with no coordination. Adding a node takes only the
// edges for which it now weighs most (about 1/(n+1) of them), all from
// different nodes; removing one moves only its own edges, each to its next
// node. The weight is the first 8 bytes of SHA-256(node ‖ 0x00 ‖ edgeID),
// the same on every machine and Go version. Ties (equal weights, or
// duplicate names) are broken by name. nodes is not modified; the result
// is a new slice of the same length.
func Order(edgeID string, nodes []string) []string {
	type scored struct {
		node string
		w    uint64
	}
	s := make([]scored, len(nodes))
	for i, n := range nodes {
		s[i] = scored{n, Weight(n, edgeID)}
	}
	slices.SortFunc(s, func(a, b scored) int {
		if c := cmp.Compare(b.w, a.w); c != 0 {
			return c
		}
		return cmp.Compare(a.node, b.node)
	})
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = x.node
	}
	return out
}

// Weight is the rendezvous weight of node for edgeID used by [Order]: the
// big-endian first 8 bytes of SHA-256(node ‖ 0x00 ‖ edgeID). The zero byte
// keeps ("ab","c") and ("a","bc") apart.
func Weight(node, edgeID string) uint64 {
	h := sha256.New()
	h.Write([]byte(node))
	h.Write([]byte{0})
	h.Write([]byte(edgeID))
	var sum [sha256.Size]byte
	return binary.BigEndian.Uint64(h.Sum(sum[:0]))
}
