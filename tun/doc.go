// Package tun opens and configures bondd's TUN device and holds the small
// per-packet helpers that belong next to it: MSS clamping for TCP SYNs and
// ICMP "fragmentation needed" / ICMPv6 "packet too big" replies for packets
// larger than the tunnel MTU.
//
// It is the only bondd package that imports golang.zx2c4.com/wireguard/tun
// (as wgtun). The rest of bondd uses the aliases declared here ([Device],
// [Event]) so that the seam stays in one place.
//
// # Batch shape
//
// A [Device] reads and writes batches: Read(bufs [][]byte, sizes []int,
// offset int) and Write(bufs [][]byte, offset int). Packet i lives at
// bufs[i][offset:offset+sizes[i]]; the offset bytes in front of it are
// headroom the caller may use (bondd puts its wire header there). Writes to
// the kernel device need offset >= [MinWriteOffset]; bondd uses a constant
// offset of at least 16 in both directions. See [Device] for the details and
// the surprises (what Write returns, GRO, when Read returns more than one
// packet).
//
// # Namespaces
//
// [Open] works in the network namespace of the calling OS thread. Callers that
// want the device in another namespace lock the thread and switch first
// (bondd's internal testbed does this); the file descriptor keeps working from
// any thread afterwards, but [Device.MTU] does not (see [Open]).
//
// # Per-packet helpers
//
// [ClampMSS] and [AppendPacketTooBig] parse untrusted bytes: they are bounds
// checked, never panic, and allocate nothing (AppendPacketTooBig allocates
// only when dst lacks capacity). Both are safe for concurrent use on distinct
// packets.
package tun
