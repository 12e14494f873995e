package bench

// bondd bench faults: the fault matrix of docs/operations.md. It runs the
// real bondd binary as an edge and a concentrator in network namespaces,
// sends a 1 kHz UDP probe through the tunnel, and for each fault measures
// the probe's longest gap, loss and lateness, the time bondd takes to see
// the fault (status) and to recover, and which counters explain the loss.
//
// The testbed (faultBed):
//
//	edge ns                                   concentrator ns
//	bondd0 10.77.0.2/24                       bondd0 10.78.0.1/24 (probe receiver)
//	up0 10.101.0.2/24       ◄─veth─►          up0 10.101.0.1/24
//	up1 10.101.1.2/24       ◄─veth─►          up1 10.101.1.1/24
//	up2 fd01:101:2::2/64    ◄─veth─►          up2 fd01:101:2::1/64   (IPv6 only)
//	                         hostile ns eth0 10.102.0.2/24 ◄─veth─► hostile0 10.102.0.1/24
//
// Each edge uplink is bound to its interface only (no source address), so
// that an address change on it is a migration, not a dead socket; up2 is an
// IPv6-only uplink carrying a path beside the IPv4 ones, as Starlink and
// many cellular carriers hand out. The cases are in faults_cases.go, the
// probe and the garbage sender in faults_probe.go.

import (
	"context"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/bondd/bondd/internal/testbed"
	"github.com/bondd/bondd/tunnel"
)

// Faults is the fault matrix's scenario name (bondd bench faults).
const Faults = "faults"

// Rule sets the matrix runs each fault under (FaultResult.Rules).
const (
	RulesDefault = "default" // no rule: bondd's default path selection
	RulesPrefer  = "prefer"  // one rule preferring the faulted uplink (label uplink=NAME)
)

// faultsPrefix names the matrix's namespaces (testbed.Cleanup removes
// leftovers of crashed runs).
const faultsPrefix = "bondd-faults-"

// faultBed timing.
const (
	// faultsPathsUp bounds the wait for every path ACTIVE (start, after a
	// case, after a restart): redial backoff is capped at 10 s.
	faultsPathsUp = 30 * time.Second
	// faultsStatusPoll is the period of the status polls that time
	// detection.
	faultsStatusPoll = 20 * time.Millisecond
)

// FaultResult is one row of the matrix: one fault under one rule set.
// Times are in milliseconds from the fault's onset unless named otherwise;
// -1 means "did not happen while measured".
type FaultResult struct {
	Name  string `json:"name"`  // blackhole, mtu-blackhole, ipv6-blackhole, link-down, address-change, all-down, conc-kill, conc-term, garbage
	Rules string `json:"rules"` // RulesDefault or RulesPrefer
	Path  string `json:"path,omitempty"`
	// RTTms is the faulted path's smoothed RTT before the fault (the
	// carrying path's for faults of the whole bond), ms.
	RTTms float64 `json:"rtt_ms"`
	// GapMs is the longest time between two probe arrivals from the onset
	// to the end of the case (for all-down it holds the outage), ms.
	GapMs float64 `json:"gap_ms"`
	// GapFaultMs is the longest gap from the onset to the fault's
	// removal (a silence still open then is cut there), ms: what the
	// bond's detection decides.
	GapFaultMs float64 `json:"gap_fault_ms"`
	// GapAfterHealMs is the longest gap that started after the fault's
	// removal (a path that returns can hurt too).
	GapAfterHealMs float64 `json:"gap_after_heal_ms"`
	// Sent and Lost are probe packets: sent by the probe, and not
	// received at all (Sent − received).
	Sent uint64 `json:"sent"`
	Lost uint64 `json:"lost"`
	// DetectMs is the onset to the first status poll (every 20 ms) that
	// shows the fault: the path not ACTIVE, a SUSPECT event, its datagram
	// budget lowered or a black hole counted, or a migration; for the
	// concentrator faults, any edge path not ACTIVE.
	DetectMs float64 `json:"detect_ms"`
	// RecoverMs is the onset (for all-down: the links' return) to the end
	// of the last 100 ms of probe sending that lost more than 10 packets
	// (10 % at 1 kHz): traffic restored.
	RecoverMs float64 `json:"recover_ms"`
	// HealMs is the fault's removal (for the concentrator faults: the new
	// process answering) to every edge path ACTIVE again.
	HealMs float64 `json:"heal_ms"`
	// LateMs is the largest one-way delay of any probe packet delivered
	// (send and receive clocks are the same), ms.
	LateMs float64 `json:"late_ms"`
	// Explained is the sum of the counters that explain lost probe
	// packets (the edge's and the concentrator's drops on the data path,
	// Drops below, less FEC-recovered packets); Unexplained is Lost −
	// Explained. Other traffic through the TUN and FEC parity make it
	// slightly inexact; negative means counters counted more than the
	// probe lost.
	Explained   int64             `json:"explained"`
	Unexplained int64             `json:"unexplained"`
	Drops       map[string]uint64 `json:"drops,omitempty"` // "edge:suspect", "conc:stale", … during the case
	ICMPSent    uint64            `json:"icmp_sent,omitempty"`
	// ExitMs (conc-term, conc-kill) is the signal to the process's exit;
	// RestartMs the signal to the new process's control socket answering.
	ExitMs    float64 `json:"exit_ms,omitempty"`
	RestartMs float64 `json:"restart_ms,omitempty"`
	// GarbageSent and GarbageCounted (garbage) are the datagrams the
	// hostile host sent and the concentrator's transport drop counters'
	// growth.
	// GarbageByReason is that growth by reason (tunnel.TransportDrops).
	// Short headers of no connection over 42 bytes are answered with a
	// stateless reset (RFC 9000 §10.3), for which quic-go reports no drop:
	// they are the difference today.
	// PMTUReason (mtu-blackhole) is the faulted path's pmtu_reason in the
	// edge's status just before the fault's removal: why its datagram
	// budget is what it is.
	PMTUReason      string            `json:"pmtu_reason,omitempty"`
	GarbageSent     uint64            `json:"garbage_sent,omitempty"`
	GarbageCounted  uint64            `json:"garbage_counted,omitempty"`
	GarbageByReason map[string]uint64 `json:"garbage_by_reason,omitempty"`
	// Target is the target for the row, Pass whether it was met.
	Target string `json:"target"`
	Pass   bool   `json:"pass"`
	Note   string `json:"note,omitempty"`
}

