package main

// The daemon config file read by `bondd run --config FILE`.
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

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

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
	DefaultLogLevel               = "info"
	DefaultLogFormat              = "text"
	DefaultTUNName                = "bondd0"
	DefaultQueuePackets           = 256
	DefaultKeepalive              = 1 * time.Second
	DefaultIdleTimeout            = 5 * time.Second
	DefaultRedialMin              = 250 * time.Millisecond
	DefaultRedialMax              = 10 * time.Second
	DefaultInitialPacketSizeBytes = 1360
	// DefaultMaxQueueDelay is how long a packet may wait in a path's send
	// queue before it is dropped rather than sent late.
	DefaultMaxQueueDelay = 200 * time.Millisecond
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
	// MaxUplinks is the largest number of uplinks of one edge.
	MaxUplinks = 8
	// MaxEdgeIDBytes and MaxUplinkNameBytes bound edge ids and uplink names.
	MaxEdgeIDBytes     = 64
	MaxUplinkNameBytes = 32
	// MaxLabelKeyBytes and MaxLabelValueBytes bound path labels; they are
	// the rule-language limits of DESIGN.md, since rules match labels.
	MaxLabelKeyBytes   = 128
	MaxLabelValueBytes = 1024
	// MaxCertCNBytes is the X.509 upper bound of a CommonName (RFC 5280
	// ub-common-name).
	MaxCertCNBytes = 64
	// MinTokenBytes and MaxTokenBytes bound a token after trimming.
	MinTokenBytes = 16
	MaxTokenBytes = 4096
	// MaxQueuePackets bounds paths.queue_packets.
	MaxQueuePackets = 65536
	// MinInitialPacketSizeBytes and MaxInitialPacketSizeBytes bound
	// paths.initial_packet_size_bytes: 1200 is the QUIC minimum (RFC 9000
	// §14.1), 1452 fills a 1500-byte IPv4 path.
	MinInitialPacketSizeBytes = 1200
	MaxInitialPacketSizeBytes = 1452
	// maxConfigFileBytes bounds what LoadConfig reads.
	maxConfigFileBytes = 1 << 20
)

// Config is the daemon configuration, one YAML file per daemon.
//
// Build it with LoadConfig or ParseConfig, which decode, apply Defaults and
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

	// src records where the config came from; nil for a Config built in Go.
	src *configSource
}

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
	// name or an IP address. Required.
	Concentrator string
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
	// Lanes is the number of QUIC connections the uplink carries, 1 to
	// tunnel.MaxLanes, or tunnel.LanesAuto (0): YAML "auto", the default.
	Lanes int
	// LEOReconf marks a LEO satellite uplink with its reconfiguration
	// schedule (YAML leo_reconf: true for Starlink's seconds 12, 27, 42
	// and 57 of each UTC minute, ±100 ms; or {seconds: [...], window_ms:
	// N}): inside a danger zone the rules see leo_state=reconf. nil:
	// none. Optional.
	LEOReconf *policy.LEOReconf
	// Budget is the uplink's byte budget per UTC day, week or month (YAML
	// budget: 2GB/month); at 90 % the path is DEGRADED for traffic no rule
	// prefers it for. The zero value: none. Optional.
	Budget policy.Budget
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
	// Keepalive is the QUIC keepalive period, shorter than IdleTimeout.
	// Default DefaultKeepalive.
	Keepalive time.Duration
	// IdleTimeout is the silence after which a path is declared dead.
	// Default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// RedialMin is the first redial backoff of a dead path; it doubles up
	// to RedialMax. Defaults DefaultRedialMin and DefaultRedialMax.
	RedialMin time.Duration
	RedialMax time.Duration
	// MaxQueueDelay is the longest a packet waits in a path's send queue;
	// an older one is dropped, not sent. Default DefaultMaxQueueDelay.
	MaxQueueDelay time.Duration
	// InitialPacketSizeBytes is quic.Config.InitialPacketSize, in bytes,
	// MinInitialPacketSizeBytes to MaxInitialPacketSizeBytes. Default
	// DefaultInitialPacketSizeBytes.
	InitialPacketSizeBytes int
}

