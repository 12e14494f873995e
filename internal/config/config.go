// Package config reads the daemon config file of `bondd run --config FILE`.
//
// Loading runs four steps, and every step reports all the problems it finds
// rather than the first one:
//
//  1. decode: YAML → yaml.Node → Config, keeping the line of every field;
//     unknown keys, wrong kinds and unparsable values are errors;
//  2. paths: relative file paths are resolved against the config file's
//     directory;
//  3. Defaults: zero values are replaced by the Default* constants;
//  4. Validate: required fields, ranges, uniqueness, overlaps and
//     cross-field rules; then the referenced files are checked.
//
// The user-facing reference for this format is docs/config.md; keep the two
// in step (TestConfigDoc checks the keys and examples).
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/bondd/bondd/classify"
	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/tunnel"
)

// Roles, the values of the role key.
const (
	RoleEdge         = "edge"
	RoleConcentrator = "concentrator"
)

// Defaults applied by (*Config).Defaults to fields left at their zero value.
const (
	DefaultLogLevel  = "info"
	DefaultLogFormat = "text"
	DefaultTUNName   = "bondd0"
	// The paths' defaults are the tunnel's (tunnel.PathOptions).
	DefaultQueuePackets           = tunnel.DefaultQueuePackets
	DefaultKeepalive              = tunnel.DefaultKeepalive
	DefaultIdleKeepalive          = tunnel.DefaultIdleKeepalive
	DefaultIdleTimeout            = tunnel.DefaultIdleTimeout
	DefaultRedialMin              = tunnel.DefaultRedialMin
	DefaultRedialMax              = tunnel.DefaultRedialMax
	DefaultInitialPacketSizeBytes = tunnel.DefaultInitialPacketSize
	DefaultRateControl            = tunnel.RateControlBondd
	// DefaultMaxQueueDelay is how long a packet may wait in a path's send
	// queue before it is dropped rather than sent late.
	DefaultMaxQueueDelay = tunnel.DefaultMaxQueueDelay
)

// Limits enforced by (*Config).Validate.
const (
	// MinMTUBytes is the smallest TUN MTU accepted: the IPv4 minimum
	// datagram every host must accept (RFC 791).
	MinMTUBytes = 576
	// MinMTUIPv6Bytes is the smallest TUN MTU accepted when the tunnel
	// carries IPv6: the IPv6 minimum link MTU (RFC 8200 §5).
	MinMTUIPv6Bytes = 1280
	// MaxMTUBytes is the largest TUN MTU accepted (jumbo frames).
	MaxMTUBytes = 9000
	// MaxIfNameBytes is the longest interface name Linux accepts
	// (IFNAMSIZ - 1).
	MaxIfNameBytes = 15
	// MaxUplinks is the largest number of uplinks of one edge: the
	// tunnel's paths per bond.
	MaxUplinks = tunnel.MaxPaths
	// MaxEdgeIDBytes and MaxUplinkNameBytes bound edge ids and uplink
	// names: the tunnel's name limit, since both travel in its hello and
	// control messages.
	MaxEdgeIDBytes     = tunnel.MaxNameBytes
	MaxUplinkNameBytes = tunnel.MaxNameBytes
	// MaxLabelKeyBytes and MaxLabelValueBytes bound path labels: the
	// control plane's limits (tunnel), which the rule language shares
	// since rules match labels.
	MaxLabelKeyBytes   = tunnel.MaxLabelKeyBytes
	MaxLabelValueBytes = tunnel.MaxLabelValueBytes
	// MaxCertCNBytes is the X.509 upper bound of a CommonName (RFC 5280
	// ub-common-name).
	MaxCertCNBytes = 64
	// MinTokenBytes and MaxTokenBytes bound a token after trimming.
	MinTokenBytes = 16
	MaxTokenBytes = 4096
	// MaxQueuePackets bounds paths.queue_packets.
	MaxQueuePackets = 65536
	// MaxIdleKeepalive bounds paths.idle_keepalive.
	MaxIdleKeepalive = tunnel.MaxIdleKeepalive
	// MinInitialPacketSizeBytes and MaxInitialPacketSizeBytes bound
	// paths.initial_packet_size_bytes: 1200 is the QUIC minimum (RFC 9000
	// §14.1), 1452 fills a 1500-byte IPv4 path.
	MinInitialPacketSizeBytes = 1200
	MaxInitialPacketSizeBytes = 1452
	// maxConfigFileBytes bounds what Load reads.
	maxConfigFileBytes = 1 << 20
)