// faultsReport is --json FILE and results.json of the fault matrix.
type faultsReport struct {
	Started time.Time     `json:"started"`
	Command string        `json:"command"`
	Short   bool          `json:"short"`
	Faults  []FaultResult `json:"faults"`
}

// runFaults runs the matrix (Options.Configs selects fault names) and
// writes its table and results.
func runFaults(ctx context.Context, o Options, out io.Writer) error {
	started := time.Now()
	res, err := RunFaults(ctx, o, out)
	if len(res) == 0 {
		return err
	}
	cmd := "bondd bench faults"
	if o.Short {
		cmd += " --short"
	}
	if len(o.Configs) > 0 {
		cmd += " --configs " + strings.Join(o.Configs, ",")
	}
	md := FaultsTable(res)
	rep := faultsReport{Started: started, Command: cmd, Short: o.Short, Faults: res}
	if werr := writeResults(o.Out, rep, "# bondd bench faults\n\n`"+cmd+"`\n\n"+md+"\n"+FaultsLegend+"\n", out); werr != nil {
		return errors.Join(err, werr)
	}
	if o.JSON != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if werr := os.WriteFile(o.JSON, append(b, '\n'), 0o644); werr != nil {
			return errors.Join(err, werr)
		}
	}
	return err
}

// RunFaults builds the fault bed and runs every selected case under both
// rule sets, printing progress on out. It returns the rows measured so far
// with the first error that stopped the matrix. It needs root (network
// namespaces, TUN devices) and the ip command. o.Bin is the bondd binary
// to run (default: this executable); o.Short runs the short version the
// integration test uses; o.Configs selects fault names.
func RunFaults(ctx context.Context, o Options, out io.Writer) ([]FaultResult, error) {
	if !testbed.IsRoot() {
		return nil, errors.New("bench faults needs root (it builds network namespaces and TUN devices): run it as root, e.g. sudo bondd bench faults")
	}
	if why := testbed.Unavailable(); why != "" {
		return nil, errors.New("bench faults: " + why)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, errors.New("bench faults needs the ip command (iproute2) to run bondd inside a namespace")
	}
	cases := faultCases(o.Short)
	for _, c := range o.Configs {
		if !slices.ContainsFunc(cases, func(fc faultCase) bool { return fc.name == c }) {
			return nil, fmt.Errorf("bench faults has no fault %q; it has %s", c, strings.Join(FaultNames(), ", "))
		}
	}
	b, err := newFaultBed(o, out)
	if err != nil {
		return nil, err
	}
	defer b.close()
	var res []FaultResult
	for _, rules := range []string{RulesDefault, RulesPrefer} {
		for _, fc := range cases {
			if !o.selected(fc.name) || (rules == RulesPrefer && !fc.prefer) || (rules == RulesDefault && fc.onlyPrefer) {
				continue
			}
			if err := ctx.Err(); err != nil {
				return res, err
			}
			fmt.Fprintf(out, "%s (%s rules)...\n", fc.name, rules)
			r, err := b.runCase(ctx, fc, rules, uint32(1+len(res)))
			if err != nil {
				return res, fmt.Errorf("%s (%s rules): %w", fc.name, rules, err)
			}
			fmt.Fprintf(out, "  %s\n", r.oneLine())
			res = append(res, r)
		}
	}
	return res, nil
}

