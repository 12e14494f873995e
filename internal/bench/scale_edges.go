package bench

// The edges of the scale scenario run in a child process (the same binary
// re-executed with scaleChildEnv set), so that the concentrator's
// resident memory and CPU time, measured in the parent, are its own.
//
// Each child holds the edges Lo … Hi−1 of the step (scale_procs.go splits
// them over several children, so that one Go process does not have to
// be fair to 10,000 clients on 2 cores). Each edge binds its own
// loopback address (scaleEdgeBind), as edges behind their own NATs
// would, so the node's per-source handshake bound sees one edge each.
//
// Protocol, one JSON object per line on the child's stdout:
//
//	{"event":"started"}            every edge is created and dialling
//	{"event":"sent","sent":[…]}    traffic done: packets sent per active bond
//	{"event":"redialled"}          every edge was told to redial (resumed handshakes)
//	{"event":"late","first_s":…}   the late edge connected (first path, both paths)
//
// and on its stdin: a line "go" starts the traffic; "redial" closes every
// edge's paths and dials again (at most MaxDialing at once), which
// resumes the TLS sessions; "late" starts the late edge (Late ≥ 0) and
// times its connection; end of input closes every edge and exits.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/bondd/bondd/tun/tuntest"
	"github.com/bondd/bondd/tunnel"
)

// scaleChildEnv names the environment variable that carries the child's
// scaleChildConfig as JSON.
const scaleChildEnv = "BONDD_BENCH_SCALE_EDGES"

// scaleChildConfig is what the parent tells the edges' process.
type scaleChildConfig struct {
	Concentrator string        `json:"concentrator"` // host:port
	Pin          []byte        `json:"pin"`          // SHA-256 of the concentrator's certificate (tunnel.ClientTLS)
	Bonds        int           `json:"bonds"`        // edges of the step, 0 … Bonds−1
	Lo           int           `json:"lo"`           // this child's edges: Lo … Hi−1 (Hi 0: all)
	Hi           int           `json:"hi"`
	Late         int           `json:"late"`         // the index of the late edge this child starts on "late"; −1: none
	Active       []int         `json:"active"`       // indexes of this child's edges that send traffic
	PPS          float64       `json:"pps"`          // packets per second, this child's active edges together
	PacketBytes  int           `json:"packet_bytes"` // inner IP packet length
	Duration     time.Duration `json:"duration"`     // traffic time
	// MaxDialing bounds the edges connecting at once (both paths not yet
	// up); 0: all start at once.
	MaxDialing int `json:"max_dialing"`
}

// scaleChildMsg is one line of the child's stdout.
type scaleChildMsg struct {
	Event string   `json:"event"`
	Sent  []uint64 `json:"sent,omitempty"` // per entry of Active
	// Drops are the packets the active edges dropped (bond and path
	// drops of every reason, summed over the active edges).
	Drops tunnel.DropCounts `json:"drops,omitempty"`
	// FirstS and BothS are the late edge's time to its first path up and
	// to both, seconds (−1: not within lateTimeout).
	FirstS float64 `json:"first_s,omitempty"`
	BothS  float64 `json:"both_s,omitempty"`
}

// lateTimeout bounds the wait for the late edge.
const lateTimeout = 30 * time.Second

// Inner addressing: edge i owns scaleInnerBase + i (a /32); traffic goes
// to scaleServer behind the concentrator.
var (
	scaleInnerBase = netip.MustParseAddr("10.128.0.0")
	scaleServer    = netip.MustParseAddrPort("10.127.0.1:9000")
)

func scaleEdgeID(i int) string    { return fmt.Sprintf("scale-%05d", i) }
func scaleEdgeToken(i int) []byte { return []byte("scale-token-not-a-secret-" + scaleEdgeID(i)) }
func scaleEdgeAddr(i int) netip.Addr {
	a := scaleInnerBase.As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3]) + uint32(i)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// scaleEdgeIndex maps an inner source address back to its edge, or −1.
