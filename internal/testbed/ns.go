package testbed

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// netnsDir is where named namespaces are bind-mounted, as by `ip netns add`.
const netnsDir = "/run/netns"

// nsCounter numbers the namespaces this process creates.
var nsCounter atomic.Uint64

// NS is a named network namespace created by [NewNS]. Its methods are safe
// for concurrent use; Close must not race with the others.
type NS struct {
	name string

	mu     sync.Mutex
	handle netns.NsHandle // guarded by mu; closed (-1) after Close
}

// IsRoot reports whether the process runs with effective user id 0, which
// the functions of this package need (they create namespaces and links).
// Tests use it to skip with a message.
func IsRoot() bool { return os.Geteuid() == 0 }

// Unavailable says why this process cannot build a testbed with TUN
// devices (not root, or no /dev/net/tun), or returns "" when it can.
func Unavailable() string {
	if !IsRoot() {
		return "needs root to create network namespaces and TUN devices (CI runs as root)"
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return "/dev/net/tun is missing"
	}
	return ""
}

// NewNS creates a new named network namespace, visible in `ip netns list`,
// called prefix + "<pid>-<n>" with n counting up per process, so parallel
// runs and namespaces left behind by crashed runs never clash (a name taken
// by a leftover is skipped). prefix may hold letters, digits, '.', '_' and
// '-'. The loopback interface of the new namespace is brought up. The
// caller's namespace is unchanged. The caller owns the NS and must Close it.
func NewNS(prefix string) (*NS, error) {
	for _, r := range prefix {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return nil, fmt.Errorf("testbed: namespace prefix %q: only letters, digits, '.', '_' and '-' allowed", prefix)
		}
	}
	for range 100 {
		name := fmt.Sprintf("%s%d-%d", prefix, os.Getpid(), nsCounter.Add(1))
		h, err := newNamed(name)
		if errors.Is(err, fs.ErrExist) {
			continue // a leftover from a crashed run with our pid
		}
		if err != nil {
			return nil, fmt.Errorf("testbed: create namespace %s: %w", name, err)
		}
		ns := &NS{name: name, handle: h}
		if err := ns.Do(loopbackUp); err != nil {
			ns.Close()
			return nil, fmt.Errorf("testbed: namespace %s: bring up lo: %w", name, err)
		}
		return ns, nil
	}
	return nil, fmt.Errorf("testbed: create namespace with prefix %q: all names taken", prefix)
}

// newNamed creates and bind-mounts a named namespace on a locked thread,
// returns an open handle to it, and returns the thread to its original
// namespace. If that fails the thread stays locked and dies with its
// goroutine, so no goroutine ever runs in the wrong namespace.
func newNamed(name string) (netns.NsHandle, error) {
	type result struct {
		h   netns.NsHandle
		err error
	}
	res := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			res <- result{netns.None(), fmt.Errorf("get current namespace: %w", err)}
			return
		}
		defer orig.Close()
		h, err := netns.NewNamed(name)
		if err != nil && !errors.Is(err, fs.ErrExist) {
			// NewNamed may leave the mount point file behind; the name
			// is ours (it holds our pid), so remove it.
			os.Remove(filepath.Join(netnsDir, name))
		}
		// NewNamed switches the thread even when it fails later on.
		if serr := netns.Set(orig); serr != nil {
			if err == nil {
				h.Close()
				netns.DeleteNamed(name)
			}
			res <- result{netns.None(), errors.Join(err, fmt.Errorf("return to original namespace: %w", serr))}
			return // thread stays locked and is discarded
		}
		runtime.UnlockOSThread()
		res <- result{h, err}
	}()
	r := <-res
	return r.h, r.err
}

func loopbackUp() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	return netlink.LinkSetUp(lo)
}

// dupHandle returns a duplicate of the namespace handle, so that a
// concurrent Close cannot pull it from under a user; the caller closes it.
func (n *NS) dupHandle() (netns.NsHandle, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.handle == netns.None() {
		return netns.None(), fmt.Errorf("testbed: namespace %s: %w", n.name, net.ErrClosed)
	}
	fd, err := unix.FcntlInt(uintptr(n.handle), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return netns.None(), fmt.Errorf("testbed: namespace %s: %w", n.name, err)
	}
	return netns.NsHandle(fd), nil
}

// Name returns the namespace's name, as shown by `ip netns list` and
// usable with `ip netns exec`.
func (n *NS) Name() string { return n.name }

// String returns the namespace's name.
func (n *NS) String() string { return n.name }

