package node

// The edge's watcher of its uplinks' interfaces: when an uplink's link
// comes up or gains an address, the edge redials that uplink at once
// (tunnel.Edge.Kick) instead of waiting out its redial backoff, up to
// paths.redial_max after a long outage. It reads rtnetlink link and
// address notifications (RTNLGRP_LINK, RTNLGRP_IPV4_IFADDR,
// RTNLGRP_IPV6_IFADDR; rtnetlink(7)) on one goroutine, outside the packet
// path.

import (
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/bondd/bondd/internal/config"
)

// uplinkWatch turns link and address notifications into the uplinks to
// kick. It knows which interfaces are up and which usable addresses each
// holds, so that only a change kicks: an interface turning up, or an
// address appearing (an IPv6 address once its duplicate address detection
// passed). Not safe for concurrent use.
type uplinkWatch struct {
	uplinks []config.UplinkConfig
	up      map[int]bool                // ifindex → administratively and operationally up
	names   map[int]string              // ifindex → interface name
	addrs   map[int]map[netip.Addr]bool // ifindex → usable addresses
}

func newUplinkWatch(uplinks []config.UplinkConfig) *uplinkWatch {
	return &uplinkWatch{uplinks: uplinks, up: map[int]bool{}, names: map[int]string{}, addrs: map[int]map[netip.Addr]bool{}}
}

// uplinkKick is one uplink to kick and why.
type uplinkKick struct {
	uplink, reason string
}

// link records the state of interface index (name, up) and returns the
// uplinks to kick: those on that interface, by name or by a Bind address
// it holds, when it turned up. An interface first seen up counts as
// turned up (a modem plugged in); seed records without kicking.
func (w *uplinkWatch) link(index int, name string, up, seed bool) []uplinkKick {
	was, known := w.up[index]
	w.up[index], w.names[index] = up, name
	if seed || !up || (known && was) {
		return nil
	}
	var ks []uplinkKick
	for _, u := range w.uplinks {
		if u.Interface == name || u.Bind.IsValid() && w.addrs[index][u.Bind] {
			ks = append(ks, uplinkKick{u.Name, "interface " + name + " up"})
		}
	}
	return ks
}

// addr records that interface index gained (added) or lost a usable
// address a and returns the uplinks to kick: those on that interface or
// bound to a, when a is new there. seed records without kicking.
func (w *uplinkWatch) addr(index int, a netip.Addr, added, seed bool) []uplinkKick {
	have := w.addrs[index]
	if !added {
		delete(have, a)
		return nil
	}
	if have == nil {
		have = map[netip.Addr]bool{}
		w.addrs[index] = have
	}
	if have[a] {
		return nil
	}
	have[a] = true
	if seed {
		return nil
	}
	var ks []uplinkKick
	for _, u := range w.uplinks {
		if u.Bind == a || u.Interface != "" && u.Interface == w.names[index] {
			ks = append(ks, uplinkKick{u.Name, "address " + a.String() + " on " + w.names[index]})
		}
	}
	return ks
}

// forget drops interface index (deleted).
func (w *uplinkWatch) forget(index int) {
	delete(w.up, index)
	delete(w.names, index)
	delete(w.addrs, index)
}

// linkUp reports whether a is up both administratively and operationally
// (a device without carrier state, such as a TUN, reports unknown).
func linkUp(a *netlink.LinkAttrs) bool {
	return a.Flags&net.FlagUp != 0 && (a.OperState == netlink.OperUp || a.OperState == netlink.OperUnknown)
}

// usableAddr returns the address of an rtnetlink address message and
// whether it is one an uplink can send from: neither tentative (IPv6
// duplicate address detection under way) nor failed, and not link-local.
func usableAddr(ipn net.IPNet, flags int) (netip.Addr, bool) {
	a, ok := netip.AddrFromSlice(ipn.IP)
	if !ok {
		return netip.Addr{}, false
	}
	a = a.Unmap()
	return a, flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED) == 0 && !a.IsLinkLocalUnicast()
}

// uplinkWatcher runs an uplinkWatch on the notifications of one network
// namespace; Close stops it.
type uplinkWatcher struct {
	ns   netns.NsHandle // netns.None(): the daemon's own
	done chan struct{}
	wg   sync.WaitGroup
}

// watchRetry is how long the watcher waits before subscribing again after
// its netlink socket failed (a receive buffer overrun drops the
// subscription).
const watchRetry = time.Second

// watchUplinks starts watching the interfaces of uplinks and calls
// kick(uplink) on each change that may bring an uplink back (see
// uplinkWatch). It returns an error when rtnetlink cannot be subscribed to
// (then nothing runs). kick must not block.
func watchUplinks(uplinks []config.UplinkConfig, kick func(uplink string) bool, log *slog.Logger) (*uplinkWatcher, error) {
	return watchUplinksIn(netns.None(), uplinks, kick, log)
}

