package main

// A fleet against a real router: two concentrator nodes (the bondd binary)
// announce over BGP to FRR (zebra and bgpd, which install what BGP learns
// in the router's kernel table), an application host sits behind the
// router, one edge with two uplinks reaches both nodes through it:
//
//	edge ns: up0 10.101.0.2, up1 10.101.1.2 ─┐
//	                                          router (AS 65000): zebra + bgpd ── app 10.200.0.2
//	nodeA 10.91.1.2 (AS 65001) ──────────────┤   10.91.1.1, 10.91.2.1, 10.200.0.1
//	nodeB 10.91.2.2 (AS 65001) ──────────────┘
//
// The edge's inner address is 10.77.0.2 (van-1, 10.77.0.0/24); the app
// host reaches it only through the node the router's BGP route points at.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/bondd/bondd/internal/status"
	"github.com/bondd/bondd/internal/testkit"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/bondd/bondd/internal/fleet"
	"github.com/bondd/bondd/internal/testbed"
	"github.com/bondd/bondd/tunnel"
)

const (
	fleetNSPrefix = "bondd-fl-"
	fleetHoldTime = 6 * time.Second // BGP hold time of the nodes' sessions
	edgePrefix    = "10.77.0.0/24"
)

// frrDaemons finds FRR's zebra, bgpd and vtysh, or skips the test.
func frrDaemons(t *testing.T) (zebra, bgpd, vtysh string) {
	t.Helper()
	for _, dir := range []string{"/usr/lib/frr", "/usr/sbin"} {
		if _, err := os.Stat(filepath.Join(dir, "bgpd")); err == nil {
			zebra, bgpd = filepath.Join(dir, "zebra"), filepath.Join(dir, "bgpd")
			break
		}
	}
	vtysh, err := exec.LookPath("vtysh")
	if bgpd == "" || err != nil {
		t.Skip("skipping: FRR (zebra, bgpd, vtysh) not found; apt-get install frr (.ci/run does)")
	}
	if _, err := os.Stat(zebra); err != nil {
		t.Skip("skipping: FRR's zebra not found")
	}
	if _, err := user.Lookup("frr"); err != nil {
		t.Skip("skipping: FRR's user frr not found (zebra runs as it)")
	}
	return zebra, bgpd, vtysh
}

// frrRouter is zebra and bgpd in the router namespace.
type frrRouter struct {
	ns    *testbed.NS
	vtysh string
	dir   string
}

const fleetRouterConf = `frr defaults datacenter
hostname router
log stdout informational
router bgp 65000
 bgp router-id 10.91.0.1
 no bgp ebgp-requires-policy
 neighbor fleet peer-group
 neighbor fleet remote-as 65001
 neighbor fleet timers 2 6
 neighbor fleet timers connect 1
 neighbor 10.91.1.2 peer-group fleet
 neighbor 10.91.2.2 peer-group fleet
`

func startFRR(t *testing.T, ns *testbed.NS) *frrRouter {
	t.Helper()
	zebra, bgpd, vtysh := frrDaemons(t)
	// zebra and bgpd refuse to run as a user outside FRR's vty group, so they run
	// as FRR's own user (frr), which must reach the directory of their
	// sockets: a world-writable directory of its own (not t.TempDir, whose
	// parent only root may enter).
	dir, err := os.MkdirTemp("", "bondd-frr-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	r := &frrRouter{ns: ns, vtysh: vtysh, dir: dir}
	zconf, bconf := filepath.Join(r.dir, "zebra.conf"), filepath.Join(r.dir, "bgpd.conf")
	zserv := filepath.Join(r.dir, "zserv.api")
	os.WriteFile(zconf, []byte("hostname router\nlog stdout informational\n"), 0o644)
	os.WriteFile(bconf, []byte(fleetRouterConf), 0o644)
	run := func(name string, args ...string) {
		var log bytes.Buffer
		cmd := exec.Command("ip", append([]string{"netns", "exec", ns.Name()}, args...)...)
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
			if t.Failed() {
				t.Logf("%s log:\n%s", name, log.String())
			}
		})
	}
	common := []string{"--vty_socket", r.dir, "-z", zserv}
	run("zebra", append([]string{zebra, "-u", "frr", "-g", "frr", "-f", zconf, "-i", filepath.Join(r.dir, "zebra.pid")}, common...)...)
	testkit.WaitFor(t, "zebra's API socket", 10*time.Second, func() bool { _, err := os.Stat(zserv); return err == nil })
	run("bgpd", append([]string{bgpd, "-u", "frr", "-g", "frr", "-f", bconf, "-i", filepath.Join(r.dir, "bgpd.pid")}, common...)...)
	testkit.WaitFor(t, "bgpd's vty", 10*time.Second, func() bool { _, err := r.show("show bgp summary json"); return err == nil })
	return r
}