// scaleEdgeBind is edge i's local address: 127.1.0.0 + i + 1, on
// loopback (any 127/8 address is local on Linux).
func scaleEdgeBind(i int) netip.Addr {
	v := uint32(127)<<24 | uint32(1)<<16 + uint32(i) + 1
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func scaleEdgeIndex(a netip.Addr, bonds int) int {
	if !a.Is4() {
		return -1
	}
	b, x := scaleInnerBase.As4(), a.As4()
	base := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v := uint32(x[0])<<24 | uint32(x[1])<<16 | uint32(x[2])<<8 | uint32(x[3])
	if v < base || v-base >= uint32(bonds) {
		return -1
	}
	return int(v - base)
}

// scaleEdgesMain runs the edges of cfg (JSON scaleChildConfig) until in ends.
func scaleEdgesMain(cfg string, in io.Reader, out io.Writer) error {
	var c scaleChildConfig
	if err := json.Unmarshal([]byte(cfg), &c); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if c.Bonds < 1 || c.PacketBytes < 28 || c.PacketBytes > demoMTU() {
		return fmt.Errorf("config: %d bonds, %d-byte packets", c.Bonds, c.PacketBytes)
	}
	raiseNoFile()
	yieldToNode()
	if c.Hi == 0 { // one child for all
		c.Hi = c.Bonds
	}
	if c.Lo < 0 || c.Hi > c.Bonds || c.Lo >= c.Hi {
		return fmt.Errorf("config: edges %d..%d of %d", c.Lo, c.Hi, c.Bonds)
	}
	// edges[j] and devs[j] are edge Lo + j; the late edge, if any, last.
	n := c.Hi - c.Lo
	total := n
	if c.Late >= 0 {
		total++
	}
	edges := make([]*tunnel.Edge, total)
	devs := make([]*tuntest.Device, total)
	defer func() {
		var wg sync.WaitGroup
		for _, e := range edges {
			if e != nil {
				wg.Go(func() { e.Close() })
			}
		}
		wg.Wait()
	}()
	for j := range total {
		i := c.Lo + j
		if j == n {
			i = c.Late
		}
		// Each edge its own TLS configuration, so its own session cache,
		// as each vehicle has: edges sharing one cache would resume the
		// first edge's session ticket, and the fresh handshakes would be
		// resumed ones.
		tlsConf, err := tunnel.ClientTLS("concentrator.scale", nil, c.Pin, nil)
		if err != nil {
			return err
		}
		devs[j] = tuntest.New(demoMTU(), 8)
		bind := scaleEdgeBind(i)
		eo := tunnel.EdgeOptions{ID: scaleEdgeID(i), Device: devs[j], MTU: demoMTU(), Concentrator: c.Concentrator, TLS: tlsConf,
			Token: scaleEdgeToken(i), Uplinks: []tunnel.UplinkOptions{{Name: "a", Bind: bind}, {Name: "b", Bind: bind}},
			Paths: tunnel.PathOptions{IdleTimeout: scaleEdgeDeadAfter, DeadAfter: scaleEdgeDeadAfter}}
		if edges[j], err = tunnel.NewEdge(eo); err != nil {
			devs[j].Close()
			return err
		}
	}
	enc := json.NewEncoder(out)
	if err := enc.Encode(scaleChildMsg{Event: "started"}); err != nil {
		return err
	}
	// Start the edges with at most c.MaxDialing of them still connecting,
	// so that the figure is the rate the node sustains rather than that of
	// a thundering herd whose handshakes time out and back off (which
	// c.MaxDialing = 0 measures).
	paced(edges[:n], c.MaxDialing, func(e *tunnel.Edge) { e.Start() })
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var msg scaleChildMsg
		switch sc.Text() {
		case "go":
			sent, err := scaleSend(c, devs[:n])
			if err != nil {
				return err
			}
			drops := tunnel.DropCounts{}
			for _, i := range c.Active {
				addDrops(drops, edges[i-c.Lo].Bond().Stats())
			}
			msg = scaleChildMsg{Event: "sent", Sent: sent, Drops: drops}
		case "redial":
			paced(edges[:n], c.MaxDialing, func(e *tunnel.Edge) {
				e.SetConcentrator(c.Concentrator)
				// Until its paths are seen down, the edge would count as
				// connected and not hold back the next ones.
				for t0 := time.Now(); e.Bond().PathsUp() == 2 && time.Since(t0) < time.Second; {
					time.Sleep(time.Millisecond)
				}
			})
			msg = scaleChildMsg{Event: "redialled"}
		case "late":
			if c.Late < 0 {
				continue
			}
			msg = scaleChildMsg{Event: "late", FirstS: -1, BothS: -1}
			e, t0 := edges[n], time.Now()
			e.Start()
			for time.Since(t0) < lateTimeout {
				up := e.Bond().PathsUp()
				if up >= 1 && msg.FirstS < 0 {
					msg.FirstS = time.Since(t0).Seconds()
				}
				if up == 2 {
					msg.BothS = time.Since(t0).Seconds()
					break
				}
				time.Sleep(time.Millisecond)
			}
		default:
			continue
		}
		if err := enc.Encode(msg); err != nil {
			return err
		}
	}
	return sc.Err()
}

// paced calls do for each edge, with at most maxDialing edges whose both
// paths are not up at once (0: no bound).
func paced(edges []*tunnel.Edge, maxDialing int, do func(*tunnel.Edge)) {
	var dialing []*tunnel.Edge
	for _, e := range edges {
		for maxDialing > 0 && len(dialing) >= maxDialing {
			dialing = slices.DeleteFunc(dialing, func(e *tunnel.Edge) bool { return e.Bond().PathsUp() == 2 })
			if len(dialing) >= maxDialing {
				time.Sleep(2 * time.Millisecond)
			}
		}
		do(e)
		dialing = append(dialing, e)
	}
}

