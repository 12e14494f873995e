package fleet

import "time"

// Defaults for [FailoverConfig].
const (
	// DefaultUnreachableAfter is how long the current node may stay
	// unreachable before the edge moves on, when
	// [FailoverConfig.UnreachableAfter] is zero.
	DefaultUnreachableAfter = 5 * time.Second
	// DefaultHomeHoldDown is how long home must stay healthy before the
	// edge goes back, when [FailoverConfig.HomeHoldDown] is zero.
	DefaultHomeHoldDown = 60 * time.Second
)

// FailoverConfig sets the edge's failover hysteresis.
type FailoverConfig struct {
	// Nodes is the edge's node order, home first ([Order]). Required.
	Nodes []string
	// UnreachableAfter is how long the current node may stay unreachable
	// (no path connected to it) before the edge moves to the next node.
	// 0 means 5 s.
	UnreachableAfter time.Duration
	// HomeHoldDown is how long home must answer probes without a break
	// before an edge away from home goes back. 0 means 60 s. It keeps an
	// edge from flapping between nodes when home comes and goes.
	HomeHoldDown time.Duration
}

// Event is what the edge observed, fed to [Failover.Step].
type Event int

// Events. Up and Down are about the current node; HomeUp and HomeDown about
// the home node while the edge is elsewhere (a probe: a handshake that is
// accepted, then closed); Tick only lets time pass.
const (
	// Tick: nothing new; time has passed.
	Tick Event = iota
	// Up: a path to the current node is connected (the bond is up).
	Up
	// Down: no path to the current node is connected any more, or a dial
	// to it failed. The edge moves once this has lasted UnreachableAfter
	// without an Up.
	Down
	// Refused: the current node refused the edge (not in its edge list, a
	// credential it does not accept) or asked it to leave (draining). The
	// edge moves at once.
	Refused
	// HomeUp: a probe of home succeeded. Ignored while at home.
	HomeUp
	// HomeDown: a probe of home failed or home refused. Ignored while at
	// home.
	HomeDown
)

// Decision is the outcome of one [Failover.Step].
type Decision struct {
	// Node is the node the edge's paths should dial now: an index into
	// FailoverConfig.Nodes.
	Node int
	// Moved is true when Node changed in this step: the edge closes its
	// paths to the old node and dials Node.
	Moved bool
	// Reason says why it moved: "unreachable", "refused" or "home"; ""
	// when it did not.
	Reason string
}

// Failover is the edge's choice of concentrator node, as a pure state
// machine: it holds no clock and starts no timer. The caller feeds it
// events with the time they happened, and calls Step with Tick at least as
// often as it wants the decision's precision (a second is plenty).
// Times must not go backwards. Not safe for concurrent use.
//
// Rules: start at home (index 0). Move to the next node in the order
// (wrapping) when the current one has been unreachable for
// UnreachableAfter, or at once when it refuses. While away from home, go
// back when home has answered probes for HomeHoldDown without a failure
// in between. After a move the new node gets a fresh UnreachableAfter to
// come up.
type Failover struct {
	cfg    FailoverConfig
	cur    int
	downAt time.Time // when the current node went unreachable; zero while reachable
	homeAt time.Time // when home's current run of healthy probes began; zero if none
}

// NewFailover returns the state machine at home, with the current node not
// yet reachable as of now (the edge has not dialled yet). With no nodes
// every decision is Node -1.
func NewFailover(cfg FailoverConfig, now time.Time) *Failover {
	if cfg.UnreachableAfter <= 0 {
		cfg.UnreachableAfter = DefaultUnreachableAfter
	}
	if cfg.HomeHoldDown <= 0 {
		cfg.HomeHoldDown = DefaultHomeHoldDown
	}
	f := &Failover{cfg: cfg, downAt: now}
	if len(cfg.Nodes) == 0 {
		f.cur = -1
	}
	return f
}

// Current is the node the edge should be on: an index into Nodes, or -1.
func (f *Failover) Current() int { return f.cur }

// Step applies ev, observed at now, and returns where the edge should be.
func (f *Failover) Step(now time.Time, ev Event) Decision {
	if f.cur < 0 {
		return Decision{Node: -1}
	}
	switch ev {
	case Up:
		f.downAt = time.Time{}
	case Down:
		if f.downAt.IsZero() {
			f.downAt = now
		}
	case Refused:
		return f.move(now, (f.cur+1)%len(f.cfg.Nodes), "refused")
	case HomeUp:
		if f.cur != 0 && f.homeAt.IsZero() {
			f.homeAt = now
		}
	case HomeDown:
		f.homeAt = time.Time{}
	}
	if f.cur != 0 && !f.homeAt.IsZero() && now.Sub(f.homeAt) >= f.cfg.HomeHoldDown {
		return f.move(now, 0, "home")
	}
	if !f.downAt.IsZero() && now.Sub(f.downAt) >= f.cfg.UnreachableAfter && len(f.cfg.Nodes) > 1 {
		return f.move(now, (f.cur+1)%len(f.cfg.Nodes), "unreachable")
	}
	return Decision{Node: f.cur}
}

func (f *Failover) move(now time.Time, to int, why string) Decision {
	moved := to != f.cur
	f.cur, f.downAt, f.homeAt = to, now, time.Time{}
	if !moved {
		why = ""
	}
	return Decision{Node: to, Moved: moved, Reason: why}
}