func (r *frrRouter) show(cmd string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, "ip", "netns", "exec", r.ns.Name(), r.vtysh, "--vty_socket", r.dir, "-d", "bgpd", "-c", cmd).Output()
}

// nextHops returns the next hops of the router's valid BGP paths to p.
func (r *frrRouter) nextHops(t *testing.T, p string) []string {
	t.Helper()
	out, err := r.show("show bgp ipv4 unicast json")
	if err != nil {
		t.Fatalf("vtysh: %v", err)
	}
	var v struct {
		Routes map[string][]struct {
			Valid    bool
			Nexthops []struct{ IP string }
		}
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("vtysh json: %v\n%s", err, out)
	}
	var nh []string
	for _, path := range v.Routes[p] {
		if path.Valid {
			for _, h := range path.Nexthops {
				nh = append(nh, h.IP)
			}
		}
	}
	slices.Sort(nh)
	return nh
}

// prober sends a UDP packet from the app host to the edge's echo server
// every 10 ms and records when each echo comes back.
type prober struct {
	mu      sync.Mutex
	replies []time.Time
}

func startProber(t *testing.T, app, edge *testbed.NS) *prober {
	t.Helper()
	srv, err := edge.ListenUDP("10.77.0.2:7")
	if err != nil {
		t.Fatal(err)
	}
	cli, err := app.ListenUDP("10.200.0.2:40100")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); srv.Close(); cli.Close(); wg.Wait() })
	p := &prober{}
	wg.Go(func() {
		buf := make([]byte, 1500)
		for {
			n, a, err := srv.ReadFrom(buf)
			if err != nil {
				return
			}
			srv.WriteTo(buf[:n], a)
		}
	})
	wg.Go(func() {
		buf := make([]byte, 1500)
		for {
			if _, _, err := cli.ReadFrom(buf); err != nil {
				return
			}
			p.mu.Lock()
			p.replies = append(p.replies, time.Now())
			p.mu.Unlock()
		}
	})
	wg.Go(func() {
		dst := net.UDPAddrFromAddrPort(netip.MustParseAddrPort("10.77.0.2:7"))
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for seq := 0; ; seq++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				cli.WriteTo(fmt.Appendf(nil, "probe %d", seq), dst)
			}
		}
	})
	return p
}

// repliesSince counts the echoes received after t0.
func (p *prober) repliesSince(t0 time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	i, _ := slices.BinarySearchFunc(p.replies, t0, func(a, b time.Time) int { return a.Compare(b) })
	return len(p.replies) - i
}

// gap is the longest time without an echo across t0: from the last echo
// before t0 to the first after it, or between two echoes after it.
func (p *prober) gap(t0 time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	i, _ := slices.BinarySearchFunc(p.replies, t0, func(a, b time.Time) int { return a.Compare(b) })
	var longest time.Duration
	for j := max(i, 1); j < len(p.replies); j++ {
		longest = max(longest, p.replies[j].Sub(p.replies[j-1]))
	}
	return longest
}

// waitResumed waits until 100 echoes (1 s of probes) have come back after t0.
func (p *prober) waitResumed(t *testing.T, what string, t0 time.Time, d time.Duration) {
	t.Helper()
	testkit.WaitFor(t, what, d, func() bool { return p.repliesSince(t0) >= 100 })
}

