package testbed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bondd/bondd/internal/testkit"
	"github.com/vishvananda/netlink"
)

const testPrefix = "bondd-tbtest-"

// requireRoot skips the test unless it runs as root, then arms a goroutine
// leak check that runs after the test's other cleanups.
func requireRoot(t *testing.T) {
	t.Helper()
	if !IsRoot() {
		t.Skip("skipping: needs root to create network namespaces and veth links (run as root, as CI does)")
	}
	testkit.CheckLeaks(t)
}

// netnsNames returns the named namespaces, as `ip netns list` shows them.
func netnsNames(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(netnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func threadNS(t *testing.T) string {
	t.Helper()
	s, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNSDo(t *testing.T) {
	requireRoot(t)
	ns, err := NewNS(testPrefix)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if !strings.HasPrefix(ns.Name(), fmt.Sprintf("%s%d-", testPrefix, os.Getpid())) {
		t.Errorf("name %q lacks prefix and pid", ns.Name())
	}
	host := threadNS(t)
	var inside string
	var links []netlink.Link
	err = ns.Do(func() error {
		inside = threadNS(t)
		var err error
		links, err = netlink.LinkList()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if inside == host {
		t.Errorf("Do ran in the host namespace %s", host)
	}
	if len(links) != 1 || links[0].Attrs().Name != "lo" || links[0].Attrs().Flags&net.FlagUp == 0 {
		t.Errorf("new namespace links: want only lo, up; got %d links", len(links))
	}
	for i := range 20 { // many calls: no thread may come back in the wrong namespace
		ns.Do(func() error { return nil })
		if got := threadNS(t); got != host {
			t.Fatalf("call %d: caller thread now in %s, want %s", i, got, host)
		}
	}
	sentinel := errors.New("x")
	if err := ns.Do(func() error { return sentinel }); !errors.Is(err, sentinel) {
		t.Errorf("Do error = %v, want fn's error", err)
	}
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want the panic from fn", r)
			}
		}()
		ns.Do(func() error { panic("boom") })
	}()
	if err := ns.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ns.Do(func() error { return nil }); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Do after Close = %v, want net.ErrClosed", err)
	}
	if err := ns.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestNewNSBadPrefix(t *testing.T) {
	if _, err := NewNS("a/b"); err == nil {
		t.Error("NewNS accepted a prefix with '/'")
	}
}

// ping sends one datagram from c to to and waits up to wait for the echo.
func ping(c *net.UDPConn, to netip.AddrPort, wait time.Duration) error {
	msg := []byte(time.Now().String())
	if _, err := c.WriteToUDPAddrPort(msg, to); err != nil {
		return err
	}
	c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 2048)
	for {
		n, _, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			return err
		}
		if bytes.Equal(buf[:n], msg) {
			return nil
		}
	}
}

// twoNS creates two namespaces owned by tb.
func twoNS(t *testing.T, tb *Testbed) (a, b *NS) {
	t.Helper()
	a, err := tb.NewNS()
	if err != nil {
		t.Fatal(err)
	}
	if b, err = tb.NewNS(); err != nil {
		t.Fatal(err)
	}
	return a, b
}

// TestUplinks checks the names and addresses of the veth uplinks, and that
// each pair carries UDP.
func TestUplinks(t *testing.T) {
	requireRoot(t)
	tb := New(testPrefix)
	defer tb.Close()
	a, b := twoNS(t, tb)
	ups, err := tb.Uplinks(a, b, 2, 203)
	if err != nil {
		t.Fatal(err)
	}
	want := []UplinkVeth{
		{"up0", netip.MustParsePrefix("10.203.0.2/24"), netip.MustParsePrefix("10.203.0.1/24")},
		{"up1", netip.MustParsePrefix("10.203.1.2/24"), netip.MustParsePrefix("10.203.1.1/24")},
	}
	if !slices.Equal(ups, want) {
		t.Fatalf("Uplinks = %v, want %v", ups, want)
	}
	for _, u := range ups {
		srv, err := b.ListenUDP(netip.AddrPortFrom(u.B.Addr(), 7000).String())
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		testkit.UDPEcho(srv)
		cli, err := a.ListenUDP(netip.AddrPortFrom(u.A.Addr(), 0).String())
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		if err := ping(cli, netip.AddrPortFrom(u.B.Addr(), 7000), 2*time.Second); err != nil {
			t.Errorf("%s: %v", u.Name, err)
		}
	}
}

