package testbed

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// VethMTU is the MTU, in bytes, of the links [Veth] creates.
const VethMTU = 1500

// carrierTimeout bounds how long Veth waits for both ends to report
// carrier; the kernel propagates it asynchronously (linkwatch), usually
// within a few milliseconds, at worst about a second.
const carrierTimeout = 5 * time.Second

// Veth creates a veth pair: aName in namespace a with address aAddr, and
// bName in namespace b with address bAddr (either address may be the zero
// Prefix for none), both with MTU [VethMTU] and up. IPv6 addresses skip
// duplicate address detection so they are usable at once. Interface names
// are at most 15 bytes. Veth returns once both ends are running (have
// carrier): until then the kernel drops what is sent, which loses the first
// ARP or neighbour solicitation. On failure nothing is left behind (the pair
// is deleted) and the error names the step.
func Veth(a *NS, aName string, aAddr netip.Prefix, b *NS, bName string, bAddr netip.Prefix) error {
	if a == nil || b == nil {
		return errors.New("testbed: veth: nil namespace")
	}
	bh, err := b.dupHandle()
	if err != nil {
		return err
	}
	defer bh.Close()
	err = a.Do(func() error {
		v := &netlink.Veth{
			LinkAttrs:     netlink.LinkAttrs{Name: aName, MTU: VethMTU},
			PeerName:      bName,
			PeerNamespace: netlink.NsFd(bh),
			PeerMTU:       VethMTU,
		}
		if err := netlink.LinkAdd(v); err != nil {
			return fmt.Errorf("testbed: veth %s/%s - %s/%s: create: %w", a.name, aName, b.name, bName, err)
		}
		if err := configureLink(a.name, aName, aAddr); err != nil {
			deleteLink(aName)
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = b.Do(func() error { return configureLink(b.name, bName, bAddr) })
	if err == nil {
		err = a.WaitRunning(aName, carrierTimeout)
	}
	if err == nil {
		err = b.WaitRunning(bName, carrierTimeout)
	}
	if err != nil {
		a.Do(func() error { return deleteLink(aName) })
		return err
	}
	return nil
}

// configureLink adds addr (if valid) to the link called name in the current
// namespace nsName and sets it up.
func configureLink(nsName, name string, addr netip.Prefix) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("testbed: %s: link %s: %w", nsName, name, err)
	}
	if addr.IsValid() {
		a := &netlink.Addr{IPNet: &net.IPNet{IP: addr.Addr().AsSlice(), Mask: net.CIDRMask(addr.Bits(), addr.Addr().BitLen())}}
		if addr.Addr().Is6() {
			a.Flags = unix.IFA_F_NODAD
		}
		if err := netlink.AddrAdd(l, a); err != nil {
			return fmt.Errorf("testbed: %s: add address %v to %s: %w", nsName, addr, name, err)
		}
	}
	if err := netlink.LinkSetUp(l); err != nil {
		return fmt.Errorf("testbed: %s: set %s up: %w", nsName, name, err)
	}
	return nil
}

// deleteLink deletes the link called name in the current namespace; a
// missing link is not an error.
func deleteLink(name string) error {
	l, err := netlink.LinkByName(name)
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return netlink.LinkDel(l)
}

// DeleteLink deletes the link called name in the namespace (for a veth,
// both ends). A link that does not exist is not an error.
func (n *NS) DeleteLink(name string) error {
	return n.Do(func() error {
		if err := deleteLink(name); err != nil {
			return fmt.Errorf("testbed: %s: delete link %s: %w", n.name, name, err)
		}
		return nil
	})
}

// AddRoute adds a route to dst in the namespace's main table, through
// gateway gw when gw is valid, out of the link called dev when dev is not
// empty (at least one of the two is needed).
func (n *NS) AddRoute(dst netip.Prefix, gw netip.Addr, dev string) error {
	if !dst.IsValid() || (!gw.IsValid() && dev == "") {
		return fmt.Errorf("testbed: %s: route %v: need a valid destination and a gateway or a device", n.name, dst)
	}
	dst = dst.Masked()
	return n.Do(func() error {
		r := &netlink.Route{Dst: &net.IPNet{IP: dst.Addr().AsSlice(), Mask: net.CIDRMask(dst.Bits(), dst.Addr().BitLen())}}
		if gw.IsValid() {
			r.Gw = gw.AsSlice()
		}
		if dev != "" {
			l, err := netlink.LinkByName(dev)
			if err != nil {
				return fmt.Errorf("testbed: %s: route %v: link %s: %w", n.name, dst, dev, err)
			}
			r.LinkIndex = l.Attrs().Index
			if !gw.IsValid() && dst.Addr().Is4() {
				r.Scope = netlink.SCOPE_LINK
			}
		}
		if err := netlink.RouteAdd(r); err != nil {
			return fmt.Errorf("testbed: %s: add route %v via %v dev %q: %w", n.name, dst, gw, dev, err)
		}
		return nil
	})
}

// WaitRunning waits until the link called name in the namespace is
// operationally up (IFF_RUNNING: up and with carrier), polling every 10 ms
// for at most timeout. It fails if the link does not exist or the time runs
// out. Use it after SetLinkUp(name, true) before sending: a veth end gets
// carrier only once both ends are up, and asynchronously.
func (n *NS) WaitRunning(name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var flags uint32
		err := n.Do(func() error {
			l, err := netlink.LinkByName(name)
			if err != nil {
				return err
			}
			flags = l.Attrs().RawFlags
			return nil
		})
		if err != nil {
			return fmt.Errorf("testbed: %s: wait for %s: %w", n.name, name, err)
		}
		if flags&unix.IFF_RUNNING != 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("testbed: %s: %s not running after %v", n.name, name, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
