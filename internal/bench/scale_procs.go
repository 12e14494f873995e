package bench

// The edges' child processes of the scale scenario (scale_edges.go runs
// in each): the parent splits the step's edges into contiguous ranges,
// one per child, and speaks to all of them at once.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"time"

	"github.com/bondd/bondd/tunnel"
)

// ScaleEdgesPerProc is how many edges one child process holds when
// Options.ScaleEdgeProcs is 0 (at most scaleMaxProcs children).
const ScaleEdgesPerProc = 500

const scaleMaxProcs = 16

// scaleProcs returns the number of edge processes for n edges.
func (o *Options) scaleProcs(n int) int {
	if o.ScaleEdgeProcs > 0 {
		return min(o.ScaleEdgeProcs, n)
	}
	return min(scaleMaxProcs, max(1, (n+ScaleEdgesPerProc-1)/ScaleEdgesPerProc))
}

// scaleEdgeProcs is a step's edge processes.
type scaleEdgeProcs struct {
	kids []*scaleChild
	cfgs []scaleChildConfig
}

// startScaleEdges starts procs children for the edges of base (base.Bonds
// edges, base.Active sending base.PPS packets/s in total, base.Late the
// late edge or −1), each with its range, its share of the active edges
// and of the rate, and base.MaxDialing/procs edges connecting at once.
func startScaleEdges(ctx context.Context, base scaleChildConfig, procs int) (*scaleEdgeProcs, error) {
	p := &scaleEdgeProcs{}
	for k := range procs {
		c := base
		c.Lo, c.Hi = k*base.Bonds/procs, (k+1)*base.Bonds/procs
		c.Active = nil
		for _, i := range base.Active {
			if i >= c.Lo && i < c.Hi {
				c.Active = append(c.Active, i)
			}
		}
		if len(base.Active) > 0 {
			c.PPS = base.PPS * float64(len(c.Active)) / float64(len(base.Active))
		}
		if base.MaxDialing > 0 {
			c.MaxDialing = max(1, base.MaxDialing/procs)
		}
		if k > 0 {
			c.Late = -1
		}
		b, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		kid, err := startScaleChild(ctx, scaleChildEnv, string(b))
		if err != nil {
			p.stop()
			return nil, err
		}
		p.kids, p.cfgs = append(p.kids, kid), append(p.cfgs, c)
	}
	return p, nil
}

// all waits up to timeout for event from every child, in child order.
func (p *scaleEdgeProcs) all(event string, timeout time.Duration) ([]scaleChildMsg, error) {
	until := time.Now().Add(timeout)
	out := make([]scaleChildMsg, len(p.kids))
	for k, kid := range p.kids {
		m, err := kid.next(event, time.Until(until))
		if err != nil {
			return nil, fmt.Errorf("edge process %d: %w", k, err)
		}
		out[k] = m
	}
	return out, nil
}

// exited returns an error naming the first child that has exited (a
// crash: its stderr is the bench's), nil while all run.
func (p *scaleEdgeProcs) exited() error {
	for k, kid := range p.kids {
		select {
		case <-kid.ended:
			return fmt.Errorf("edge process %d exited", k)
		default:
		}
	}
	return nil
}

// send writes line to every child.
func (p *scaleEdgeProcs) send(line string) error {
	for _, kid := range p.kids {
		if err := kid.send(line); err != nil {
			return err
		}
	}
	return nil
}

// sentByEdge merges the children's "sent" messages: packets sent per
// active edge (global index) and the active edges' drops.
func (p *scaleEdgeProcs) sentByEdge(msgs []scaleChildMsg) (map[int]uint64, scaleChildMsg) {
	sent := map[int]uint64{}
	var all scaleChildMsg
	for k, m := range msgs {
		for j, i := range p.cfgs[k].Active {
			if j < len(m.Sent) {
				sent[i] += m.Sent[j]
			}
		}
		if all.Drops == nil {
			all.Drops = m.Drops
		} else {
			for r, n := range m.Drops {
				all.Drops[r] += n
			}
		}
	}
	return sent, all
}

// stop ends every child.
func (p *scaleEdgeProcs) stop() {
	for _, kid := range p.kids {
		kid.stop()
	}
}

// scaleChild is the running edges' process.
type scaleChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	errc  chan error
	ended chan struct{} // closed when the child's output ends: it exited

	killed bool // by kill
}

// kill ends the child with SIGKILL and waits for it.
func (c *scaleChild) kill() {
	c.killed = true
	c.cmd.Process.Kill()
	c.cmd.Wait()
}

// startScaleChild re-executes this binary as a child process of the
// scale scenario: env names its role (scaleChildEnv: edges; scaleConcEnv:
// the concentrator; scaleFloodEnv: the flood) and carries cfg.
func startScaleChild(ctx context.Context, env, cfg string) (*scaleChild, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), env+"="+cfg)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting a child process: %w", err)
	}
	c := &scaleChild{cmd: cmd, stdin: stdin, lines: make(chan string, 64), errc: make(chan error, 1), ended: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			select {
			case c.lines <- sc.Text():
			case <-ctx.Done():
			}
		}
		close(c.ended)
		c.errc <- errors.New("the edges' process ended")
	}()
	return c, nil
}

// next waits up to timeout for the child's message of event.
func (c *scaleChild) next(event string, timeout time.Duration) (scaleChildMsg, error) {
	var m scaleChildMsg
	l, err := c.nextEvent(event, timeout)
	if err == nil {
		err = json.Unmarshal([]byte(l), &m)
	}
	return m, err
}

// nextEvent waits up to timeout for the child's line of event and
// returns it; lines of other events are skipped.
func (c *scaleChild) nextEvent(event string, timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case l := <-c.lines:
			var m struct {
				Event string `json:"event"`
			}
			if json.Unmarshal([]byte(l), &m) == nil && m.Event == event {
				return l, nil
			}
		case err := <-c.errc:
			return "", err
		case <-t.C:
			return "", fmt.Errorf("no %q from the child process within %s", event, timeout)
		}
	}
}

// send writes one line to the child.
func (c *scaleChild) send(line string) error {
	_, err := io.WriteString(c.stdin, line+"\n")
	return err
}

// stop closes the child's input (it closes its edges and exits) and waits
// for it, killing it after 20 s.
func (c *scaleChild) stop() {
	if c.killed {
		return
	}
	c.stdin.Close()
	done := make(chan struct{})
	go func() { c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		c.cmd.Process.Kill()
		<-done
	}
}

// scaleEdgeAuths returns the concentrator's list of the scale edges 0 … n−1.
func scaleEdgeAuths(n int) []tunnel.EdgeAuth {
	out := make([]tunnel.EdgeAuth, n)
	for i := range n {
		out[i] = tunnel.EdgeAuth{ID: scaleEdgeID(i), Token: scaleEdgeToken(i), AllowedPrefixes: []netip.Prefix{netip.PrefixFrom(scaleEdgeAddr(i), 32)}}
	}
	return out
}
