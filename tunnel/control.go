package tunnel

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Control-stream messages. The edge opens one bidirectional QUIC stream on
// every connection and sends a hello; the concentrator answers with a
// helloReply and the stream then stays open for later control messages.
// Each message is a 2-byte big-endian length followed by that many bytes of
// JSON with a "type" field. A receiver skips message types it does not know.
// The control plane's messages (ctrl_msg.go) follow the hello on the same
// stream, when the hello and its reply negotiated them.

// Limits on control messages, checked on receipt.
const (
	maxControlMsg = 16 << 10 // bytes
	maxLabels     = 32
	maxLabelKey   = 128  // bytes
	maxLabelValue = 1024 // bytes
	maxNameLen    = 64   // bytes, edge id and path name
)

const (
	msgHello      = "hello"
	msgHelloReply = "hello_reply"
)

// hello announces one path of an edge's bond.
type hello struct {
	Type    string `json:"type"`
	Version int    `json:"version"`
	EdgeID  string `json:"edge_id"`
	BondID  uint64 `json:"bond_id"` // random per edge start; a new id restarts the sequence space
	Path    string `json:"path"`
	// Lane is which of the uplink's QUIC connections this is, 0..MaxLanes-1
	// (see lanes.go); the connections of one uplink form one path.
	Lane   int               `json:"lane,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	Token  []byte            `json:"token,omitempty"`
	// Control lists the control-plane capabilities the edge offers
	// (ctrl_msg.go: path_state, path_labels, path_mapping; MoMQ A.2
	// ENABLE_MOMQ). Unknown names are ignored. At most maxCaps entries of
	// maxCapLen bytes.
	Control []string `json:"control,omitempty"`
}

// helloReply accepts or refuses a path. A refusal does not say why.
type helloReply struct {
	Type  string `json:"type"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	MTU   int    `json:"mtu,omitempty"` // the concentrator's TUN MTU, bytes
	// Control lists the capabilities of hello.Control the concentrator
	// accepts on this connection; a control message of any other is a
	// protocol violation that closes the connection.
	Control []string `json:"control,omitempty"`
}

// Application error codes used when closing a connection.
const (
	codeShutdown     = 0x100
	codeUnauthorized = 0x101
	codeProtocol     = 0x102
	codeReplaced     = 0x103 // the bond restarted with a new bond id
)

// ErrUnauthorized is recorded as a path's last error when the concentrator
// refused the edge's credentials. Redialling continues with backoff.
var ErrUnauthorized = errors.New("tunnel: concentrator refused the credentials")

func writeMsg(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(b) > maxControlMsg {
		return fmt.Errorf("control message of %d bytes exceeds %d", len(b), maxControlMsg)
	}
	out := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(b)), uint16(len(b)))
	_, err = w.Write(append(out, b...))
	return err
}

// readMsg reads one message into a buffer and returns its type and bytes.
// An error that wraps errControl is the peer's fault (a length over
// maxControlMsg, a body that is not a JSON object); any other is the
// stream's.
func readMsg(r io.Reader) (typ string, body []byte, err error) {
	var l [2]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return "", nil, err
	}
	n := int(binary.BigEndian.Uint16(l[:]))
	if n > maxControlMsg {
		return "", nil, fmt.Errorf("%w of %d bytes exceeds %d", errControl, n, maxControlMsg)
	}
	body = make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return "", nil, err
	}
	var t struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(body, &t); err != nil {
		return "", nil, fmt.Errorf("%w: %v", errControl, err)
	}
	return t.Type, body, nil
}

// check validates the fields of a hello received from the network.
func (h *hello) check() error {
	switch {
	case h.Version != Version:
		return fmt.Errorf("hello version %d, want %d", h.Version, Version)
	case h.EdgeID == "" || len(h.EdgeID) > maxNameLen:
		return errors.New("hello: bad edge id")
	case h.Path == "" || len(h.Path) > maxNameLen:
		return errors.New("hello: bad path name")
	case h.Lane < 0 || h.Lane >= MaxLanes:
		return fmt.Errorf("hello: lane %d outside 0..%d", h.Lane, MaxLanes-1)
	case len(h.Labels) > maxLabels:
		return fmt.Errorf("hello: %d labels, at most %d", len(h.Labels), maxLabels)
	case len(h.Control) > maxCaps:
		return fmt.Errorf("hello: %d capabilities, at most %d", len(h.Control), maxCaps)
	}
	for _, c := range h.Control {
		if c == "" || len(c) > maxCapLen {
			return errors.New("hello: capability empty or too long")
		}
	}
	for k, v := range h.Labels {
		if k == "" || len(k) > maxLabelKey || len(v) > maxLabelValue {
			return errors.New("hello: label key or value out of bounds")
		}
	}
	return nil
}
