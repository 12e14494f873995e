package tunnel

import "time"

// BondStats is a snapshot of one bond. Counters are totals since the bond
// was created, in packets unless named otherwise.
type BondStats struct {
	EdgeID     string        `json:"edge_id"`
	BondID     uint64        `json:"bond_id"`
	Uptime     time.Duration `json:"uptime_ns"` // since creation or the edge's last restart
	MTU        int           `json:"mtu"`       // inner MTU, bytes
	TxPackets  uint64        `json:"tx_packets"`
	RxPackets  uint64        `json:"rx_packets"` // delivered to the TUN
	ICMPSent   uint64        `json:"icmp_sent"`  // "fragmentation needed" / "packet too big" replies
	MSSClamped uint64        `json:"mss_clamped"`
	Drops      BondDrops     `json:"drops"`
	FEC        *FECStats     `json:"fec"`
	Rules      *RuleStats    `json:"rules,omitempty"` // rule hits on the send path
	Paths      []PathStats   `json:"paths"`
}

// BondDrops counts packets a bond dropped, by reason.
type BondDrops struct {
	NoPath      uint64 `json:"no_path"`     // no path could take the packet
	Oversize    uint64 `json:"oversize"`    // longer than the MTU (answered with ICMP when allowed)
	BadHeader   uint64 `json:"bad_header"`  // datagram with a malformed bondd header
	Duplicate   uint64 `json:"duplicate"`   // sequence number seen before
	TooOld      uint64 `json:"too_old"`     // sequence number behind the duplicate window
	Spoofed     uint64 `json:"spoofed"`     // inner source outside the edge's allowed prefixes
	Malformed   uint64 `json:"malformed"`   // inner packet is not a valid IPv4/IPv6 packet
	Unsupported uint64 `json:"unsupported"` // datagram type this build does not handle
	TUNWrite    uint64 `json:"tun_write"`   // the TUN refused the packet
	LinkLocal   uint64 `json:"link_local"`  // link-local or link-scope multicast destination: not routed through the tunnel
}

// PathStats is a snapshot of one path.
type PathStats struct {
	Name             string            `json:"name"`
	Labels           map[string]string `json:"labels,omitempty"`
	Status           string            `json:"status"` // ACTIVE, DEGRADED or UNAVAILABLE
	SmoothedRTT      time.Duration     `json:"srtt_ns"`
	MinRTT           time.Duration     `json:"min_rtt_ns"`
	CongestionWindow int               `json:"cwnd_bytes"`
	BytesInFlight    int               `json:"bytes_in_flight"`
	PacketsSent      uint64            `json:"packets_sent"` // QUIC packets sent
	PacketsLost      uint64            `json:"packets_lost"` // QUIC packets declared lost (RFC 9002)
	QueueLen         int               `json:"queue_len"`
	TxPackets        uint64            `json:"tx_packets"`
	TxBytes          uint64            `json:"tx_bytes"`
	RxPackets        uint64            `json:"rx_packets"`
	RxBytes          uint64            `json:"rx_bytes"`
	Drops            PathDrops         `json:"drops"`
	Rescued          uint64            `json:"rescued"` // queued frames moved to other paths when this one failed
	// Conn is the current QUIC connection's own counters (quic-go
	// ConnectionStats); nil while the path is down.
	Conn      *ConnStats `json:"conn,omitempty"`
	LastError string     `json:"last_error,omitempty"`
}

// PathDrops counts datagrams a path dropped, by reason.
type PathDrops struct {
	QueueFull        uint64 `json:"queue_full"`         // oldest dropped from a full send queue
	Expired          uint64 `json:"expired"`            // waited longer than MaxQueueDelay
	TooLarge         uint64 `json:"too_large"`          // above the connection's datagram size limit
	SendError        uint64 `json:"send_error"`         // SendDatagram failed (connection closing)
	ReceiveQueueFull uint64 `json:"receive_queue_full"` // dropped inside quic-go's receive queue
}

// ConnStats are one QUIC connection's counters, from quic-go's
// ConnectionStats: since the connection was established, in bytes and QUIC
// packets (not bondd datagrams).
type ConnStats struct {
	LatestRTT     time.Duration `json:"latest_rtt_ns"`
	MeanDeviation time.Duration `json:"rtt_mean_deviation_ns"`
	BytesSent     uint64        `json:"bytes_sent"`
	PacketsSent   uint64        `json:"packets_sent"`
	BytesLost     uint64        `json:"bytes_lost"`
	PacketsLost   uint64        `json:"packets_lost"`
	BytesReceived uint64        `json:"bytes_received"`
}