// FaultNames lists the matrix's faults in the order they run.
func FaultNames() []string {
	var n []string
	for _, c := range faultCases(false) {
		n = append(n, c.name)
	}
	return n
}

// FaultsLegend explains FaultsTable's columns, one paragraph.
const FaultsLegend = "Columns: gap = longest silence of the 1 kHz probe from the onset; detect = onset to the edge's status showing the fault; recover = onset (all-down: the links' return) to the probe arriving again; heal = the fault's removal to the path ACTIVE again; late = the most delayed probe packet; unexplained = lost − the drop counters of \"explained by\". docs/operations.md, \"Fault matrix\", has the details and targets."

// FaultsTable renders rows as the matrix's markdown table.
func FaultsTable(rows []FaultResult) string {
	var b strings.Builder
	b.WriteString("| fault | rules | path | rtt ms | gap ms | lost/sent | detect ms | recover ms | heal ms | late ms | unexplained | explained by | target | result |\n")
	b.WriteString("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |\n")
	for _, r := range rows {
		pass := "pass"
		if !r.Pass {
			pass = "**miss**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %.1f | %.0f | %d/%d | %s | %s | %s | %.0f | %d | %s | %s | %s |\n",
			r.Name, r.Rules, orDash(r.Path), r.RTTms, r.GapMs, r.Lost, r.Sent, ms(r.DetectMs), ms(r.RecoverMs), ms(r.HealMs), r.LateMs,
			r.Unexplained, r.explainedBy(), r.Target, pass)
	}
	return b.String()
}

// ms formats a time in ms, "-" for -1 (did not happen).
func ms(v float64) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", v)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// explainedBy lists the non-zero drop counters and the case's extras.
func (r *FaultResult) explainedBy() string {
	var parts []string
	keys := make([]string, 0, len(r.Drops))
	for k, v := range r.Drops {
		if v > 0 {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, r.Drops[k]))
	}
	if r.GapAfterHealMs >= 100 && r.GapAfterHealMs >= r.GapMs {
		parts = append(parts, "the longest gap after the fault's removal")
	}
	if r.ExitMs > 0 {
		parts = append(parts, fmt.Sprintf("exit %.0f ms", r.ExitMs))
	}
	if r.RestartMs > 0 {
		parts = append(parts, fmt.Sprintf("restart %.0f ms", r.RestartMs))
	}
	if r.GarbageSent > 0 {
		parts = append(parts, fmt.Sprintf("garbage %d sent, %d counted", r.GarbageSent, r.GarbageCounted))
		keys := slices.Sorted(maps.Keys(r.GarbageByReason))
		for _, k := range keys {
			if n := r.GarbageByReason[k]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", k, n))
			}
		}
	}
	if r.ICMPSent > 0 {
		parts = append(parts, fmt.Sprintf("icmp %d", r.ICMPSent))
	}
	if r.Note != "" {
		parts = append(parts, r.Note)
	}
	return strings.Join(parts, ", ")
}

// oneLine is the progress line of a row.
func (r *FaultResult) oneLine() string {
	pass := "pass"
	if !r.Pass {
		pass = "MISS"
	}
	line := fmt.Sprintf("%s: path %s, rtt %.1f ms, gap %.0f ms, lost %d/%d, detect %s ms, recover %s ms, heal %s ms, late %.0f ms, unexplained %d (%s) [%s: %s]",
		r.Name, orDash(r.Path), r.RTTms, r.GapMs, r.Lost, r.Sent, ms(r.DetectMs), ms(r.RecoverMs), ms(r.HealMs), r.LateMs, r.Unexplained, r.explainedBy(), r.Target, pass)
	if r.PMTUReason != "" {
		line += "; pmtu_reason: " + r.PMTUReason
	}
	return line
}