// scaleSend sends c.PPS packets per second, round-robin over the active
// edges, for c.Duration, and returns the packets sent per active edge.
func scaleSend(c scaleChildConfig, devs []*tuntest.Device) ([]uint64, error) {
	sent := make([]uint64, len(c.Active))
	if len(c.Active) == 0 || c.PPS <= 0 {
		return sent, nil
	}
	payload := make([]byte, c.PacketBytes-28)
	pkts := make([][]byte, len(c.Active))
	for j, i := range c.Active {
		p, err := tuntest.AppendUDP4(nil, netip.AddrPortFrom(scaleEdgeAddr(i), 9000), scaleServer, payload)
		if err != nil {
			return nil, err
		}
		pkts[j] = p
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.Duration+time.Second)
	defer cancel()
	start := time.Now()
	total := uint64(c.PPS * c.Duration.Seconds())
	var k uint64
	for k < total {
		due := min(total, uint64(time.Since(start).Seconds()*c.PPS))
		for ; k < due; k++ {
			j := int(k % uint64(len(c.Active)))
			if err := devs[c.Active[j]-c.Lo].InjectContext(ctx, pkts[j]); err != nil {
				if errors.Is(err, context.DeadlineExceeded) {
					return sent, nil
				}
				return nil, err
			}
			sent[j]++
		}
		time.Sleep(time.Millisecond)
	}
	return sent, nil
}

// raiseNoFile raises the soft limit of open files to the hard limit: every
// uplink of every edge is a socket. (Go does this at start-up too; doing it
// here keeps the figure in one place.)
func raiseNoFile() (soft, hard uint64) {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) != nil {
		return 0, 0
	}
	if l.Cur < l.Max {
		l.Cur = l.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
	return l.Cur, l.Max
}

// scaleEdgeDeadAfter is the silence after which a bench edge gives a
// SUSPECT path up (PathOptions.DeadAfter and IdleTimeout; the daemon's
// defaults are 3 and 5 s). QUIC's idle timeout is the smaller of the two
// ends' (the node's: idle_keepalive + 5 s = 20 s), so a silent connection
// still ends after 20 s. Thousands of edges in a few processes on the
// node's cores stall for seconds at a time (their collections mark
// gigabytes): with the defaults such a stall reads as the node's silence
// on every path at once, and the redials of a few thousand paths together
// swamp the node (a 10,000-bond ramp collapsed from 9,600 bonds up so).
// The node keeps its defaults: what it does with a silent edge is part of
// what is measured.
const scaleEdgeDeadAfter = 30 * time.Second

// scaleEdgeGCPercent is the edges' processes' GOGC: fewer collections of
// their large heaps, less CPU taken from the node (memory is not what the
// bench measures of the edges).
const scaleEdgeGCPercent = 300

// edgeNice is the nice value of the edges' processes. The scale bench
// measures the node; on a real fleet the edges run on vehicles, not on the
// node's cores. Here they share them, and with thousands of edges
// handshaking at once their processes would take as much CPU as the node
// (equal shares, nice 0), starving its socket reader and timers: what the
// node can do would be lost in what the machine cannot. At nice 10 the
// scheduler gives a busy node about nine tenths of a contended core
// (weights 1024 against 110, sched(7)), and the edges everything the node
// leaves idle.
const edgeNice = 10

// yieldToNode sets every thread of this process to edgeNice, and its
// collector to scaleEdgeGCPercent. Linux keeps a nice value per thread
// and a new thread inherits its creator's, so setting the threads there
// are covers the ones the Go runtime starts later; a second pass catches
// a thread started during the first. Errors are ignored: at nice 0 the
// bench still runs, only less fairly to the node.
func yieldToNode() {
	if os.Getenv("GOGC") == "" { // a GOGC the user set stands
		debug.SetGCPercent(scaleEdgeGCPercent)
	}
	for range 2 {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return
		}
		for _, t := range tasks {
			if tid, err := strconv.Atoi(t.Name()); err == nil {
				syscall.Setpriority(syscall.PRIO_PROCESS, tid, edgeNice)
			}
		}
	}
}

// demoMTU is the inner MTU of the default QUIC packet size.
func demoMTU() int { return tunnel.MTUFor(tunnel.DefaultInitialPacketSize) }

// addDrops adds the bond's and its paths' nonzero drop counts to sum.
func addDrops(sum tunnel.DropCounts, s tunnel.BondStats) {
	for r, n := range s.Drops {
		if n > 0 {
			sum[r] += n
		}
	}
	for _, p := range s.Paths {
		for r, n := range p.Drops {
			if n > 0 {
				sum[r] += n
			}
		}
	}
}