// Do runs fn on a goroutine locked to an OS thread that has switched into
// the namespace, waits for it, switches the thread back and returns fn's
// error. Sockets, TUN devices and links that fn creates stay in the
// namespace. Only fn's own goroutine is inside: goroutines that fn starts
// run in the process's namespace, so fn must create its sockets itself
// (with IP literals: name resolution may start goroutines). If fn panics,
// Do restores the thread and re-panics in the caller. If the thread cannot
// switch back, it is never unlocked and is discarded with its goroutine.
// It returns an error wrapping net.ErrClosed after Close.
func (n *NS) Do(fn func() error) error {
	target, err := n.dupHandle()
	if err != nil {
		return err
	}
	defer target.Close()

	type result struct {
		err   error
		panic any
	}
	res := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			res <- result{err: fmt.Errorf("testbed: get current namespace: %w", err)}
			return
		}
		defer orig.Close()
		if err := netns.Set(target); err != nil {
			runtime.UnlockOSThread() // setns failed: still in orig
			res <- result{err: fmt.Errorf("testbed: enter namespace %s: %w", n.name, err)}
			return
		}
		var r result
		func() {
			defer func() { r.panic = recover() }()
			r.err = fn()
		}()
		if err := netns.Set(orig); err != nil {
			r.err = errors.Join(r.err, fmt.Errorf("testbed: leave namespace %s: %w", n.name, err))
			res <- r
			return // thread stays locked and is discarded
		}
		runtime.UnlockOSThread()
		res <- r
	}()
	r := <-res
	if r.panic != nil {
		panic(r.panic)
	}
	return r.err
}

// Close deletes the namespace: it unmounts and removes its name and closes
// this process's handle. Links inside it (veth ends, TUNs) go with it once
// nothing holds it open; sockets or devices created inside keep it alive,
// unnamed, until they are closed. Close is idempotent.
func (n *NS) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.handle == netns.None() {
		return nil
	}
	n.handle.Close()
	n.handle = netns.None()
	if err := netns.DeleteNamed(n.name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("testbed: delete namespace %s: %w", n.name, err)
	}
	return nil
}

// SetLinkUp sets the link called name in the namespace up or down.
func (n *NS) SetLinkUp(name string, up bool) error {
	return n.Do(func() error {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return fmt.Errorf("testbed: %s: link %s: %w", n.name, name, err)
		}
		if up {
			err = netlink.LinkSetUp(l)
		} else {
			err = netlink.LinkSetDown(l)
		}
		if err != nil {
			return fmt.Errorf("testbed: %s: set %s up=%v: %w", n.name, name, up, err)
		}
		return nil
	})
}

// Sysctl writes value to the namespace's sysctl key, in dotted form
// ("net.ipv4.ip_forward") or slash form ("net/ipv4/conf/eth0.5/forwarding",
// needed when a component contains a dot). Keys under net. are per
// namespace; others are global and affect the whole machine.
func (n *NS) Sysctl(key, value string) error {
	path := key
	if !strings.Contains(key, "/") {
		path = strings.ReplaceAll(key, ".", "/")
	}
	path = filepath.Join("/proc/sys", filepath.Clean("/"+path))
	return n.Do(func() error {
		if err := os.WriteFile(path, []byte(value), 0); err != nil {
			return fmt.Errorf("testbed: %s: sysctl %s=%s: %w", n.name, key, value, err)
		}
		return nil
	})
}

// ListenUDP opens a UDP socket in the namespace bound to addr ("ip:port",
// with an IP literal; port 0 picks one). The caller owns the socket.
func (n *NS) ListenUDP(addr string) (*net.UDPConn, error) {
	var c *net.UDPConn
	err := n.Do(func() error {
		a, err := net.ResolveUDPAddr("udp", addr)
		if err != nil {
			return err
		}
		c, err = net.ListenUDP("udp", a)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("testbed: %s: listen udp %s: %w", n.name, addr, err)
	}
	return c, nil
}

// ListenTCP opens a TCP listener in the namespace bound to addr ("ip:port",
// with an IP literal). The caller owns the listener; connections it accepts
// are in the namespace too.
func (n *NS) ListenTCP(addr string) (*net.TCPListener, error) {
	var l *net.TCPListener
	err := n.Do(func() error {
		a, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			return err
		}
		l, err = net.ListenTCP("tcp", a)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("testbed: %s: listen tcp %s: %w", n.name, addr, err)
	}
	return l, nil
}

// DialTCP connects from the namespace to addr ("ip:port", with an IP
// literal), giving up when ctx is done. The caller owns the connection.
func (n *NS) DialTCP(ctx context.Context, addr string) (*net.TCPConn, error) {
	var c net.Conn
	err := n.Do(func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, "tcp", addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("testbed: %s: dial tcp %s: %w", n.name, addr, err)
	}
	return c.(*net.TCPConn), nil
}

// Cleanup deletes the namespaces whose names start with prefix and were
// made by [NewNS] in a process that no longer runs (the pid is part of the
// name), i.e. leftovers of crashed runs. Namespaces of live processes,
// including this one, are kept, so concurrent runs are safe. It returns the
// errors of the deletions that failed; a missing namespace directory is not
// an error.
func Cleanup(prefix string) error {
	entries, err := os.ReadDir(netnsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("testbed: cleanup: %w", err)
	}
	var errs []error
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		pidStr, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if !ok || err != nil || pid <= 0 || processAlive(pid) {
			continue
		}
		if err := netns.DeleteNamed(e.Name()); err != nil {
			// Not a mount point (half-created): just remove the file.
			if rerr := os.Remove(filepath.Join(netnsDir, e.Name())); rerr != nil {
				errs = append(errs, fmt.Errorf("testbed: cleanup %s: %w", e.Name(), errors.Join(err, rerr)))
			}
		}
	}
	return errors.Join(errs...)
}

// processAlive reports whether a process with this pid exists.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
