// Package ctrlmsg is the codec of bondd's control stream: the hello that
// opens it on every path connection and the control-plane messages that
// follow (MoMQ appendix A.2, Table 5). It encodes, decodes and checks
// messages; what a message does is the tunnel package's business
// (tunnel/ctrl_edge.go, tunnel/ctrl_conc.go).
//
// Framing: each message is a 2-byte big-endian length followed by that many
// bytes (at most MaxMessageLen) of one JSON object with a "type" field
// (Write, Read). The edge opens one bidirectional QUIC stream per
// connection, sends a Hello and reads a HelloReply; the stream then carries
// the message types both negotiated through the capability lists of the
// hello and its reply (Caps; MoMQ's ENABLE_MOMQ setup parameter, split per
// message family).
//
// Every field a peer sends is checked by the parse function of its type
// (Parse): a message that fails is a protocol violation, and the error
// wraps ErrBadMessage. Unknown JSON fields are ignored, so a newer peer may
// add fields; a type this build does not know is for the caller to skip
// (Lookup reports it unknown). A parsed message marshals back
// (json.Marshal) to bytes that parse to the same message.
//
// Adding a message type: a Type* constant, its struct with a MessageType
// method, its Parse* function, and one line in the types table of
// messages.go that names the capability it needs and the side that sends
// it; a new capability adds a Cap* constant and one line in capNames.
package ctrlmsg

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Limits on control messages, checked on receipt.
const (
	MaxMessageLen = 16 << 10 // bytes of one message's JSON body
	MaxLabels     = 32       // labels of one path
	MaxLabelKey   = 128      // bytes of a label key
	MaxLabelValue = 1024     // bytes of a label value
	MaxNameLen    = 64       // bytes of an edge id or a path name
	MaxPaths      = 16       // paths of one state report (and of one bond)
	MaxCaps       = 8        // entries of a capability list
	MaxCapLen     = 32       // bytes of one capability name
)

// ErrBadMessage is wrapped by every error that is the peer's fault: a
// length over MaxMessageLen, a body that is not a JSON object, a message
// that fails its checks. Read returns other errors for the stream's own
// failures.
var ErrBadMessage = errors.New("control message")

func badf(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrBadMessage, fmt.Sprintf(format, a...))
}

// ErrEncode is wrapped by Write's errors for a message it did not write
// at all: v does not marshal, or its body exceeds MaxMessageLen.
var ErrEncode = errors.New("control message not encoded")

// Encode returns v (a Hello, HelloReply or Message) framed as one
// message: a 2-byte length and the JSON body. Its error wraps ErrEncode
// when v does not marshal or its body exceeds MaxMessageLen.
func Encode(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrEncode, err)
	}
	if len(b) > MaxMessageLen {
		return nil, fmt.Errorf("%w: %d bytes exceeds %d", ErrEncode, len(b), MaxMessageLen)
	}
	out := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(b)), uint16(len(b)))
	return append(out, b...), nil
}

// Write writes v, framed by Encode, to w in one call. It returns Encode's
// error (nothing is written) or the write's.
func Write(w io.Writer, v any) error {
	b, err := Encode(v)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// Read reads one framed message from r and returns its type field and its
// body, a new slice the caller owns. An error that wraps ErrBadMessage is
// the peer's fault (a length over MaxMessageLen, a body that is not a JSON
// object); any other is the stream's.
func Read(r io.Reader) (typ string, body []byte, err error) {
	var l [2]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return "", nil, err
	}
	n := int(binary.BigEndian.Uint16(l[:]))
	if n > MaxMessageLen {
		return "", nil, fmt.Errorf("%w of %d bytes exceeds %d", ErrBadMessage, n, MaxMessageLen)
	}
	body = make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return "", nil, err
	}
	var t struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(body, &t); err != nil {
		return "", nil, fmt.Errorf("%w: %v", ErrBadMessage, err)
	}
	return t.Type, body, nil
}