// FECConfig configures forward error correction on what this end sends (key
// fec). The zero value is adaptive FEC with k = 20, α = 2 and a 20 ms block
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
	// Budget is the longest a block stays open, 1ms to 1s. Default 20ms.
	Budget time.Duration
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
	if f.Budget < 0 || f.Budget > time.Second || f.Budget > 0 && f.Budget < time.Millisecond {
		v.errorf("fec.budget", "expected a duration from 1ms to 1s, got %s", f.Budget)
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

// ConfigError is one problem in a config file. It is returned inside
// ConfigErrors.
type ConfigError struct {
	// File is the config file name as given to LoadConfig or ParseConfig;
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
func (e *ConfigError) Error() string {
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

// ConfigErrors is every problem found in a config file, sorted by line. It
// is the error type of LoadConfig, ParseConfig and (*Config).Validate.
type ConfigErrors []*ConfigError

// Error returns one problem per line.
func (es ConfigErrors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the problems, so that errors.As finds a *ConfigError.
func (es ConfigErrors) Unwrap() []error {
	errs := make([]error, len(es))
	for i, e := range es {
		errs[i] = e
	}
	return errs
}

func (es ConfigErrors) sort() {
	sort.SliceStable(es, func(i, j int) bool { return es[i].Line < es[j].Line })
}

// LoadConfig reads, decodes, defaults and validates the config file at path
// and checks the files it refers to. Relative paths in the file are resolved
// against the file's directory. The error, if any, is ConfigErrors.
func LoadConfig(path string) (*Config, error) {
	return loadConfig(path, parseOptions{})
}

// loadConfig is LoadConfig with options: `bondd classify --config` reads
// only the classify section, so it skips the checks of referenced files
// (credentials that live on the daemon's machine).
func loadConfig(path string, opts parseOptions) (*Config, error) {
	fail := func(format string, args ...any) (*Config, error) {
		return nil, ConfigErrors{{File: path, Msg: fmt.Sprintf(format, args...)}}
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
	return parseConfig(path, data, opts)
}

// ParseConfig is LoadConfig for a file already in memory: name is used in
// errors and its directory resolves relative paths.
func ParseConfig(name string, data []byte) (*Config, error) {
	return parseConfig(name, data, parseOptions{})
}

// parseOptions are for tests.
type parseOptions struct {
	// dir resolves relative paths instead of the directory of name.
	dir string
	// skipFileChecks skips checking that referenced files exist, for
	// configs whose files live on another machine (docs/examples, and
	// `bondd classify --config`).
	skipFileChecks bool
}

func parseConfig(name string, data []byte, opts parseOptions) (*Config, error) {
	src := &configSource{
		file:  name,
		dir:   opts.dir,
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
	c.resolvePaths()
	c.Defaults()
	v := &configValidator{src: src}
	c.validate(v)
	if !opts.skipFileChecks {
		c.checkFiles(v)
	}
	errs := append(d.errs, v.errs...)
	if len(errs) > 0 {
		errs.sort()
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
}

// Validate reports every problem in c as ConfigErrors sorted by line, or
// returns nil. Fields that have a default may be zero. Validate does not
// touch the file system; LoadConfig and ParseConfig also check that the
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

// ---------------------------------------------------------------------------
// Where fields are

// configSource records the origin of a parsed Config.
type configSource struct {
	file  string          // name as given, for errors
	dir   string          // resolves relative paths
	lines map[string]int  // field path → line of its key or list item
	bad   map[string]bool // field paths that failed to decode
}

// parentField returns the field enclosing f: edge.uplinks[1].bind →
// edge.uplinks[1] → edge.uplinks → edge → "" (the document).
func parentField(f string) (string, bool) {
	if f == "" {
		return "", false
	}
	if i := strings.LastIndexAny(f, ".["); i >= 0 {
		return f[:i], true
	}
	return "", true
}

// line returns the line of field f, or of its nearest enclosing field
// present in the file.
func (s *configSource) line(f string) int {
	for ok := true; ok; f, ok = parentField(f) {
		if l, found := s.lines[f]; found {
			return l
		}
	}
	return 0
}

// badAround reports whether decoding f or a field enclosing it failed.
func (s *configSource) badAround(f string) bool {
	for ok := true; ok; f, ok = parentField(f) {
		if s.bad[f] {
			return true
		}
	}
	return false
}

// badInside reports whether decoding a field inside f failed.
func (s *configSource) badInside(f string) bool {
	for b := range s.bad {
		if f == "" || strings.HasPrefix(b, f+".") || strings.HasPrefix(b, f+"[") {
			return true
		}
	}
	return false
}

func joinField(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func indexField(list string, i int) string {
	return list + "[" + strconv.Itoa(i) + "]"
}

// ---------------------------------------------------------------------------
// Step 1: decode

// Known keys of each mapping, in the order docs/config.md lists them.
var (
	configKeys       = []string{"role", "log_level", "log_format", "metrics_listen", "qlog_dir", "tun", "edge", "concentrator", "paths", "scheduler", "fec", "rules", "classify"}
	fecKeys          = []string{"mode", "k", "alpha", "ratio", "budget"}
	tunKeys          = []string{"name", "addresses", "mtu", "routes"}
	edgeKeys         = []string{"id", "concentrator", "server_name", "ca_file", "server_cert_sha256", "token_file", "cert_file", "key_file", "uplinks", "downlink_rules"}
	uplinkKeys       = []string{"name", "bind", "interface", "remote", "labels", "lanes", "leo_reconf", "budget"}
	leoReconfKeys    = []string{"seconds", "window_ms"}
	concentratorKeys = []string{"listen", "cert_file", "key_file", "client_ca_file", "edges"}
	edgeEntryKeys    = []string{"id", "token_file", "cert_cn", "allowed_prefixes", "allow_edge_rules", "policy_label_keys"}
	pathsKeys        = []string{"queue_packets", "max_queue_delay", "keepalive", "idle_timeout", "redial_min", "redial_max", "initial_packet_size_bytes"}
	classifyKeys     = []string{"rtp_ports", "payload_types", "rtp_heuristic", "classes", "sdp"}
	classKeys        = []string{"name", "match", "labels"}
	classMatchKeys   = []string{"proto", "src", "dst", "src_ports", "dst_ports", "ports", "dscp"}
)

// configDecoder turns a yaml.Node tree into a Config, collecting errors.
type configDecoder struct {
	src  *configSource
	errs ConfigErrors
}

func (d *configDecoder) errorf(n *yaml.Node, field, format string, args ...any) {
	d.errs = append(d.errs, &ConfigError{File: d.src.file, Line: n.Line, Field: field, Msg: fmt.Sprintf(format, args...)})
	d.src.bad[field] = true
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlParserProblems are the problems yaml.v3's parser (as opposed to its
// scanner) reports; it gives their line 0-based, at the start of the
// enclosing construct when it knows one.
var yamlParserProblems = []string{
	"did not find expected <stream-start>",
	"did not find expected <document start>",
	"found undefined tag handle",
	"did not find expected node content",
	"did not find expected '-' indicator",
	"did not find expected key",
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
	"found duplicate %TAG directive",
}

// document parses data as a single YAML document and returns its root
// mapping, or nil after recording an error.
func (d *configDecoder) document(data []byte) *yaml.Node {
	fail := func(line int, format string, args ...any) *yaml.Node {
		d.errs = append(d.errs, &ConfigError{File: d.src.file, Line: line, Msg: fmt.Sprintf(format, args...)})
		return nil
	}
	yamlErr := func(err error) *yaml.Node {
		msg := err.Error()
		if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
			line, _ := strconv.Atoi(m[1])
			if slices.Contains(yamlParserProblems, m[2]) {
				line++
			}
			return fail(line, "invalid YAML: %s", m[2])
		}
		return fail(0, "invalid YAML: %s", strings.TrimPrefix(msg, "yaml: "))
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return fail(1, "empty config; expected a mapping with at least role and tun")
		}
		return yamlErr(err)
	}
	var next yaml.Node
	if err := dec.Decode(&next); err == nil {
		return fail(next.Line, "a second YAML document; expected one document per config file")
	} else if err != io.EOF {
		return yamlErr(err)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = derefNode(root.Content[0])
	}
	if isNullNode(root) {
		return fail(1, "empty config; expected a mapping with at least role and tun")
	}
	return root
}

func derefNode(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func isNullNode(n *yaml.Node) bool {
	return n == nil || n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// describeNode names the kind or value of n for "got ..." in messages.
func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return strconv.Quote(n.Value)
}

// fields checks that n is a mapping whose keys are all in known and
// distinct, records the line of each key and returns the value of each key
// whose value is not null. It returns nil if n is not a mapping.
func (d *configDecoder) fields(n *yaml.Node, path string, known []string) map[string]*yaml.Node {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "expected a mapping with fields %s; got %s", strings.Join(known, ", "), describeNode(n))
		return nil
	}
	out := make(map[string]*yaml.Node)
	first := make(map[string]int)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := derefNode(n.Content[i]), derefNode(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			d.errorf(k, path, "expected a field name, got %s", describeNode(k))
			continue
		}
		f := joinField(path, k.Value)
		if line, dup := first[k.Value]; dup {
			d.errorf(k, f, "field set twice; first set at line %d", line)
			continue
		}
		first[k.Value] = k.Line
		if !slices.Contains(known, k.Value) {
			d.errorf(k, f, "unknown field %q; known fields: %s%s", k.Value, strings.Join(known, ", "), suggestKey(k.Value, known))
			continue
		}
		d.src.lines[f] = k.Line
		if !isNullNode(val) {
			out[k.Value] = val
		}
	}
	return out
}

// suggestKey returns `; did you mean "x"?` for the known key closest to key,
// if it is a likely typo.
func suggestKey(key string, known []string) string {
	best, bestDist := "", 3
	for _, k := range known {
		if strings.HasPrefix(key, k+"_") { // keepalive_ms
			return fmt.Sprintf("; did you mean %q?", k)
		}
		if dist := editDistance(key, k); dist < bestDist {
			best, bestDist = k, dist
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

// editDistance is the edit distance of a and b in bytes, counting a swap of
// two adjacent bytes as one edit (optimal string alignment), so that dcsp is
// nearer to dscp than to dst.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// scalar returns the text of the scalar n ("" for null). want describes
// the expected value for the error when n is a mapping or a list.
func (d *configDecoder) scalar(n *yaml.Node, field, want string) (string, bool) {
	if n == nil {
		return "", false
	}
	if n.Kind != yaml.ScalarNode {
		d.errorf(n, field, "expected %s, got %s", want, describeNode(n))
		return "", false
	}
	if isNullNode(n) {
		return "", true
	}
	return n.Value, true
}

func (d *configDecoder) str(n *yaml.Node, field, want string) string {
	s, _ := d.scalar(n, field, want)
	return s
}

// list returns the items of the sequence n and records their lines.
func (d *configDecoder) list(n *yaml.Node, field, wantItem string) []*yaml.Node {
	if n == nil {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, field, "expected a list of %s, got %s", wantItem, describeNode(n))
		return nil
	}
	items := make([]*yaml.Node, len(n.Content))
	for i, it := range n.Content {
		items[i] = derefNode(it)
		d.src.lines[indexField(field, i)] = it.Line
	}
	return items
}

// prefixes decodes a list of prefixes. An item that does not parse stays
// the zero Prefix, so that indexes match the file.
func (d *configDecoder) prefixes(n *yaml.Node, field, want, example string) []netip.Prefix {
	items := d.list(n, field, want)
	if items == nil {
		return nil
	}
	out := make([]netip.Prefix, len(items))
	for i, it := range items {
		f := indexField(field, i)
		s, ok := d.scalar(it, f, want)
		if !ok {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			hint := ""
			if _, aerr := netip.ParseAddr(s); aerr == nil {
				hint = " (the /prefix-length is missing)"
			}
			d.errorf(it, f, "expected %s, like %s, got %q%s", want, example, s, hint)
			continue
		}
		out[i] = p
	}
	return out
}

func (d *configDecoder) integer(n *yaml.Node, field, want string) int {
	s, ok := d.scalar(n, field, want)
	if !ok || s == "" {
		return 0
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		d.errorf(n, field, "expected %s, got %q", want, s)
		return 0
	}
	return v
}

func (d *configDecoder) duration(n *yaml.Node, field string) time.Duration {
	const want = "a duration with a unit, like 1500ms or 5s"
	s, ok := d.scalar(n, field, want)
	if !ok || s == "" {
		return 0
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		d.errorf(n, field, "expected %s, got %q", want, s)
		return 0
	}
	return v
}

func (d *configDecoder) config(root *yaml.Node) *Config {
	c := &Config{src: d.src}
	d.src.lines[""] = root.Line
	f := d.fields(root, "", configKeys)
	if f == nil {
		return c
	}
	c.Role = d.str(f["role"], "role", `"edge" or "concentrator"`)
	c.LogLevel = d.str(f["log_level"], "log_level", "debug, info, warn or error")
	c.LogFormat = d.str(f["log_format"], "log_format", "text or json")
	c.MetricsListen = d.str(f["metrics_listen"], "metrics_listen", "host:port")
	c.QlogDir = d.str(f["qlog_dir"], "qlog_dir", "a directory path")
	if n := f["tun"]; n != nil {
		d.tun(n, &c.TUN)
	}
	if n := f["edge"]; n != nil {
		c.Edge = d.edge(n)
	}
	if n := f["concentrator"]; n != nil {
		c.Concentrator = d.concentrator(n)
	}
	if n := f["paths"]; n != nil {
		d.paths(n, &c.Paths)
	}
	if n := f["fec"]; n != nil {
		d.fec(n, &c.FEC)
	}
	c.Rules = d.str(f["rules"], "rules", "a file path")
	c.Scheduler = d.str(f["scheduler"], "scheduler", "a scheduler name")
	if n := f["classify"]; n != nil {
		d.classify(n, &c.Classify)
	}
	return c
}

func (d *configDecoder) tun(n *yaml.Node, t *TUNConfig) {
	f := d.fields(n, "tun", tunKeys)
	if f == nil {
		return
	}
	t.Name = d.str(f["name"], "tun.name", "an interface name")
	t.Addresses = d.prefixes(f["addresses"], "tun.addresses", "an address with prefix length", "10.77.0.2/24 or fd77::2/64")
	if m := f["mtu"]; m != nil {
		want := fmt.Sprintf(`"auto" or an integer number of bytes from %d to %d`, MinMTUBytes, MaxMTUBytes)
		if s, ok := d.scalar(m, "tun.mtu", want); ok && s != "auto" {
			v, err := strconv.Atoi(s)
			if err != nil || v == 0 {
				d.errorf(m, "tun.mtu", "expected %s, got %q", want, s)
			} else {
				t.MTU = v
			}
		}
	}
	t.Routes = d.prefixes(f["routes"], "tun.routes", "a network prefix", "10.78.0.0/16")
}

func (d *configDecoder) edge(n *yaml.Node) *EdgeConfig {
	f := d.fields(n, "edge", edgeKeys)
	if f == nil {
		return nil
	}
	e := &EdgeConfig{
		ID:           d.str(f["id"], "edge.id", "an edge id"),
		Concentrator: d.str(f["concentrator"], "edge.concentrator", "host:port"),
		ServerName:   d.str(f["server_name"], "edge.server_name", "a DNS name"),
		CAFile:       d.str(f["ca_file"], "edge.ca_file", "a file path"),
		TokenFile:    d.str(f["token_file"], "edge.token_file", "a file path"),
		CertFile:     d.str(f["cert_file"], "edge.cert_file", "a file path"),
		KeyFile:      d.str(f["key_file"], "edge.key_file", "a file path"),

		DownlinkRules: d.str(f["downlink_rules"], "edge.downlink_rules", "a file path"),
	}
	if p := f["server_cert_sha256"]; p != nil {
		const want = "the SHA-256 of the concentrator's certificate (DER) as 64 hex digits, colons allowed"
		if s, ok := d.scalar(p, "edge.server_cert_sha256", want); ok {
			sum, err := hex.DecodeString(strings.ReplaceAll(s, ":", ""))
			if err != nil || len(sum) != sha256.Size {
				d.errorf(p, "edge.server_cert_sha256", "expected %s, got %q", want, s)
			} else {
				e.ServerCertSHA256 = sum
			}
		}
	}
	for i, it := range d.list(f["uplinks"], "edge.uplinks", "uplinks") {
		e.Uplinks = append(e.Uplinks, d.uplink(it, indexField("edge.uplinks", i)))
	}
	return e
}

func (d *configDecoder) uplink(n *yaml.Node, path string) UplinkConfig {
	var u UplinkConfig
	f := d.fields(n, path, uplinkKeys)
	if f == nil {
		return u
	}
	u.Name = d.str(f["name"], path+".name", "an uplink name")
	if b := f["bind"]; b != nil {
		if s, ok := d.scalar(b, path+".bind", "an IP address"); ok && s != "" {
			a, err := netip.ParseAddr(s)
			switch {
			case err == nil:
				u.Bind = a
			case validIfName(s):
				d.errorf(b, path+".bind", "expected a local IP address, got %q; to bind to a device, write interface: %s", s, s)
			default:
				d.errorf(b, path+".bind", "expected a local IP address, like 192.0.2.10, got %q", s)
			}
		}
	}
	u.Interface = d.str(f["interface"], path+".interface", "an interface name")
	u.Remote = d.str(f["remote"], path+".remote", "host:port")
	if n := f["lanes"]; n != nil {
		u.Lanes = d.lanes(n, path+".lanes")
	}
	if n := f["leo_reconf"]; n != nil {
		u.LEOReconf = d.leoReconf(n, path+".leo_reconf")
	}
	if n := f["budget"]; n != nil {
		const want = "a byte budget per period, like 2GB/month, 500MB/day or 10GiB/week"
		if s, ok := d.scalar(n, path+".budget", want); ok && s != "" {
			if b, err := policy.ParseBudget(s); err != nil {
				d.errorf(n, path+".budget", "expected %s (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB; periods day, week, month), got %q", want, s)
			} else {
				u.Budget = b
			}
		}
	}
	if l := f["labels"]; l != nil {
		u.Labels = d.labels(l, path+".labels")
	}
	return u
}

// leoReconf decodes an uplink's leo_reconf: true (the Starlink schedule),
// false (none), or a mapping {seconds: [0..59, ...], window_ms: 1..7500}.
func (d *configDecoder) leoReconf(n *yaml.Node, field string) *policy.LEOReconf {
	if n.Kind == yaml.ScalarNode {
		if on, ok := d.boolean(n, field); ok && on {
			return &policy.LEOReconf{}
		}
		return nil
	}
	f := d.fields(n, field, leoReconfKeys)
	if f == nil {
		return nil
	}
	l := &policy.LEOReconf{}
	for i, it := range d.list(f["seconds"], field+".seconds", "seconds of the minute from 0 to 59") {
		sf := indexField(field+".seconds", i)
		s, ok := d.scalar(it, sf, "a second of the minute from 0 to 59")
		if !ok {
			continue
		}
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 || v > 59 {
			d.errorf(it, sf, "expected a second of the UTC minute from 0 to 59, got %q", s)
			continue
		}
		l.Seconds = append(l.Seconds, v)
	}
	if w := f["window_ms"]; w != nil {
		maxMS := int(policy.MaxLEOWindow / time.Millisecond)
		want := fmt.Sprintf("a window in milliseconds from 1 to %d either side of each second, like 100", maxMS)
		if s, ok := d.scalar(w, field+".window_ms", want); ok {
			if v, err := strconv.Atoi(s); err != nil || v < 1 || v > maxMS {
				d.errorf(w, field+".window_ms", "expected %s, got %q", want, s)
			} else {
				l.Window = time.Duration(v) * time.Millisecond
			}
		}
	}
	return l
}

// lanes decodes an uplink's lanes: auto, or 1 to tunnel.MaxLanes.
func (d *configDecoder) lanes(n *yaml.Node, field string) int {
	want := fmt.Sprintf("auto or a number of QUIC connections from 1 to %d", tunnel.MaxLanes)
	s, ok := d.scalar(n, field, want)
	if !ok || s == "auto" {
		return tunnel.LanesAuto
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 || v > tunnel.MaxLanes {
		d.errorf(n, field, "expected %s, got %q", want, s)
		return tunnel.LanesAuto
	}
	return v
}

func (d *configDecoder) labels(n *yaml.Node, path string) map[string]string {
	pairs, ok := d.labelPairs(n, path, "{link_type: cellular}")
	if !ok {
		return nil
	}
	m := make(map[string]string, len(pairs))
	for _, l := range pairs {
		m[l.Key] = l.Value
	}
	return m
}

// labelPairs decodes a mapping of label keys to values in file order;
// example is a mapping for the message when n is not one.
func (d *configDecoder) labelPairs(n *yaml.Node, path, example string) ([]classify.Label, bool) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "expected a mapping of label keys to values, like %s, got %s", example, describeNode(n))
		return nil, false
	}
	var pairs []classify.Label
	first := make(map[string]int)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := derefNode(n.Content[i]), derefNode(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			d.errorf(k, path, "expected a label key, got %s", describeNode(k))
			continue
		}
		f := joinField(path, k.Value)
		if line, dup := first[k.Value]; dup {
			d.errorf(k, f, "label set twice; first set at line %d", line)
			continue
		}
		first[k.Value] = k.Line
		d.src.lines[f] = k.Line
		if s, ok := d.scalar(val, f, "a label value"); ok {
			pairs = append(pairs, classify.Label{Key: k.Value, Value: s})
		}
	}
	return pairs, true
}

func (d *configDecoder) concentrator(n *yaml.Node) *ConcentratorConfig {
	f := d.fields(n, "concentrator", concentratorKeys)
	if f == nil {
		return nil
	}
	c := &ConcentratorConfig{
		Listen:       d.str(f["listen"], "concentrator.listen", "ip:port"),
		CertFile:     d.str(f["cert_file"], "concentrator.cert_file", "a file path"),
		KeyFile:      d.str(f["key_file"], "concentrator.key_file", "a file path"),
		ClientCAFile: d.str(f["client_ca_file"], "concentrator.client_ca_file", "a file path"),
	}
	for i, it := range d.list(f["edges"], "concentrator.edges", "edges") {
		path := indexField("concentrator.edges", i)
		var e EdgeEntry
		if ef := d.fields(it, path, edgeEntryKeys); ef != nil {
			e.ID = d.str(ef["id"], path+".id", "an edge id")
			e.TokenFile = d.str(ef["token_file"], path+".token_file", "a file path")
			e.CertCN = d.str(ef["cert_cn"], path+".cert_cn", "a certificate CommonName")
			e.AllowedPrefixes = d.prefixes(ef["allowed_prefixes"], path+".allowed_prefixes", "a network prefix", "10.77.17.0/24")
			if n := ef["allow_edge_rules"]; n != nil {
				e.AllowEdgeRules, _ = d.boolean(n, path+".allow_edge_rules")
			}
			for j, it := range d.list(ef["policy_label_keys"], path+".policy_label_keys", "label keys") {
				e.PolicyLabelKeys = append(e.PolicyLabelKeys, d.str(it, indexField(path+".policy_label_keys", j), "a label key"))
			}
		}
		c.Edges = append(c.Edges, e)
	}
	return c
}

func (d *configDecoder) paths(n *yaml.Node, p *PathsConfig) {
	f := d.fields(n, "paths", pathsKeys)
	if f == nil {
		return
	}
	p.QueuePackets = d.integer(f["queue_packets"], "paths.queue_packets", "an integer number of packets")
	p.MaxQueueDelay = d.duration(f["max_queue_delay"], "paths.max_queue_delay")
	p.Keepalive = d.duration(f["keepalive"], "paths.keepalive")
	p.IdleTimeout = d.duration(f["idle_timeout"], "paths.idle_timeout")
	p.RedialMin = d.duration(f["redial_min"], "paths.redial_min")
	p.RedialMax = d.duration(f["redial_max"], "paths.redial_max")
	p.InitialPacketSizeBytes = d.integer(f["initial_packet_size_bytes"], "paths.initial_packet_size_bytes", "an integer number of bytes")
}

func (d *configDecoder) fec(n *yaml.Node, c *FECConfig) {
	f := d.fields(n, "fec", fecKeys)
	if f == nil {
		return
	}
	c.Mode = d.str(f["mode"], "fec.mode", "adaptive, fixed or off")
	c.K = d.integer(f["k"], "fec.k", "an integer number of data packets")
	c.Alpha = d.float(f["alpha"], "fec.alpha", "a number, like 2.0")
	c.Ratio = d.float(f["ratio"], "fec.ratio", "a number of parity packets per data packet, like 0.1")
	c.Budget = d.duration(f["budget"], "fec.budget")
}

func (d *configDecoder) float(n *yaml.Node, field, want string) float64 {
	s, ok := d.scalar(n, field, want)
	if !ok || s == "" {
		return 0
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		d.errorf(n, field, "expected %s, got %q", want, s)
		return 0
	}
	return v
}

func (d *configDecoder) classify(n *yaml.Node, c *ClassifyConfig) {
	c.src = d.src
	f := d.fields(n, "classify", classifyKeys)
	if f == nil {
		return
	}
	c.RTPPorts = d.portRanges(f["rtp_ports"], "classify.rtp_ports")
	if pt := f["payload_types"]; pt != nil {
		c.PayloadTypes = d.payloadTypes(pt, "classify.payload_types")
	}
	c.SDP = d.str(f["sdp"], "classify.sdp", "the path of an SDP file")
	if h := f["rtp_heuristic"]; h != nil {
		if on, ok := d.boolean(h, "classify.rtp_heuristic"); ok {
			c.NoRTPHeuristic = !on
		}
	}
	if d.notList(f["classes"], "classify.classes", "classes", "{name: video, match: {ports: [5004-5010]}}") {
		return
	}
	for i, it := range d.list(f["classes"], "classify.classes", "classes") {
		c.Classes = append(c.Classes, d.class(it, indexField("classify.classes", i)))
	}
}

func (d *configDecoder) class(n *yaml.Node, path string) classify.Class {
	var cl classify.Class
	f := d.fields(n, path, classKeys)
	if f == nil {
		return cl
	}
	cl.Name = d.str(f["name"], path+".name", "a class name")
	if m := f["match"]; m != nil {
		mf := d.fields(m, path+".match", classMatchKeys)
		if mf != nil {
			cl.Match = d.classMatch(mf, path+".match")
		}
	}
	if l := f["labels"]; l != nil {
		cl.Labels, _ = d.labelPairs(l, path+".labels", "{media: camera}")
	}
	return cl
}

func (d *configDecoder) classMatch(f map[string]*yaml.Node, path string) classify.ClassMatch {
	var m classify.ClassMatch
	const protoWant = "a protocol name (udp, tcp, icmp, icmpv6, sctp, …) or number from 0 to 255"
	if n := f["proto"]; !d.notList(n, path+".proto", "protocols", "udp") {
		for i, it := range d.list(n, path+".proto", "protocols") {
			fi := indexField(path+".proto", i)
			s, ok := d.scalar(it, fi, protoWant)
			if !ok {
				m.Protos = append(m.Protos, 0)
				continue
			}
			p, err := classify.KeyProto.ParseValue(s)
			if err != nil {
				d.errorf(it, fi, "expected %s, got %q", protoWant, s)
			}
			m.Protos = append(m.Protos, uint8(p))
		}
	}
	for _, side := range []struct {
		key string
		dst *[]netip.Prefix
	}{{"src", &m.Src}, {"dst", &m.Dst}} {
		field := path + "." + side.key
		if n := f[side.key]; !d.notList(n, field, "network prefixes", "10.77.17.0/24") {
			*side.dst = d.prefixes(n, field, "a network prefix", "10.77.17.0/24 or fd77:0:0:17::/64")
		}
	}
	m.SrcPorts = d.portRanges(f["src_ports"], path+".src_ports")
	m.DstPorts = d.portRanges(f["dst_ports"], path+".dst_ports")
	m.Ports = d.portRanges(f["ports"], path+".ports")
	if n := f["dscp"]; !d.notList(n, path+".dscp", "DSCP code points", "EF") {
		for i, it := range d.list(n, path+".dscp", "DSCP code points") {
			fi := indexField(path+".dscp", i)
			s, ok := d.scalar(it, fi, dscpWant)
			if !ok {
				m.DSCP = append(m.DSCP, 0)
				continue
			}
			v, ok := parseDSCP(s)
			if !ok {
				d.errorf(it, fi, "expected %s, got %q", dscpWant, s)
			}
			m.DSCP = append(m.DSCP, v)
		}
	}
	return m
}

// notList reports, after recording an error, that n is a single value
// where a list is expected, and shows the list to write instead.
func (d *configDecoder) notList(n *yaml.Node, field, wantItems, example string) bool {
	if n == nil || n.Kind != yaml.ScalarNode || isNullNode(n) {
		return false
	}
	d.errorf(n, field, "expected a list of %s, like [%s], got %q", wantItems, example, n.Value)
	return true
}

const portRangeWant = "a port or a range LO-HI of ports from 0 to 65535, like 5004 or 5004-5010"

// portRanges decodes a list of ports and LO-HI ranges. An item that does
// not parse stays the zero PortRange, so that indexes match the file.
func (d *configDecoder) portRanges(n *yaml.Node, field string) []classify.PortRange {
	if d.notList(n, field, "ports or ranges", "5004-5010") {
		return nil
	}
	items := d.list(n, field, "ports or ranges")
	if items == nil {
		return nil
	}
	out := make([]classify.PortRange, len(items))
	for i, it := range items {
		f := indexField(field, i)
		s, ok := d.scalar(it, f, portRangeWant)
		if !ok {
			continue
		}
		r, ok := parsePortRange(s)
		if !ok {
			d.errorf(it, f, "expected %s, got %q", portRangeWant, s)
			continue
		}
		out[i] = r
	}
	return out
}

// parsePortRange parses PORT or LO-HI (spaces around the dash allowed); it
// does not check LO ≤ HI.
func parsePortRange(s string) (classify.PortRange, bool) {
	lo, hi, isRange := strings.Cut(s, "-")
	a, err := strconv.ParseUint(strings.TrimSpace(lo), 10, 16)
	if err != nil {
		return classify.PortRange{}, false
	}
	b := a
	if isRange {
		if b, err = strconv.ParseUint(strings.TrimSpace(hi), 10, 16); err != nil {
			return classify.PortRange{}, false
		}
	}
	return classify.PortRange{Lo: uint16(a), Hi: uint16(b)}, true
}

const payloadTypeWant = "an RTP payload type from 0 to 127"

// payloadTypes decodes a mapping of payload types to codec names.
func (d *configDecoder) payloadTypes(n *yaml.Node, path string) map[uint8]classify.Codec {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "expected a mapping of RTP payload types to codecs, like {96: h264, 111: opus}, got %s", describeNode(n))
		return nil
	}
	m := make(map[uint8]classify.Codec, len(n.Content)/2)
	first := make(map[int]int)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := derefNode(n.Content[i]), derefNode(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			d.errorf(k, path, "expected %s as the key, got %s", payloadTypeWant, describeNode(k))
			continue
		}
		f := joinField(path, k.Value)
		d.src.lines[f] = k.Line
		pt, err := strconv.Atoi(k.Value)
		if err != nil || pt < 0 || pt > 255 {
			d.errorf(k, f, "expected %s as the key, got %q", payloadTypeWant, k.Value)
			continue
		}
		if line, dup := first[pt]; dup {
			d.errorf(k, f, "payload type %d set twice; first set at line %d", pt, line)
			continue
		}
		first[pt] = k.Line
		want := "a codec name (" + strings.Join(codecNames(), ", ") + ") or auto"
		s, ok := d.scalar(val, f, want)
		if !ok {
			continue
		}
		codec, known := classify.CodecByName(s)
		switch {
		case strings.EqualFold(s, "auto"):
			codec = classify.CodecUnknown
		case !known:
			d.errorf(val, f, "expected %s to learn it from the payload, got %q", want, s)
			continue
		}
		m[uint8(pt)] = codec
	}
	return m
}

// codecNames returns the names of the codecs classify knows.
func codecNames() []string {
	var names []string
	for c := classify.CodecUnknown + 1; c.String() != ""; c++ {
		names = append(names, c.String())
	}
	return names
}

func (d *configDecoder) boolean(n *yaml.Node, field string) (bool, bool) {
	s, ok := d.scalar(n, field, "true or false")
	if !ok {
		return false, false
	}
	switch strings.ToLower(s) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	d.errorf(n, field, "expected true or false, got %q", s)
	return false, false
}

const dscpWant = "a DSCP from 0 to 63 or a name like EF, AF41, CS6 or LE"

// dscpNames are the DSCP names of RFC 2474 (CS), RFC 2597 (AF), RFC 3246
// (EF), RFC 5865 (VA) and RFC 8622 (LE); DF is the default (CS0).
var dscpNames = map[string]uint8{
	"df": 0, "be": 0, "le": 1, "va": 44, "ef": 46,
	"cs0": 0, "cs1": 8, "cs2": 16, "cs3": 24, "cs4": 32, "cs5": 40, "cs6": 48, "cs7": 56,
	"af11": 10, "af12": 12, "af13": 14, "af21": 18, "af22": 20, "af23": 22,
	"af31": 26, "af32": 28, "af33": 30, "af41": 34, "af42": 36, "af43": 38,
}

// parseDSCP parses a DSCP name (any case) or a decimal number 0–63.
func parseDSCP(s string) (uint8, bool) {
	if v, ok := dscpNames[strings.ToLower(s)]; ok {
		return v, true
	}
	v, err := strconv.ParseUint(s, 10, 8)
	if err != nil || v > 63 {
		return 0, false
	}
	return uint8(v), true
}

// ---------------------------------------------------------------------------
// Step 2: paths

// fileRef is one field of c that names a file.
type fileRef struct {
	field string
	path  *string
	token bool   // checked with LoadToken
	what  string // what the file should hold, for errors
}

func (c *Config) fileRefs() []fileRef {
	refs := []fileRef{{"rules", &c.Rules, false, "a rule file (docs/rules.md)"}}
	if e := c.Edge; e != nil {
		refs = append(refs,
			fileRef{"edge.ca_file", &e.CAFile, false, "the PEM file of the CA that signed the concentrator's certificate"},
			fileRef{"edge.token_file", &e.TokenFile, true, ""},
			fileRef{"edge.cert_file", &e.CertFile, false, "the PEM file of this edge's client certificate"},
			fileRef{"edge.key_file", &e.KeyFile, false, "the PEM file of this edge's private key"},
			fileRef{"edge.downlink_rules", &e.DownlinkRules, false, "a rule file (docs/rules.md)"},
		)
	}
	if k := c.Concentrator; k != nil {
		refs = append(refs,
			fileRef{"concentrator.cert_file", &k.CertFile, false, "the PEM file of the concentrator's certificate"},
			fileRef{"concentrator.key_file", &k.KeyFile, false, "the PEM file of the concentrator's private key"},
			fileRef{"concentrator.client_ca_file", &k.ClientCAFile, false, "the PEM file of the CA that signs edge certificates"},
		)
		for i := range k.Edges {
			refs = append(refs, fileRef{indexField("concentrator.edges", i) + ".token_file", &k.Edges[i].TokenFile, true, ""})
		}
	}
	return refs
}

// resolvePaths makes relative file and directory paths relative to the
// config file's directory.
func (c *Config) resolvePaths() {
	paths := []*string{&c.QlogDir, &c.Classify.SDP}
	for _, r := range c.fileRefs() {
		paths = append(paths, r.path)
	}
	for _, p := range paths {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(c.src.dir, *p)
		}
	}
}

