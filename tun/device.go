package tun

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	wgtun "golang.zx2c4.com/wireguard/tun"
)

// Device is a TUN device that reads and writes batches of IP packets. It is
// wireguard's tun.Device interface, aliased so that no other bondd package
// imports wireguard.
//
// Batch shape, as implemented by the kernel device that [Open] returns:
//
//   - Read(bufs [][]byte, sizes []int, offset int) (n int, err error) blocks
//     until at least one packet arrives, then stores packet i at
//     bufs[i][offset:] and its length in sizes[i] for i < n. len(sizes) must
//     be >= len(bufs). Each Read is one read(2); it returns more than one
//     packet only when the kernel hands over a TSO/USO superpacket, which is
//     split into MTU-sized packets (ordinary traffic comes back one packet per
//     Read). Every bufs[i] needs room for offset + MTU bytes; size bufs to
//     BatchSize(). [ErrTooManySegments] means bufs was too short; n packets
//     are still valid. After Close, Read returns an error that matches
//     os.ErrClosed.
//   - Write(bufs [][]byte, offset int) (int, error) writes the packets at
//     bufs[i][offset:]. offset must be >= [MinWriteOffset] (the virtio-net
//     header is written into the headroom); a smaller one fails with
//     "invalid offset". Despite wireguard's interface doc, the int returned
//     is the total number of bytes written including one [MinWriteOffset]
//     header per packet written, not a packet count. Write coalesces packets
//     of one TCP/UDP flow (GRO) into the first packet's buffer when that
//     buffer's capacity is >= offset+65535, and modifies buffers in place:
//     do not reuse their contents after Write. Write issues one write(2) per
//     (coalesced) packet and is safe to call from one goroutine at a time
//     per direction (wireguard serialises Writes internally).
//   - Events() must be drained for the device's whole life (see
//     [DrainEvents]); wireguard's listeners block on a 5-slot channel.
//   - MTU() opens a socket in the calling thread's network namespace; do not
//     call it from another namespace than the device's (it fails, or reports
//     the MTU of an unrelated interface with the same name).
//   - Close() stops the device; the Events channel is closed afterwards.
type Device = wgtun.Device

// Event is a device event delivered on Device.Events(): a bit set of
// [EventUp], [EventDown] and [EventMTUUpdate].
type Event = wgtun.Event

// Device events, re-exported from wireguard.
const (
	// EventUp: the link is up and running.
	EventUp Event = wgtun.EventUp
	// EventDown: the link went down (never sent before the first EventUp).
	EventDown Event = wgtun.EventDown
	// EventMTUUpdate: link attributes changed; re-read the MTU in the
	// device's namespace if it matters.
	EventMTUUpdate Event = wgtun.EventMTUUpdate
)

const (
	// MinWriteOffset is the smallest offset, in bytes, that Device.Write
	// accepts on the kernel device: the virtio-net header (10 bytes) is
	// written into bufs[i][offset-10:offset].
	MinWriteOffset = 10

	// MaxPacketSize is the largest IP packet, in bytes, a Read can return
	// (and the buffer capacity after offset that lets Write coalesce).
	MaxPacketSize = 65535

	// DefaultMTU is the MTU, in bytes, that [Open] uses when Config.MTU is
	// zero: the smallest MTU that still carries IPv6 (RFC 8200 §5).
	DefaultMTU = 1280

	// MinMTU is the smallest MTU, in bytes, that [Open] accepts: the IPv4
	// minimum (RFC 791). Linux disables IPv6 on a link whose MTU is below
	// [DefaultMTU], so Open rejects IPv6 prefixes with such an MTU.
	MinMTU = 68
)

// Config says how [Open] creates and configures the TUN device. The zero
// value is valid: a kernel-named device ("tun%d") with MTU [DefaultMTU], no
// addresses and no routes.
type Config struct {
	// Name is the interface name, at most 15 bytes. Empty lets the kernel
	// pick "tun%d"; read the result with Device.Name().
	Name string
	// Addrs are the inner addresses set on the device, each with its prefix
	// length (for example 10.8.0.2/24). The kernel adds the connected route
	// for each prefix. Optional.
	Addrs []netip.Prefix
	// MTU is the device MTU in bytes, in [MinMTU, MaxPacketSize];
	// zero means [DefaultMTU]. Must be >= 1280 when any address or route
	// is IPv6.
	MTU int
	// Routes are destination prefixes routed into the device (no gateway).
	// A route to the same prefix, table and metric that already exists is
	// replaced. Optional.
	Routes []netip.Prefix
}

