package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/bondd/bondd/classify"
	"github.com/bondd/bondd/internal/yamlfile"
	"github.com/bondd/bondd/policy"
)

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
	configKeys       = []string{"role", "log_level", "log_format", "metrics_listen", "qlog_dir", "state_dir", "state_flush", "usage_retention_months", "tun", "edge", "concentrator", "paths", "scheduler", "fec", "rules", "classify", "web"}
	fecKeys          = []string{"mode", "k", "alpha", "ratio", "budget", "video_residual", "placement"}
	tunKeys          = []string{"name", "addresses", "mtu", "routes"}
	edgeKeys         = []string{"id", "concentrator", "server_name", "ca_file", "server_cert_sha256", "token_file", "cert_file", "key_file", "uplinks", "downlink_rules", "failover"}
	uplinkKeys       = []string{"name", "bind", "interface", "remote", "labels", "leo_reconf", "budget", "budget_direction", "budget_reset_day"}
	leoReconfKeys    = []string{"seconds", "window_ms", "hold_ms"}
	concentratorKeys = []string{"listen", "cert_file", "key_file", "client_ca_file", "edges", "bgp", "handshakes"}
	edgeEntryKeys    = []string{"id", "token_file", "cert_cn", "allowed_prefixes", "allow_edge_rules", "policy_label_keys"}
	pathsKeys        = []string{"queue_packets", "max_queue_delay", "keepalive", "idle_keepalive", "idle_timeout", "redial_min", "redial_max", "initial_packet_size_bytes", "rate_control", "suspect_rtts", "suspect_min", "dead_after", "stale_after", "pmtu_discovery", "pmtu_raise", "retransmit"}
	classifyKeys     = []string{"rtp_ports", "payload_types", "rtp_heuristic", "classes", "sdp"}
	classKeys        = []string{"name", "match", "labels"}
	classMatchKeys   = []string{"proto", "src", "dst", "src_ports", "dst_ports", "ports", "dscp"}
)

// Retired keys of an uplink: still accepted, ignored, and each occurrence
// warned about (Config.Warnings) with the reason, so that a config written
// for an older bondd starts.
var retiredUplinkKeys = map[string]string{
	"lanes": "retired and ignored: bondd's own congestion controller now sets each path's rate on one QUIC connection " +
		"(lanes, several connections per uplink under quic-go's loss-based window, delivered 0.30–0.46 of the links' " +
		"summed capacity; see docs/performance.md); remove the key",
}

// configDecoder turns a yaml.Node tree into a Config, collecting errors.
type configDecoder struct {
	src   *configSource
	errs  Errors
	warns Errors // problems that do not stop the config (Config.Warnings)
}

