// Package quicfork holds the tests of bondd's quic-go fork in
// third_party/quic-go: that the tree is the released module plus
// third_party/quic-go.patch and nothing else, and that the patch's
// congestion-control hook (package github.com/quic-go/quic-go/congestion)
// does what it says. It has no code of its own.
package quicfork