// checkFiles reports referenced files that are missing or unreadable,
// token files that LoadToken refuses, and a qlog_dir that is not a
// directory (a missing one is created at start).
func (c *Config) checkFiles(v *configValidator) {
	if c.QlogDir != "" {
		if fi, err := os.Stat(c.QlogDir); err == nil && !fi.IsDir() {
			v.errorf("qlog_dir", "%s is not a directory; expected a directory for the qlog files", c.QlogDir)
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			v.errorf("qlog_dir", "cannot read %s: %v; expected a directory for the qlog files", c.QlogDir, pathErrCause(err))
		}
	}
	for _, r := range c.fileRefs() {
		p := *r.path
		if p == "" {
			continue
		}
		if r.token {
			if _, err := c.LoadToken(p); err != nil {
				v.errorf(r.field, "%v", err)
			}
			continue
		}
		fi, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			v.errorf(r.field, "%s does not exist; expected %s", p, r.what)
		case err != nil:
			v.errorf(r.field, "cannot read %s: %v; expected %s", p, pathErrCause(err), r.what)
		case fi.IsDir():
			v.errorf(r.field, "%s is a directory; expected %s", p, r.what)
		default:
			if f, err := os.Open(p); err != nil {
				v.errorf(r.field, "cannot read %s: %v; expected %s", p, pathErrCause(err), r.what)
			} else {
				f.Close()
			}
		}
	}
}