// Config is the daemon configuration, one YAML file per daemon.
//
// Build it with Load or Parse, which decode, apply Defaults and
// Validate, and check referenced files. A Config built in Go should call
// Defaults and then Validate; its errors then carry no file or line.
//
// Zero values mean "default" wherever a default is documented. A Config is
// not modified after loading and may be read from several goroutines.
type Config struct {
	// Role is RoleEdge or RoleConcentrator. Required.
	Role string
	// LogLevel is debug, info, warn or error. Default DefaultLogLevel.
	LogLevel string
	// LogFormat is text or json (log/slog handlers). Default
	// DefaultLogFormat.
	LogFormat string
	// MetricsListen is the TCP host:port (or :port) on which the daemon
	// serves Prometheus metrics at /metrics. Optional; empty: no metrics
	// endpoint.
	MetricsListen string
	// QlogDir is a directory where quic-go writes the qlog of every path
	// connection (tunnel.PathOptions.QlogDir), for debugging; it is
	// created at start if missing. Optional; empty: no qlog.
	QlogDir string
	// StateDir is the directory of the daemon's state, its usage store
	// (usage.db, internal/usage). Default DefaultStateDir.
	StateDir string
	// StateFlush is how often the usage counters are written to the
	// store, 100ms to 10s (a SIGKILL loses at most this much counting).
	// Default usage.DefaultFlush (10s).
	StateFlush time.Duration
	// UsageRetentionMonths is how long the hourly usage history is kept,
	// 1 to usage.MaxRetentionMonths. Default usage.DefaultRetentionMonths
	// (13).
	UsageRetentionMonths int
	// TUN configures the tunnel device. Required (addresses).
	TUN TUNConfig
	// Edge is set when Role is RoleEdge, and must be nil otherwise.
	Edge *EdgeConfig
	// Concentrator is set when Role is RoleConcentrator, and must be nil
	// otherwise.
	Concentrator *ConcentratorConfig
	// Paths tunes every path (uplink connection). Optional.
	Paths PathsConfig
	// FEC configures forward error correction of what this end sends.
	// Optional; default adaptive.
	FEC FECConfig
	// Rules is the rule file (docs/rules.md), reloaded on change and on
	// SIGHUP. Optional; without it no rule applies.
	Rules string
	// Scheduler picks the path of each packet: rules (default: the rule
	// set plus the default choice), roundrobin, minrtt, blest or redundant
	// (baselines for comparison, policy.Schedulers).
	Scheduler string
	// Classify configures the packet classifier: how RTP is found and the
	// traffic classes. Optional, both roles.
	Classify ClassifyConfig
	// Web configures the read-only status page (key web). Default: on
	// DefaultWebListen.
	Web WebConfig

	// src records where the config came from; nil for a Config built in Go.
	src *configSource
	// warnings are the decoder's (Warnings).
	warnings Errors
}

// Warnings returns what the file says that bondd accepts but ignores —
// a retired key, such as an uplink's lanes — one *Error per occurrence,
// with file, line and the reason, sorted by line. The config runs as if
// the key were absent. nil for a Config built in Go, or when there is
// nothing to say.
func (c *Config) Warnings() Errors { return c.warnings }

// TUNConfig configures the TUN device (key tun).
type TUNConfig struct {
	// Name is the interface name, at most MaxIfNameBytes bytes. Default
	// DefaultTUNName.
	Name string
	// Addresses are the inner addresses of this end, each with its prefix
	// length (10.77.0.2/24). Required, at least one.
	Addresses []netip.Prefix
	// MTU is the device MTU in bytes, MinMTUBytes to MaxMTUBytes, and at
	// least MinMTUIPv6Bytes when the tunnel carries IPv6. 0 (YAML "auto",
	// the default) derives it from the paths at run time.
	MTU int
	// Routes are the prefixes routed into the tunnel, host bits zero.
	// Optional.
	Routes []netip.Prefix
}

