package fleet

// A real router: FRR's bgpd in a network namespace, peering with speakers
// that run (as helper processes) in node namespaces:
//
//	node1 (AS 65001, 10.91.1.2, fd91:1::2) ── r1 ┐
//	                                             router (AS 65000, bgpd)
//	node2 (10.91.2.2)                      ── r2 ┘
//
// The router's view is read with vtysh from that bgpd's own vty socket.
// bgpd runs with -Z (no zebra): the test checks what BGP learned, not the
// kernel's table, so no zebra, FRR user or systemd is needed.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bondd/bondd/internal/testbed"
)

const nsPrefix = "bfleet"

func TestMain(m *testing.M) {
	if cfg := os.Getenv(helperEnv); cfg != "" {
		os.Exit(runHelper(cfg))
	}
	if testbed.IsRoot() {
		testbed.Cleanup(nsPrefix)
	}
	os.Exit(m.Run())
}

// frrBgpd finds FRR's bgpd, or skips the test.
func frrBgpd(t *testing.T) (bgpd, vtysh string) {
	t.Helper()
	if !testbed.IsRoot() {
		t.Skip("skipping: needs root for network namespaces (run as root, as CI does)")
	}
	for _, p := range []string{"/usr/lib/frr/bgpd", "/usr/sbin/bgpd"} {
		if _, err := os.Stat(p); err == nil {
			bgpd = p
			break
		}
	}
	vtysh, err := exec.LookPath("vtysh")
	if bgpd == "" || err != nil {
		t.Skip("skipping: FRR's bgpd and vtysh not found (apt-get install frr; .ci/run does)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("skipping: ip (iproute2) not found")
	}
	return bgpd, vtysh
}

// router is a bgpd instance in its own namespace.
type router struct {
	ns    *testbed.NS
	vtysh string
	dir   string
	cmd   *exec.Cmd
	log   *bytes.Buffer
}

const routerConf = `frr defaults datacenter
hostname router
log stdout informational
router bgp 65000
 bgp router-id 10.91.0.1
 no bgp ebgp-requires-policy
 no bgp network import-check
 neighbor 10.91.1.2 remote-as 65001
 neighbor 10.91.1.2 password s3cret
 neighbor 10.91.1.2 timers 1 3
 neighbor 10.91.1.2 timers connect 1
 neighbor 10.91.2.2 remote-as 65002
 neighbor 10.91.2.2 timers 1 3
 neighbor 10.91.2.2 timers connect 1
 address-family ipv6 unicast
  neighbor 10.91.1.2 activate
  neighbor 10.91.2.2 activate
 exit-address-family
`

func startRouter(t *testing.T, ns *testbed.NS, bgpd, vtysh string) *router {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "bgpd.conf")
	if err := os.WriteFile(conf, []byte(routerConf), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &router{ns: ns, vtysh: vtysh, dir: dir, log: new(bytes.Buffer)}
	r.cmd = exec.Command("ip", "netns", "exec", ns.Name(), bgpd,
		"-Z", "-S", "-u", "root", "-g", "root", "-f", conf,
		"-i", filepath.Join(dir, "bgpd.pid"), "--vty_socket", dir, "-z", filepath.Join(dir, "zserv.api"))
	r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start bgpd: %v", err)
	}
	t.Cleanup(func() {
		r.cmd.Process.Kill()
		r.cmd.Wait()
		if t.Failed() {
			t.Logf("bgpd log:\n%s", r.log)
		}
	})
	waitFor(t, 10*time.Second, "bgpd's vty socket", func() bool {
		_, err := r.show("show bgp summary json")
		return err == nil
	})
	return r
}

// show runs a vtysh command against this bgpd and returns its output.
func (r *router) show(cmd string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", r.ns.Name(), r.vtysh,
		"--vty_socket", r.dir, "-d", "bgpd", "-c", cmd).Output()
	if err != nil {
		return nil, fmt.Errorf("vtysh %q: %w (%s)", cmd, err, out)
	}
	return out, nil
}