func fleetNodeConfig(dir, addr string) string {
	return fmt.Sprintf(`role: concentrator
log_level: info
tun:
  name: bondd0
  addresses: [10.78.0.1/24]
concentrator:
  listen: 0.0.0.0:4433
  cert_file: %[1]s/conc.pem
  key_file: %[1]s/conc.key
  edges:
    - {id: van-1, token_file: %[1]s/van.token, allowed_prefixes: [10.77.0.0/24]}
    - {id: van-2, token_file: %[1]s/van2.token, allowed_prefixes: [10.77.1.0/24]}
  bgp:
    local_as: 65001
    router_id: %[2]s
    next_hop4: %[2]s
    neighbors:
      - {address: %[3]s, as: 65000, hold_time: %[4]s, connect_retry: 1s}
paths:
  idle_timeout: 2s
  redial_max: 1s
`, dir, addr, addr[:len(addr)-1]+"1", fleetHoldTime)
}

func fleetEdgeConfig(dir, pin string) string {
	return fmt.Sprintf(`role: edge
tun:
  name: bondd0
  addresses: [10.77.0.2/24]
  routes: [10.200.0.0/24]
edge:
  id: van-1
  concentrator: ["10.91.1.2:4433", "10.91.2.2:4433"]
  server_cert_sha256: %[2]s
  token_file: %[1]s/van.token
  failover: {unreachable_after: 1s, home_hold_down: 3s}
  uplinks:
    - {name: up0, bind: 10.101.0.2, interface: up0}
    - {name: up1, bind: 10.101.1.2, interface: up1}
paths:
  idle_timeout: 2s
  keepalive: 500ms
  redial_max: 1s
`, dir, pin)
}

