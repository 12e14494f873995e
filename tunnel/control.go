package tunnel

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/rules"
	"github.com/bondd/bondd/tunnel/ctrlmsg"
)

// The control stream. The edge opens one bidirectional QUIC stream on every
// connection and sends a ctrlmsg.Hello; the concentrator answers with a
// ctrlmsg.HelloReply and the stream then stays open for the control-plane
// messages the two negotiated (ctrl_edge.go, ctrl_conc.go). The messages,
// their framing and their checks are package ctrlmsg's.

// Bounds the tunnel shares with the control messages.
const (
	maxNameLen = ctrlmsg.MaxNameLen // bytes, edge id and path name
	maxPaths   = ctrlmsg.MaxPaths   // paths of one bond
)

// Application error codes used when closing a connection.
const (
	codeShutdown     = 0x100
	codeUnauthorized = 0x101
	codeProtocol     = 0x102
	codeReplaced     = 0x103 // the bond restarted with a new bond id
	// codeControlStalled closes a connection whose control stream took
	// part of a message and not the rest within twice ctrlWriteTimeout
	// (writeControl), or on the concentrator could not send a rule's
	// result.
	codeControlStalled = 0x108
)

// Errors of writeControl for a write that timed out.
var (
	// errControlBusy: nothing of the message went on the stream, which
	// is intact; the message is dropped (the edge's control writer then
	// moves to another carrier, the rate reports wait for the next
	// interval).
	errControlBusy = errors.New("control stream busy, message dropped")
	// errControlStalled: part of the message went on the stream and the
	// rest did not follow; the connection was closed.
	errControlStalled = errors.New("control stream stalled, connection closed")
)

// writeControl writes the control message v on str, a control stream of
// conn, waiting at most ctrlWriteTimeout; wmu serialises the stream's
// writers (the control plane's and the rate reports'). A write that times
// out before any of the message went on the stream drops it (the error
// wraps errControlBusy) and leaves the stream as it was. One that timed
// out part-way gets one more ctrlWriteTimeout for the rest: the peer
// cannot follow the stream's framing without it. If the rest does not
// go either, conn is closed with codeControlStalled before any other
// writer can add to the stream (errControlStalled), and the edge redials
// the path: a stalled control stream leaves no connection without its
// control plane and its rate reports. Any other error (a message that does
// not encode, wrapping ctrlmsg.ErrEncode; a stream or connection that
// ended) is returned as it is.
func writeControl(conn *quic.Conn, str *quic.Stream, wmu *sync.Mutex, v any) error {
	b, err := ctrlmsg.Encode(v)
	if err != nil {
		return err
	}
	wmu.Lock()
	defer wmu.Unlock()
	for sent, tries := 0, 0; ; tries++ {
		str.SetWriteDeadline(time.Now().Add(ctrlWriteTimeout))
		n, err := str.Write(b[sent:])
		str.SetWriteDeadline(time.Time{})
		sent += n
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, os.ErrDeadlineExceeded):
			return err
		case sent == 0:
			return fmt.Errorf("%w: %w", errControlBusy, err)
		case tries > 0:
			return closeStalled(conn, err)
		}
	}
}

// closeStalled closes conn with codeControlStalled for a control write
// that failed with err, and returns err wrapped in errControlStalled.
func closeStalled(conn *quic.Conn, err error) error {
	conn.CloseWithError(codeControlStalled, "control stream stalled")
	return fmt.Errorf("%w: %w", errControlStalled, err)
}

// logControlWrite logs a failed control write on path's stream: a
// stall that closed the connection as a warning, any other failure (a
// message dropped on a busy stream, the stream or the connection ended)
// for debugging.
func logControlWrite(log *slog.Logger, path string, err error) {
	if errors.Is(err, errControlStalled) {
		log.Warn("control stream stalled: connection closed", "path", path, "err", err)
		return
	}
	log.Debug("control write failed", "path", path, "err", err)
}

// ErrUnauthorized is recorded as a path's last error when the concentrator
// refused the edge's credentials. Redialling continues with backoff.
var ErrUnauthorized = errors.New("tunnel: concentrator refused the credentials")