// routes returns, per prefix, the next hops of the router's valid paths.
func (r *router) routes(t *testing.T, family string) map[string][]string {
	t.Helper()
	out, err := r.show("show bgp " + family + " unicast json")
	if err != nil {
		t.Fatal(err)
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
	res := map[string][]string{}
	for p, paths := range v.Routes {
		for _, path := range paths {
			if path.Valid {
				for _, nh := range path.Nexthops {
					res[p] = append(res[p], nh.IP)
				}
			}
		}
	}
	return res
}

// peerState is the router's BGP state for a neighbour ("Established", ...).
func (r *router) peerState(t *testing.T, addr string) string {
	t.Helper()
	out, err := r.show("show bgp neighbors " + addr + " json")
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]struct{ BgpState string }
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("vtysh json: %v\n%s", err, out)
	}
	return v[addr].BgpState
}

// node is a speaker running as a helper process in a namespace.
type node struct {
	t   *testing.T
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
	log *bytes.Buffer
}

func startNode(t *testing.T, ns *testbed.NS, cfg Config) *node {
	t.Helper()
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, log: new(bytes.Buffer)}
	n.cmd = exec.Command("ip", "netns", "exec", ns.Name(), os.Args[0], "-test.run=^$")
	n.cmd.Env = append(os.Environ(), helperEnv+"="+string(js))
	n.cmd.Stderr = n.log
	if n.in, err = n.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := n.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	n.out = bufio.NewScanner(stdout)
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.cmd.Process.Signal(syscall.SIGCONT)
		n.cmd.Process.Kill()
		n.cmd.Wait()
		if t.Failed() {
			t.Logf("node %s log:\n%s", ns.Name(), n.log)
		}
	})
	return n
}

// do sends one command and returns the reply's Stats; an Err in it fails
// the test.
func (n *node) do(cmd string) Stats { return n.reply(cmd).Stats }

// reply sends one command and returns the reply; an Err in it fails the test.
func (n *node) reply(cmd string) helperReply {
	n.t.Helper()
	if _, err := fmt.Fprintln(n.in, cmd); err != nil {
		n.t.Fatalf("node %q: %v\n%s", cmd, err, n.log)
	}
	if !n.out.Scan() {
		n.t.Fatalf("node %q: no reply (%v)\n%s", cmd, n.out.Err(), n.log)
	}
	var r helperReply
	if err := json.Unmarshal(n.out.Bytes(), &r); err != nil {
		n.t.Fatalf("node %q: %v: %s", cmd, err, n.out.Bytes())
	}
	if r.Err != "" {
		n.t.Fatalf("node %q: %s", cmd, r.Err)
	}
	return r
}

func (n *node) established() bool {
	st := n.do("stats")
	return len(st.Neighbors) == 1 && st.Neighbors[0].State == "established"
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}

// md5Failures is the router namespace's count of TCP segments dropped for
// a wrong MD5 signature (TcpExt TCPMD5Failure).
func md5Failures(t *testing.T, ns *testbed.NS) int {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", ns.Name(), "cat", "/proc/net/netstat").Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(out), "\n")
	for i := 0; i+1 < len(lines); i += 2 {
		keys, vals := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if i := slices.Index(keys, "TCPMD5Failure"); i > 0 && i < len(vals) && keys[0] == "TcpExt:" {
			n, _ := strconv.Atoi(vals[i])
			return n
		}
	}
	t.Fatal("no TcpExt TCPMD5Failure in /proc/net/netstat")
	return 0
}

func nodeConfig(as uint32, v4, v6, password string) Config {
	return Config{
		LocalAS:  as,
		RouterID: netip.MustParseAddr(v4),
		NextHop4: netip.MustParseAddr(v4),
		NextHop6: netip.MustParseAddr(v6),
		Neighbors: []Neighbor{{
			Address: netip.MustParseAddr(strings.TrimSuffix(v4, ".2") + ".1"), AS: 65000,
			Password: password, HoldTime: 3 * time.Second, ConnectRetry: time.Second,
		}},
	}
}