// EdgeConfig configures an edge (key edge).
type EdgeConfig struct {
	// ID names this edge to the concentrator, 1 to MaxEdgeIDBytes bytes of
	// [A-Za-z0-9._-]. Required.
	ID string
	// Concentrator is the concentrator's host:port; the host may be a DNS
	// name or an IP address. Required. With several nodes (YAML: a list)
	// it is the first of them.
	Concentrator string
	// Concentrators are the fleet's nodes, host:port each, when YAML
	// gives a list (nil for one address). A single DNS name with several addresses is
	// several nodes too, resolved when the edge starts. The edge orders
	// them by rendezvous hashing on its id (fleet.Order). ServerName
	// defaults to the first node's host: with several, give the name in
	// every node's certificate, or pin it (ServerCertSHA256).
	Concentrators []string
	// Failover tunes the moves between nodes (key edge.failover).
	Failover FailoverConfig
	// ServerName is the TLS server name checked against the concentrator's
	// certificate. Default: the host part of Concentrator.
	ServerName string
	// CAFile is a PEM file of the CA that signed the concentrator's
	// certificate. At least one of CAFile and ServerCertSHA256 is required;
	// with both, the certificate must chain to the CA and match the pin.
	CAFile string
	// ServerCertSHA256 pins the concentrator's certificate: the SHA-256 of
	// its DER encoding, 32 bytes.
	ServerCertSHA256 []byte
	// TokenFile holds this edge's token (see LoadToken). Exactly one of
	// TokenFile and CertFile+KeyFile is required.
	TokenFile string
	// CertFile and KeyFile are the PEM client certificate and key for
	// mutual TLS; both or neither.
	CertFile string
	KeyFile  string
	// Uplinks are the paths of the bond, 1 to MaxUplinks, names unique.
	// Required.
	Uplinks []UplinkConfig
	// DownlinkRules is a rule file (docs/rules.md) for the concentrator's
	// traffic to this edge. The edge installs its rules in its session on
	// the concentrator over the control plane (PATH_MAPPING_RULE; the
	// concentrator must allow it), and again after each change of the
	// file. Optional.
	DownlinkRules string
}

// UplinkConfig is one uplink of an edge (an item of edge.uplinks).
type UplinkConfig struct {
	// Name identifies the uplink in logs, status and the hello, 1 to
	// MaxUplinkNameBytes bytes of [A-Za-z0-9._-], unique. Required.
	Name string
	// Bind is the local source address of the uplink's socket; the zero
	// Addr means unset. At least one of Bind and Interface is required.
	Bind netip.Addr
	// Interface binds the socket to a device (SO_BINDTODEVICE), at most
	// MaxIfNameBytes bytes. It need not exist at load time.
	Interface string
	// Labels describe the path to the rules (cost_class, link_type, ...).
	// Keys and values are non-empty, keys at most MaxLabelKeyBytes bytes,
	// values at most MaxLabelValueBytes bytes. Optional.
	Labels map[string]string
	// Remote is the concentrator host:port this uplink dials instead of
	// edge.concentrator, for a concentrator with one public address per
	// carrier (or a link emulator in front of it). Optional.
	Remote string
	// LEOReconf marks a LEO satellite uplink with its reconfiguration
	// schedule (YAML leo_reconf: true for Starlink's seconds 12, 27, 42
	// and 57 of each UTC minute, ±100 ms; or {seconds: [...], window_ms:
	// N, hold_ms: N}): inside a danger zone the rules see
	// leo_state=reconf, and from 10 ms before each second to hold_ms
	// (default 100, 0: none) after it the uplink holds its queued
	// frames. nil: none. Optional.
	LEOReconf *policy.LEOReconf
	// Budget is the uplink's byte budget per UTC day, week or month (YAML
	// budget: 2GB/month); at 90 % the path is DEGRADED for traffic no rule
	// prefers it for. The zero value: none. Optional. Its ResetDay is
	// YAML budget_reset_day (1 to 28): a monthly budget renews on that
	// day at 00:00 UTC instead of the 1st.
	Budget policy.Budget
	// BudgetDirection is which wire bytes count against Budget: up, down
	// or both (YAML budget_direction). Default both.
	BudgetDirection string
}

