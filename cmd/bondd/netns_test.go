package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/bondd/bondd/internal/status"
	"github.com/bondd/bondd/internal/testbed"
	"github.com/bondd/bondd/internal/testkit"
	"github.com/bondd/bondd/tunnel"
)

// The integration test runs the real bondd binary as an edge and a
// concentrator in two network namespaces joined by three veth uplinks:
//
//	edge ns: bondd0 10.77.0.2/24, upI 10.101.I.2/24  ◄─veth─►  conc ns: upI 10.101.I.1/24, bondd0 10.78.0.1/24
//
// Each uplink dials the concentrator's address on its own veth (uplink key
// remote) from a socket bound to that veth.

const itPrefix = "bondd-it-"

type itBed struct {
	tb         *testbed.Testbed
	edge, conc *testbed.NS
	dir, bin   string
	edgeSock   string
	concSock   string
	procs      []*exec.Cmd
}

func requireNetns(t *testing.T) {
	t.Helper()
	if why := testbed.Unavailable(); why != "" {
		t.Skip("skipping: " + why)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("skipping: the ip command (iproute2) is needed to start bondd inside a namespace")
	}
}

func newITBed(t *testing.T) *itBed {
	t.Helper()
	testbed.Cleanup(itPrefix)
	b := &itBed{tb: testbed.New(itPrefix), dir: t.TempDir()}
	t.Cleanup(b.close)
	var err error
	if b.edge, err = b.tb.NewNS(); err != nil {
		t.Fatal(err)
	}
	if b.conc, err = b.tb.NewNS(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.tb.Uplinks(b.edge, b.conc, 3, 101); err != nil {
		t.Fatal(err)
	}
	b.bin = filepath.Join(b.dir, "bondd")
	if out, err := exec.Command("go", "build", "-o", b.bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	b.edgeSock = filepath.Join(b.dir, "edge.sock")
	b.concSock = filepath.Join(b.dir, "conc.sock")
	return b
}

func (b *itBed) close() {
	for _, p := range b.procs {
		p.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			p.Process.Kill()
			<-done
		}
	}
	b.tb.Close()
}

// start runs bondd run with config in namespace ns; its log goes to the test log.
func (b *itBed) start(t *testing.T, ns *testbed.NS, name, config, sock string) {
	t.Helper()
	path := filepath.Join(b.dir, name+".yaml")
	// Each daemon keeps its usage store in its own folder (by name), not
	// in the shared default /var/lib/bondd.
	config += "state_dir: " + filepath.Join(b.dir, name+"-state") + "\n"
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", ns.Name(), b.bin, "run", "--config", path, "--control-socket", sock)
	cmd.Stdout, cmd.Stderr = testLogWriter{t, name}, testLogWriter{t, name}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	b.procs = append(b.procs, cmd)
}

type testLogWriter struct {
	t    *testing.T
	name string
}

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s: %s", w.name, strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// writeCreds writes the concentrator's certificate and key and a token file;
// it returns the certificate's SHA-256 pin.
func (b *itBed) writeCreds(t *testing.T) string {
	cert, pin, err := tunnel.SelfSignedCert("concentrator.test")
	if err != nil {
		t.Fatal(err)
	}
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(b.dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("conc.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}))
	write("conc.key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}))
	write("van.token", []byte("integration-test-token-0123456789\n"))
	write("wrong.token", []byte("not-the-right-token-0123456789\n"))
	write("rules.yaml", []byte(itRules("echo-no-fec")))
	return hex.EncodeToString(pin)
}

func (b *itBed) concConfig() string {
	return fmt.Sprintf(`role: concentrator
log_level: info
tun:
  name: bondd0
  addresses: [10.78.0.1/24, "fd78::1/64"]
  # no routes: the edge's allowed_prefixes are routed into the TUN
concentrator:
  listen: 0.0.0.0:4433
  cert_file: %[1]s/conc.pem
  key_file: %[1]s/conc.key
  edges:
    - id: van-1
      token_file: %[1]s/van.token
      allowed_prefixes: [10.77.0.0/24, "fd77::/64"]
paths:
  idle_timeout: 3s
  redial_max: 1s
`, b.dir)
}

func (b *itBed) edgeConfig(tunName, addr, tokenFile, pin string) string {
	var ups strings.Builder
	for i := range 3 {
		fmt.Fprintf(&ups, "    - {name: up%[1]d, bind: 10.101.%[1]d.2, interface: up%[1]d, remote: \"10.101.%[1]d.1:4433\", labels: {link_type: cellular}}\n", i)
	}
	return fmt.Sprintf(`role: edge
tun:
  name: %s
  addresses: [%s]
  routes: [10.78.0.0/24, "fd78::/64"]
edge:
  id: van-1
  concentrator: 10.101.0.1:4433
  server_cert_sha256: %s
  token_file: %s/%s
  uplinks:
%spaths:
  idle_timeout: 3s
  redial_max: 1s
rules: %s/rules.yaml
`, tunName, addr, pin, b.dir, tokenFile, ups.String(), b.dir)
}

// itRules is the edge's rule file: UDP to port 7 without FEC, in a rule
// named id.
func itRules(id string) string {
	return "rules:\n  - id: " + id + "\n    priority: 1\n    match: {proto: udp, dst_port: 7}\n    actions: {fec: off}\n"
}

// getStatus reads a daemon's control socket, waiting for it to appear.
func getStatus(t *testing.T, sock string) *status.Report {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		r, err := status.Fetch(ctx, sock)
		cancel()
		if err == nil {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("status %s: %v", sock, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func activePaths(r *status.Report) int {
	n := 0
	for _, b := range r.Bonds {
		for _, p := range b.Paths {
			if p.Status == "ACTIVE" {
				n++
			}
		}
	}
	return n
}

// echo sends msg from a UDP socket in ns `from` to an echo server at dst in
// ns `to`, and checks the reply.
func udpEcho(t *testing.T, from, to *testbed.NS, src, dst string) {
	t.Helper()
	srv, err := to.ListenUDP(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	testkit.UDPEcho(srv)
	cli, err := from.ListenUDP(src)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	raddr := net.UDPAddrFromAddrPort(netip.MustParseAddrPort(dst))
	buf := make([]byte, 2048)
	for i := range 3 {
		msg := fmt.Appendf(nil, "echo %d from %s", i, src)
		cli.WriteTo(msg, raddr)
		cli.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, _, err := cli.ReadFrom(buf)
		if err != nil || !bytes.Equal(buf[:n], msg) {
			t.Fatalf("UDP echo %s → %s: %v (got %q)", src, dst, err, buf[:n])
		}
	}
}

func TestNetnsBond(t *testing.T) {
	requireNetns(t)
	b := newITBed(t)
	pin := b.writeCreds(t)
	b.start(t, b.conc, "concentrator", b.concConfig(), b.concSock)
	getStatus(t, b.concSock)
	b.start(t, b.edge, "edge", b.edgeConfig("bondd0", `10.77.0.2/24, "fd77::2/64"`, "van.token", pin), b.edgeSock)
	testkit.WaitFor(t, "three active edge paths", 15*time.Second, func() bool { return activePaths(getStatus(t, b.edgeSock)) == 3 })

	t.Run("udp echo both ways", func(t *testing.T) {
		udpEcho(t, b.edge, b.conc, "10.77.0.2:40000", "10.78.0.1:7")
		udpEcho(t, b.conc, b.edge, "10.78.0.1:40001", "10.77.0.2:7")
	})

	t.Run("udp echo over IPv6", func(t *testing.T) {
		udpEcho(t, b.edge, b.conc, "[fd77::2]:40003", "[fd78::1]:7")
		udpEcho(t, b.conc, b.edge, "[fd78::1]:40004", "[fd77::2]:7")
	})

	t.Run("rules apply and reload on SIGHUP", func(t *testing.T) {
		hits := func() map[string]uint64 {
			m := map[string]uint64{}
			if r := getStatus(t, b.edgeSock).Bonds[0].Rules; r != nil {
				for _, h := range r.Rules {
					m[h.ID] = h.Hits
				}
			}
			return m
		}
		if h := hits(); h["echo-no-fec"] < 6 {
			t.Fatalf("rule hits %v after 6 echo packets to port 7", h)
		}
		if err := os.WriteFile(filepath.Join(b.dir, "rules.yaml.new"), []byte(itRules("echo-renamed")), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(b.dir, "rules.yaml.new"), filepath.Join(b.dir, "rules.yaml")); err != nil {
			t.Fatal(err)
		}
		b.procs[1].Process.Signal(syscall.SIGHUP)
		testkit.WaitFor(t, "the edge to load the new rule file", 10*time.Second, func() bool {
			_, ok := hits()["echo-renamed"]
			return ok
		})
	})

	t.Run("tcp 20 MB with an uplink set down halfway", func(t *testing.T) {
		const size = 20 << 20
		ln, err := b.conc.ListenTCP("10.78.0.1:5001")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		got := make(chan string, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				got <- err.Error()
				return
			}
			defer c.Close()
			h := sha256.New()
			n, err := io.Copy(h, c)
			got <- fmt.Sprintf("%x %d %v", h.Sum(nil), n, err)
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		c, err := b.edge.DialTCP(ctx, "10.78.0.1:5001")
		if err != nil {
			t.Fatal(err)
		}
		data := make([]byte, size)
		rand.Read(data)
		if _, err := c.Write(data[:size/2]); err != nil {
			t.Fatal(err)
		}
		busiest := b.busiestUplink(t)
		t.Logf("setting %s down after %d MB", busiest, size/2>>20)
		if err := b.edge.SetLinkUp(busiest, false); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(data[size/2:]); err != nil {
			t.Fatal(err)
		}
		c.CloseWrite()
		want := fmt.Sprintf("%x %d %v", sha256.Sum256(data), size, nil)
		select {
		case g := <-got:
			if g != want {
				t.Fatalf("received %s, want %s", g, want)
			}
		case <-ctx.Done():
			t.Fatal("TCP transfer did not complete in 60 s")
		}
		c.Close()
		if err := b.edge.SetLinkUp(busiest, true); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, "the uplink's path to be redialled", 20*time.Second, func() bool { return activePaths(getStatus(t, b.edgeSock)) == 3 })
	})

	t.Run("spoofed inner source is dropped and counted", func(t *testing.T) {
		// A second address on the edge TUN, outside van-1's allowed prefix.
		if err := b.edge.Do(func() error {
			l, err := netlink.LinkByName("bondd0")
			if err != nil {
				return err
			}
			return netlink.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: net.IPv4(10, 99, 0, 5), Mask: net.CIDRMask(32, 32)}})
		}); err != nil {
			t.Fatal(err)
		}
		before := getStatus(t, b.concSock).Bonds[0].Drops[tunnel.DropSpoofed]
		cli, err := b.edge.ListenUDP("10.99.0.5:40002")
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		for range 5 {
			cli.WriteTo([]byte("spoofed"), net.UDPAddrFromAddrPort(netip.MustParseAddrPort("10.78.0.1:7")))
		}
		testkit.WaitFor(t, "5 spoofed drops", 5*time.Second, func() bool {
			return getStatus(t, b.concSock).Bonds[0].Drops[tunnel.DropSpoofed] == before+5
		})
	})

	t.Run("edge with a wrong credential is rejected", func(t *testing.T) {
		sock := filepath.Join(b.dir, "wrong.sock")
		b.start(t, b.edge, "wrong-edge", b.edgeConfig("bondd1", "10.77.0.3/24", "wrong.token", pin), sock)
		testkit.WaitFor(t, "the concentrator to refuse the edge", 15*time.Second, func() bool {
			return getStatus(t, b.concSock).AuthFailures > 0
		})
		r := getStatus(t, sock)
		for _, p := range r.Bonds[0].Paths {
			if p.Status != "UNAVAILABLE" {
				t.Errorf("path %s of the refused edge is %s", p.Name, p.Status)
			}
		}
		testkit.WaitFor(t, "the refused edge to report why", 10*time.Second, func() bool {
			return strings.Contains(getStatus(t, sock).Bonds[0].Paths[0].LastError, "refused the credentials")
		})
		// The right edge is unaffected.
		if r := getStatus(t, b.edgeSock); activePaths(r) != 3 {
			for _, p := range r.Bonds[0].Paths {
				t.Logf("good edge: path %s %s %q", p.Name, p.Status, p.StatusReason)
			}
			t.Errorf("%d active paths on the good edge after the refusal", activePaths(r))
		}
	})
}

// busiestUplink returns the edge veth that has sent the most bytes.
func (b *itBed) busiestUplink(t *testing.T) string {
	t.Helper()
	best, most := "", uint64(0)
	err := b.edge.Do(func() error {
		for i := range 3 {
			name := fmt.Sprintf("up%d", i)
			l, err := netlink.LinkByName(name)
			if err != nil {
				return err
			}
			if s := l.Attrs().Statistics; s != nil && s.TxBytes >= most {
				best, most = name, s.TxBytes
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return best
}

// TestNetnsRestart stops the edge with SIGTERM: its paths close with a QUIC
// application close, so the concentrator sees them down at once (well
// before the idle timeout); a restarted edge redials and the concentrator
// takes the bond back.
func TestNetnsRestart(t *testing.T) {
	requireNetns(t)
	b := newITBed(t)
	pin := b.writeCreds(t)
	b.start(t, b.conc, "concentrator", b.concConfig(), b.concSock)
	getStatus(t, b.concSock)
	edgeCfg := b.edgeConfig("bondd0", "10.77.0.2/24", "van.token", pin)
	b.start(t, b.edge, "edge", edgeCfg, b.edgeSock)
	testkit.WaitFor(t, "three active paths at the concentrator", 15*time.Second, func() bool { return activePaths(getStatus(t, b.concSock)) == 3 })

	edge := b.procs[len(b.procs)-1]
	stopped := time.Now()
	edge.Process.Signal(syscall.SIGTERM)
	if err := edge.Wait(); err != nil {
		t.Fatalf("edge exit after SIGTERM: %v", err)
	}
	b.procs = b.procs[:len(b.procs)-1]
	// The idle timeout is 3 s in these configs: seeing the paths down in
	// under 1 s means the close reached the concentrator.
	testkit.WaitFor(t, "the concentrator to see the edge's paths closed", time.Second, func() bool { return activePaths(getStatus(t, b.concSock)) == 0 })
	t.Logf("paths down at the concentrator %v after SIGTERM", time.Since(stopped).Round(time.Millisecond))
	if _, err := os.Stat(b.edgeSock); !os.IsNotExist(err) {
		t.Errorf("the edge left its control socket behind: %v", err)
	}

	b.start(t, b.edge, "edge-restarted", edgeCfg, b.edgeSock)
	testkit.WaitFor(t, "the restarted edge's paths at the concentrator", 15*time.Second, func() bool { return activePaths(getStatus(t, b.concSock)) == 3 })
	udpEcho(t, b.edge, b.conc, "10.77.0.2:40010", "10.78.0.1:7")
	udpEcho(t, b.conc, b.edge, "10.78.0.1:40011", "10.77.0.2:7")
}
