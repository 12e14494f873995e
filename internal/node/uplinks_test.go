package node

import (
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/bondd/bondd/internal/config"
	"github.com/bondd/bondd/internal/testbed"
	"github.com/bondd/bondd/internal/testkit"
)

// watchUplinksCfg: a by interface, b by bind address, c on an interface
// the tests never touch.
var watchUplinksCfg = []config.UplinkConfig{
	{Name: "a", Interface: "up0"},
	{Name: "b", Bind: netip.MustParseAddr("10.9.1.2")},
	{Name: "c", Interface: "other0"},
}

func TestUplinkWatch(t *testing.T) {
	addr := netip.MustParseAddr
	// Each step is a notification: a link (index, name, up) or an
	// address (index, addr, added); want is the uplinks it kicks.
	type step struct {
		link  bool
		index int
		name  string
		up    bool
		addr  netip.Addr
		added bool
		seed  bool
		want  []string
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"an interface turning up kicks its uplink", []step{
			{link: true, index: 2, name: "up0", up: false, seed: true},
			{link: true, index: 2, name: "up0", up: true, want: []string{"a"}},
		}},
		{"staying up kicks nothing", []step{
			{link: true, index: 2, name: "up0", up: true, seed: true},
			{link: true, index: 2, name: "up0", up: true},
			{link: true, index: 2, name: "up0", up: false},
			{link: true, index: 2, name: "up0", up: true, want: []string{"a"}},
			{link: true, index: 2, name: "up0", up: true},
		}},
		{"a new interface up kicks (a modem plugged in)", []step{
			{link: true, index: 7, name: "up0", up: true, want: []string{"a"}},
		}},
		{"other interfaces kick nothing", []step{
			{link: true, index: 3, name: "eth9", up: false},
			{link: true, index: 3, name: "eth9", up: true},
			{index: 3, addr: addr("192.0.2.1"), added: true},
		}},
		{"seeding kicks nothing", []step{
			{link: true, index: 2, name: "up0", up: true, seed: true},
			{index: 2, addr: addr("10.9.1.2"), added: true, seed: true},
		}},
		{"a new address kicks the interface's uplink and the uplink bound to it", []step{
			{link: true, index: 2, name: "up0", up: true, seed: true},
			{index: 2, addr: addr("10.9.0.2"), added: true, want: []string{"a"}},
			{index: 2, addr: addr("10.9.0.2"), added: true}, // a lifetime refresh
			{index: 2, addr: addr("10.9.1.2"), added: true, want: []string{"a", "b"}},
			{index: 2, addr: addr("10.9.1.2"), added: false},
			{index: 2, addr: addr("10.9.1.2"), added: true, want: []string{"a", "b"}},
		}},
		{"the interface holding a bind address turning up kicks that uplink", []step{
			{link: true, index: 4, name: "wwan0", up: true, seed: true},
			{index: 4, addr: addr("10.9.1.2"), added: true, seed: true},
			{link: true, index: 4, name: "wwan0", up: false},
			{link: true, index: 4, name: "wwan0", up: true, want: []string{"b"}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newUplinkWatch(watchUplinksCfg)
			for i, s := range tc.steps {
				var ks []uplinkKick
				if s.link {
					ks = w.link(s.index, s.name, s.up, s.seed)
				} else {
					ks = w.addr(s.index, s.addr, s.added, s.seed)
				}
				var got []string
				for _, k := range ks {
					got = append(got, k.uplink)
				}
				if !slices.Equal(got, s.want) {
					t.Errorf("step %d: kicked %v, want %v", i, got, s.want)
				}
			}
		})
	}
}

func TestUsableAddr(t *testing.T) {
	for _, tc := range []struct {
		ip    string
		flags int
		want  bool
	}{
		{"10.9.0.2", 0, true},
		{"fd01::2", unix.IFA_F_PERMANENT, true},
		{"fd01::2", unix.IFA_F_TENTATIVE, false},
		{"fd01::2", unix.IFA_F_DADFAILED, false},
		{"fe80::1", 0, false},
		{"169.254.3.4", 0, false},
	} {
		ip := net.ParseIP(tc.ip)
		if _, ok := usableAddr(net.IPNet{IP: ip}, tc.flags); ok != tc.want {
			t.Errorf("usableAddr(%s, %#x) = %v, want %v", tc.ip, tc.flags, ok, tc.want)
		}
	}
}

// kickLog records the watcher's kicks.
type kickLog struct {
	mu  sync.Mutex
	got []string
}

func (k *kickLog) kick(name string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.got = append(k.got, name)
	return true
}

// wait waits up to 3 s for the kicks since the last wait to hold want,
// and returns them.
func (k *kickLog) wait(t *testing.T, want ...string) []string {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		k.mu.Lock()
		got := slices.Clone(k.got)
		k.mu.Unlock()
		if !slices.ContainsFunc(want, func(w string) bool { return !slices.Contains(got, w) }) {
			k.mu.Lock()
			k.got = k.got[len(got):]
			k.mu.Unlock()
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("kicked %v, want %v", got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWatchUplinksNetns runs the watcher on a namespace's rtnetlink: a
// veth interface up0 turning up kicks uplink a, an address added kicks
// the uplinks it concerns, and c (on another interface) is never kicked.
func TestWatchUplinksNetns(t *testing.T) {
	if !testbed.IsRoot() {
		t.Skip("needs root (network namespaces)")
	}
	if why := testbed.Unavailable(); why != "" {
		t.Skip(why)
	}
	testkit.CheckLeaks(t)
	ns, err := testbed.NewNS("bondd-uplinks-")
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	var h netns.NsHandle
	var link netlink.Link
	if err := ns.Do(func() error {
		if h, err = netns.Get(); err != nil {
			return err
		}
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "up0"}, PeerName: "peer0"}); err != nil {
			return err
		}
		peer, err := netlink.LinkByName("peer0")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(peer); err != nil { // up0 is operationally up once up itself
			return err
		}
		link, err = netlink.LinkByName("up0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	inNS := func(fn func() error) {
		t.Helper()
		if err := ns.Do(fn); err != nil {
			t.Fatal(err)
		}
	}
	var k kickLog
	uw, err := watchUplinksIn(h, watchUplinksCfg, k.kick, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer uw.Close()

	inNS(func() error { return netlink.LinkSetUp(link) })
	if got := k.wait(t, "a"); slices.Contains(got, "c") || slices.Contains(got, "b") {
		t.Errorf("up0 up kicked %v, want a only", got)
	}
	inNS(func() error {
		return netlink.AddrAdd(link, &netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP("10.9.1.2"), Mask: net.CIDRMask(24, 32)}})
	})
	if got := k.wait(t, "a", "b"); slices.Contains(got, "c") {
		t.Errorf("an address on up0 kicked %v, want a and b", got)
	}
	inNS(func() error { return netlink.LinkSetDown(link) })
	inNS(func() error { return netlink.LinkSetUp(link) })
	if got := k.wait(t, "a", "b"); slices.Contains(got, "c") {
		t.Errorf("up0 down and up kicked %v, want a and b", got)
	}
}