// ConcentratorConfig configures a concentrator (key concentrator).
type ConcentratorConfig struct {
	// Listen is the UDP ip:port (or :port) QUIC listens on. Required.
	Listen string
	// CertFile and KeyFile are the concentrator's PEM certificate and key.
	// Required.
	CertFile string
	KeyFile  string
	// ClientCAFile is the PEM file of the CA that signs edge client
	// certificates. Required when any edge has CertCN.
	ClientCAFile string
	// Edges are the edges accepted, at least one, ids unique.
	Edges []EdgeEntry
	// BGP, when set, runs a BGP speaker that announces the allowed
	// prefixes of each edge whose bond is up here (key concentrator.bgp,
	// docs/operations.md "Running a fleet"). Optional.
	BGP *BGPConfig
	// Handshakes bounds the new path connections the node takes on (key
	// concentrator.handshakes, handshakes.go). Optional; nil: defaults.
	Handshakes *HandshakesConfig
}

// EdgeEntry is one edge a concentrator accepts (an item of
// concentrator.edges).
type EdgeEntry struct {
	// ID is the edge's id, as in its EdgeConfig.ID. Required, unique.
	ID string
	// TokenFile holds the token the edge presents (see LoadToken). Exactly
	// one of TokenFile and CertCN is required.
	TokenFile string
	// CertCN is the CommonName the edge's client certificate must carry,
	// at most MaxCertCNBytes bytes, unique.
	CertCN string
	// AllowedPrefixes are the inner source prefixes the edge may use, host
	// bits zero; downlink packets to them go to this edge. Prefixes of
	// different edges must not overlap. Required, at least one.
	AllowedPrefixes []netip.Prefix
	// AllowEdgeRules lets the edge install downlink rules for its own
	// session (edge.downlink_rules, sent as PATH_MAPPING_RULE). Default
	// false: the concentrator answers NOT_AUTHORIZED.
	AllowEdgeRules bool
	// PolicyLabelKeys are path label keys, besides cost_class, whose values
	// the edge's label updates may not change. Optional.
	PolicyLabelKeys []string
}

// PathsConfig tunes every path of a bond (key paths). All fields are
// optional.
type PathsConfig struct {
	// QueuePackets bounds each path's send queue, in packets, 1 to
	// MaxQueuePackets. Default DefaultQueuePackets.
	QueuePackets int
	// Keepalive is how long the edge lets a path of a bond that carries
	// traffic go unheard before it sends a keepalive, shorter than
	// IdleTimeout. Default DefaultKeepalive.
	Keepalive time.Duration
	// IdleKeepalive is the same for an idle bond (no data for 5 s):
	// just often enough for NAT bindings; from Keepalive to 10 minutes.
	// Default DefaultIdleKeepalive.
	IdleKeepalive time.Duration
	// IdleTimeout is the silence, beyond the keepalive expected, after
	// which a path is declared dead. Default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// RedialMin is the first redial backoff of a dead path; it doubles up
	// to RedialMax. Defaults DefaultRedialMin and DefaultRedialMax.
	RedialMin time.Duration
	RedialMax time.Duration
	// MaxQueueDelay is the longest a packet waits in a path's send queue;
	// an older one is dropped, not sent. Default DefaultMaxQueueDelay.
	MaxQueueDelay time.Duration
	// SuspectRTTs and SuspectMin bound the silence after a send that makes
	// a path SUSPECT: max(SuspectRTTs × srtt, SuspectMin) (tunnel
	// PathOptions; docs/operations.md "Path liveness"). SuspectRTTs 1 to
	// 100, default 3; SuspectMin at least 10ms, default 100ms.
	SuspectRTTs float64
	SuspectMin  time.Duration
	// DeadAfter is the silence after which a SUSPECT path's connections
	// are closed and redialled; above SuspectMin, at most IdleTimeout.
	// Default tunnel.DefaultDeadAfter, or IdleTimeout when that is shorter.
	DeadAfter time.Duration
	// StaleAfter is the age, against the path's one-way-delay baseline,
	// past which a received datagram is dropped (drop reason stale); at
	// least MaxQueueDelay. Default tunnel.DefaultStaleAfter.
	StaleAfter time.Duration
	// InitialPacketSizeBytes is quic.Config.InitialPacketSize, in bytes,
	// MinInitialPacketSizeBytes to MaxInitialPacketSizeBytes. Default
	// DefaultInitialPacketSizeBytes.
	InitialPacketSizeBytes int
	// RateControl is who decides each path's sending rate, bond-wide for
	// what this end sends: "bondd" (DefaultRateControl; bondd's
	// controller inside quic-go: a per-path rate estimator fed by the
	// receiver's reports, a window of twice its BDP, and pacing) or "quic"
	// (quic-go's own NewReno, the measured baseline, with the receiver's
	// reports acting on path status and choice only;
	// tunnel.PathOptions.RateControl).
	RateControl string
	// PMTUOff turns off path MTU discovery and black-hole detection (YAML
	// pmtu_discovery: false; default on; tunnel.PathOptions.PMTUOff).
	PMTUOff bool
	// RetransmitOff turns off the retransmission of data datagrams a path
	// lost (YAML retransmit: false; default on;
	// tunnel.PathOptions.RetransmitOff).
	RetransmitOff bool
	// PMTURaise is how often a path whose datagram budget fell probes the
	// full size again (YAML pmtu_raise), up to 10m. Default
	// policy.DefaultPMTURaise (2s).
	PMTURaise time.Duration
}