// TestRouter checks the speaker against FRR's bgpd: the router learns an
// edge's IPv4 and IPv6 prefixes with the node as next hop, loses them on
// Withdraw, on a graceful stop, on a kill (the kernel closes the session)
// and, when the node hangs without closing anything, after the hold time;
// with two nodes announcing the same prefix, killing one leaves the
// other's path; a node with the wrong AS or password never gets a session.
func TestRouter(t *testing.T) {
	bgpd, vtysh := frrBgpd(t)
	tb := testbed.New(nsPrefix)
	t.Cleanup(func() { tb.Close() })
	rns, err := tb.NewNS()
	if err != nil {
		t.Fatal(err)
	}
	n1, err := tb.NewNS()
	if err != nil {
		t.Fatal(err)
	}
	n2, err := tb.NewNS()
	if err != nil {
		t.Fatal(err)
	}
	pfx := netip.MustParsePrefix
	if err := tb.Veth(rns, "r1", pfx("10.91.1.1/24"), n1, "n1", pfx("10.91.1.2/24")); err != nil {
		t.Fatal(err)
	}
	if err := tb.Veth(rns, "r2", pfx("10.91.2.1/24"), n2, "n2", pfx("10.91.2.2/24")); err != nil {
		t.Fatal(err)
	}
	r := startRouter(t, rns, bgpd, vtysh)
	good := nodeConfig(65001, "10.91.1.2", "fd91:1::2", "s3cret")
	const edge, p4, p6 = "van-17", "10.77.17.0/24", "fd77:0:0:17::/64"
	has := func(family, p, nh string) func() bool {
		return func() bool { return slices.Contains(r.routes(t, family)[p], nh) }
	}
	gone := func(family, p string) func() bool {
		return func() bool { _, ok := r.routes(t, family)[p]; return !ok }
	}

	t.Run("announce and withdraw", func(t *testing.T) {
		n := startNode(t, n1, good)
		d := waitFor(t, 15*time.Second, "session with the router", n.established)
		t.Logf("session established %v after the node started", d.Round(time.Millisecond))
		n.do("announce " + edge + " " + p4 + "," + p6)
		d4 := waitFor(t, 5*time.Second, "router learns "+p4+" via 10.91.1.2", has("ipv4", p4, "10.91.1.2"))
		waitFor(t, 5*time.Second, "router learns "+p6+" via fd91:1::2", has("ipv6", p6, "fd91:1::2"))
		t.Logf("router learned the prefixes %v after Announce", d4.Round(time.Millisecond))
		if st := n.do("stats"); st.Prefixes != 2 || st.Edges != 1 || st.AnnouncedTotal != 2 {
			t.Errorf("stats after announce: %+v", st)
		}
		n.do("withdraw " + edge)
		d = waitFor(t, 5*time.Second, "router forgets "+p4, gone("ipv4", p4))
		waitFor(t, 5*time.Second, "router forgets "+p6, gone("ipv6", p6))
		t.Logf("router dropped the prefixes %v after Withdraw", d.Round(time.Millisecond))

		n.do("announce " + edge + " " + p4 + "," + p6)
		waitFor(t, 5*time.Second, "router learns "+p4+" again", has("ipv4", p4, "10.91.1.2"))
		start := time.Now()
		n.do("stop graceful")
		d = waitFor(t, 5*time.Second, "router forgets "+p4+" after a graceful stop", gone("ipv4", p4))
		_ = d
		t.Logf("graceful stop: route gone %v after Stop was called", time.Since(start).Round(time.Millisecond))
		n.cmd.Wait()
	})

	t.Run("killed node", func(t *testing.T) {
		n := startNode(t, n1, good)
		waitFor(t, 15*time.Second, "session with the router", n.established)
		n.do("announce " + edge + " " + p4)
		waitFor(t, 5*time.Second, "router learns "+p4, has("ipv4", p4, "10.91.1.2"))
		n.cmd.Process.Kill()
		d := waitFor(t, 5*time.Second, "router forgets "+p4+" after SIGKILL", gone("ipv4", p4))
		t.Logf("SIGKILL: route gone after %v (the kernel closed the session)", d.Round(time.Millisecond))
	})

	t.Run("hung node: hold time", func(t *testing.T) {
		n := startNode(t, n1, good)
		waitFor(t, 15*time.Second, "session with the router", n.established)
		n.do("announce " + edge + " " + p4)
		waitFor(t, 5*time.Second, "router learns "+p4, has("ipv4", p4, "10.91.1.2"))
		n.cmd.Process.Signal(syscall.SIGSTOP) // sockets stay open, keepalives stop
		d := waitFor(t, 10*time.Second, "router forgets "+p4+" after the hold time", gone("ipv4", p4))
		t.Logf("SIGSTOP: route gone after %v (hold time 3 s)", d.Round(time.Millisecond))
		if d < 2*time.Second || d > 5*time.Second {
			t.Errorf("route gone after %v, want about the 3 s hold time", d)
		}
	})

	t.Run("wrong AS refused", func(t *testing.T) {
		bad := nodeConfig(65003, "10.91.2.2", "fd91:2::2", "") // the router expects 65002
		n := startNode(t, n2, bad)
		waitFor(t, 15*time.Second, "the node counts a refusal", func() bool {
			st := n.do("stats")
			return st.Neighbors[0].NotificationsReceived+st.Neighbors[0].NotificationsSent > 0
		})
		st := n.do("stats")
		if st.Neighbors[0].Established != 0 || r.peerState(t, "10.91.2.2") == "Established" {
			t.Errorf("a session with the wrong AS came up: %+v", st.Neighbors[0])
		}
		t.Logf("wrong AS: %s; router: %s", st.Neighbors[0].LastError, r.peerState(t, "10.91.2.2"))
		// The speaker logs the session's end with its reason, or GoBGP
		// (through the speaker's logger) the NOTIFICATION, whichever the
		// FSM's path through OpenSent produced.
		if l := strings.ToLower(n.log.String()); !strings.Contains(l, "bgp session ended") && !strings.Contains(l, "notification") {
			t.Errorf("refusal not logged:\n%s", n.log)
		}
		n.do("stop abrupt")
	})

	t.Run("two nodes, one killed", func(t *testing.T) {
		a := startNode(t, n1, good)
		b := startNode(t, n2, nodeConfig(65002, "10.91.2.2", "fd91:2::2", ""))
		waitFor(t, 15*time.Second, "node1's session", a.established)
		waitFor(t, 15*time.Second, "node2's session", b.established)
		a.do("announce " + edge + " " + p4)
		b.do("announce " + edge + " " + p4)
		waitFor(t, 5*time.Second, "router has both paths", func() bool {
			nh := r.routes(t, "ipv4")[p4]
			return slices.Contains(nh, "10.91.1.2") && slices.Contains(nh, "10.91.2.2")
		})
		// The router sends its best path (one node's) to the other node
		// (eBGP); that node rejects it on import, so each holds only its own.
		waitFor(t, 5*time.Second, "router advertises one node's path to the other", func() bool {
			for _, nb := range []string{"10.91.1.2", "10.91.2.2"} {
				out, err := r.show("show bgp ipv4 unicast neighbors " + nb + " advertised-routes")
				if err == nil && strings.Contains(string(out), p4) {
					return true
				}
			}
			return false
		})
		if ra, rb := a.reply("rib").RIBPaths, b.reply("rib").RIBPaths; ra != 1 || rb != 1 {
			t.Errorf("the nodes' RIBs hold %d and %d paths, want only their own (1 each)", ra, rb)
		}
		a.cmd.Process.Kill()
		d := waitFor(t, 5*time.Second, "router keeps only node2's path", func() bool {
			return slices.Equal(r.routes(t, "ipv4")[p4], []string{"10.91.2.2"})
		})
		t.Logf("node1 killed: the router's only path is node2's after %v", d.Round(time.Millisecond))
		b.do("stop graceful")
	})

	t.Run("wrong password refused", func(t *testing.T) {
		before := md5Failures(t, rns)
		bad := good
		bad.Neighbors = []Neighbor{good.Neighbors[0]}
		bad.Neighbors[0].Password = "wrong"
		n := startNode(t, n1, bad)
		waitFor(t, 15*time.Second, "router drops segments with a bad MD5 signature", func() bool {
			return md5Failures(t, rns) > before
		})
		if n.established() || r.peerState(t, "10.91.1.2") == "Established" {
			t.Error("a session with the wrong password came up")
		}
		n.do("stop abrupt")
	})
}