// ---------------------------------------------------------------------------
// Step 4: validate

// configValidator collects semantic errors. Errors about a field whose decoding
// already failed are suppressed, so that one mistake yields one error.
type configValidator struct {
	src  *configSource // nil for a Config built in Go
	errs ConfigErrors
}

func (v *configValidator) add(field, lineField, format string, args []any) {
	e := &ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)}
	if v.src != nil {
		e.File, e.Line = v.src.file, v.src.line(lineField)
	}
	v.errs = append(v.errs, e)
}

// errorf reports a wrong value of field.
func (v *configValidator) errorf(field, format string, args ...any) {
	if v.src != nil && v.src.badAround(field) {
		return
	}
	v.add(field, field, format, args)
}

// missing reports that field is absent; the line is that of near (often
// the enclosing field).
func (v *configValidator) missing(field, near, format string, args ...any) {
	if v.src != nil && (v.src.badAround(field) || v.src.badInside(field) || v.src.badAround(near)) {
		return
	}
	v.add(field, near, format, args)
}

// where names field and its line for messages that point at a second
// field.
func (v *configValidator) where(field string) string {
	if v.src != nil {
		if l := v.src.line(field); l > 0 {
			return fmt.Sprintf("%s (line %d)", field, l)
		}
	}
	return field
}