// checkHello validates a hello received from the network: the codec's
// bounds, this build's wire version and lane 0: a path has one connection.
// An edge from before lanes were retired may still dial lanes 1..7 of an
// uplink; they are refused (their lane 0 carries the path), so that they
// do not replace each other's connection.
func checkHello(h *ctrlmsg.Hello) error { return h.Check(Version, helloLanes) }

// helloLanes is how many values of ctrlmsg.Hello.Lane a hello may carry:
// only 0, since a path has one QUIC connection.
const helloLanes = 1

// An edge rule's id fits rules.MaxKeyBytes once prefixed with
// edgeRulePrefix (a compile-time check).
const _ = uint(rules.MaxKeyBytes - len(edgeRulePrefix) - ctrlmsg.MaxRuleIDLen)

// readControl reads control messages from str, a stream that negotiated
// caps with the side peer, until one this side acts on: it counts every
// message in ctr, and skips and counts those of unknown type. It returns
// the parsed message; or a non-empty violation saying why the stream broke
// the protocol (the caller closes the connection); or err when the stream
// or the connection ended.
func readControl(str io.Reader, caps ctrlmsg.Caps, peer ctrlmsg.Side, ctr *ctrlCounters) (msg ctrlmsg.Message, violation string, err error) {
	for {
		typ, body, err := ctrlmsg.Read(str)
		if err != nil {
			if errors.Is(err, ctrlmsg.ErrBadMessage) {
				return nil, err.Error(), nil
			}
			return nil, "", err
		}
		ctr.received.Add(1)
		known, why := screenType(typ, caps, peer)
		switch {
		case why != "":
			return nil, why, nil
		case !known:
			ctr.unknown.Add(1)
			continue
		}
		if msg, err = ctrlmsg.Parse(typ, body); err != nil {
			return nil, err.Error(), nil
		}
		return msg, "", nil
	}
}

// screenType decides what the receiver of a control message of type typ
// does with it before parsing, on a stream that negotiated caps, when the
// peer is the side peer: known is false for a type this build does not
// know (skip it and count it); a non-empty violation says why the message
// breaks the protocol (a hello after the hello, a type not negotiated, or
// one the peer's side never sends), which closes the connection.
func screenType(typ string, caps ctrlmsg.Caps, peer ctrlmsg.Side) (known bool, violation string) {
	if typ == ctrlmsg.TypeHello || typ == ctrlmsg.TypeHelloReply {
		return true, typ + " after the hello"
	}
	info, ok := ctrlmsg.Lookup(typ)
	switch {
	case !ok:
		return false, ""
	case caps&info.Cap == 0:
		return true, typ + " was not negotiated"
	case info.From&peer == 0:
		side := "edge"
		if peer == ctrlmsg.FromConcentrator {
			side = "concentrator"
		}
		return true, typ + " sent by the " + side
	}
	return true, ""
}

// leoToWire is an uplink's LEO reconfiguration schedule as the hello
// carries it; nil for none.
func leoToWire(l *policy.LEOReconf) *ctrlmsg.LEOSchedule {
	if l == nil {
		return nil
	}
	ceilMs := func(d time.Duration) int { return int((d + time.Millisecond - 1) / time.Millisecond) } // 0.5 ms is not 0, the default
	w := &ctrlmsg.LEOSchedule{Seconds: l.Seconds, WindowMs: ceilMs(l.Window), HoldMs: ceilMs(l.Hold)}
	if l.Hold < 0 {
		w.HoldMs = -1
	}
	return w
}

// leoFromWire is the schedule of a hello (checked by Hello.Check) as the
// path's marker; nil for none.
func leoFromWire(w *ctrlmsg.LEOSchedule) *policy.LEOReconf {
	if w == nil {
		return nil
	}
	l := &policy.LEOReconf{Seconds: slices.Clone(w.Seconds), Window: time.Duration(w.WindowMs) * time.Millisecond,
		Hold: time.Duration(w.HoldMs) * time.Millisecond}
	if l.Validate() != nil {
		return nil // bounds Hello.Check does not know of
	}
	return l
}