func TestVethUDP(t *testing.T) {
	requireRoot(t)
	tb := New(testPrefix)
	defer tb.Close()
	a, b := twoNS(t, tb)
	if err := tb.Veth(a, "va", netip.MustParsePrefix("10.200.0.1/24"), b, "vb", netip.MustParsePrefix("10.200.0.2/24")); err != nil {
		t.Fatal(err)
	}
	if err := tb.Veth(a, "va6", netip.MustParsePrefix("fd00:200::1/64"), b, "vb6", netip.MustParsePrefix("fd00:200::2/64")); err != nil {
		t.Fatal(err)
	}
	for _, fam := range []struct{ client, server string }{{"10.200.0.1:0", "10.200.0.2:7000"}, {"[fd00:200::1]:0", "[fd00:200::2]:7000"}} {
		srv, err := b.ListenUDP(fam.server)
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		testkit.UDPEcho(srv)
		cli, err := a.ListenUDP(fam.client)
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		to := netip.MustParseAddrPort(fam.server)
		if err := ping(cli, to, 2*time.Second); err != nil {
			t.Fatalf("%s: ping across veth: %v", fam.server, err)
		}
	}
	// The IPv4 pair down: no echo.
	cli, _ := a.ListenUDP("10.200.0.1:0")
	defer cli.Close()
	to := netip.MustParseAddrPort("10.200.0.2:7000")
	if err := b.SetLinkUp("vb", false); err != nil {
		t.Fatal(err)
	}
	if err := ping(cli, to, 200*time.Millisecond); err == nil {
		t.Fatal("ping succeeded over a link that is down")
	}
	if err := b.SetLinkUp("vb", true); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitRunning("vb", time.Second); err != nil {
		t.Fatal(err)
	}
	if err := ping(cli, to, 2*time.Second); err != nil {
		t.Fatalf("ping after link up: %v", err)
	}

	names := []string{a.Name(), b.Name()}
	for _, c := range []io.Closer{cli} {
		c.Close()
	}
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	for _, have := range netnsNames(t) {
		for _, n := range names {
			if have == n {
				t.Errorf("namespace %s still listed after Close", n)
			}
		}
	}
	if ip, err := exec.LookPath("ip"); err == nil {
		out, err := exec.Command(ip, "netns", "list").CombinedOutput()
		if err != nil {
			t.Fatalf("ip netns list: %v: %s", err, out)
		}
		for _, n := range names {
			if strings.Contains(string(out), n) {
				t.Errorf("`ip netns list` still shows %s", n)
			}
		}
	}
}

// TestRoutedTCP builds a - r - b with forwarding in r, and checks routes,
// sysctls and TCP through it.
func TestRoutedTCP(t *testing.T) {
	requireRoot(t)
	tb := New(testPrefix)
	defer tb.Close()
	var nss [3]*NS
	for i := range nss {
		var err error
		if nss[i], err = tb.NewNS(); err != nil {
			t.Fatal(err)
		}
	}
	a, r, b := nss[0], nss[1], nss[2]
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(tb.Veth(a, "a0", netip.MustParsePrefix("10.201.1.2/24"), r, "r1", netip.MustParsePrefix("10.201.1.1/24")))
	must(tb.Veth(b, "b0", netip.MustParsePrefix("10.201.2.2/24"), r, "r2", netip.MustParsePrefix("10.201.2.1/24")))
	must(a.AddRoute(netip.MustParsePrefix("0.0.0.0/0"), netip.MustParseAddr("10.201.1.1"), ""))
	must(b.AddRoute(netip.MustParsePrefix("10.201.1.0/24"), netip.MustParseAddr("10.201.2.1"), "b0"))

	hostFwd, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	must(r.Sysctl("net.ipv4.ip_forward", "1"))
	var inside []byte
	must(r.Do(func() error {
		var err error
		inside, err = os.ReadFile("/proc/sys/net/ipv4/ip_forward")
		return err
	}))
	if strings.TrimSpace(string(inside)) != "1" {
		t.Errorf("ip_forward in %s = %q, want 1", r.Name(), inside)
	}
	if now, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); !bytes.Equal(now, hostFwd) {
		t.Errorf("host ip_forward changed from %q to %q", hostFwd, now)
	}

	l, err := b.ListenTCP("10.201.2.2:0")
	must(err)
	defer l.Close()
	payload := bytes.Repeat([]byte("bondd"), 100000)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := a.DialTCP(ctx, l.Addr().String())
	must(err)
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	go func() {
		c.Write(payload)
		c.CloseWrite()
	}()
	got, err := io.ReadAll(c)
	must(err)
	if !bytes.Equal(got, payload) {
		t.Fatalf("echoed %d bytes, want the %d sent", len(got), len(payload))
	}
}

func TestCleanup(t *testing.T) {
	requireRoot(t)
	// A leftover from a dead process: pid 999999999 exceeds pid_max.
	dead := fmt.Sprintf("%s999999999-1", testPrefix)
	h, err := newNamed(dead)
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	live, err := NewNS(testPrefix)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if err := Cleanup(testPrefix); err != nil {
		t.Fatal(err)
	}
	names := strings.Join(netnsNames(t), " ")
	if strings.Contains(names, dead) {
		t.Errorf("Cleanup left %s", dead)
	}
	if !strings.Contains(names, live.Name()) {
		t.Errorf("Cleanup removed %s of a live process", live.Name())
	}
}

func TestTestbedCloseAfterPartialFailure(t *testing.T) {
	requireRoot(t)
	tb := New(testPrefix)
	a, b := twoNS(t, tb)
	if err := tb.Veth(a, "x0", netip.MustParsePrefix("10.202.0.1/24"), b, "x1", netip.MustParsePrefix("10.202.0.2/24")); err != nil {
		t.Fatal(err)
	}
	// Same names again: fails, and must leave nothing half made.
	if err := tb.Veth(a, "y0", netip.Prefix{}, b, "x1", netip.Prefix{}); err == nil {
		t.Fatal("Veth with a clashing peer name succeeded")
	}
	if err := a.Do(func() error {
		_, err := netlink.LinkByName("y0")
		if err == nil {
			return errors.New("y0 left behind after failed Veth")
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	b.Close() // closed by hand: Close must cope
	names := []string{a.Name(), b.Name()}
	if err := tb.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, have := range netnsNames(t) {
		for _, n := range names {
			if have == n {
				t.Errorf("namespace %s left after Close", n)
			}
		}
	}
}

func TestMain(m *testing.M) {
	if IsRoot() {
		Cleanup(testPrefix)
	}
	os.Exit(m.Run())
}