func (c *Config) validate(v *configValidator) {
	switch c.Role {
	case RoleEdge, RoleConcentrator:
	case "":
		v.missing("role", "role", `required; expected "edge" or "concentrator"`)
	default:
		v.errorf("role", `expected "edge" or "concentrator", got %q`, c.Role)
	}
	switch c.LogLevel {
	case "", "debug", "info", "warn", "error":
	default:
		v.errorf("log_level", "expected debug, info, warn or error, got %q", c.LogLevel)
	}
	switch c.LogFormat {
	case "", "text", "json":
	default:
		v.errorf("log_format", "expected text or json, got %q", c.LogFormat)
	}
	if c.MetricsListen != "" {
		if _, ok := checkHostPort(c.MetricsListen, true, true); !ok {
			v.errorf("metrics_listen", "expected host:port or :port with a port from 1 to 65535, like 127.0.0.1:9477, got %q", c.MetricsListen)
		}
	}
	c.TUN.validate(v)

	roleKnown := c.Role == RoleEdge || c.Role == RoleConcentrator
	switch {
	case c.Edge == nil && c.Role == RoleEdge:
		v.missing("edge", "edge", "required when role is edge; expected a mapping with id, concentrator, credentials and uplinks")
	case c.Edge != nil && roleKnown && c.Role != RoleEdge:
		v.errorf("edge", "only allowed when role is edge; role is %q", c.Role)
	case c.Edge != nil:
		c.Edge.validate(v)
	}
	switch {
	case c.Concentrator == nil && c.Role == RoleConcentrator:
		v.missing("concentrator", "concentrator", "required when role is concentrator; expected a mapping with listen, cert_file, key_file and edges")
	case c.Concentrator != nil && roleKnown && c.Role != RoleConcentrator:
		v.errorf("concentrator", "only allowed when role is concentrator; role is %q", c.Role)
	case c.Concentrator != nil:
		c.Concentrator.validate(v)
	}
	c.Paths.validate(v)
	c.FEC.validate(v)
	if _, err := policy.NewPicker(c.Scheduler); err != nil {
		v.errorf("scheduler", "expected one of %s, got %q", strings.Join(policy.Schedulers, ", "), c.Scheduler)
	}
	c.Classify.validate(v)
}

