package classify

// Reason says why Parse could not read all of a packet. It is a per-packet
// outcome for a drop counter, never an error: Parse still fills every key it
// could read before the problem. ReasonNone (the zero value) means the
// packet parsed cleanly. The caller decides whether to drop; a packet from
// the TUN device normally has none of these problems.
type Reason uint8

// Reasons, in the order Parse meets them.
const (
	ReasonNone Reason = iota
	// ReasonShort: fewer bytes than the IP header needs (20 for IPv4, 40
	// for IPv6), or an empty packet.
	ReasonShort
	// ReasonVersion: the version nibble is neither 4 nor 6.
	ReasonVersion
	// ReasonHeader: an IPv4 IHL below 5 or past the packet's end, or a
	// total length below the header length.
	ReasonHeader
	// ReasonTruncated: the IP length field claims more bytes than the
	// packet has (a capture's snap length); parsing went on with what is
	// there.
	ReasonTruncated
	// ReasonExtHeader: an IPv6 extension header runs past the packet's end,
	// or more than MaxExtHeaders of them.
	ReasonExtHeader
	// ReasonTransport: the TCP/UDP/ICMP header is cut short.
	ReasonTransport

	numReasons
)

var reasonNames = [numReasons]string{"", "short", "version", "header", "truncated", "ext_header", "transport"}

// String returns a short lower-case name for use as a metric label ("" for
// ReasonNone).
func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return "unknown"
}
