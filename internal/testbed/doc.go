// Package testbed builds throwaway network hosts out of Linux network
// namespaces for bondd's integration tests and for `bondd demo` run as root:
// named namespaces ([NS]), veth links between them ([Veth]), routes,
// sysctls, and sockets opened inside a namespace.
//
// Nothing here changes the caller's own namespace. Work inside a namespace
// runs through [NS.Do], on a locked OS thread that switches in and back out;
// sockets and TUN devices created there stay in that namespace and may be
// used from any goroutine afterwards.
//
// A [Testbed] owns what it created and removes all of it on Close, even
// after a partial failure. [Cleanup] removes namespaces left behind by a run
// that crashed. Everything needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN); see
// [IsRoot].
package testbed