// TestNetnsFleet: the router learns the edge's prefix from its home node
// and traffic flows both ways; an inner source of another edge is dropped
// on this edge's bond; SIGTERM of the home node moves the edge gracefully
// (gap ≤ 1 s); the edge goes back home once home is up again; SIGKILL of
// the home node moves it within the BGP hold time + 2 s.
func TestNetnsFleet(t *testing.T) {
	requireNetns(t)
	frrDaemons(t)
	testbed.Cleanup(fleetNSPrefix)
	b := &itBed{tb: testbed.New(fleetNSPrefix), dir: t.TempDir()}
	t.Cleanup(b.close)
	ns := func() *testbed.NS {
		n, err := b.tb.NewNS()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	edge, nodeA, nodeB, rtr, app := ns(), ns(), ns(), ns(), ns()
	pfx := netip.MustParsePrefix
	ip := netip.MustParseAddr
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(b.tb.Veth(edge, "up0", pfx("10.101.0.2/24"), rtr, "e0", pfx("10.101.0.1/24")))
	must(b.tb.Veth(edge, "up1", pfx("10.101.1.2/24"), rtr, "e1", pfx("10.101.1.1/24")))
	must(b.tb.Veth(nodeA, "n", pfx("10.91.1.2/24"), rtr, "na", pfx("10.91.1.1/24")))
	must(b.tb.Veth(nodeB, "n", pfx("10.91.2.2/24"), rtr, "nb", pfx("10.91.2.1/24")))
	must(b.tb.Veth(app, "app", pfx("10.200.0.2/24"), rtr, "app", pfx("10.200.0.1/24")))
	for _, n := range []*testbed.NS{rtr, nodeA, nodeB} {
		must(n.Sysctl("net.ipv4.ip_forward", "1"))
	}
	must(nodeA.AddRoute(pfx("0.0.0.0/0"), ip("10.91.1.1"), "n"))
	must(nodeB.AddRoute(pfx("0.0.0.0/0"), ip("10.91.2.1"), "n"))
	must(app.AddRoute(pfx("0.0.0.0/0"), ip("10.200.0.1"), "app"))
	// Each uplink reaches the nodes through its own veth (SO_BINDTODEVICE
	// picks the route of its device).
	for i, dev := range []string{"up0", "up1"} {
		if out, err := exec.Command("ip", "-n", edge.Name(), "route", "add", "10.91.0.0/16", "via",
			fmt.Sprintf("10.101.%d.1", i), "dev", dev, "metric", fmt.Sprint(10*(i+1))).CombinedOutput(); err != nil {
			t.Fatalf("edge route via %s: %v: %s", dev, err, out)
		}
	}

	b.bin = filepath.Join(b.dir, "bondd")
	if out, err := exec.Command("go", "build", "-o", b.bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	pin := b.writeCreds(t)
	must(os.WriteFile(filepath.Join(b.dir, "van2.token"), []byte("integration-test-token-van-2-0123\n"), 0o600))
	r := startFRR(t, rtr)
	start := time.Now()

	type fnode struct {
		name, addr, cfg, sock string
		ns                    *testbed.NS
		proc                  *exec.Cmd
	}
	nodes := map[string]*fnode{
		"10.91.1.2:4433": {name: "nodeA", addr: "10.91.1.2", ns: nodeA},
		"10.91.2.2:4433": {name: "nodeB", addr: "10.91.2.2", ns: nodeB},
	}
	run := func(n *fnode) {
		n.cfg, n.sock = fleetNodeConfig(b.dir, n.addr), filepath.Join(b.dir, n.name+".sock")
		b.start(t, n.ns, n.name, n.cfg, n.sock)
		n.proc = b.procs[len(b.procs)-1]
	}
	established := func(n *fnode) func() bool {
		return func() bool {
			bs := getStatus(t, n.sock).BGP
			return bs != nil && len(bs.Neighbors) == 1 && bs.Neighbors[0].State == "established"
		}
	}
	for _, n := range nodes {
		run(n)
	}
	for _, n := range nodes {
		testkit.WaitFor(t, n.name+"'s BGP session", 15*time.Second, established(n))
	}
	order := fleet.Order("van-1", []string{"10.91.1.2:4433", "10.91.2.2:4433"})
	home, other := nodes[order[0]], nodes[order[1]]
	t.Logf("sessions up %v after the router started; van-1's home is %s (%s)", time.Since(start).Round(time.Millisecond), home.name, home.addr)

	edgeSock := filepath.Join(b.dir, "edge.sock")
	b.start(t, edge, "edge", fleetEdgeConfig(b.dir, pin), edgeSock)
	onNode := func(n *fnode) func() bool {
		return func() bool {
			s := getStatus(t, edgeSock)
			return s.Fleet != nil && s.Fleet.Current == n.addr+":4433" && activePaths(s) == 2
		}
	}
	routeVia := func(n *fnode) func() bool {
		return func() bool { return slices.Equal(r.nextHops(t, edgePrefix), []string{n.addr}) }
	}
	testkit.WaitFor(t, "the edge's two paths up at home", 15*time.Second, onNode(home))
	testkit.WaitFor(t, "the router's route to the edge via home", 10*time.Second, routeVia(home))
	if bs := getStatus(t, other.sock).BGP; bs.Prefixes != 0 {
		t.Errorf("%s announces %d prefixes without holding the bond", other.name, bs.Prefixes)
	}

	t.Run("traffic both ways", func(t *testing.T) {
		udpEcho(t, edge, app, "10.77.0.2:40000", "10.200.0.2:7")
		udpEcho(t, app, edge, "10.200.0.2:40001", "10.77.0.2:7")
	})

	t.Run("no cross-talk", func(t *testing.T) {
		// van-2's address on van-1's TUN: its packets reach the node on
		// van-1's bond and are dropped there as spoofed.
		must(edge.Do(func() error {
			l, err := netlink.LinkByName("bondd0")
			if err != nil {
				return err
			}
			return netlink.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: net.IPv4(10, 77, 1, 5), Mask: net.CIDRMask(32, 32)}})
		}))
		spoofed := func() uint64 {
			for _, bs := range getStatus(t, home.sock).Bonds {
				if bs.EdgeID == "van-1" {
					return bs.Drops[tunnel.DropSpoofed]
				}
			}
			return 0
		}
		before := spoofed()
		cli, err := edge.ListenUDP("10.77.1.5:40002")
		must(err)
		defer cli.Close()
		for range 5 {
			cli.WriteTo([]byte("not mine"), net.UDPAddrFromAddrPort(netip.MustParseAddrPort("10.200.0.2:9")))
		}
		testkit.WaitFor(t, "5 spoofed drops on van-1's bond", 5*time.Second, func() bool { return spoofed() == before+5 })
	})

	t.Run("SIGHUP reloads the edge list", func(t *testing.T) {
		// van-3 joins the list on the home node; van-1's bond stays.
		must(os.WriteFile(filepath.Join(b.dir, "van3.token"), []byte("integration-test-token-van-3-0123\n"), 0o600))
		cfg := strings.Replace(home.cfg, "  bgp:\n", fmt.Sprintf("    - {id: van-3, token_file: %s/van3.token, allowed_prefixes: [10.77.3.0/24]}\n  bgp:\n", b.dir), 1)
		must(os.WriteFile(filepath.Join(b.dir, home.name+".yaml"), []byte(cfg), 0o600))
		bondUp := getStatus(t, home.sock).Bonds[0].Uptime
		must(home.proc.Process.Signal(syscall.SIGHUP))
		testkit.WaitFor(t, "three edges on the home node", 5*time.Second, func() bool { return len(getStatus(t, home.sock).Bonds) == 3 })
		s := getStatus(t, home.sock)
		if s.Bonds[0].EdgeID != "van-1" || s.Bonds[0].Uptime < bondUp || activePaths(&status.Report{Bonds: s.Bonds[:1]}) != 2 {
			t.Errorf("van-1's bond after the reload: %+v", s.Bonds[0])
		}
		out, err := exec.Command("ip", "-n", home.ns.Name(), "route", "show", "10.77.3.0/24").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "bondd0") {
			t.Errorf("van-3's prefix not routed into the TUN: %v %s", err, out)
		}
	})

	p := startProber(t, app, edge)
	p.waitResumed(t, "the probes' echoes", time.Now(), 5*time.Second)

	t.Run("SIGTERM: graceful move", func(t *testing.T) {
		t0 := time.Now()
		must(home.proc.Process.Signal(syscall.SIGTERM))
		testkit.WaitFor(t, "the router's route via the other node", 10*time.Second, routeVia(other))
		routed := time.Since(t0)
		testkit.WaitFor(t, "the edge on the other node", 10*time.Second, onNode(other))
		p.waitResumed(t, "the echoes after the move", t0, 10*time.Second)
		gap := p.gap(t0)
		t.Logf("SIGTERM of %s: longest gap %v; the router's BGP route moved within %v", home.name, gap.Round(time.Millisecond), routed.Round(time.Millisecond))
		if gap > time.Second {
			t.Errorf("graceful move: gap %v, want ≤ 1 s", gap)
		}
		if err := home.proc.Wait(); err != nil {
			t.Errorf("%s after SIGTERM: %v", home.name, err)
		}
		if f := getStatus(t, edgeSock).Fleet; f.Moves["refused"] != 1 {
			t.Errorf("edge moves %v, want one refused (drained)", f.Moves)
		}
	})

	t.Run("back home", func(t *testing.T) {
		run(home)
		testkit.WaitFor(t, home.name+"'s BGP session again", 15*time.Second, established(home))
		t0 := time.Now()
		testkit.WaitFor(t, "the edge back home", 20*time.Second, onNode(home))
		testkit.WaitFor(t, "the router's route via home", 10*time.Second, routeVia(home))
		p.waitResumed(t, "the echoes at home", time.Now(), 10*time.Second)
		t.Logf("back home %v after home's session was up; longest gap %v", time.Since(t0).Round(time.Millisecond), p.gap(t0).Round(time.Millisecond))
	})

	t.Run("SIGKILL: move within the hold time", func(t *testing.T) {
		t0 := time.Now()
		must(home.proc.Process.Signal(syscall.SIGKILL))
		testkit.WaitFor(t, "the edge on the other node", fleetHoldTime+5*time.Second, onNode(other))
		testkit.WaitFor(t, "the router's route via the other node", fleetHoldTime+5*time.Second, routeVia(other))
		p.waitResumed(t, "the echoes after the move", t0, fleetHoldTime+5*time.Second)
		gap := p.gap(t0)
		t.Logf("SIGKILL of %s: longest gap %v (BGP hold time %v)", home.name, gap.Round(time.Millisecond), fleetHoldTime)
		if gap > fleetHoldTime+2*time.Second {
			t.Errorf("gap %v, want ≤ hold time + 2 s = %v", gap, fleetHoldTime+2*time.Second)
		}
		if f := getStatus(t, edgeSock).Fleet; f.Moves["unreachable"] != 1 {
			t.Errorf("edge moves %v, want one for unreachable", f.Moves)
		}
	})
	t.Logf("whole test %v", time.Since(start).Round(time.Millisecond))
}