// Open creates the TUN device described by cfg in the calling thread's
// network namespace, sets its MTU and addresses, brings it up and adds the
// routes through it, in that order, then waits (at most 2 s, normally well
// under a millisecond) until the kernel has installed every address, so
// that packets written to the device for them are delivered at once. The device and its configuration stay
// in that namespace; callers that want another namespace lock the OS thread
// and switch to it before calling Open, and switch back afterwards.
//
// Open needs CAP_NET_ADMIN. It checks cfg with [Config.Validate] first and
// creates nothing when that fails. On any later failure it closes the device
// and returns an error naming the failed step, wrapping the cause.
//
// The caller owns the returned Device: it must drain Events() until Close
// (for example `go tun.DrainEvents(dev, nil)`), must call MTU() only from the
// device's namespace, and must Close it. The device disappears when closed or
// when the process exits.
func Open(cfg Config) (Device, error) {
	mtu, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	dev, err := wgtun.CreateTUN(cfg.Name, mtu)
	if err != nil {
		return nil, fmt.Errorf("tun: create %q: %w", cfg.Name, err)
	}
	if err := configure(dev, &cfg, mtu); err != nil {
		// Close, and drain the events so that wireguard's listener
		// goroutines can exit.
		go DrainEvents(dev, nil)
		dev.Close()
		return nil, err
	}
	return dev, nil
}

// Validate checks cfg without touching the system: name length, MTU range,
// prefixes that are valid IPv4 or IPv6 prefixes without zones, and an MTU of
// at least 1280 when any prefix is IPv6. Errors wrap [ErrInvalidConfig].
func (cfg *Config) Validate() error {
	_, err := cfg.validate()
	return err
}

// validate checks cfg and returns the effective MTU.
func (cfg *Config) validate() (int, error) {
	if len(cfg.Name) >= unix.IFNAMSIZ {
		return 0, fmt.Errorf("%w: name %q is longer than %d bytes", ErrInvalidConfig, cfg.Name, unix.IFNAMSIZ-1)
	}
	mtu := cfg.MTU
	if mtu == 0 {
		mtu = DefaultMTU
	}
	if mtu < MinMTU || mtu > MaxPacketSize {
		return 0, fmt.Errorf("%w: MTU %d outside [%d, %d]", ErrInvalidConfig, cfg.MTU, MinMTU, MaxPacketSize)
	}
	for _, list := range [...]struct {
		what     string
		prefixes []netip.Prefix
	}{{"address", cfg.Addrs}, {"route", cfg.Routes}} {
		for _, p := range list.prefixes {
			if !p.IsValid() || p.Addr().Zone() != "" || p.Addr().Is4In6() {
				return 0, fmt.Errorf("%w: %s %v is not a valid IPv4 or IPv6 prefix", ErrInvalidConfig, list.what, p)
			}
			if p.Addr().Is6() && mtu < DefaultMTU {
				return 0, fmt.Errorf("%w: IPv6 %s %v needs MTU >= %d, have %d", ErrInvalidConfig, list.what, p, DefaultMTU, mtu)
			}
		}
	}
	return mtu, nil
}