// watchUplinksIn is watchUplinks in network namespace ns (netns.None():
// the caller's); ns must stay open until Close.
func watchUplinksIn(ns netns.NsHandle, uplinks []config.UplinkConfig, kick func(uplink string) bool, log *slog.Logger) (*uplinkWatcher, error) {
	uw := &uplinkWatcher{ns: ns, done: make(chan struct{})}
	s, err := uw.subscribe()
	if err != nil {
		return nil, err
	}
	uw.wg.Go(func() { uw.routineWatch(s, newUplinkWatch(uplinks), kick, log) })
	return uw, nil
}

// Close stops the watcher and waits for it.
func (uw *uplinkWatcher) Close() {
	close(uw.done)
	uw.wg.Wait()
}

// subscription is one rtnetlink subscription: its channels, closed by
// netlink when it ends, and stop, which ends it.
type subscription struct {
	links chan netlink.LinkUpdate
	addrs chan netlink.AddrUpdate
	stop  chan struct{}
}

// subscribe subscribes to the link and address notifications of uw.ns.
func (uw *uplinkWatcher) subscribe() (*subscription, error) {
	s := &subscription{links: make(chan netlink.LinkUpdate, 64), addrs: make(chan netlink.AddrUpdate, 64), stop: make(chan struct{})}
	if err := netlink.LinkSubscribeWithOptions(s.links, s.stop, netlink.LinkSubscribeOptions{Namespace: &uw.ns}); err != nil {
		close(s.stop)
		return nil, err
	}
	if err := netlink.AddrSubscribeWithOptions(s.addrs, s.stop, netlink.AddrSubscribeOptions{Namespace: &uw.ns}); err != nil {
		s.addrs = nil // never started
		s.close()
		return nil, err
	}
	return s, nil
}

// close ends s and waits for netlink to close its channels (its reader
// goroutines send on them until then); a nil channel is one already
// closed.
func (s *subscription) close() {
	close(s.stop)
	if s.links != nil {
		for range s.links {
		}
	}
	if s.addrs != nil {
		for range s.addrs {
		}
	}
}

// routineWatch seeds w with the interfaces and addresses present, then
// applies every notification of s, kicking the uplinks w names. When the
// subscription fails it subscribes again after watchRetry and kicks every
// uplink (a change may have been missed).
func (uw *uplinkWatcher) routineWatch(s *subscription, w *uplinkWatch, kick func(string) bool, log *slog.Logger) {
	log.Debug("routineWatch started")
	defer log.Debug("routineWatch stopped")
	apply := func(ks []uplinkKick) {
		for _, k := range ks {
			if kick(k.uplink) {
				log.Info("uplink's network came up: redialling it now", "path", k.uplink, "change", k.reason)
			}
		}
	}
	for {
		uw.seed(w)
		err := uw.pump(s, w, apply)
		s.close()
		if err == nil {
			return
		}
		log.Warn("uplink watcher: netlink subscription ended; subscribing again", "err", err, "retry_in", watchRetry)
		for {
			select {
			case <-uw.done:
				return
			case <-time.After(watchRetry):
			}
			if s, err = uw.subscribe(); err == nil {
				break
			}
		}
		for _, u := range w.uplinks {
			apply([]uplinkKick{{u.Name, "netlink subscription renewed"}})
		}
	}
}

// errSubscriptionEnded is pump's error when netlink closed a channel.
var errSubscriptionEnded = errors.New("netlink closed the subscription")

// pump applies the notifications of s to w until uw is closed (nil) or
// the subscription ends (errSubscriptionEnded).
func (uw *uplinkWatcher) pump(s *subscription, w *uplinkWatch, apply func([]uplinkKick)) error {
	for {
		select {
		case <-uw.done:
			return nil
		case u, ok := <-s.links:
			if !ok {
				s.links = nil
				return errSubscriptionEnded
			}
			a := u.Attrs()
			if u.Header.Type == unix.RTM_DELLINK {
				w.forget(a.Index)
				continue
			}
			apply(w.link(a.Index, a.Name, linkUp(a), false))
		case u, ok := <-s.addrs:
			if !ok {
				s.addrs = nil
				return errSubscriptionEnded
			}
			if a, usable := usableAddr(u.LinkAddress, u.Flags); usable || !u.NewAddr {
				apply(w.addr(u.LinkIndex, a, u.NewAddr && usable, false))
			}
		}
	}
}

// seed records the interfaces and addresses of uw.ns in w, without kicks.
// Errors leave w as it was: the notifications fill it in.
func (uw *uplinkWatcher) seed(w *uplinkWatch) {
	h, err := netlink.NewHandleAt(uw.ns)
	if err != nil {
		return
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		return
	}
	for _, l := range links {
		a := l.Attrs()
		w.link(a.Index, a.Name, linkUp(a), true)
		addrs, err := h.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			continue
		}
		for _, ad := range addrs {
			if ip, ok := usableAddr(*ad.IPNet, ad.Flags); ok {
				w.addr(a.Index, ip, true, true)
			}
		}
	}
}