func (t *TUNConfig) validate(v *configValidator) {
	if t.Name != "" && !validIfName(t.Name) {
		v.errorf("tun.name", "expected an interface name of 1 to %d bytes without '/', ':' or white space, got %q", MaxIfNameBytes, t.Name)
	}
	if len(t.Addresses) == 0 {
		v.missing("tun.addresses", "tun.addresses", "required; expected a list of inner addresses with prefix length, like [10.77.0.2/24, fd77::2/64]")
	}
	hasIPv6 := false
	seen := make(map[netip.Addr]int)
	for i, p := range t.Addresses {
		f := indexField("tun.addresses", i)
		if !p.IsValid() {
			v.errorf(f, "expected an address with prefix length, like 10.77.0.2/24")
			continue
		}
		a := p.Addr()
		if a.Is6() && !a.Is4In6() {
			hasIPv6 = true
		}
		if msg := unicastProblem(a); msg != "" {
			v.errorf(f, "expected a unicast address with prefix length, got %s (%s)", p, msg)
			continue
		}
		if j, dup := seen[a]; dup {
			v.errorf(f, "address %s is already in %s", a, v.where(indexField("tun.addresses", j)))
			continue
		}
		seen[a] = i
	}
	checkPrefixList(v, "tun.routes", t.Routes, "10.78.0.0/16")
	for _, p := range t.Routes {
		if p.IsValid() && p.Addr().Is6() {
			hasIPv6 = true
		}
	}
	if t.MTU != 0 {
		switch {
		case t.MTU < MinMTUBytes || t.MTU > MaxMTUBytes:
			v.errorf("tun.mtu", `expected "auto" or an integer number of bytes from %d to %d, got %d`, MinMTUBytes, MaxMTUBytes, t.MTU)
		case hasIPv6 && t.MTU < MinMTUIPv6Bytes:
			v.errorf("tun.mtu", "expected at least %d bytes because the tunnel carries IPv6 (RFC 8200 minimum link MTU), got %d", MinMTUIPv6Bytes, t.MTU)
		}
	}
}

// checkPrefixList checks that each prefix of a list is valid, has its host
// bits zero and appears once.
func checkPrefixList(v *configValidator, field string, ps []netip.Prefix, example string) {
	seen := make(map[netip.Prefix]int)
	for i, p := range ps {
		f := indexField(field, i)
		switch {
		case !p.IsValid():
			v.errorf(f, "expected a network prefix, like %s", example)
		case p.Addr().Is4In6():
			v.errorf(f, "expected an IPv4 prefix in IPv4 form, got %s", p)
		case p != p.Masked():
			v.errorf(f, "expected a network prefix with the host bits zero, like %s, got %s", p.Masked(), p)
		default:
			if j, dup := seen[p]; dup {
				v.errorf(f, "prefix %s is already in %s", p, v.where(indexField(field, j)))
				continue
			}
			seen[p] = i
		}
	}
}

// unicastProblem says why a is not usable as a unicast address, or "".
func unicastProblem(a netip.Addr) string {
	switch {
	case a.IsUnspecified():
		return "unspecified"
	case a.IsMulticast():
		return "multicast"
	case a.Is4In6():
		return "IPv4-mapped IPv6; write the IPv4 form"
	case a.Is4() && a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "broadcast"
	}
	return ""
}

func (e *EdgeConfig) validate(v *configValidator) {
	if e.ID == "" {
		v.missing("edge.id", "edge", "required; expected 1 to %d characters from A-Z a-z 0-9 . _ -, like van-17", MaxEdgeIDBytes)
	} else if !validName(e.ID, MaxEdgeIDBytes) {
		v.errorf("edge.id", "expected 1 to %d characters from A-Z a-z 0-9 . _ -, got %q", MaxEdgeIDBytes, e.ID)
	}

	var concentratorIP netip.Addr
	if e.Concentrator == "" {
		v.missing("edge.concentrator", "edge", "required; expected the concentrator's host:port, like concentrator.example.net:4433")
	} else if host, ok := checkHostPort(e.Concentrator, true, false); !ok {
		v.errorf("edge.concentrator", "expected host:port, like concentrator.example.net:4433, 203.0.113.10:4433 or [2001:db8::10]:4433, got %q", e.Concentrator)
	} else if a, err := netip.ParseAddr(host); err == nil {
		concentratorIP = a
	}
	if e.ServerName != "" && !validHostname(e.ServerName) {
		if _, err := netip.ParseAddr(e.ServerName); err != nil {
			v.errorf("edge.server_name", "expected a DNS name or an IP address, like concentrator.example.net, got %q", e.ServerName)
		}
	}

	if e.CAFile == "" && len(e.ServerCertSHA256) == 0 {
		v.missing("edge.ca_file", "edge", "one of ca_file or server_cert_sha256 is required; bondd does not bond to a concentrator it cannot authenticate")
	}
	if n := len(e.ServerCertSHA256); n != 0 && n != sha256.Size {
		v.errorf("edge.server_cert_sha256", "expected a %d-byte SHA-256, got %d bytes", sha256.Size, n)
	}

	switch {
	case e.TokenFile != "" && (e.CertFile != "" || e.KeyFile != ""):
		v.errorf("edge.token_file", "set either token_file or cert_file and key_file, not both")
	case e.TokenFile == "" && e.CertFile == "" && e.KeyFile == "":
		v.missing("edge.token_file", "edge", "a credential is required; expected token_file, or cert_file and key_file")
	case e.CertFile != "" && e.KeyFile == "":
		v.missing("edge.key_file", "edge.cert_file", "required with cert_file; expected the PEM file of this edge's private key")
	case e.KeyFile != "" && e.CertFile == "":
		v.missing("edge.cert_file", "edge.key_file", "required with key_file; expected the PEM file of this edge's client certificate")
	}

	switch {
	case len(e.Uplinks) == 0:
		v.missing("edge.uplinks", "edge.uplinks", "required; expected a list of 1 to %d uplinks, each with a name and a bind address or an interface", MaxUplinks)
	case len(e.Uplinks) > MaxUplinks:
		v.errorf(indexField("edge.uplinks", MaxUplinks), "at most %d uplinks are allowed, got %d", MaxUplinks, len(e.Uplinks))
	}
	names := make(map[string]int)
	sockets := make(map[string]int)
	for i := range e.Uplinks {
		u := &e.Uplinks[i]
		path := indexField("edge.uplinks", i)
		switch {
		case u.Name == "":
			v.missing(path+".name", path, "required; expected 1 to %d characters from A-Z a-z 0-9 . _ -, like cell-a", MaxUplinkNameBytes)
		case !validName(u.Name, MaxUplinkNameBytes):
			v.errorf(path+".name", "expected 1 to %d characters from A-Z a-z 0-9 . _ -, got %q", MaxUplinkNameBytes, u.Name)
		default:
			if j, dup := names[u.Name]; dup {
				v.errorf(path+".name", "uplink name %q is already used by %s", u.Name, v.where(indexField("edge.uplinks", j)))
			} else {
				names[u.Name] = i
			}
		}
		if !u.Bind.IsValid() && u.Interface == "" {
			v.missing(path+".bind", path, "at least one of bind (a local IP address) or interface (a device name) is required")
		}
		if u.Bind.IsValid() {
			if msg := unicastProblem(u.Bind); msg != "" {
				v.errorf(path+".bind", "expected a local unicast IP address, got %s (%s)", u.Bind, msg)
			} else if concentratorIP.IsValid() && u.Bind.Is4() != concentratorIP.Is4() {
				v.errorf(path+".bind", "expected an %s address to reach the concentrator at %s, got %s", addrFamily(concentratorIP), concentratorIP, u.Bind)
			}
		}
		if _, ok := checkHostPort(u.Remote, true, false); u.Remote != "" && !ok {
			v.errorf(path+".remote", "expected host:port, like 203.0.113.11:4433, got %q", u.Remote)
		}
		if u.Interface != "" && !validIfName(u.Interface) {
			v.errorf(path+".interface", "expected an interface name of 1 to %d bytes without '/', ':' or white space, got %q", MaxIfNameBytes, u.Interface)
		}
		if u.Bind.IsValid() || u.Interface != "" {
			sock := u.Bind.String() + "%" + u.Interface
			if !u.Bind.IsValid() {
				sock = "%" + u.Interface
			}
			if j, dup := sockets[sock]; dup {
				v.errorf(path, "same bind and interface as %s; each uplink needs its own socket", v.where(indexField("edge.uplinks", j)))
			} else {
				sockets[sock] = i
			}
		}
		for _, k := range slices.Sorted(maps.Keys(u.Labels)) {
			val := u.Labels[k]
			f := joinField(path+".labels", k)
			switch {
			case k == "":
				v.errorf(path+".labels", "expected non-empty label keys, got an empty key")
			case len(k) > MaxLabelKeyBytes:
				v.errorf(f, "expected a label key of at most %d bytes, got %d bytes", MaxLabelKeyBytes, len(k))
			case val == "":
				v.errorf(f, "expected a non-empty label value, like %s: cellular", k)
			case len(val) > MaxLabelValueBytes:
				v.errorf(f, "expected a label value of at most %d bytes, got %d bytes", MaxLabelValueBytes, len(val))
			}
		}
	}
}