// FECConfig configures forward error correction on what this end sends (key
// fec). The zero value is adaptive FEC with k = 20, α = 2 and a 30 ms block
// budget.
type FECConfig struct {
	// Mode is adaptive (default), fixed or off.
	Mode string
	// K is the data packets per block, 1 to 64. Default 20.
	K int
	// Alpha is adaptive FEC's safety factor α, above 0 and at most 10.
	// Default 2.
	Alpha float64
	// Ratio is fixed FEC's parity packets per data packet, in (0, 1];
	// required with mode fixed, refused otherwise.
	Ratio float64
	// Budget is the longest a block stays open, 1ms to 1s. Default 30ms.
	Budget time.Duration
	// VideoResidual is adaptive FEC's bound on the probability that a
	// block holding a video packet cannot be rebuilt, in (0, 1]; 1 gives
	// video α's parity alone. Default 0.0001
	// (tunnel.DefaultVideoResidual).
	VideoResidual float64
	// Placement is where a block's packets go: "" (through the
	// scheduler), rate, earliest or rate+earliest
	// (tunnel.FECOptions.Placement).
	Placement string
}

// TunnelVideoResidual returns VideoResidual as tunnel.FECOptions takes it:
// 0 for the default, −1 for 1 (no parity beyond α's).
func (f *FECConfig) TunnelVideoResidual() float64 {
	if f.VideoResidual >= 1 {
		return -1
	}
	return f.VideoResidual
}

func (f *FECConfig) validate(v *configValidator) {
	switch f.Mode {
	case "", "adaptive", "off":
		if f.Ratio != 0 {
			v.errorf("fec.ratio", "only allowed with mode fixed")
		}
	case "fixed":
		if f.Ratio <= 0 || f.Ratio > 1 {
			v.errorf("fec.ratio", "expected a number of parity packets per data packet above 0 and at most 1, got %v", f.Ratio)
		}
	default:
		v.errorf("fec.mode", "expected adaptive, fixed or off, got %q", f.Mode)
	}
	if f.K < 0 || f.K > 64 {
		v.errorf("fec.k", "expected an integer from 1 to 64 data packets, got %d", f.K)
	}
	if f.Alpha < 0 || f.Alpha > 10 {
		v.errorf("fec.alpha", "expected a number above 0 and at most 10, got %v", f.Alpha)
	}
	if f.VideoResidual < 0 || f.VideoResidual > 1 {
		v.errorf("fec.video_residual", "expected a probability above 0 and at most 1, got %v", f.VideoResidual)
	}
	if f.Budget < 0 || f.Budget > time.Second || f.Budget > 0 && f.Budget < time.Millisecond {
		v.errorf("fec.budget", "expected a duration from 1ms to 1s, got %s", f.Budget)
	}
	switch f.Placement {
	case "", "rate", "earliest", "rate+earliest":
	default:
		v.errorf("fec.placement", "expected rate, earliest or rate+earliest, got %q", f.Placement)
	}
}