// faultBed is the matrix's namespaces and the two bondd processes.
type faultBed struct {
	o                   Options
	out                 io.Writer
	tb                  *testbed.Testbed
	edge, conc, hostile *testbed.NS
	dir, bin            string
	edgeSock, concSock  string
	edgeCmd, concCmd    *exec.Cmd
	rules               string // the rule file's content now
	ownDir              bool
}

// faultUplinks are the edge's uplinks: name, the edge's and the
// concentrator's address on the veth, and the address the edge dials.
var faultUplinks = []struct {
	name, edge, conc, remote, label string
}{
	{"up0", "10.101.0.2/24", "10.101.0.1/24", "10.101.0.1:4433", "cellular"},
	{"up1", "10.101.1.2/24", "10.101.1.1/24", "10.101.1.1:4433", "cellular"},
	{"up2", "fd01:101:2::2/64", "fd01:101:2::1/64", "[fd01:101:2::1]:4433", "satellite"},
}

// Probe and hostile addresses.
const (
	faultsProbeDst   = "10.78.0.1" // the concentrator's TUN address
	faultsProbePort  = 9           // the probe's UDP port (discard)
	faultsHostile    = "10.102.0.2/24"
	faultsHostileGW  = "10.102.0.1/24"
	faultsGarbageDst = "10.102.0.1:4433"
)

// newFaultBed builds the namespaces, writes the credentials and configs,
// and starts the concentrator and the edge with every path ACTIVE.
func newFaultBed(o Options, out io.Writer) (_ *faultBed, err error) {
	testbed.Cleanup(faultsPrefix)
	b := &faultBed{o: o, out: out, tb: testbed.New(faultsPrefix), bin: o.Bin}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	if b.bin == "" {
		if b.bin, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	if b.dir, err = os.MkdirTemp("", "bondd-faults-"); err != nil {
		return nil, err
	}
	b.ownDir = true
	for _, ns := range []**testbed.NS{&b.edge, &b.conc, &b.hostile} {
		if *ns, err = b.tb.NewNS(); err != nil {
			return nil, err
		}
	}
	for _, u := range faultUplinks {
		if err := b.tb.Veth(b.edge, u.name, netip.MustParsePrefix(u.edge), b.conc, u.name, netip.MustParsePrefix(u.conc)); err != nil {
			return nil, err
		}
		// An IPv6 address survives its link going down, as a modem's
		// would come back by SLAAC (Linux flushes it otherwise).
		if err := b.edge.Sysctl("net.ipv6.conf."+u.name+".keep_addr_on_down", "1"); err != nil {
			return nil, err
		}
	}
	if err := b.tb.Veth(b.hostile, "eth0", netip.MustParsePrefix(faultsHostile), b.conc, "hostile0", netip.MustParsePrefix(faultsHostileGW)); err != nil {
		return nil, err
	}
	pin, err := b.writeCreds()
	if err != nil {
		return nil, err
	}
	b.edgeSock = filepath.Join(b.dir, "edge.sock")
	b.concSock = filepath.Join(b.dir, "conc.sock")
	if err := b.writeFile("conc.yaml", b.concConfig()); err != nil {
		return nil, err
	}
	if err := b.writeFile("edge.yaml", b.edgeConfig(pin)); err != nil {
		return nil, err
	}
	b.rules = probeRules("")
	if err := b.writeFile("rules.yaml", b.rules); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), faultsPathsUp)
	defer cancel()
	if err := b.startConc(ctx); err != nil {
		return nil, err
	}
	if b.edgeCmd, err = b.startDaemon(b.edge, "edge", "edge.yaml", b.edgeSock); err != nil {
		return nil, err
	}
	if err := b.waitAllActive(ctx); err != nil {
		return nil, err
	}
	keep := "removed at exit; BONDD_FAULTS_KEEP=1 keeps them"
	if !b.ownDir || os.Getenv("BONDD_FAULTS_KEEP") != "" {
		keep = "kept"
	}
	fmt.Fprintf(out, "fault bed: namespaces %s (edge), %s (concentrator), %s (hostile); configs and logs in %s (%s)\n",
		b.edge.Name(), b.conc.Name(), b.hostile.Name(), b.dir, keep)
	return b, nil
}

// close stops the daemons and removes the namespaces; the folder goes too
// unless the run failed (its daemon logs are worth reading).
func (b *faultBed) close() {
	for _, c := range []*exec.Cmd{b.edgeCmd, b.concCmd} {
		stopDaemon(c)
	}
	b.tb.Close()
	if b.ownDir && os.Getenv("BONDD_FAULTS_KEEP") == "" {
		os.RemoveAll(b.dir)
	}
}