// warnf records a warning at n: the config still loads.
func (d *configDecoder) warnf(n *yaml.Node, field, format string, args ...any) {
	d.warns = append(d.warns, &Error{File: d.src.file, Line: n.Line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// retire warns about every key of the mapping n in retired (key → why) and
// returns n without them, for fields; n itself is not modified. Anything
// but a mapping is returned as it is.
func (d *configDecoder) retire(n *yaml.Node, path string, retired map[string]string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return n
	}
	var kept []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := derefNode(n.Content[i])
		if why, ok := retired[k.Value]; ok && k.Kind == yaml.ScalarNode {
			d.warnf(k, joinField(path, k.Value), "%s", why)
			continue
		}
		kept = append(kept, n.Content[i], n.Content[i+1])
	}
	if len(kept) == len(n.Content) {
		return n
	}
	m := *n
	m.Content = kept
	return &m
}

func (d *configDecoder) errorf(n *yaml.Node, field, format string, args ...any) {
	d.errs = append(d.errs, &Error{File: d.src.file, Line: n.Line, Field: field, Msg: fmt.Sprintf(format, args...)})
	d.src.bad[field] = true
}

// document parses data as a single YAML document and returns its root
// mapping, or nil after recording an error.
func (d *configDecoder) document(data []byte) *yaml.Node {
	fail := func(line int, format string, args ...any) *yaml.Node {
		d.errs = append(d.errs, &Error{File: d.src.file, Line: line, Msg: fmt.Sprintf(format, args...)})
		return nil
	}
	root, err := yamlfile.Parse(data)
	var se *yamlfile.SyntaxError
	var ee *yamlfile.ExtraDocumentError
	switch {
	case errors.As(err, &se):
		return fail(se.Line, "invalid YAML: %s", se.Msg)
	case errors.As(err, &ee):
		return fail(ee.Line, "a second YAML document; expected one document per config file")
	case err != nil:
		return fail(1, "invalid YAML: %v", err)
	}
	root = derefNode(root)
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

func isNullNode(n *yaml.Node) bool { return yamlfile.IsNull(n) }

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
// if it is a likely typo (yamlfile.Suggest).
func suggestKey(key string, known []string) string {
	if s := yamlfile.Suggest(key, known); s != "" {
		return fmt.Sprintf("; did you mean %q?", s)
	}
	return ""
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
	d.state(f, c) // state.go
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
	if n := f["web"]; n != nil {
		d.web(n, &c.Web)
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
		ID:         d.str(f["id"], "edge.id", "an edge id"),
		ServerName: d.str(f["server_name"], "edge.server_name", "a DNS name"),
		CAFile:     d.str(f["ca_file"], "edge.ca_file", "a file path"),
		TokenFile:  d.str(f["token_file"], "edge.token_file", "a file path"),
		CertFile:   d.str(f["cert_file"], "edge.cert_file", "a file path"),
		KeyFile:    d.str(f["key_file"], "edge.key_file", "a file path"),

		DownlinkRules: d.str(f["downlink_rules"], "edge.downlink_rules", "a file path"),
	}
	e.Concentrator, e.Concentrators = d.concentratorList(f["concentrator"])
	if n := f["failover"]; n != nil {
		e.Failover = d.failover(n)
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
	f := d.fields(d.retire(n, path, retiredUplinkKeys), path, uplinkKeys)
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
	d.budgetOptions(f, path, &u) // state.go
	if l := f["labels"]; l != nil {
		u.Labels = d.labels(l, path+".labels")
	}
	return u
}

// leoReconf decodes an uplink's leo_reconf: true (the Starlink schedule),
// false (none), or a mapping {seconds: [0..59, ...], window_ms: 1..7500,
// hold_ms: 0..1000} (hold_ms 0: no hold).
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
		if slices.Contains(l.Seconds, v) {
			d.errorf(it, sf, "second %d is listed twice", v)
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
	if h := f["hold_ms"]; h != nil {
		maxMS := int(policy.MaxLEOHold / time.Millisecond)
		want := fmt.Sprintf("a hold in milliseconds from 0 (none) to %d after each second, like 100", maxMS)
		if s, ok := d.scalar(h, field+".hold_ms", want); ok {
			switch v, err := strconv.Atoi(s); {
			case err != nil || v < 0 || v > maxMS:
				d.errorf(h, field+".hold_ms", "expected %s, got %q", want, s)
			case v == 0:
				l.Hold = -1
			default:
				l.Hold = time.Duration(v) * time.Millisecond
			}
		}
	}
	return l
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
	if n := f["bgp"]; n != nil {
		c.BGP = d.bgp(n)
	}
	if n := f["handshakes"]; n != nil {
		c.Handshakes = d.handshakes(n) // handshakes.go
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
	p.IdleKeepalive = d.duration(f["idle_keepalive"], "paths.idle_keepalive")
	p.IdleTimeout = d.duration(f["idle_timeout"], "paths.idle_timeout")
	p.RedialMin = d.duration(f["redial_min"], "paths.redial_min")
	p.RedialMax = d.duration(f["redial_max"], "paths.redial_max")
	p.InitialPacketSizeBytes = d.integer(f["initial_packet_size_bytes"], "paths.initial_packet_size_bytes", "an integer number of bytes")
	p.RateControl = d.str(f["rate_control"], "paths.rate_control", "bondd or quic")
	p.SuspectRTTs = d.float(f["suspect_rtts"], "paths.suspect_rtts", "a number of smoothed RTTs, like 3")
	p.SuspectMin = d.duration(f["suspect_min"], "paths.suspect_min")
	p.DeadAfter = d.duration(f["dead_after"], "paths.dead_after")
	p.StaleAfter = d.duration(f["stale_after"], "paths.stale_after")
	if on, ok := d.boolean(f["pmtu_discovery"], "paths.pmtu_discovery"); ok {
		p.PMTUOff = !on
	}
	p.PMTURaise = d.duration(f["pmtu_raise"], "paths.pmtu_raise")
	if on, ok := d.boolean(f["retransmit"], "paths.retransmit"); ok {
		p.RetransmitOff = !on
	}
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
	c.VideoResidual = d.float(f["video_residual"], "fec.video_residual", "a probability, like 0.0001")
	c.Placement = d.str(f["placement"], "fec.placement", "rate, earliest or rate+earliest")
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