// ClassifyConfig configures the packet classifier of every bond (key
// classify). The zero value is valid: RTP is found by the heuristic alone
// and no traffic class is set. Options turns it into classify.Options.
type ClassifyConfig struct {
	// RTPPorts are UDP port ranges (source or destination port) whose
	// payloads are RTP from the first packet, with no probation. Optional;
	// at most classify.MaxRTPPortRanges ranges, each with Lo ≤ Hi, none
	// overlapping another.
	RTPPorts []classify.PortRange
	// PayloadTypes maps RTP payload types, 0–127 except 72–76 (which RTCP
	// packet types alias, RFC 5761 §4), to their codecs, as the senders'
	// SDP a=rtpmap lines say. classify.CodecUnknown (YAML "auto") means
	// "RTP; learn the codec from the payload". Optional.
	PayloadTypes map[uint8]classify.Codec
	// SDP is an SDP file, like the one the encoder writes (ffmpeg
	// -sdp_file), whose a=rtpmap lines add the payload types PayloadTypes
	// does not set (classify.LoadSDP); relative to the config file.
	// Optional; errors name the SDP file's line.
	SDP string
	// NoRTPHeuristic turns off finding RTP on UDP that matches neither
	// RTPPorts nor PayloadTypes (YAML rtp_heuristic: false). Default false:
	// the heuristic is on.
	NoRTPHeuristic bool
	// Classes are the traffic classes; the first whose match holds sets
	// class and its labels. Optional; at most classify.MaxClasses, names
	// unique, and the other bounds of classify.NewClassSet.
	Classes []classify.Class

	// src records where the section came from, so that Options can name
	// the line of a class it cannot compile; nil when built in Go.
	src *configSource
}

// Error is one problem in a config file. It is returned inside
// Errors.
type Error struct {
	// File is the config file name as given to Load or Parse;
	// empty for a Config built in Go.
	File string
	// Line is the 1-based line of the field, or of the enclosing field
	// when the field is missing; 0 when unknown.
	Line int
	// Field is the dotted path of the field, like edge.uplinks[1].bind;
	// empty when the problem is not about one field (YAML syntax).
	Field string
	// Msg says what is wrong and what is expected.
	Msg string
}

// Error formats e as file:line: field: msg, leaving out empty parts.
func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", e.File, e.Line)
	case e.File != "":
		fmt.Fprintf(&b, "%s: ", e.File)
	case e.Line > 0:
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in a config file, sorted by line. It
// is the error type of Load, Parse and (*Config).Validate.
type Errors []*Error

// Error returns one problem per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the problems, so that errors.As finds a *Error.
func (es Errors) Unwrap() []error {
	errs := make([]error, len(es))
	for i, e := range es {
		errs[i] = e
	}
	return errs
}

func (es Errors) sort() {
	sort.SliceStable(es, func(i, j int) bool { return es[i].Line < es[j].Line })
}

// Load reads, decodes, defaults and validates the config file at path
// and checks the files it refers to. Relative paths in the file are resolved
// against the file's directory. The error, if any, is Errors.
func Load(path string) (*Config, error) {
	return LoadWith(path, Options{})
}

// LoadWith is Load with options: `bondd classify --config` reads only the
// classify section, so it skips the checks of referenced files (credentials
// that live on the daemon's machine). The error, if any, is Errors.
func LoadWith(path string, opts Options) (*Config, error) {
	fail := func(format string, args ...any) (*Config, error) {
		return nil, Errors{{File: path, Msg: fmt.Sprintf(format, args...)}}
	}
	f, err := os.Open(path)
	if err != nil {
		return fail("cannot read the config file: %v", pathErrCause(err))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigFileBytes+1))
	if err != nil {
		return fail("cannot read the config file: %v", pathErrCause(err))
	}
	if len(data) > maxConfigFileBytes {
		return fail("config file is larger than %d bytes; expected a small YAML file", maxConfigFileBytes)
	}
	return ParseWith(path, data, opts)
}

// Parse is Load for a file already in memory: name is used in
// errors and its directory resolves relative paths.
func Parse(name string, data []byte) (*Config, error) {
	return ParseWith(name, data, Options{})
}

// Options change how LoadWith and ParseWith read a file; the zero value is
// what Load and Parse do.
type Options struct {
	// Dir resolves relative paths instead of the directory of name
	// (tests).
	Dir string
	// SkipFileChecks skips checking that referenced files exist, for
	// configs whose files live on another machine (docs/examples, and
	// `bondd classify --config`).
	SkipFileChecks bool
	// Partial returns the decoded config together with its Errors instead
	// of nil, so that `bondd run --check` can go on to check the rule
	// files it names. Such a config must not be run. A file that is not
	// YAML still returns nil.
	Partial bool
}