// stopDaemon sends SIGTERM to c and waits up to 5 s, then kills it.
func stopDaemon(c *exec.Cmd) {
	if c == nil || c.Process == nil || c.ProcessState != nil {
		return
	}
	c.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { c.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		c.Process.Kill()
		<-done
	}
}

func (b *faultBed) writeFile(name, content string) error {
	return os.WriteFile(filepath.Join(b.dir, name), []byte(content), 0o600)
}

// writeCreds writes the concentrator's self-signed certificate and key
// and the edge's token; it returns the certificate's SHA-256 pin.
func (b *faultBed) writeCreds() (string, error) {
	cert, pin, err := tunnel.SelfSignedCert("concentrator.faults")
	if err != nil {
		return "", err
	}
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		return "", err
	}
	for name, data := range map[string][]byte{
		"conc.pem":  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}),
		"conc.key":  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}),
		"van.token": []byte("fault-matrix-token-0123456789abcdef\n"),
	} {
		if err := os.WriteFile(filepath.Join(b.dir, name), data, 0o600); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(pin), nil
}

// concConfig is the concentrator's config file: daemon defaults but for
// the addresses.
func (b *faultBed) concConfig() string {
	return fmt.Sprintf(`role: concentrator
log_level: info
`+qlogLine(b.dir, "conc")+`
tun:
  name: bondd0
  addresses: [10.78.0.1/24]
concentrator:
  listen: ":4433"
  cert_file: %[1]s/conc.pem
  key_file: %[1]s/conc.key
  edges:
    - id: van-1
      token_file: %[1]s/van.token
      allowed_prefixes: [10.77.0.0/24]
`, b.dir)
}

// edgeConfig is the edge's config file: three uplinks bound to their
// interfaces, each labelled uplink=NAME for the prefer rule, and the rule
// file the cases rewrite.
func (b *faultBed) edgeConfig(pin string) string {
	var ups strings.Builder
	for _, u := range faultUplinks {
		fmt.Fprintf(&ups, "    - {name: %s, interface: %s, remote: %q, labels: {link_type: %s, uplink: %s}}\n", u.name, u.name, u.remote, u.label, u.name)
	}
	return fmt.Sprintf(`role: edge
log_level: info
`+qlogLine(b.dir, "edge")+`
tun:
  name: bondd0
  addresses: [10.77.0.2/24]
  routes: [10.78.0.0/24]
edge:
  id: van-1
  concentrator: 10.101.0.1:4433
  server_cert_sha256: %s
  token_file: %s/van.token
  uplinks:
%srules: %s/rules.yaml
`, pin, b.dir, ups.String(), b.dir)
}