// configure applies cfg to the freshly created dev with netlink, using
// per-call sockets in the calling thread's namespace.
func configure(dev Device, cfg *Config, mtu int) error {
	name, err := dev.Name()
	if err != nil {
		return fmt.Errorf("tun: read device name: %w", err)
	}
	link, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("tun: look up link %s: %w", name, err)
	}
	// CreateTUN set the MTU with an ioctl already; set it again through
	// netlink so the link state we act on is the one we asked for.
	if err := netlink.LinkSetMTU(link, mtu); err != nil {
		return fmt.Errorf("tun: set MTU %d on %s: %w", mtu, name, err)
	}
	for _, p := range cfg.Addrs {
		addr := &netlink.Addr{IPNet: prefixIPNet(p, false)}
		if p.Addr().Is6() {
			// Inner addresses are configured, not autoconfigured; skip DAD
			// so they are usable at once (TUN links skip it anyway).
			addr.Flags = unix.IFA_F_NODAD
		}
		if err := netlink.AddrAdd(link, addr); err != nil {
			return fmt.Errorf("tun: add address %v to %s: %w", p, name, err)
		}
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("tun: set %s up: %w", name, err)
	}
	for _, p := range cfg.Routes {
		r := &netlink.Route{
			LinkIndex: link.Attrs().Index,
			Dst:       prefixIPNet(p, true),
			Protocol:  unix.RTPROT_STATIC,
		}
		if p.Addr().Is4() {
			r.Scope = netlink.SCOPE_LINK
		}
		if err := netlink.RouteReplace(r); err != nil {
			return fmt.Errorf("tun: add route %v via %s: %w", p, name, err)
		}
	}
	return waitLocal(name, cfg.Addrs)
}

// addrReadyTimeout bounds how long Open waits for the kernel to install the
// local routes of the device's addresses.
const addrReadyTimeout = 2 * time.Second

// waitLocal waits until every address in addrs routes to the local host.
// The kernel installs an IPv6 address's local route from a workqueue once
// the link is up (even with NODAD), so for a moment after LinkSetUp packets
// written to the device for that address are dropped as not ours
// (Ip6InAddrErrors). IPv4 local routes are synchronous; checking them costs
// one netlink round trip.
func waitLocal(name string, addrs []netip.Prefix) error {
	deadline := time.Now().Add(addrReadyTimeout)
	for _, p := range addrs {
		for delay := 100 * time.Microsecond; ; delay = min(2*delay, 10*time.Millisecond) {
			rs, err := netlink.RouteGet(p.Addr().AsSlice())
			if err == nil && len(rs) > 0 && rs[0].Type == unix.RTN_LOCAL {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("tun: address %v on %s not usable after %v (last lookup: %d routes, %v)", p, name, addrReadyTimeout, len(rs), err)
			}
			time.Sleep(delay)
		}
	}
	return nil
}

// prefixIPNet converts p to a *net.IPNet. With masked, host bits are cleared
// (routes); without, the address is kept as is (interface addresses).
func prefixIPNet(p netip.Prefix, masked bool) *net.IPNet {
	if masked {
		p = p.Masked()
	}
	a := p.Addr()
	bits := a.BitLen()
	return &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(p.Bits(), bits)}
}

// DrainEvents receives from d.Events() until the channel is closed (after
// d.Close()), calling fn for each event when fn is not nil. It blocks for the
// device's whole life: run it in its own goroutine. fn runs on that goroutine
// and must not block for long, or wireguard's listeners stall.
func DrainEvents(d Device, fn func(Event)) {
	for ev := range d.Events() {
		if fn != nil {
			fn(ev)
		}
	}
}

// SetMTU sets the MTU of dev to mtu bytes, in [MinMTU, MaxPacketSize],
// with netlink in the calling thread's network namespace, which must be
// the device's. The kernel then answers packets it would route into dev
// that are larger (with DF) with ICMP errors itself, and local sockets
// learn the MTU. Linux removes the IPv6 addresses of a link whose MTU
// falls below [DefaultMTU] and does not restore them: a caller with IPv6
// on dev keeps mtu >= DefaultMTU. It returns an error wrapping
// [ErrInvalidConfig] for an MTU out of range, else the netlink error.
func SetMTU(dev Device, mtu int) error {
	if mtu < MinMTU || mtu > MaxPacketSize {
		return fmt.Errorf("%w: MTU %d outside [%d, %d]", ErrInvalidConfig, mtu, MinMTU, MaxPacketSize)
	}
	name, err := dev.Name()
	if err != nil {
		return fmt.Errorf("tun: read device name: %w", err)
	}
	link, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("tun: look up link %s: %w", name, err)
	}
	if err := netlink.LinkSetMTU(link, mtu); err != nil {
		return fmt.Errorf("tun: set MTU %d on %s: %w", mtu, name, err)
	}
	return nil
}
