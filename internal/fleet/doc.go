// Package fleet holds what a bondd node needs to be one of several: the
// BGP speaker a concentrator uses to announce the prefixes of the edges it
// holds to the site's routers ([Speaker]), the rendezvous order in which an
// edge tries the concentrator nodes ([Order]), and the edge's failover
// decision between them ([Failover]).
//
// The speaker embeds GoBGP (github.com/osrg/gobgp/v4) as a library: BGP-4
// (RFC 4271) with multiprotocol extensions (RFC 4760) for IPv4 and IPv6
// unicast, TCP MD5 signatures (RFC 2385) for neighbour passwords. It
// originates routes only; it installs nothing into the kernel and accepts
// no routes it would act on.
//
// Nothing here imports another bondd package: the concentrator and the edge
// call in with plain values (edge ids, prefixes, addresses, times).
package fleet