// startDaemon runs bondd run in ns with the config file name; its output
// goes to name.log in the bed's folder. It waits for the control socket.
func (b *faultBed) startDaemon(ns *testbed.NS, name, cfg, sock string) (*exec.Cmd, error) {
	os.Remove(sock) // a killed daemon leaves it
	logf, err := os.OpenFile(filepath.Join(b.dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child holds its own descriptor
	// Each daemon keeps its usage store in its own folder, not in the
	// shared default /var/lib/bondd.
	if data, err := os.ReadFile(filepath.Join(b.dir, cfg)); err == nil && !strings.Contains(string(data), "state_dir:") {
		b.writeFile(cfg, string(data)+"state_dir: "+filepath.Join(b.dir, name+"-state")+"\n")
	}
	cmd := exec.Command("ip", "netns", "exec", ns.Name(), b.bin, "run", "--config", filepath.Join(b.dir, cfg), "--control-socket", sock)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the %s: %w", name, err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := fetchFaultStatus(ctx, sock)
		cancel()
		if err == nil {
			return cmd, nil
		}
		if time.Now().After(deadline) {
			stopDaemon(cmd)
			return nil, fmt.Errorf("the %s's control socket did not answer in 15 s (log: %s): %w", name, filepath.Join(b.dir, name+".log"), err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startConc starts a concentrator process.
func (b *faultBed) startConc(ctx context.Context) (err error) {
	b.concCmd, err = b.startDaemon(b.conc, "concentrator", "conc.yaml", b.concSock)
	return err
}

// waitAllActive waits until the edge reports every path ACTIVE.
func (b *faultBed) waitAllActive(ctx context.Context) error {
	return waitFor(ctx, faultsPathsUp, "every edge path ACTIVE", func() bool {
		st, err := b.status(b.edgeSock)
		return err == nil && allActive(st)
	})
}

// waitFor polls cond every 5 ms until it holds, ctx ends or d passes.
func waitFor(ctx context.Context, d time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", d, what)
		}
		if err := sleepUntil(ctx, time.Now().Add(5*time.Millisecond), nil); err != nil {
			return err
		}
	}
	return nil
}

// faultStatus is the part of a daemon's status (internal/status.Report)
// the matrix reads.
type faultStatus struct {
	Bonds          []tunnel.BondStats `json:"bonds"`
	TransportDrops map[string]uint64  `json:"transport_drops"`
	Rules          *struct {
		Version uint64 `json:"version"`
	} `json:"rules"`
}

// status fetches a daemon's status with a 1 s timeout.
func (b *faultBed) status(sock string) (*faultStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return fetchFaultStatus(ctx, sock)
}

// fetchFaultStatus reads GET /status from the control socket sock.
func fetchFaultStatus(ctx context.Context, sock string) (*faultStatus, error) {
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
		DisableKeepAlives: true,
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://bondd/status", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var st faultStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, err
	}
	if len(st.Bonds) == 0 {
		return nil, errors.New("status without a bond")
	}
	return &st, nil
}

// allActive reports whether every path of the first bond is ACTIVE.
func allActive(st *faultStatus) bool {
	if st == nil || len(st.Bonds) == 0 || len(st.Bonds[0].Paths) < len(faultUplinks) {
		return false
	}
	for _, p := range st.Bonds[0].Paths {
		if p.Status != "ACTIVE" {
			return false
		}
	}
	return true
}

// pathStats returns the named path of st's first bond.
func pathStats(st *faultStatus, name string) (tunnel.PathStats, bool) {
	if st == nil || len(st.Bonds) == 0 {
		return tunnel.PathStats{}, false
	}
	for _, p := range st.Bonds[0].Paths {
		if p.Name == name {
			return p, true
		}
	}
	return tunnel.PathStats{}, false
}

// setRules installs content as the edge's rule file (SIGHUP) unless it is
// already in force, and waits for the new version.
func (b *faultBed) setRules(ctx context.Context, content string) error {
	if content == b.rules {
		return nil
	}
	st, err := b.status(b.edgeSock)
	if err != nil {
		return err
	}
	var v uint64
	if st.Rules != nil {
		v = st.Rules.Version
	}
	tmp := filepath.Join(b.dir, "rules.yaml.new")
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(b.dir, "rules.yaml")); err != nil {
		return err
	}
	b.edgeCmd.Process.Signal(syscall.SIGHUP)
	b.rules = content
	return waitFor(ctx, 10*time.Second, "the edge to load the new rule file", func() bool {
		st, err := b.status(b.edgeSock)
		return err == nil && st.Rules != nil && st.Rules.Version > v
	})
}

// probeRules is the edge's rule file of a case: the probe (UDP to port
// faultsProbePort) without FEC, so that every lost probe packet shows
// and each loss must be explained by a drop counter rather than hidden by
// a reconstruction (and parity datagrams do not swell the drop counters);
// with prefer, a second rule prefers the uplink labelled uplink=prefer
// for every packet.
func probeRules(prefer string) string {
	s := fmt.Sprintf("rules:\n  - id: probe-no-fec\n    priority: 2\n    match: {proto: udp, dst_port: %d}\n    actions: {fec: off}\n", faultsProbePort)
	if prefer != "" {
		s += fmt.Sprintf("  - id: prefer-%[1]s\n    priority: 1\n    actions: {prefer: {uplink: %[1]s}}\n", prefer)
	}
	return s
}

// ip runs the ip command with args inside ns.
func ip(ns *testbed.NS, args ...string) error {
	out, err := exec.Command("ip", append([]string{"-n", ns.Name()}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip -n %s %s: %w: %s", ns.Name(), strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// qlogLine is the qlog_dir line of a daemon's config (side: edge or
// conc): with BONDD_FAULTS_QLOG set, every QUIC connection's qlog goes to
// qlog-SIDE in the bed's folder (keep it with BONDD_FAULTS_KEEP=1).
func qlogLine(dir, side string) string {
	if os.Getenv("BONDD_FAULTS_QLOG") == "" {
		return ""
	}
	d := filepath.Join(dir, "qlog-"+side)
	os.MkdirAll(d, 0o755)
	return "qlog_dir: " + d
}