func addrFamily(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

func (k *ConcentratorConfig) validate(v *configValidator) {
	if k.Listen == "" {
		v.missing("concentrator.listen", "concentrator", "required; expected the UDP ip:port to listen on, like 0.0.0.0:4433, [::]:4433 or :4433")
	} else if _, ok := checkHostPort(k.Listen, false, true); !ok {
		v.errorf("concentrator.listen", "expected ip:port or :port, like 0.0.0.0:4433, [::]:4433 or :4433, got %q", k.Listen)
	}
	if k.CertFile == "" {
		v.missing("concentrator.cert_file", "concentrator", "required; expected the PEM file of the concentrator's certificate")
	}
	if k.KeyFile == "" {
		v.missing("concentrator.key_file", "concentrator", "required; expected the PEM file of the concentrator's private key")
	}
	if len(k.Edges) == 0 {
		v.missing("concentrator.edges", "concentrator.edges", "required; expected a list of the edges to accept, each with id, token_file or cert_cn, and allowed_prefixes")
	}

	type owned struct {
		edge  int
		field string
		p     netip.Prefix
	}
	var (
		ids      = make(map[string]int)
		cns      = make(map[string]int)
		tokens   = make(map[string]int)
		prefixes []owned
		firstCN  = -1
	)
	for i := range k.Edges {
		e := &k.Edges[i]
		path := indexField("concentrator.edges", i)
		other := func(j int) string { return v.where(indexField("concentrator.edges", j)) }
		switch {
		case e.ID == "":
			v.missing(path+".id", path, "required; expected the edge's id (its edge.id), like van-17")
		case !validName(e.ID, MaxEdgeIDBytes):
			v.errorf(path+".id", "expected 1 to %d characters from A-Z a-z 0-9 . _ -, got %q", MaxEdgeIDBytes, e.ID)
		default:
			if j, dup := ids[e.ID]; dup {
				v.errorf(path+".id", "edge id %q is already used by %s", e.ID, other(j))
			} else {
				ids[e.ID] = i
			}
		}

		switch {
		case e.TokenFile != "" && e.CertCN != "":
			v.errorf(path+".token_file", "set either token_file or cert_cn, not both")
		case e.TokenFile == "" && e.CertCN == "":
			v.missing(path+".token_file", path, "a credential is required; expected token_file or cert_cn")
		case e.TokenFile != "":
			if j, dup := tokens[e.TokenFile]; dup {
				v.errorf(path+".token_file", "token file %s is already used by %s; each edge needs its own token", e.TokenFile, other(j))
			} else {
				tokens[e.TokenFile] = i
			}
		case len(e.CertCN) > MaxCertCNBytes:
			v.errorf(path+".cert_cn", "expected a CommonName of at most %d bytes, got %d bytes", MaxCertCNBytes, len(e.CertCN))
		default:
			if firstCN < 0 {
				firstCN = i
			}
			if j, dup := cns[e.CertCN]; dup {
				v.errorf(path+".cert_cn", "cert_cn %q is already used by %s", e.CertCN, other(j))
			} else {
				cns[e.CertCN] = i
			}
		}

		pf := path + ".allowed_prefixes"
		if len(e.AllowedPrefixes) == 0 {
			v.missing(pf, path, "required; expected the inner source prefixes this edge may use, like [10.77.17.0/24]")
		}
		checkPrefixList(v, pf, e.AllowedPrefixes, "10.77.17.0/24")
		for j, p := range e.AllowedPrefixes {
			if !p.IsValid() || p != p.Masked() {
				continue
			}
			f := indexField(pf, j)
			for _, o := range prefixes {
				if !o.p.Overlaps(p) || o.p == p && o.edge == i {
					continue // disjoint, or a duplicate checkPrefixList reported
				}
				{
					who := "this edge"
					if o.edge != i {
						who = fmt.Sprintf("edge %q", k.Edges[o.edge].ID)
					}
					v.errorf(f, "%s overlaps %s of %s at %s; allowed prefixes must not overlap", p, o.p, who, v.where(o.field))
					break
				}
			}
			prefixes = append(prefixes, owned{i, f, p})
		}
	}
	if firstCN >= 0 && k.ClientCAFile == "" {
		v.missing("concentrator.client_ca_file", indexField("concentrator.edges", firstCN)+".cert_cn",
			"required because %s authenticates with a client certificate; expected the PEM file of the CA that signs edge certificates",
			indexField("concentrator.edges", firstCN))
	}
}

func (p *PathsConfig) validate(v *configValidator) {
	if p.MaxQueueDelay < 0 || p.MaxQueueDelay > 10*time.Second {
		v.errorf("paths.max_queue_delay", "expected a duration up to 10s, like 200ms, got %s", p.MaxQueueDelay)
	}
	if p.QueuePackets < 0 || p.QueuePackets > MaxQueuePackets {
		v.errorf("paths.queue_packets", "expected an integer from 1 to %d packets, got %d", MaxQueuePackets, p.QueuePackets)
	}
	if p.InitialPacketSizeBytes != 0 && (p.InitialPacketSizeBytes < MinInitialPacketSizeBytes || p.InitialPacketSizeBytes > MaxInitialPacketSizeBytes) {
		v.errorf("paths.initial_packet_size_bytes", "expected an integer from %d to %d bytes, got %d", MinInitialPacketSizeBytes, MaxInitialPacketSizeBytes, p.InitialPacketSizeBytes)
	}
	durs := []struct {
		field string
		d     time.Duration
	}{
		{"paths.keepalive", p.Keepalive},
		{"paths.idle_timeout", p.IdleTimeout},
		{"paths.redial_min", p.RedialMin},
		{"paths.redial_max", p.RedialMax},
	}
	negative := false
	for _, d := range durs {
		if d.d < 0 {
			v.errorf(d.field, "expected a positive duration, like 1s, got %s", d.d)
			negative = true
		}
	}
	if negative {
		return
	}
	keepalive, idle := orDefault(p.Keepalive, DefaultKeepalive), orDefault(p.IdleTimeout, DefaultIdleTimeout)
	if keepalive >= idle {
		v.errorf("paths.keepalive", "expected less than idle_timeout (%s), got %s", idle, keepalive)
	}
	redialMin, redialMax := orDefault(p.RedialMin, DefaultRedialMin), orDefault(p.RedialMax, DefaultRedialMax)
	if redialMin > redialMax {
		v.errorf("paths.redial_min", "expected at most redial_max (%s), got %s", redialMax, redialMin)
	}
}

// classLabelKeyRE is what classify.NewClassSet accepts as a label key.
var classLabelKeyRE = regexp.MustCompile(`^[a-z][a-z0-9_.-]*$`)

func (c *ClassifyConfig) validate(v *configValidator) {
	c.compile(v)
}

// compile checks c, reporting every problem to v with the field at fault,
// and then compiles its classes; the set is nil when there are none or
// when a problem was found.
func (c *ClassifyConfig) compile(v *configValidator) *classify.ClassSet {
	before := len(v.errs)
	checkPortRanges(v, "classify.rtp_ports", c.RTPPorts)
	if n := len(c.RTPPorts); n > classify.MaxRTPPortRanges {
		v.errorf(indexField("classify.rtp_ports", classify.MaxRTPPortRanges), "at most %d port ranges are allowed, got %d", classify.MaxRTPPortRanges, n)
	}
	for _, pt := range slices.Sorted(maps.Keys(c.PayloadTypes)) {
		f := joinField("classify.payload_types", strconv.Itoa(int(pt)))
		switch codec := c.PayloadTypes[pt]; {
		case pt > 127:
			v.errorf(f, "expected %s as the key, got %d", payloadTypeWant, pt)
		case pt >= 72 && pt <= 76:
			v.errorf(f, "payload type %d cannot be told from RTCP (packet types 200-204 with the marker bit, RFC 3550 §12.1, RFC 5761 §4); expected 0 to 71 or 77 to 127", pt)
		case codec != classify.CodecUnknown && codec.String() == "":
			v.errorf(f, "unknown codec %d; expected one of %s, or auto", codec, strings.Join(codecNames(), ", "))
		}
	}

	if _, err := c.sdpPayloadTypes(); err != nil {
		v.errorf("classify.sdp", "%v", err)
	}
	if n := len(c.Classes); n > classify.MaxClasses {
		v.errorf(indexField("classify.classes", classify.MaxClasses), "at most %d classes are allowed, got %d", classify.MaxClasses, n)
	}
	names := make(map[string]int)
	labelKeys := make(map[string]bool) // distinct label keys of all classes
	for i := range c.Classes {
		cl := &c.Classes[i]
		path := indexField("classify.classes", i)
		switch {
		case cl.Name == "":
			v.missing(path+".name", path, "required; expected the name rules see as class, like video")
		case len(cl.Name) > classify.MaxLabelValueBytes:
			v.errorf(path+".name", "expected a class name of at most %d bytes, got %d bytes", classify.MaxLabelValueBytes, len(cl.Name))
		default:
			if j, dup := names[cl.Name]; dup {
				v.errorf(path+".name", "class name %q is already used by %s", cl.Name, v.where(indexField("classify.classes", j)))
			} else {
				names[cl.Name] = i
			}
		}

		mp := path + ".match"
		m := &cl.Match
		checkPrefixList(v, mp+".src", m.Src, "10.77.17.0/24")
		checkPrefixList(v, mp+".dst", m.Dst, "10.78.0.0/16")
		if n := len(m.Src) + len(m.Dst); n > classify.MaxPrefixesPerClass {
			v.errorf(mp, "at most %d prefixes (src and dst together) are allowed in one class, got %d", classify.MaxPrefixesPerClass, n)
		}
		checkPortRanges(v, mp+".src_ports", m.SrcPorts)
		checkPortRanges(v, mp+".dst_ports", m.DstPorts)
		checkPortRanges(v, mp+".ports", m.Ports)
		if n := len(m.SrcPorts) + len(m.DstPorts) + len(m.Ports); n > classify.MaxPortRangesPerClass {
			v.errorf(mp, "at most %d port ranges (src_ports, dst_ports and ports together) are allowed in one class, got %d", classify.MaxPortRangesPerClass, n)
		}
		checkDistinct(v, mp+".proto", m.Protos, nil)
		checkDistinct(v, mp+".dscp", m.DSCP, func(d uint8) string {
			if d > 63 {
				return fmt.Sprintf("expected %s, got %d", dscpWant, d)
			}
			return ""
		})

		lp := path + ".labels"
		if n := len(cl.Labels); n > classify.MaxLabelsPerClass {
			v.errorf(lp, "at most %d labels are allowed in one class, got %d", classify.MaxLabelsPerClass, n)
		}
		seen := make(map[string]bool)
		for _, l := range cl.Labels {
			f := joinField(lp, l.Key)
			_, builtin := classify.KeyByName(l.Key)
			switch {
			case l.Key == "":
				v.errorf(lp, "expected non-empty label keys, got an empty key")
			case len(l.Key) > classify.MaxKeyBytes:
				v.errorf(f, "expected a label key of at most %d bytes, got %d bytes", classify.MaxKeyBytes, len(l.Key))
			case !classLabelKeyRE.MatchString(l.Key):
				v.errorf(f, "expected a label key of a-z 0-9 _ . - starting with a lower-case letter, like media, got %q", l.Key)
			case l.Key == "class":
				v.errorf(f, "class is set by the class name; choose another label key")
			case builtin:
				v.errorf(f, "%s is a metadata key the classifier sets; choose another label key", l.Key)
			case seen[l.Key]:
				v.errorf(f, "label %q set twice", l.Key)
			case l.Value == "":
				v.errorf(f, "expected a non-empty label value, like %s: camera", l.Key)
			case len(l.Value) > classify.MaxLabelValueBytes:
				v.errorf(f, "expected a label value of at most %d bytes, got %d bytes", classify.MaxLabelValueBytes, len(l.Value))
			case !labelKeys[l.Key]:
				labelKeys[l.Key] = true
				if len(labelKeys) > classify.MaxLabelKeys {
					v.errorf(f, "%q is distinct label key %d of all classes; at most %d are allowed", l.Key, len(labelKeys), classify.MaxLabelKeys)
				}
			}
			seen[l.Key] = true
		}
	}

	if len(v.errs) > before || (v.src != nil && (v.src.badAround("classify") || v.src.badInside("classify"))) || len(c.Classes) == 0 {
		return nil
	}
	// Every bound above is classify's; this catches any check it adds.
	set, err := classify.NewClassSet(c.Classes)
	if err != nil {
		e := classSetError(err)
		v.add(e.Field, e.Field, "%s", []any{e.Msg})
		return nil
	}
	return set
}

// classSetError turns an error of classify.NewClassSet, which names the
// class by its 1-based position, into the field of that class.
func classSetError(err error) *ConfigError {
	msg := strings.TrimPrefix(err.Error(), "classify: ")
	e := &ConfigError{Field: "classify.classes", Msg: msg}
	rest, ok := strings.CutPrefix(msg, "class ")
	if !ok {
		return e
	}
	num, rest, ok := strings.Cut(rest, " (")
	i, err := strconv.Atoi(num)
	if !ok || err != nil || i < 1 {
		return e
	}
	if q, err := strconv.QuotedPrefix(rest); err == nil {
		if m, ok := strings.CutPrefix(rest[len(q):], "): "); ok {
			e.Field, e.Msg = indexField("classify.classes", i-1), m
		}
	}
	return e
}

// Options returns the classifier options c describes, with its classes
// compiled into a ClassSet. It runs the checks Validate runs on the section,
// so a ClassifyConfig built in Go gets the same messages; a ClassifyConfig
// from LoadConfig or ParseConfig has passed them, and its errors carry the
// file and line. The error, if any, is ConfigErrors. A nil c gives the zero
// Options (heuristic RTP detection, no classes).
func (c *ClassifyConfig) Options() (classify.Options, error) {
	if c == nil {
		return classify.Options{}, nil
	}
	v := &configValidator{src: c.src}
	set := c.compile(v)
	if len(v.errs) > 0 {
		v.errs.sort()
		return classify.Options{}, v.errs
	}
	pts, _ := c.sdpPayloadTypes()
	for pt, codec := range c.PayloadTypes {
		pts[pt] = codec // payload_types override the SDP file
	}
	return classify.Options{
		RTPPorts:     slices.Clone(c.RTPPorts),
		PayloadTypes: pts,
		NoHeuristic:  c.NoRTPHeuristic,
		Classes:      set,
	}, nil
}

// sdpPayloadTypes reads the SDP file's payload types (an empty map when
// there is none); the error is a *classify.SDPError.
func (c *ClassifyConfig) sdpPayloadTypes() (map[uint8]classify.Codec, error) {
	if c.SDP == "" {
		return map[uint8]classify.Codec{}, nil
	}
	return classify.LoadSDP(c.SDP)
}

// checkPortRanges checks that each range of a list has Lo ≤ Hi and
// overlaps no earlier one.
func checkPortRanges(v *configValidator, field string, rs []classify.PortRange) {
	for i, r := range rs {
		f := indexField(field, i)
		if r.Lo > r.Hi {
			v.errorf(f, "expected a range LO-HI with LO at most HI, like %d-%d, got %d-%d", r.Hi, r.Lo, r.Lo, r.Hi)
			continue
		}
		for j, o := range rs[:i] {
			if o.Lo <= o.Hi && r.Lo <= o.Hi && o.Lo <= r.Hi {
				v.errorf(f, "%s overlaps %s at %s", formatPortRange(r), formatPortRange(o), v.where(indexField(field, j)))
				break
			}
		}
	}
}

func formatPortRange(r classify.PortRange) string {
	if r.Lo == r.Hi {
		return strconv.Itoa(int(r.Lo))
	}
	return fmt.Sprintf("%d-%d", r.Lo, r.Hi)
}

// checkDistinct reports values of a list that bad rejects, and values that
// appear twice.
func checkDistinct(v *configValidator, field string, vals []uint8, bad func(uint8) string) {
	seen := make(map[uint8]int)
	for i, x := range vals {
		f := indexField(field, i)
		if bad != nil {
			if msg := bad(x); msg != "" {
				v.errorf(f, "%s", msg)
				continue
			}
		}
		if j, dup := seen[x]; dup {
			v.errorf(f, "%d is already in %s", x, v.where(indexField(field, j)))
			continue
		}
		seen[x] = i
	}
}

// orDefault returns d, or def when d is zero.
func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// ---------------------------------------------------------------------------
// Value checks

// validName reports whether s is 1 to max bytes of [A-Za-z0-9._-].
func validName(s string, max int) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// validIfName reports whether Linux accepts s as an interface name
// (dev_valid_name): 1 to 15 bytes, not "." or "..", no '/', ':' or white
// space.
func validIfName(s string) bool {
	if len(s) == 0 || len(s) > MaxIfNameBytes || s == "." || s == ".." {
		return false
	}
	return !strings.ContainsAny(s, "/: \t\n\v\f\r")
}

// validHostname reports whether s is a DNS name: dot-separated labels of
// 1 to 63 bytes of letters, digits, '-' and '_', 253 bytes at most.
func validHostname(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// checkHostPort checks s as host:port with a numeric port 1..65535 and
// returns the host. The host may be an IP address, a DNS name if
// allowName, and empty if allowEmptyHost.
func checkHostPort(s string, allowName, allowEmptyHost bool) (string, bool) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", false
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return "", false
	}
	switch {
	case host == "":
		return host, allowEmptyHost
	case strings.Contains(host, ":") || strings.Count(host, ".") == 3 && strings.Trim(host, "0123456789.") == "":
		// An IP literal, or something that only looks like an IPv4
		// address (must parse as one, not as a name).
		_, err := netip.ParseAddr(host)
		return host, err == nil
	default:
		return host, allowName && validHostname(host)
	}
}