// ParseWith is Parse with options. The error, if any, is Errors.
func ParseWith(name string, data []byte, opts Options) (*Config, error) {
	src := &configSource{
		file:  name,
		dir:   opts.Dir,
		lines: make(map[string]int),
		bad:   make(map[string]bool),
	}
	if src.dir == "" {
		src.dir = filepath.Dir(name)
		if abs, err := filepath.Abs(src.dir); err == nil {
			src.dir = abs
		}
	}
	d := &configDecoder{src: src}
	root := d.document(data)
	if root == nil {
		return nil, d.errs
	}
	c := d.config(root)
	d.warns.sort()
	c.warnings = d.warns
	c.resolvePaths()
	c.Defaults()
	v := &configValidator{src: src}
	c.validate(v)
	if !opts.SkipFileChecks {
		c.checkFiles(v)
	}
	errs := append(d.errs, v.errs...)
	if len(errs) > 0 {
		errs.sort()
		if opts.Partial {
			return c, errs
		}
		return nil, errs
	}
	return c, nil
}

// Defaults replaces zero fields of c by their defaults. ServerName defaults
// to the host of Concentrator when that parses as host:port.
func (c *Config) Defaults() {
	if c.LogLevel == "" {
		c.LogLevel = DefaultLogLevel
	}
	if c.LogFormat == "" {
		c.LogFormat = DefaultLogFormat
	}
	if c.TUN.Name == "" {
		c.TUN.Name = DefaultTUNName
	}
	c.Web.defaults()
	if e := c.Edge; e != nil && e.ServerName == "" {
		if host, ok := checkHostPort(e.Concentrator, true, false); ok {
			e.ServerName = host
		}
	}
	p := &c.Paths
	if p.QueuePackets == 0 {
		p.QueuePackets = DefaultQueuePackets
	}
	if p.MaxQueueDelay == 0 {
		p.MaxQueueDelay = DefaultMaxQueueDelay
	}
	if p.Keepalive == 0 {
		p.Keepalive = DefaultKeepalive
	}
	if p.IdleKeepalive == 0 {
		p.IdleKeepalive = max(DefaultIdleKeepalive, p.Keepalive)
	}
	if p.IdleTimeout == 0 {
		p.IdleTimeout = DefaultIdleTimeout
	}
	if p.RedialMin == 0 {
		p.RedialMin = DefaultRedialMin
	}
	if p.RedialMax == 0 {
		p.RedialMax = DefaultRedialMax
	}
	if p.InitialPacketSizeBytes == 0 {
		p.InitialPacketSizeBytes = DefaultInitialPacketSizeBytes
	}
	if p.RateControl == "" {
		p.RateControl = DefaultRateControl
	}
}

// Validate reports every problem in c as Errors sorted by line, or
// returns nil. Fields that have a default may be zero. Validate does not
// touch the file system; Load and Parse also check that the
// referenced files exist.
func (c *Config) Validate() error {
	v := &configValidator{src: c.src}
	c.validate(v)
	if len(v.errs) == 0 {
		return nil
	}
	v.errs.sort()
	return v.errs
}

// LoadToken reads the token in the file at path, trims surrounding white
// space and returns it. A relative path is resolved against the config
// file's directory. It refuses a file that group or others may read or
// write (mode&0o077 != 0), and a token shorter than MinTokenBytes or longer
// than MaxTokenBytes. The edge reads its own token with it; the
// concentrator reads the token of each edge.
func (c *Config) LoadToken(path string) ([]byte, error) {
	if c != nil && c.src != nil && path != "" && !filepath.IsAbs(path) {
		path = filepath.Join(c.src.dir, path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, pathErrCause(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, pathErrCause(err))
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("token file %s is not a regular file; expected a file holding the token", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("token file %s may be read or written by group or others (mode %04o); expected mode 0600 or stricter: chmod 600 %s", path, perm, path)
	}
	data, err := io.ReadAll(io.LimitReader(f, 2*MaxTokenBytes))
	if err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, pathErrCause(err))
	}
	tok := bytes.TrimSpace(data)
	if len(tok) < MinTokenBytes || len(tok) > MaxTokenBytes {
		return nil, fmt.Errorf("token file %s holds a %d-byte token; expected %d to %d bytes (for example 32 random bytes in hex: openssl rand -hex 32)", path, len(tok), MinTokenBytes, MaxTokenBytes)
	}
	return tok, nil
}

// pathErrCause strips the operation and path from a *fs.PathError, whose
// message would repeat what the caller says.
func pathErrCause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
