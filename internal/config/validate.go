package config

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/tunnel"
)

// ---------------------------------------------------------------------------
// Step 4: validate

// configValidator collects semantic errors. Errors about a field whose decoding
// already failed are suppressed, so that one mistake yields one error.
type configValidator struct {
	src  *configSource // nil for a Config built in Go
	errs Errors
}

func (v *configValidator) add(field, lineField, format string, args []any) {
	e := &Error{Field: field, Msg: fmt.Sprintf(format, args...)}
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
	c.validateState(v) // state.go
	c.Web.validate(v)

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
	c.checkMTUBudget(v)
	c.FEC.validate(v)
	if _, err := policy.NewPicker(c.Scheduler); err != nil {
		v.errorf("scheduler", "expected one of %s, got %q", strings.Join(policy.Schedulers, ", "), c.Scheduler)
	}
	c.Classify.validate(v)
}

// checkMTUBudget rejects a tun.mtu larger than what one QUIC datagram
// carries from a connection's first packet (tunnel.MTUFor of
// paths.initial_packet_size_bytes, 1280 bytes by default): the daemon
// refuses such an MTU when it starts, so the config does at load time, with
// the line. Values outside the ranges are reported by TUNConfig.validate
// and PathsConfig.validate instead.
func (c *Config) checkMTUBudget(v *configValidator) {
	mtu, ips := c.TUN.MTU, c.Paths.InitialPacketSizeBytes
	if ips == 0 {
		ips = DefaultInitialPacketSizeBytes
	}
	if mtu < MinMTUBytes || mtu > MaxMTUBytes || ips < MinInitialPacketSizeBytes || ips > MaxInitialPacketSizeBytes {
		return
	}
	if limit := tunnel.MTUFor(ips); mtu > limit {
		v.errorf("tun.mtu", `%d bytes exceeds the %d bytes one QUIC datagram carries with %d-byte QUIC packets (paths.initial_packet_size_bytes); expected "auto" or at most %d`, mtu, limit, ips, limit)
	}
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
	e.validateFleet(v)
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
	if k.BGP != nil {
		k.BGP.validate(v)
	}
	if k.Handshakes != nil {
		k.Handshakes.validate(v)
	}
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
	switch p.RateControl {
	case "", tunnel.RateControlBondd, tunnel.RateControlQUIC:
	default:
		v.errorf("paths.rate_control", "expected bondd or quic, got %q", p.RateControl)
	}
	if p.InitialPacketSizeBytes != 0 && (p.InitialPacketSizeBytes < MinInitialPacketSizeBytes || p.InitialPacketSizeBytes > MaxInitialPacketSizeBytes) {
		v.errorf("paths.initial_packet_size_bytes", "expected an integer from %d to %d bytes, got %d", MinInitialPacketSizeBytes, MaxInitialPacketSizeBytes, p.InitialPacketSizeBytes)
	}
	durs := []struct {
		field string
		d     time.Duration
	}{
		{"paths.keepalive", p.Keepalive},
		{"paths.idle_keepalive", p.IdleKeepalive},
		{"paths.idle_timeout", p.IdleTimeout},
		{"paths.redial_min", p.RedialMin},
		{"paths.redial_max", p.RedialMax},
		{"paths.suspect_min", p.SuspectMin},
		{"paths.dead_after", p.DeadAfter},
		{"paths.stale_after", p.StaleAfter},
		{"paths.pmtu_raise", p.PMTURaise},
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
	if p.IdleKeepalive != 0 && (p.IdleKeepalive < keepalive || p.IdleKeepalive > MaxIdleKeepalive) {
		v.errorf("paths.idle_keepalive", "expected a duration from keepalive (%s) to %s, got %s", keepalive, MaxIdleKeepalive, p.IdleKeepalive)
	}
	redialMin, redialMax := orDefault(p.RedialMin, DefaultRedialMin), orDefault(p.RedialMax, DefaultRedialMax)
	if redialMin > redialMax {
		v.errorf("paths.redial_min", "expected at most redial_max (%s), got %s", redialMax, redialMin)
	}
	p.validateLiveness(v, idle)
	if p.PMTURaise > 10*time.Minute {
		v.errorf("paths.pmtu_raise", "expected at most 10m, got %s", p.PMTURaise)
	}
}

// validateLiveness checks the liveness bounds against each other and the
// idle timeout idle: the checks tunnel.PathOptions would fail at start.
func (p *PathsConfig) validateLiveness(v *configValidator, idle time.Duration) {
	if p.SuspectRTTs != 0 && (p.SuspectRTTs < 1 || p.SuspectRTTs > 100) {
		v.errorf("paths.suspect_rtts", "expected a number of smoothed RTTs from 1 to 100, got %g", p.SuspectRTTs)
	}
	suspectMin := orDefault(p.SuspectMin, policy.DefaultSuspectMin)
	if suspectMin < 10*time.Millisecond {
		v.errorf("paths.suspect_min", "expected at least 10ms, got %s", suspectMin)
	}
	if p.DeadAfter != 0 && (p.DeadAfter <= suspectMin || p.DeadAfter > idle) {
		v.errorf("paths.dead_after", "expected more than suspect_min (%s) and at most idle_timeout (%s), got %s", suspectMin, idle, p.DeadAfter)
	}
	if p.DeadAfter == 0 && min(tunnel.DefaultDeadAfter, idle) <= suspectMin {
		v.errorf("paths.idle_timeout", "expected more than suspect_min (%s): a path is declared dead at min(dead_after, idle_timeout), got %s", suspectMin, idle)
	}
	if p.StaleAfter != 0 {
		if queue := orDefault(p.MaxQueueDelay, DefaultMaxQueueDelay); p.StaleAfter < queue { // else datagrams the sender may still send arrive stale
			v.errorf("paths.stale_after", "expected at least max_queue_delay (%s), got %s", queue, p.StaleAfter)
		}
	}
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
