package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testToken is a valid token (32 bytes) for fixture files.
const testToken = "00112233445566778899aabbccddeeff"

// configDir returns a directory holding the files the test configs refer
// to, by relative name.
func configDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // umask
			t.Fatal(err)
		}
	}
	for _, name := range []string{"ca.pem", "van-17.pem", "van-17.key", "concentrator.pem", "concentrator.key", "edges-ca.pem"} {
		write(name, "-----BEGIN PLACEHOLDER-----\n", 0o644)
	}
	write("van-17.token", testToken+"\n", 0o600)
	write("van-18.token", "  "+testToken+"ff\n\n", 0o400)
	write("short.token", "0123456789\n", 0o600)
	write("shared.token", testToken+"\n", 0o640)
	if err := os.Mkdir(filepath.Join(dir, "certs"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// snippet strips the newline after the opening backquote, so that line 1 of a
// snippet is the line below it.
func snippet(s string) string { return strings.TrimPrefix(s, "\n") }

// Minimal valid configs; cases below change one thing.
var (
	// edgeHead is an edge config up to its uplinks.
	edgeHead = snippet(`
role: edge
tun: {addresses: [10.77.17.1/24]}
edge:
  id: van-17
  concentrator: concentrator.example.net:4433
  ca_file: ca.pem
  token_file: van-17.token
  uplinks:
`)
	edgeOK         = edgeHead + "    - {name: cell-a, interface: wwan0}\n"
	concentratorOK = snippet(`
role: concentrator
tun: {addresses: [10.77.0.1/24]}
concentrator:
  listen: 0.0.0.0:4433
  cert_file: concentrator.pem
  key_file: concentrator.key
  edges:
    - {id: van-17, token_file: van-17.token, allowed_prefixes: [10.77.17.0/24]}
`)
)

func TestConfigParse(t *testing.T) {
	dir := configDir(t)
	tests := []struct {
		name string
		in   string
		want string // substring of the error; "" means no error
	}{
		{"edge minimal", edgeOK, ""},
		{"concentrator minimal", concentratorOK, ""},

		// The document.
		{"empty", "", "bondd.yaml:1: empty config; expected a mapping"},
		{"only comments", "# nothing\n", "bondd.yaml:1: empty config"},
		{"null document", "---\n", "bondd.yaml:1: empty config"},
		{"yaml syntax", "role: edge\ntun: [a\n", "bondd.yaml:2: invalid YAML: did not find expected ',' or ']'"},
		{"yaml stray list item", "role: edge\ntun: {}\n- x\n", "bondd.yaml:3: invalid YAML: did not find expected key"},
		{"yaml colon in value", "role: edge\ntun: a: b\n", "bondd.yaml:2: invalid YAML: mapping values are not allowed in this context"},
		{"yaml tab indent", "role: edge\ntun:\n\tname: x\n", "bondd.yaml:3: invalid YAML:"},
		{"binary", "\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x03\x00>\x00", "bondd.yaml:1: invalid YAML: "},
		{"binary after text", "role: edge\ntun: {}\n\x00\x01\xfe\xff", "bondd.yaml:3: invalid YAML: "},
		{"two documents", edgeOK + "---\nrole: edge\n", "bondd.yaml:10: a second YAML document"},
		{"root is a list", "- role: edge\n", "bondd.yaml:1: expected a mapping with fields role, log_level"},
		{"unknown top-level key", edgeOK + "tunn: {}\n", `bondd.yaml:10: tunn: unknown field "tunn"; known fields: role, log_level, log_format, metrics_listen, qlog_dir, state_dir, state_flush, usage_retention_months, tun, edge, concentrator, paths, scheduler, fec, rules, classify, web; did you mean "tun"?`},
		{"unknown key far from any", edgeOK + "zzzzzzzzz: 1\n", `bondd.yaml:10: zzzzzzzzz: unknown field "zzzzzzzzz"; known fields: role,`},
		{"unknown edge key", strings.Replace(edgeOK, "  uplinks:", "  uplinkz:", 1), `bondd.yaml:8: edge.uplinkz: unknown field "uplinkz"; known fields: id, concentrator, server_name, ca_file, server_cert_sha256, token_file, cert_file, key_file, uplinks, downlink_rules, failover; did you mean "uplinks"?`},
		{"unknown uplink key", strings.Replace(edgeOK, "interface: wwan0", "iface: wwan0", 1), `bondd.yaml:9: edge.uplinks[0].iface: unknown field "iface"; known fields: name, bind, interface, remote, labels`},
		{"key set twice", edgeOK + "role: concentrator\n", "bondd.yaml:10: role: field set twice; first set at line 1"},
		{"section not a mapping", "role: edge\ntun: [10.77.17.1/24]\n", `bondd.yaml:2: tun: expected a mapping with fields name, addresses, mtu, routes; got a list`},
		{"anchors and aliases", edgeHead + snippet(`
    - {name: cell-a, interface: wwan0, labels: &cell {cost_class: metered, link_type: cellular}}
    - {name: cell-b, interface: wwan1, labels: *cell}
`), ""},

		// role, log_level, log_format.
		{"role missing", strings.Replace(edgeOK, "role: edge\n", "log_level: info\n", 1), `bondd.yaml:1: role: required; expected "edge" or "concentrator"`},
		{"role bad", strings.Replace(edgeOK, "role: edge", "role: edg", 1), `bondd.yaml:1: role: expected "edge" or "concentrator", got "edg"`},
		{"role a list", strings.Replace(edgeOK, "role: edge", "role: [edge]", 1), `bondd.yaml:1: role: expected "edge" or "concentrator", got a list`},
		{"log_level bad", edgeOK + "log_level: verbose\n", `bondd.yaml:10: log_level: expected debug, info, warn or error, got "verbose"`},
		{"log_format bad", edgeOK + "log_format: xml\n", `bondd.yaml:10: log_format: expected text or json, got "xml"`},
		{"log ok", edgeOK + "log_level: debug\nlog_format: json\n", ""},

		// tun.
		{"tun missing", strings.Replace(edgeOK, "tun: {addresses: [10.77.17.1/24]}\n", "", 1), "bondd.yaml:1: tun.addresses: required; expected a list of inner addresses with prefix length"},
		{"tun addresses empty", strings.Replace(edgeOK, "[10.77.17.1/24]", "[]", 1), "bondd.yaml:2: tun.addresses: required"},
		{"tun addresses not a list", strings.Replace(edgeOK, "[10.77.17.1/24]", "10.77.17.1/24", 1), `bondd.yaml:2: tun.addresses: expected a list of an address with prefix length, got "10.77.17.1/24"`},
		{"tun address bad", strings.Replace(edgeOK, "[10.77.17.1/24]", "[10.77.17.300/24]", 1), `bondd.yaml:2: tun.addresses[0]: expected an address with prefix length, like 10.77.0.2/24 or fd77::2/64, got "10.77.17.300/24"`},
		{"tun address without length", strings.Replace(edgeOK, "[10.77.17.1/24]", "[10.77.17.1/24, fd77::1]", 1), `bondd.yaml:2: tun.addresses[1]: expected an address with prefix length, like 10.77.0.2/24 or fd77::2/64, got "fd77::1" (the /prefix-length is missing)`},
		{"tun address multicast", strings.Replace(edgeOK, "[10.77.17.1/24]", "[224.0.0.1/24]", 1), "bondd.yaml:2: tun.addresses[0]: expected a unicast address with prefix length, got 224.0.0.1/24 (multicast)"},
		{"tun address duplicate", strings.Replace(edgeOK, "[10.77.17.1/24]", "[10.77.17.1/24, 10.77.17.1/16]", 1), "bondd.yaml:2: tun.addresses[1]: address 10.77.17.1 is already in tun.addresses[0] (line 2)"},
		{"tun name too long", strings.Replace(edgeOK, "tun: {", "tun: {name: bondd-0123456789a, ", 1), `bondd.yaml:2: tun.name: expected an interface name of 1 to 15 bytes without '/', ':' or white space, got "bondd-0123456789a"`},
		{"tun name slash", strings.Replace(edgeOK, "tun: {", "tun: {name: a/b, ", 1), `tun.name: expected an interface name`},
		{"tun name 15 bytes", strings.Replace(edgeOK, "tun: {", "tun: {name: bondd-012345678, ", 1), ""},
		{"mtu auto", strings.Replace(edgeOK, "tun: {", "tun: {mtu: auto, ", 1), ""},
		{"mtu min", strings.Replace(edgeOK, "tun: {", "tun: {mtu: 576, ", 1), ""},
		{"mtu at the datagram budget", strings.Replace(edgeOK, "tun: {", "tun: {mtu: 1280, ", 1), ""},
		{"mtu over the datagram budget", strings.Replace(edgeOK, "tun: {", "tun: {mtu: 1400, ", 1), `bondd.yaml:2: tun.mtu: 1400 bytes exceeds the 1280 bytes one QUIC datagram carries with 1360-byte QUIC packets (paths.initial_packet_size_bytes); expected "auto" or at most 1280`},
		{"mtu jumbo", strings.Replace(edgeOK, "tun: {", "tun: {mtu: 9000, ", 1), "bondd.yaml:2: tun.mtu: 9000 bytes exceeds the 1280 bytes"},
		{"mtu with larger packets", strings.Replace(edgeOK, "tun: {", "tun: {mtu: 1368, ", 1) + "paths: {initial_packet_size_bytes: 1452}\n", ""},
		{"mtu too small", strings.Replace(edgeOK, "tun: {", "tun: {mtu: 575, ", 1), `bondd.yaml:2: tun.mtu: expected "auto" or an integer number of bytes from 576 to 9000, got 575`},
		{"mtu too large", strings.Replace(edgeOK, "tun: {", "tun: {mtu: 9001, ", 1), `bondd.yaml:2: tun.mtu: expected "auto" or an integer number of bytes from 576 to 9000, got 9001`},
		{"mtu zero", strings.Replace(edgeOK, "tun: {", "tun: {mtu: 0, ", 1), `bondd.yaml:2: tun.mtu: expected "auto" or an integer number of bytes from 576 to 9000, got "0"`},
		{"mtu word", strings.Replace(edgeOK, "tun: {", "tun: {mtu: big, ", 1), `bondd.yaml:2: tun.mtu: expected "auto" or an integer number of bytes from 576 to 9000, got "big"`},
		{"mtu IPv6 too small", strings.Replace(edgeOK, "tun: {addresses: [10.77.17.1/24]", "tun: {mtu: 1279, addresses: [10.77.17.1/24, fd77::1/64]", 1), "bondd.yaml:2: tun.mtu: expected at least 1280 bytes because the tunnel carries IPv6 (RFC 8200 minimum link MTU), got 1279"},
		{"mtu IPv6 route", strings.Replace(edgeOK, "tun: {", "tun: {mtu: 1200, routes: [fd78::/48], ", 1), "bondd.yaml:2: tun.mtu: expected at least 1280 bytes"},
		{"mtu IPv6 ok", strings.Replace(edgeOK, "tun: {addresses: [10.77.17.1/24]", "tun: {mtu: 1280, addresses: [10.77.17.1/24, fd77::1/64]", 1), ""},
		{"routes ok", strings.Replace(edgeOK, "tun: {", "tun: {routes: [10.78.0.0/16, fd78::/48, 0.0.0.0/0], ", 1), ""},
		{"route host bits", strings.Replace(edgeOK, "tun: {", "tun: {routes: [10.78.1.1/16], ", 1), "bondd.yaml:2: tun.routes[0]: expected a network prefix with the host bits zero, like 10.78.0.0/16, got 10.78.1.1/16"},
		{"route bad", strings.Replace(edgeOK, "tun: {", "tun: {routes: [10.78.0.0/33], ", 1), `bondd.yaml:2: tun.routes[0]: expected a network prefix, like 10.78.0.0/16, got "10.78.0.0/33"`},
		{"route duplicate", strings.Replace(edgeOK, "tun: {", "tun: {routes: [10.78.0.0/16, 10.78.0.0/16], ", 1), "bondd.yaml:2: tun.routes[1]: prefix 10.78.0.0/16 is already in tun.routes[0] (line 2)"},

		// edge: presence.
		{"edge missing", "role: edge\ntun: {addresses: [10.77.17.1/24]}\n", "bondd.yaml:1: edge: required when role is edge"},
		{"edge null", "role: edge\ntun: {addresses: [10.77.17.1/24]}\nedge:\n", "bondd.yaml:3: edge: required when role is edge"},
		{"edge with concentrator role", concentratorOK + "edge: {id: van-17}\n", `bondd.yaml:9: edge: only allowed when role is edge; role is "concentrator"`},
		{"concentrator with edge role", edgeOK + "concentrator: {listen: 0.0.0.0:4433}\n", `bondd.yaml:10: concentrator: only allowed when role is concentrator; role is "edge"`},

		// edge.id, edge.concentrator, edge.server_name.
		{"edge id missing", strings.Replace(edgeOK, "  id: van-17\n", "", 1), "bondd.yaml:3: edge.id: required; expected 1 to 64 characters from A-Z a-z 0-9 . _ -"},
		{"edge id bad", strings.Replace(edgeOK, "id: van-17", `id: "van 17"`, 1), `bondd.yaml:4: edge.id: expected 1 to 64 characters from A-Z a-z 0-9 . _ -, got "van 17"`},
		{"edge id too long", strings.Replace(edgeOK, "id: van-17", "id: "+strings.Repeat("v", 65), 1), "bondd.yaml:4: edge.id: expected 1 to 64 characters"},
		{"edge id numeric", strings.Replace(edgeOK, "id: van-17", "id: 17", 1), ""},
		{"concentrator missing", strings.Replace(edgeOK, "  concentrator: concentrator.example.net:4433\n", "", 1), "bondd.yaml:3: edge.concentrator: required; expected the concentrator's host:port"},
		{"concentrator no port", strings.Replace(edgeOK, "concentrator.example.net:4433", "concentrator.example.net", 1), `bondd.yaml:5: edge.concentrator: expected host:port, like concentrator.example.net:4433, 203.0.113.10:4433 or [2001:db8::10]:4433, got "concentrator.example.net"`},
		{"concentrator port zero", strings.Replace(edgeOK, "concentrator.example.net:4433", "concentrator.example.net:0", 1), "bondd.yaml:5: edge.concentrator: expected host:port"},
		{"concentrator port name", strings.Replace(edgeOK, "concentrator.example.net:4433", "concentrator.example.net:https", 1), "bondd.yaml:5: edge.concentrator: expected host:port"},
		{"concentrator bad host", strings.Replace(edgeOK, "concentrator.example.net:4433", "conc_entrator!:4433", 1), "bondd.yaml:5: edge.concentrator: expected host:port"},
		{"concentrator bad IPv4", strings.Replace(edgeOK, "concentrator.example.net:4433", "203.0.113.300:4433", 1), "bondd.yaml:5: edge.concentrator: expected host:port"},
		{"concentrator IPv6 unbracketed", strings.Replace(edgeOK, "concentrator.example.net:4433", `"2001:db8::10:4433"`, 1), "bondd.yaml:5: edge.concentrator: expected host:port"},
		{"concentrator IPv6", strings.Replace(edgeOK, "concentrator.example.net:4433", `"[2001:db8::10]:4433"`, 1), ""},
		{"server_name bad", strings.Replace(edgeOK, "  ca_file:", "  server_name: -bad-\n  ca_file:", 1), `bondd.yaml:6: edge.server_name: expected a DNS name or an IP address, like concentrator.example.net, got "-bad-"`},

		// edge: server authentication.
		{"no server authentication", strings.Replace(edgeOK, "  ca_file: ca.pem\n", "", 1), "bondd.yaml:3: edge.ca_file: one of ca_file or server_cert_sha256 is required"},
		{"pin only", strings.Replace(edgeOK, "ca_file: ca.pem", "server_cert_sha256: "+strings.Repeat("ab", 32), 1), ""},
		{"pin with colons", strings.Replace(edgeOK, "ca_file: ca.pem", `server_cert_sha256: "`+strings.TrimSuffix(strings.Repeat("AB:", 32), ":")+`"`, 1), ""},
		{"pin and CA", strings.Replace(edgeOK, "ca_file: ca.pem", "ca_file: ca.pem\n  server_cert_sha256: "+strings.Repeat("0", 64), 1), ""},
		{"pin short", strings.Replace(edgeOK, "ca_file: ca.pem", "server_cert_sha256: abcd", 1), `bondd.yaml:6: edge.server_cert_sha256: expected the SHA-256 of the concentrator's certificate (DER) as 64 hex digits, colons allowed, got "abcd"`},
		{"pin not hex", strings.Replace(edgeOK, "ca_file: ca.pem", "server_cert_sha256: "+strings.Repeat("xy", 32), 1), "bondd.yaml:6: edge.server_cert_sha256: expected the SHA-256"},

		// edge: credentials.
		{"no credential", strings.Replace(edgeOK, "  token_file: van-17.token\n", "", 1), "bondd.yaml:3: edge.token_file: a credential is required; expected token_file, or cert_file and key_file"},
		{"both credentials", strings.Replace(edgeOK, "  token_file: van-17.token\n", "  token_file: van-17.token\n  cert_file: van-17.pem\n  key_file: van-17.key\n", 1), "bondd.yaml:7: edge.token_file: set either token_file or cert_file and key_file, not both"},
		{"certificate", strings.Replace(edgeOK, "  token_file: van-17.token\n", "  cert_file: van-17.pem\n  key_file: van-17.key\n", 1), ""},
		{"cert without key", strings.Replace(edgeOK, "  token_file: van-17.token\n", "  cert_file: van-17.pem\n", 1), "bondd.yaml:7: edge.key_file: required with cert_file"},
		{"key without cert", strings.Replace(edgeOK, "  token_file: van-17.token\n", "  key_file: van-17.key\n", 1), "bondd.yaml:7: edge.cert_file: required with key_file"},

		// edge.uplinks.
		{"uplinks missing", strings.Replace(edgeOK, "  uplinks:\n    - {name: cell-a, interface: wwan0}\n", "", 1), "bondd.yaml:3: edge.uplinks: required; expected a list of 1 to 16 uplinks"},
		{"uplinks empty", strings.Replace(edgeOK, "  uplinks:\n    - {name: cell-a, interface: wwan0}\n", "  uplinks: []\n", 1), "bondd.yaml:8: edge.uplinks: required"},
		{"uplinks not a list", strings.Replace(edgeOK, "  uplinks:\n    - {name: cell-a, interface: wwan0}\n", "  uplinks: {name: cell-a}\n", 1), "bondd.yaml:8: edge.uplinks: expected a list of uplinks, got a mapping"},
		{"uplink not a mapping", strings.Replace(edgeOK, "{name: cell-a, interface: wwan0}", "cell-a", 1), `bondd.yaml:9: edge.uplinks[0]: expected a mapping with fields name, bind, interface, remote, labels, leo_reconf, budget, budget_direction, budget_reset_day; got "cell-a"`},
		{"sixteen uplinks", edgeOK + uplinkItems(2, 16), ""},
		{"seventeen uplinks", edgeOK + uplinkItems(2, 17), "bondd.yaml:25: edge.uplinks[16]: at most 16 uplinks are allowed, got 17"},
		{"uplink name missing", strings.Replace(edgeOK, "name: cell-a, ", "", 1), "bondd.yaml:9: edge.uplinks[0].name: required; expected 1 to 64 characters"},
		{"uplink name bad", strings.Replace(edgeOK, "name: cell-a", "name: cell/a", 1), `bondd.yaml:9: edge.uplinks[0].name: expected 1 to 64 characters from A-Z a-z 0-9 . _ -, got "cell/a"`},
		{"uplink name duplicate", edgeOK + "    - {name: cell-a, interface: wwan1}\n", `bondd.yaml:10: edge.uplinks[1].name: uplink name "cell-a" is already used by edge.uplinks[0] (line 9)`},
		{"uplink neither bind nor interface", strings.Replace(edgeOK, ", interface: wwan0", "", 1), "bondd.yaml:9: edge.uplinks[0].bind: at least one of bind (a local IP address) or interface (a device name) is required"},
		{"uplink bind only", strings.Replace(edgeOK, "interface: wwan0", "bind: 192.0.2.10", 1), ""},
		{"uplink bind and interface", strings.Replace(edgeOK, "interface: wwan0", "bind: 192.0.2.10, interface: wwan0", 1), ""},
		{"uplink bind is a device", strings.Replace(edgeOK, "interface: wwan0", "bind: eth9x", 1), `bondd.yaml:9: edge.uplinks[0].bind: expected a local IP address, got "eth9x"; to bind to a device, write interface: eth9x`},
		{"uplink bind bad", strings.Replace(edgeOK, "interface: wwan0", "bind: 192.0.2.300/24", 1), `bondd.yaml:9: edge.uplinks[0].bind: expected a local IP address, like 192.0.2.10, got "192.0.2.300/24"`},
		{"uplink bind unspecified", strings.Replace(edgeOK, "interface: wwan0", "bind: 0.0.0.0", 1), "bondd.yaml:9: edge.uplinks[0].bind: expected a local unicast IP address, got 0.0.0.0 (unspecified)"},
		{"uplink bind family", strings.Replace(strings.Replace(edgeOK, "interface: wwan0", `bind: "2001:db8::2"`, 1), "concentrator.example.net:4433", "203.0.113.10:4433", 1), "bondd.yaml:9: edge.uplinks[0].bind: expected an IPv4 address to reach the concentrator at 203.0.113.10, got 2001:db8::2"},
		{"uplink interface too long", strings.Replace(edgeOK, "interface: wwan0", "interface: wwan0123456789abc", 1), `bondd.yaml:9: edge.uplinks[0].interface: expected an interface name of 1 to 15 bytes without '/', ':' or white space, got "wwan0123456789abc"`},
		{"scheduler blest", edgeOK + "scheduler: blest\n", ""},
		{"scheduler unknown", edgeOK + "scheduler: fastest\n", `bondd.yaml:10: scheduler: expected one of lowestrtt, roundrobin, minrtt, blest, redundant, got "fastest"`},
		{"fec adaptive", edgeOK + "fec: {mode: adaptive, k: 20, alpha: 2}\n", ""},
		{"fec off", edgeOK + "fec: {mode: off}\n", ""},
		{"fec bad mode", edgeOK + "fec: {mode: sometimes}\n", `bondd.yaml:10: fec.mode: expected adaptive, fixed or off, got "sometimes"`},
		{"fec fixed needs ratio", edgeOK + "fec: {mode: fixed}\n", "bondd.yaml:10: fec.ratio: expected a number of parity packets per data packet above 0 and at most 1, got 0"},
		{"fec ratio without fixed", edgeOK + "fec: {ratio: 0.1}\n", "bondd.yaml:10: fec.ratio: only allowed with mode fixed"},
		{"fec k too big", edgeOK + "fec: {k: 65}\n", "bondd.yaml:10: fec.k: expected an integer from 1 to 64 data packets, got 65"},
		{"fec alpha not a number", edgeOK + "fec: {alpha: lots}\n", `bondd.yaml:10: fec.alpha: expected a number, like 2.0, got "lots"`},
		{"fec placement", edgeOK + "fec: {placement: rate+earliest}\n", ""},
		{"fec bad placement", edgeOK + "fec: {placement: fastest}\n", `bondd.yaml:10: fec.placement: expected rate, earliest or rate+earliest, got "fastest"`},
		{"fec budget too long", edgeOK + "fec: {budget: 2s}\n", "bondd.yaml:10: fec.budget: expected a duration from 1ms to 1s, got 2s"},
		{"fec video residual above 1", edgeOK + "fec: {video_residual: 2}\n", "bondd.yaml:10: fec.video_residual: expected a probability above 0 and at most 1, got 2"},
		{"rules file missing", edgeOK + "rules: nowhere.yaml\n", "bondd.yaml:10: rules: "},
		{"downlink rules file missing", strings.Replace(edgeOK, "  uplinks:", "  downlink_rules: nowhere.yaml\n  uplinks:", 1), "bondd.yaml:8: edge.downlink_rules: "},
		{"downlink rules not a scalar", strings.Replace(edgeOK, "  uplinks:", "  downlink_rules: [a.yaml]\n  uplinks:", 1), "bondd.yaml:8: edge.downlink_rules: expected a file path, got a list"},
		{"metrics listen", edgeOK + "metrics_listen: 127.0.0.1:9477\n", ""},
		{"metrics listen port only", concentratorOK + "metrics_listen: \":9477\"\n", ""},
		{"metrics listen name", edgeOK + "metrics_listen: localhost:9477\n", ""},
		{"metrics listen IPv6", edgeOK + "metrics_listen: \"[::1]:9477\"\n", ""},
		{"metrics listen without port", edgeOK + "metrics_listen: 127.0.0.1\n", `bondd.yaml:10: metrics_listen: expected host:port or :port with a port from 1 to 65535, like 127.0.0.1:9477, got "127.0.0.1"`},
		{"metrics listen port 0", edgeOK + "metrics_listen: 127.0.0.1:0\n", `bondd.yaml:10: metrics_listen: expected host:port or :port with a port from 1 to 65535, like 127.0.0.1:9477, got "127.0.0.1:0"`},
		{"metrics listen not a scalar", edgeOK + "metrics_listen: [127.0.0.1:9477]\n", "bondd.yaml:10: metrics_listen: expected host:port, got a list"},
		{"qlog dir", edgeOK + "qlog_dir: certs\n", ""},
		{"qlog dir created at start", concentratorOK + "qlog_dir: qlog/new\n", ""},
		{"qlog dir is a file", edgeOK + "qlog_dir: ca.pem\n", "bondd.yaml:10: qlog_dir: " + filepath.Join(dir, "ca.pem") + " is not a directory; expected a directory for the qlog files"},
		{"max queue delay", edgeOK + "paths: {max_queue_delay: 1m}\n", "bondd.yaml:10: paths.max_queue_delay: expected a duration up to 10s, like 200ms, got 1m0s"},
		{"uplink remote", strings.Replace(edgeOK, "interface: wwan0", "interface: wwan0, remote: \"203.0.113.11:4433\"", 1), ""},
		{"uplink remote without port", strings.Replace(edgeOK, "interface: wwan0", "interface: wwan0, remote: 203.0.113.11", 1), `bondd.yaml:9: edge.uplinks[0].remote: expected host:port, like 203.0.113.11:4433, got "203.0.113.11"`},
		{"uplink same socket", edgeOK + "    - {name: cell-b, interface: wwan0}\n", "bondd.yaml:10: edge.uplinks[1]: same bind and interface as edge.uplinks[0] (line 9)"},
		{"labels", strings.Replace(edgeOK, "interface: wwan0}", "interface: wwan0, labels: {cost_class: metered, link_type: cellular, carrier: att}}", 1), ""},
		{"labels block style", edgeHead + snippet(`
    - name: cell-a
      interface: wwan0
      labels:
        cost_class: metered
        carrier:
`), `bondd.yaml:13: edge.uplinks[0].labels.carrier: expected a non-empty label value, like carrier: cellular`},
		{"labels not a mapping", strings.Replace(edgeOK, "interface: wwan0}", "interface: wwan0, labels: [metered]}", 1), "bondd.yaml:9: edge.uplinks[0].labels: expected a mapping of label keys to values, like {link_type: cellular}, got a list"},
		{"label empty key", strings.Replace(edgeOK, "interface: wwan0}", `interface: wwan0, labels: {"": x}}`, 1), "bondd.yaml:9: edge.uplinks[0].labels: expected non-empty label keys, got an empty key"},
		{"label key max", strings.Replace(edgeOK, "interface: wwan0}", "interface: wwan0, labels: {"+strings.Repeat("k", 128)+": x}}", 1), ""},
		{"label key too long", strings.Replace(edgeOK, "interface: wwan0}", "interface: wwan0, labels: {"+strings.Repeat("k", 129)+": x}}", 1), "bondd.yaml:9: edge.uplinks[0].labels.kkk" + strings.Repeat("k", 126) + ": expected a label key of at most 128 bytes, got 129 bytes"},
		{"label value max", strings.Replace(edgeOK, "interface: wwan0}", "interface: wwan0, labels: {k: "+strings.Repeat("v", 1024)+"}}", 1), ""},
		{"label value too long", strings.Replace(edgeOK, "interface: wwan0}", "interface: wwan0, labels: {k: "+strings.Repeat("v", 1025)+"}}", 1), "bondd.yaml:9: edge.uplinks[0].labels.k: expected a label value of at most 1024 bytes, got 1025 bytes"},
		{"label set twice", strings.Replace(edgeOK, "interface: wwan0}", "interface: wwan0, labels: {k: a, k: b}}", 1), "bondd.yaml:9: edge.uplinks[0].labels.k: label set twice; first set at line 9"},
		{"lanes retired", strings.Replace(edgeOK, "interface: wwan0}", "interface: wwan0, lanes: 3}", 1), ""},
		{"lanes retired, any value", strings.Replace(edgeOK, "interface: wwan0}", "interface: wwan0, lanes: [many]}", 1), ""},
		{"lanes retired, an unknown key still fails", strings.Replace(edgeOK, "interface: wwan0}", "interface: wwan0, lanes: 3, lanez: 3}", 1), `bondd.yaml:9: edge.uplinks[0].lanez: unknown field "lanez"`},
		{"leo_reconf true", strings.Replace(edgeOK, "interface: wwan0}", "interface: wwan0, leo_reconf: true}", 1), ""},
		{"leo_reconf false", strings.Replace(edgeOK, "interface: wwan0}", "interface: wwan0, leo_reconf: false}", 1), ""},
		{"leo_reconf schedule", strings.Replace(edgeOK, "interface: wwan0}", "interface: wwan0, leo_reconf: {seconds: [12, 27, 42, 57], window_ms: 150}}", 1), ""},
		{"leo_reconf defaults", strings.Replace(edgeOK, "interface: wwan0}", "interface: wwan0, leo_reconf: {}}", 1), ""},
		{"leo_reconf hold", strings.Replace(edgeOK, "interface: wwan0}", "interface: wwan0, leo_reconf: {hold_ms: 150}}", 1), ""},
		{"leo_reconf no hold", strings.Replace(edgeOK, "interface: wwan0}", "interface: wwan0, leo_reconf: {hold_ms: 0}}", 1), ""},
		{"leo_reconf hold too long", strings.Replace(edgeOK, "interface: wwan0}", "interface: wwan0, leo_reconf: {hold_ms: 1001}}", 1), `bondd.yaml:9: edge.uplinks[0].leo_reconf.hold_ms: expected a hold in milliseconds from 0 (none) to 1000 after each second, like 100, got "1001"`},
		{"leo_reconf second out of range", strings.Replace(edgeOK, "interface: wwan0}", "interface: wwan0, leo_reconf: {seconds: [12, 60]}}", 1), `bondd.yaml:9: edge.uplinks[0].leo_reconf.seconds[1]: expected a second of the UTC minute from 0 to 59, got "60"`},
		{"leo_reconf second twice", strings.Replace(edgeOK, "interface: wwan0}", "interface: wwan0, leo_reconf: {seconds: [12, 27, 12]}}", 1), `bondd.yaml:9: edge.uplinks[0].leo_reconf.seconds[2]: second 12 is listed twice`},
		{"leo_reconf seconds not a list", strings.Replace(edgeOK, "interface: wwan0}", "interface: wwan0, leo_reconf: {seconds: 12}}", 1), "bondd.yaml:9: edge.uplinks[0].leo_reconf.seconds: expected a list of seconds of the minute from 0 to 59, got"},
		{"leo_reconf window zero", strings.Replace(edgeOK, "interface: wwan0}", "interface: wwan0, leo_reconf: {window_ms: 0}}", 1), `bondd.yaml:9: edge.uplinks[0].leo_reconf.window_ms: expected a window in milliseconds from 1 to 7500 either side of each second, like 100, got "0"`},
		{"leo_reconf window too wide", strings.Replace(edgeOK, "interface: wwan0}", "interface: wwan0, leo_reconf: {window_ms: 8000}}", 1), "bondd.yaml:9: edge.uplinks[0].leo_reconf.window_ms: expected a window in milliseconds from 1 to 7500"},
		{"leo_reconf not a bool", strings.Replace(edgeOK, "interface: wwan0}", "interface: wwan0, leo_reconf: yes}", 1), `bondd.yaml:9: edge.uplinks[0].leo_reconf: expected true or false, got "yes"`},
		{"leo_reconf unknown field", strings.Replace(edgeOK, "interface: wwan0}", "interface: wwan0, leo_reconf: {window: 100}}", 1), `bondd.yaml:9: edge.uplinks[0].leo_reconf.window: unknown field "window"; known fields: seconds, window_ms, hold_ms`},
		{"budget", strings.Replace(edgeOK, "interface: wwan0}", "interface: wwan0, budget: 2GB/month}", 1), ""},
		{"budget binary units", strings.Replace(edgeOK, "interface: wwan0}", "interface: wwan0, budget: 10GiB/week}", 1), ""},
		{"budget fraction", strings.Replace(edgeOK, "interface: wwan0}", "interface: wwan0, budget: 1.5 GB/day}", 1), ""},
		{"budget without period", strings.Replace(edgeOK, "interface: wwan0}", "interface: wwan0, budget: 2GB}", 1), `bondd.yaml:9: edge.uplinks[0].budget: expected a byte budget per period, like 2GB/month, 500MB/day or 10GiB/week (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB; periods day, week, month), got "2GB"`},
		{"budget bits", strings.Replace(edgeOK, "interface: wwan0}", "interface: wwan0, budget: 2Gbit/month}", 1), `bondd.yaml:9: edge.uplinks[0].budget: expected a byte budget per period, like 2GB/month`},
		{"budget zero", strings.Replace(edgeOK, "interface: wwan0}", "interface: wwan0, budget: 0GB/month}", 1), `bondd.yaml:9: edge.uplinks[0].budget: expected a byte budget per period`},
		{"budget not a scalar", strings.Replace(edgeOK, "interface: wwan0}", "interface: wwan0, budget: {bytes: 2}}", 1), "bondd.yaml:9: edge.uplinks[0].budget: expected a byte budget per period, like 2GB/month, 500MB/day or 10GiB/week, got a mapping"},

		// concentrator.
		{"concentrator section missing", "role: concentrator\ntun: {addresses: [10.77.0.1/24]}\n", "bondd.yaml:1: concentrator: required when role is concentrator"},
		{"listen missing", strings.Replace(concentratorOK, "  listen: 0.0.0.0:4433\n", "", 1), "bondd.yaml:3: concentrator.listen: required; expected the UDP ip:port to listen on"},
		{"listen port only", strings.Replace(concentratorOK, "0.0.0.0:4433", `":4433"`, 1), ""},
		{"listen IPv6", strings.Replace(concentratorOK, "0.0.0.0:4433", `"[::]:4433"`, 1), ""},
		{"listen name", strings.Replace(concentratorOK, "0.0.0.0:4433", "concentrator.example.net:4433", 1), `bondd.yaml:4: concentrator.listen: expected ip:port or :port, like 0.0.0.0:4433, [::]:4433 or :4433, got "concentrator.example.net:4433"`},
		{"listen no port", strings.Replace(concentratorOK, "0.0.0.0:4433", "0.0.0.0", 1), "bondd.yaml:4: concentrator.listen: expected ip:port"},
		{"cert_file missing", strings.Replace(concentratorOK, "  cert_file: concentrator.pem\n", "", 1), "bondd.yaml:3: concentrator.cert_file: required; expected the PEM file of the concentrator's certificate"},
		{"key_file missing", strings.Replace(concentratorOK, "  key_file: concentrator.key\n", "", 1), "bondd.yaml:3: concentrator.key_file: required; expected the PEM file of the concentrator's private key"},
		{"edges missing", strings.Replace(concentratorOK, "  edges:\n    - {id: van-17, token_file: van-17.token, allowed_prefixes: [10.77.17.0/24]}\n", "", 1), "bondd.yaml:3: concentrator.edges: required; expected a list of the edges to accept"},
		{"edge entry id missing", strings.Replace(concentratorOK, "id: van-17, ", "", 1), "bondd.yaml:8: concentrator.edges[0].id: required"},
		{"edge entry id bad", strings.Replace(concentratorOK, "id: van-17", "id: van#17", 1), `bondd.yaml:8: concentrator.edges[0].id: expected 1 to 64 characters from A-Z a-z 0-9 . _ -, got "van#17"`},
		{"edge entry id duplicate", concentratorOK + "    - {id: van-17, token_file: van-18.token, allowed_prefixes: [10.77.18.0/24]}\n", `bondd.yaml:9: concentrator.edges[1].id: edge id "van-17" is already used by concentrator.edges[0] (line 8)`},
		{"edge entry unknown key", strings.Replace(concentratorOK, "allowed_prefixes:", "allowed_prefix:", 1), `bondd.yaml:8: concentrator.edges[0].allowed_prefix: unknown field "allowed_prefix"; known fields: id, token_file, cert_cn, allowed_prefixes, allow_edge_rules, policy_label_keys; did you mean "allowed_prefixes"?`},
		{"edge entry allow_edge_rules", strings.Replace(concentratorOK, "allowed_prefixes:", "allow_edge_rules: true, policy_label_keys: [carrier], allowed_prefixes:", 1), ""},
		{"edge entry allow_edge_rules not a bool", strings.Replace(concentratorOK, "allowed_prefixes:", "allow_edge_rules: maybe, allowed_prefixes:", 1), `bondd.yaml:8: concentrator.edges[0].allow_edge_rules: expected true or false, got "maybe"`},
		{"edge entry policy_label_keys not a list", strings.Replace(concentratorOK, "allowed_prefixes:", "policy_label_keys: carrier, allowed_prefixes:", 1), `bondd.yaml:8: concentrator.edges[0].policy_label_keys: expected a list of label keys, got`},
		{"edge entry both credentials", strings.Replace(concentratorOK, "token_file: van-17.token", "token_file: van-17.token, cert_cn: van-17", 1), "bondd.yaml:8: concentrator.edges[0].token_file: set either token_file or cert_cn, not both"},
		{"edge entry no credential", strings.Replace(concentratorOK, "token_file: van-17.token, ", "", 1), "bondd.yaml:8: concentrator.edges[0].token_file: a credential is required; expected token_file or cert_cn"},
		{"edge entry cert_cn", strings.Replace(concentratorOK, "  edges:", "  client_ca_file: edges-ca.pem\n  edges:", 1) + "    - {id: van-18, cert_cn: van-18.example.net, allowed_prefixes: [10.77.18.0/24]}\n", ""},
		{"cert_cn without client CA", concentratorOK + "    - {id: van-18, cert_cn: van-18, allowed_prefixes: [10.77.18.0/24]}\n", "bondd.yaml:9: concentrator.client_ca_file: required because concentrator.edges[1] authenticates with a client certificate"},
		{"cert_cn duplicate", strings.Replace(concentratorOK, "  edges:\n    - {id: van-17, token_file: van-17.token,", "  client_ca_file: edges-ca.pem\n  edges:\n    - {id: van-17, cert_cn: van,", 1) + "    - {id: van-18, cert_cn: van, allowed_prefixes: [10.77.18.0/24]}\n", `bondd.yaml:10: concentrator.edges[1].cert_cn: cert_cn "van" is already used by concentrator.edges[0] (line 9)`},
		{"cert_cn too long", strings.Replace(concentratorOK, "  edges:\n    - {id: van-17, token_file: van-17.token,", "  client_ca_file: edges-ca.pem\n  edges:\n    - {id: van-17, cert_cn: "+strings.Repeat("c", 65)+",", 1), "bondd.yaml:9: concentrator.edges[0].cert_cn: expected a CommonName of at most 64 bytes, got 65 bytes"},
		{"token_file shared", concentratorOK + "    - {id: van-18, token_file: ./van-17.token, allowed_prefixes: [10.77.18.0/24]}\n", "bondd.yaml:9: concentrator.edges[1].token_file: token file " + filepath.Join(dir, "van-17.token") + " is already used by concentrator.edges[0] (line 8); each edge needs its own token"},
		{"allowed_prefixes missing", strings.Replace(concentratorOK, ", allowed_prefixes: [10.77.17.0/24]", "", 1), "bondd.yaml:8: concentrator.edges[0].allowed_prefixes: required; expected the inner source prefixes this edge may use"},
		{"allowed_prefixes empty", strings.Replace(concentratorOK, "[10.77.17.0/24]", "[]", 1), "bondd.yaml:8: concentrator.edges[0].allowed_prefixes: required"},
		{"allowed prefix host bits", strings.Replace(concentratorOK, "[10.77.17.0/24]", "[10.77.17.1/24]", 1), "bondd.yaml:8: concentrator.edges[0].allowed_prefixes[0]: expected a network prefix with the host bits zero, like 10.77.17.0/24, got 10.77.17.1/24"},
		{"allowed prefix bad", strings.Replace(concentratorOK, "[10.77.17.0/24]", "[10.77.17.0/24, fd77:17::/129]", 1), `bondd.yaml:8: concentrator.edges[0].allowed_prefixes[1]: expected a network prefix, like 10.77.17.0/24, got "fd77:17::/129"`},
		{"allowed prefixes overlap across edges", concentratorOK + "    - id: van-18\n      token_file: van-18.token\n      allowed_prefixes:\n        - 10.77.18.0/24\n        - 10.77.17.128/25\n", `bondd.yaml:13: concentrator.edges[1].allowed_prefixes[1]: 10.77.17.128/25 overlaps 10.77.17.0/24 of edge "van-17" at concentrator.edges[0].allowed_prefixes[0] (line 8); allowed prefixes must not overlap`},
		{"allowed prefixes equal across edges", concentratorOK + "    - {id: van-18, token_file: van-18.token, allowed_prefixes: [10.77.17.0/24]}\n", `bondd.yaml:9: concentrator.edges[1].allowed_prefixes[0]: 10.77.17.0/24 overlaps 10.77.17.0/24 of edge "van-17"`},
		{"allowed prefixes overlap within edge", strings.Replace(concentratorOK, "[10.77.17.0/24]", "[10.77.0.0/16, 10.77.17.0/24]", 1), "bondd.yaml:8: concentrator.edges[0].allowed_prefixes[1]: 10.77.17.0/24 overlaps 10.77.0.0/16 of this edge"},
		{"allowed prefixes duplicate within edge", strings.Replace(concentratorOK, "[10.77.17.0/24]", "[10.77.17.0/24, 10.77.17.0/24]", 1), "bondd.yaml:8: concentrator.edges[0].allowed_prefixes[1]: prefix 10.77.17.0/24 is already in concentrator.edges[0].allowed_prefixes[0] (line 8)"},
		{"allowed prefixes disjoint", concentratorOK + "    - {id: van-18, token_file: van-18.token, allowed_prefixes: [10.77.18.0/24, 'fd77:18::/64']}\n", ""},

		// Referenced files.
		{"ca_file missing", strings.Replace(edgeOK, "ca_file: ca.pem", "ca_file: nope.pem", 1), "bondd.yaml:6: edge.ca_file: " + filepath.Join(dir, "nope.pem") + " does not exist; expected the PEM file of the CA that signed the concentrator's certificate"},
		{"ca_file a directory", strings.Replace(edgeOK, "ca_file: ca.pem", "ca_file: certs", 1), "bondd.yaml:6: edge.ca_file: " + filepath.Join(dir, "certs") + " is a directory"},
		{"ca_file absolute", strings.Replace(edgeOK, "ca_file: ca.pem", "ca_file: "+filepath.Join(dir, "ca.pem"), 1), ""},
		{"token_file missing", strings.Replace(edgeOK, "token_file: van-17.token", "token_file: van-99.token", 1), "bondd.yaml:7: edge.token_file: token file " + filepath.Join(dir, "van-99.token") + ": no such file or directory"},
		{"token_file readable by group", strings.Replace(edgeOK, "token_file: van-17.token", "token_file: shared.token", 1), "bondd.yaml:7: edge.token_file: token file " + filepath.Join(dir, "shared.token") + " may be read or written by group or others (mode 0640); expected mode 0600 or stricter"},
		{"token_file short", strings.Replace(edgeOK, "token_file: van-17.token", "token_file: short.token", 1), "bondd.yaml:7: edge.token_file: token file " + filepath.Join(dir, "short.token") + " holds a 10-byte token; expected 16 to 4096 bytes"},
		{"cert_file missing", strings.Replace(edgeOK, "  token_file: van-17.token\n", "  cert_file: nope.pem\n  key_file: van-17.key\n", 1), "bondd.yaml:7: edge.cert_file: " + filepath.Join(dir, "nope.pem") + " does not exist; expected the PEM file of this edge's client certificate"},
		{"concentrator key missing", strings.Replace(concentratorOK, "key_file: concentrator.key", "key_file: nope.key", 1), "bondd.yaml:6: concentrator.key_file: " + filepath.Join(dir, "nope.key") + " does not exist"},
		{"client_ca_file missing", strings.Replace(concentratorOK, "  edges:", "  client_ca_file: nope.pem\n  edges:", 1), "bondd.yaml:7: concentrator.client_ca_file: " + filepath.Join(dir, "nope.pem") + " does not exist"},
		{"edge entry token missing", strings.Replace(concentratorOK, "token_file: van-17.token", "token_file: nope.token", 1), "bondd.yaml:8: concentrator.edges[0].token_file: token file " + filepath.Join(dir, "nope.token") + ": no such file"},

		// paths.
		{"paths all", edgeOK + "paths: {queue_packets: 1024, keepalive: 500ms, idle_timeout: 3s, redial_min: 100ms, redial_max: 30s, initial_packet_size_bytes: 1452}\n", ""},
		{"paths unknown key", edgeOK + "paths: {keepalive_ms: 500}\n", `bondd.yaml:10: paths.keepalive_ms: unknown field "keepalive_ms"; known fields: queue_packets, max_queue_delay, keepalive, idle_keepalive, idle_timeout, redial_min, redial_max, initial_packet_size_bytes, rate_control, suspect_rtts, suspect_min, dead_after, stale_after, pmtu_discovery, pmtu_raise, retransmit; did you mean "keepalive"?`},
		{"rate control", edgeOK + "paths: {rate_control: quic}\n", ""},
		{"rate control unknown", edgeOK + "paths: {rate_control: bbr}\n", `bondd.yaml:10: paths.rate_control: expected bondd or quic, got "bbr"`},
		{"liveness all", edgeOK + "paths: {suspect_rtts: 4, suspect_min: 150ms, dead_after: 2s, stale_after: 500ms}\n", ""},
		{"pmtu", edgeOK + "paths: {pmtu_discovery: false, pmtu_raise: 5s}\n", ""},
		{"retransmit off", edgeOK + "paths: {retransmit: false}\n", ""},
		{"retransmit not a bool", edgeOK + "paths: {retransmit: sometimes}\n", "bondd.yaml:10: paths.retransmit: "},
		{"pmtu raise too long", edgeOK + "paths: {pmtu_raise: 1h}\n", "bondd.yaml:10: paths.pmtu_raise: expected at most 10m, got 1h0m0s"},
		{"pmtu discovery not a bool", edgeOK + "paths: {pmtu_discovery: maybe}\n", `bondd.yaml:10: paths.pmtu_discovery: expected true or false, got "maybe"`},
		{"suspect_rtts range", edgeOK + "paths: {suspect_rtts: 0.5}\n", "bondd.yaml:10: paths.suspect_rtts: expected a number of smoothed RTTs from 1 to 100, got 0.5"},
		{"suspect_min floor", edgeOK + "paths: {suspect_min: 5ms}\n", "bondd.yaml:10: paths.suspect_min: expected at least 10ms, got 5ms"},
		{"dead_after past idle", edgeOK + "paths: {dead_after: 6s}\n", "bondd.yaml:10: paths.dead_after: expected more than suspect_min (100ms) and at most idle_timeout (5s), got 6s"},
		{"idle below suspect", edgeOK + "paths: {keepalive: 20ms, idle_timeout: 80ms}\n", "bondd.yaml:10: paths.idle_timeout: expected more than suspect_min (100ms): a path is declared dead at min(dead_after, idle_timeout), got 80ms"},
		{"stale below queue delay", edgeOK + "paths: {stale_after: 100ms}\n", "bondd.yaml:10: paths.stale_after: expected at least max_queue_delay (200ms), got 100ms"},
		{"queue_packets negative", edgeOK + "paths: {queue_packets: -1}\n", "bondd.yaml:10: paths.queue_packets: expected an integer from 1 to 65536 packets, got -1"},
		{"queue_packets too large", edgeOK + "paths:\n  queue_packets: 65537\n", "bondd.yaml:11: paths.queue_packets: expected an integer from 1 to 65536 packets, got 65537"},
		{"queue_packets word", edgeOK + "paths: {queue_packets: many}\n", `bondd.yaml:10: paths.queue_packets: expected an integer number of packets, got "many"`},
		{"keepalive without unit", edgeOK + "paths: {keepalive: 1}\n", `bondd.yaml:10: paths.keepalive: expected a duration with a unit, like 1500ms or 5s, got "1"`},
		{"keepalive negative", edgeOK + "paths: {keepalive: -1s}\n", "bondd.yaml:10: paths.keepalive: expected a positive duration, like 1s, got -1s"},
		{"keepalive not below idle default", edgeOK + "paths: {keepalive: 5s}\n", "bondd.yaml:10: paths.keepalive: expected less than idle_timeout (5s), got 5s"},
		{"keepalive not below idle", edgeOK + "paths: {keepalive: 2s, idle_timeout: 1500ms}\n", "bondd.yaml:10: paths.keepalive: expected less than idle_timeout (1.5s), got 2s"},
		{"idle keepalive below keepalive", edgeOK + "paths: {keepalive: 2s, idle_keepalive: 1s}\n", "bondd.yaml:10: paths.idle_keepalive: expected a duration from keepalive (2s) to 10m0s, got 1s"},
		{"idle keepalive too long", edgeOK + "paths: {idle_keepalive: 11m}\n", "bondd.yaml:10: paths.idle_keepalive: expected a duration from keepalive (1s) to 10m0s, got 11m0s"},
		{"idle keepalive negative", edgeOK + "paths: {idle_keepalive: -15s}\n", "bondd.yaml:10: paths.idle_keepalive: expected a positive duration, like 1s, got -15s"},
		{"redial min above max", edgeOK + "paths:\n  redial_max: 100ms\n", "bondd.yaml:10: paths.redial_min: expected at most redial_max (100ms), got 250ms"},
		{"initial packet size small", edgeOK + "paths: {initial_packet_size_bytes: 1199}\n", "bondd.yaml:10: paths.initial_packet_size_bytes: expected an integer from 1200 to 1452 bytes, got 1199"},
		{"initial packet size large", edgeOK + "paths: {initial_packet_size_bytes: 1500}\n", "bondd.yaml:10: paths.initial_packet_size_bytes: expected an integer from 1200 to 1452 bytes, got 1500"},
		{"paths on concentrator", concentratorOK + "paths: {queue_packets: 64}\n", ""},

		// classify.
		{"classify all", withClassify(`
classify:
  rtp_ports: [5004-5010, 6000]
  payload_types: {96: h264, 97: H265, 98: auto, 111: opus}
  rtp_heuristic: false
  classes:
    - name: video
      match: {proto: [udp], src: [10.77.17.0/24], dst: ["fd78::/48"], src_ports: [1024-65535], dst_ports: [5004-5010], ports: [5004], dscp: [AF41, af42, 0]}
      labels: {media: camera, priority: high}
    - name: control
      match: {dscp: [EF, CS6]}
    - name: rest
`), ""},
		{"classify on concentrator", concentratorOK + "classify: {rtp_ports: [5004], classes: [{name: talkback, match: {dscp: [EF]}}]}\n", ""},
		{"classify empty", edgeOK + "classify: {}\n", ""},
		{"classify null", edgeOK + "classify:\n", ""},
		{"classify not a mapping", edgeOK + "classify: [video]\n", "bondd.yaml:10: classify: expected a mapping with fields rtp_ports, payload_types, rtp_heuristic, classes, sdp; got a list"},
		{"classify unknown key", edgeOK + "classify: {rtp_port: [5004]}\n", `bondd.yaml:10: classify.rtp_port: unknown field "rtp_port"; known fields: rtp_ports, payload_types, rtp_heuristic, classes, sdp; did you mean "rtp_ports"?`},

		// classify.rtp_ports.
		{"rtp_ports a single port", edgeOK + "classify: {rtp_ports: 5004}\n", `bondd.yaml:10: classify.rtp_ports: expected a list of ports or ranges, like [5004-5010], got "5004"`},
		{"rtp_ports port too large", withClassify("classify:\n  rtp_ports: [5004, 70000]\n"), `bondd.yaml:11: classify.rtp_ports[1]: expected a port or a range LO-HI of ports from 0 to 65535, like 5004 or 5004-5010, got "70000"`},
		{"rtp_ports word", withClassify("classify:\n  rtp_ports: [rtp]\n"), `bondd.yaml:11: classify.rtp_ports[0]: expected a port or a range LO-HI of ports from 0 to 65535, like 5004 or 5004-5010, got "rtp"`},
		{"rtp_ports range open", withClassify("classify:\n  rtp_ports: [5004-]\n"), `bondd.yaml:11: classify.rtp_ports[0]: expected a port or a range LO-HI`},
		{"rtp_ports range reversed", withClassify("classify:\n  rtp_ports: [5010-5004]\n"), "bondd.yaml:11: classify.rtp_ports[0]: expected a range LO-HI with LO at most HI, like 5004-5010, got 5010-5004"},
		{"rtp_ports range spaces", withClassify("classify:\n  rtp_ports: [5004 - 5010]\n"), ""},
		{"rtp_ports overlap", withClassify("classify:\n  rtp_ports:\n    - 5004-5010\n    - 5008\n"), "bondd.yaml:13: classify.rtp_ports[1]: 5008 overlaps 5004-5010 at classify.rtp_ports[0] (line 12)"},
		{"rtp_ports 16", withClassify("classify:\n  rtp_ports: [" + numberList(1, 16) + "]\n"), ""},
		{"rtp_ports 17", withClassify("classify:\n  rtp_ports: [" + numberList(1, 17) + "]\n"), "bondd.yaml:11: classify.rtp_ports[16]: at most 16 port ranges are allowed, got 17"},

		// classify.payload_types.
		{"payload_types a list", withClassify("classify:\n  payload_types: [96]\n"), "bondd.yaml:11: classify.payload_types: expected a mapping of RTP payload types to codecs, like {96: h264, 111: opus}, got a list"},
		{"payload type a word", withClassify("classify:\n  payload_types: {h264: 96}\n"), `bondd.yaml:11: classify.payload_types.h264: expected an RTP payload type from 0 to 127 as the key, got "h264"`},
		{"payload type 128", withClassify("classify:\n  payload_types: {128: h264}\n"), "bondd.yaml:11: classify.payload_types.128: expected an RTP payload type from 0 to 127 as the key, got 128"},
		{"payload type 300", withClassify("classify:\n  payload_types: {300: h264}\n"), `bondd.yaml:11: classify.payload_types.300: expected an RTP payload type from 0 to 127 as the key, got "300"`},
		{"payload type RTCP", withClassify("classify:\n  payload_types: {72: h264}\n"), "bondd.yaml:11: classify.payload_types.72: payload type 72 cannot be told from RTCP (packet types 200-204 with the marker bit, RFC 3550 §12.1, RFC 5761 §4); expected 0 to 71 or 77 to 127"},
		{"payload types beside RTCP", withClassify("classify:\n  payload_types: {71: h264, 77: vp8, 0: pcmu, 127: AV1}\n"), ""},
		{"payload type unknown codec", withClassify("classify:\n  payload_types: {96: h266}\n"), `bondd.yaml:11: classify.payload_types.96: expected a codec name (h264, h265, vp8, vp9, av1, mp2t, h263, h261, jpeg, mpv, pcmu, gsm, g723, dvi4, lpc, pcma, g722, l16, qcelp, cn, mpa, g728, g729, opus, red, fec, rtx) or auto to learn it from the payload, got "h266"`},
		{"payload type codec list", withClassify("classify:\n  payload_types: {96: [h264]}\n"), "bondd.yaml:11: classify.payload_types.96: expected a codec name (h264, h265,"},
		{"payload type SDP names", withClassify("classify:\n  payload_types: {96: HEVC, 97: ulpfec, 98: VP8}\n"), ""},
		{"payload type set twice", withClassify("classify:\n  payload_types:\n    96: h264\n    096: vp8\n"), "bondd.yaml:13: classify.payload_types.096: payload type 96 set twice; first set at line 12"},

		// classify.rtp_heuristic.
		{"rtp_heuristic word", edgeOK + "classify: {rtp_heuristic: maybe}\n", `bondd.yaml:10: classify.rtp_heuristic: expected true or false, got "maybe"`},
		{"rtp_heuristic yes", edgeOK + "classify: {rtp_heuristic: yes}\n", `bondd.yaml:10: classify.rtp_heuristic: expected true or false, got "yes"`},
		{"rtp_heuristic true", edgeOK + "classify: {rtp_heuristic: true}\n", ""},

		// classify.classes.
		{"classes a mapping", edgeOK + "classify: {classes: {name: video}}\n", "bondd.yaml:10: classify.classes: expected a list of classes, got a mapping"},
		{"classes a word", edgeOK + "classify: {classes: video}\n", `bondd.yaml:10: classify.classes: expected a list of classes, like [{name: video, match: {ports: [5004-5010]}}], got "video"`},
		{"class a word", withClassify("classify:\n  classes: [video]\n"), `bondd.yaml:11: classify.classes[0]: expected a mapping with fields name, match, labels; got "video"`},
		{"class unknown key", withClassify("classify:\n  classes:\n    - {name: video, matches: {ports: [5004]}}\n"), `bondd.yaml:12: classify.classes[0].matches: unknown field "matches"; known fields: name, match, labels; did you mean "match"?`},
		{"class match unknown key", withClassify("classify:\n  classes:\n    - {name: video, match: {dcsp: [EF]}}\n"), `bondd.yaml:12: classify.classes[0].match.dcsp: unknown field "dcsp"; known fields: proto, src, dst, src_ports, dst_ports, ports, dscp; did you mean "dscp"?`},
		{"class match a word", withClassify("classify:\n  classes:\n    - {name: video, match: udp}\n"), `bondd.yaml:12: classify.classes[0].match: expected a mapping with fields proto, src, dst, src_ports, dst_ports, ports, dscp; got "udp"`},
		{"class match empty", withClassify("classify:\n  classes:\n    - {name: all, match: {}}\n"), ""},
		{"class name missing", withClassify("classify:\n  classes:\n    - {match: {dscp: [EF]}}\n"), "bondd.yaml:12: classify.classes[0].name: required; expected the name rules see as class, like video"},
		{"class name duplicate", withClassify("classify:\n  classes:\n    - {name: video, match: {ports: [5004]}}\n    - {name: video, match: {ports: [5006]}}\n"), `bondd.yaml:13: classify.classes[1].name: class name "video" is already used by classify.classes[0] (line 12)`},
		{"class name max", withClassify("classify:\n  classes: [{name: " + strings.Repeat("n", 1024) + "}]\n"), ""},
		{"class name too long", withClassify("classify:\n  classes: [{name: " + strings.Repeat("n", 1025) + "}]\n"), "bondd.yaml:11: classify.classes[0].name: expected a class name of at most 1024 bytes, got 1025 bytes"},
		{"classes 64", classifyClasses(64, func(i int) string { return fmt.Sprintf("{name: c%d}", i) }), ""},
		{"classes 65", classifyClasses(65, func(i int) string { return fmt.Sprintf("{name: c%d}", i) }), "bondd.yaml:76: classify.classes[64]: at most 64 classes are allowed, got 65"},

		// classify.classes[].match.proto.
		{"proto names and numbers", withClassify("classify:\n  classes: [{name: c, match: {proto: [udp, 6, 0x84, icmpv6, ESP]}}]\n"), ""},
		{"proto unknown", withClassify("classify:\n  classes: [{name: c, match: {proto: [udp, quic]}}]\n"), `bondd.yaml:11: classify.classes[0].match.proto[1]: expected a protocol name (udp, tcp, icmp, icmpv6, sctp, …) or number from 0 to 255, got "quic"`},
		{"proto 256", withClassify("classify:\n  classes: [{name: c, match: {proto: [256]}}]\n"), `bondd.yaml:11: classify.classes[0].match.proto[0]: expected a protocol name (udp, tcp, icmp, icmpv6, sctp, …) or number from 0 to 255, got "256"`},
		{"proto a word", withClassify("classify:\n  classes: [{name: c, match: {proto: udp}}]\n"), `bondd.yaml:11: classify.classes[0].match.proto: expected a list of protocols, like [udp], got "udp"`},
		{"proto twice", withClassify("classify:\n  classes: [{name: c, match: {proto: [udp, 17]}}]\n"), "bondd.yaml:11: classify.classes[0].match.proto[1]: 17 is already in classify.classes[0].match.proto[0] (line 11)"},

		// classify.classes[].match.src and dst.
		{"src bad", withClassify("classify:\n  classes: [{name: c, match: {src: [10.77.17.300/24]}}]\n"), `bondd.yaml:11: classify.classes[0].match.src[0]: expected a network prefix, like 10.77.17.0/24 or fd77:0:0:17::/64, got "10.77.17.300/24"`},
		{"src host bits", withClassify("classify:\n  classes: [{name: c, match: {src: [10.77.17.1/24]}}]\n"), "bondd.yaml:11: classify.classes[0].match.src[0]: expected a network prefix with the host bits zero, like 10.77.17.0/24, got 10.77.17.1/24"},
		{"dst without length", withClassify("classify:\n  classes: [{name: c, match: {dst: [10.78.0.1]}}]\n"), `bondd.yaml:11: classify.classes[0].match.dst[0]: expected a network prefix, like 10.77.17.0/24 or fd77:0:0:17::/64, got "10.78.0.1" (the /prefix-length is missing)`},
		{"src a word", withClassify("classify:\n  classes: [{name: c, match: {src: 10.77.17.0/24}}]\n"), `bondd.yaml:11: classify.classes[0].match.src: expected a list of network prefixes, like [10.77.17.0/24], got "10.77.17.0/24"`},
		{"dst twice", withClassify("classify:\n  classes:\n    - name: c\n      match:\n        dst: [10.78.0.0/16, 10.78.0.0/16]\n"), "bondd.yaml:14: classify.classes[0].match.dst[1]: prefix 10.78.0.0/16 is already in classify.classes[0].match.dst[0] (line 14)"},
		{"prefixes 16", withClassify("classify:\n  classes: [{name: c, match: {src: [" + prefixList(0, 8) + "], dst: [" + prefixList(8, 8) + "]}}]\n"), ""},
		{"prefixes 17", withClassify("classify:\n  classes: [{name: c, match: {src: [" + prefixList(0, 9) + "], dst: [" + prefixList(9, 8) + "]}}]\n"), "bondd.yaml:11: classify.classes[0].match: at most 16 prefixes (src and dst together) are allowed in one class, got 17"},

		// classify.classes[].match ports.
		{"ports bad", withClassify("classify:\n  classes: [{name: c, match: {ports: [5004-]}}]\n"), `bondd.yaml:11: classify.classes[0].match.ports[0]: expected a port or a range LO-HI of ports from 0 to 65535, like 5004 or 5004-5010, got "5004-"`},
		{"ports a word", withClassify("classify:\n  classes: [{name: c, match: {dst_ports: 5004}}]\n"), `bondd.yaml:11: classify.classes[0].match.dst_ports: expected a list of ports or ranges, like [5004-5010], got "5004"`},
		{"src_ports reversed", withClassify("classify:\n  classes: [{name: c, match: {src_ports: [2000-1000]}}]\n"), "bondd.yaml:11: classify.classes[0].match.src_ports[0]: expected a range LO-HI with LO at most HI, like 1000-2000, got 2000-1000"},
		{"dst_ports overlap", withClassify("classify:\n  classes: [{name: c, match: {dst_ports: [5004-5010, 5010-5020]}}]\n"), "bondd.yaml:11: classify.classes[0].match.dst_ports[1]: 5010-5020 overlaps 5004-5010 at classify.classes[0].match.dst_ports[0] (line 11)"},
		{"port ranges 16", withClassify("classify:\n  classes: [{name: c, match: {src_ports: [" + numberList(1, 6) + "], dst_ports: [" + numberList(1, 5) + "], ports: [" + numberList(1, 5) + "]}}]\n"), ""},
		{"port ranges 17", withClassify("classify:\n  classes: [{name: c, match: {src_ports: [" + numberList(1, 6) + "], dst_ports: [" + numberList(1, 6) + "], ports: [" + numberList(1, 5) + "]}}]\n"), "bondd.yaml:11: classify.classes[0].match: at most 16 port ranges (src_ports, dst_ports and ports together) are allowed in one class, got 17"},

		// classify.classes[].match.dscp.
		{"dscp names", withClassify("classify:\n  classes: [{name: c, match: {dscp: [ef, AF41, cs6, VA, le, DF, af11, CS7, 63]}}]\n"), ""},
		{"dscp bad name", withClassify("classify:\n  classes: [{name: c, match: {dscp: [EF, XF]}}]\n"), `bondd.yaml:11: classify.classes[0].match.dscp[1]: expected a DSCP from 0 to 63 or a name like EF, AF41, CS6 or LE, got "XF"`},
		{"dscp 64", withClassify("classify:\n  classes: [{name: c, match: {dscp: [64]}}]\n"), `bondd.yaml:11: classify.classes[0].match.dscp[0]: expected a DSCP from 0 to 63 or a name like EF, AF41, CS6 or LE, got "64"`},
		{"dscp AF44", withClassify("classify:\n  classes: [{name: c, match: {dscp: [AF44]}}]\n"), `classify.classes[0].match.dscp[0]: expected a DSCP from 0 to 63 or a name like EF, AF41, CS6 or LE, got "AF44"`},
		{"dscp twice", withClassify("classify:\n  classes: [{name: c, match: {dscp: [EF, 46]}}]\n"), "bondd.yaml:11: classify.classes[0].match.dscp[1]: 46 is already in classify.classes[0].match.dscp[0] (line 11)"},
		{"dscp a word", withClassify("classify:\n  classes: [{name: c, match: {dscp: EF}}]\n"), `bondd.yaml:11: classify.classes[0].match.dscp: expected a list of DSCP code points, like [EF], got "EF"`},

		// classify.classes[].labels.
		{"class labels", withClassify("classify:\n  classes: [{name: c, labels: {media: camera, site.zone: north, x_y-z: \"1\"}}]\n"), ""},
		{"class labels a list", withClassify("classify:\n  classes: [{name: c, labels: [camera]}]\n"), "bondd.yaml:11: classify.classes[0].labels: expected a mapping of label keys to values, like {media: camera}, got a list"},
		{"class label key upper case", withClassify("classify:\n  classes: [{name: c, labels: {Media: camera}}]\n"), `bondd.yaml:11: classify.classes[0].labels.Media: expected a label key of a-z 0-9 _ . - starting with a lower-case letter, like media, got "Media"`},
		{"class label key digit first", withClassify("classify:\n  classes: [{name: c, labels: {1st: camera}}]\n"), `bondd.yaml:11: classify.classes[0].labels.1st: expected a label key of a-z 0-9 _ . - starting with a lower-case letter`},
		{"class label key builtin", withClassify("classify:\n  classes: [{name: c, labels: {codec: h264}}]\n"), "bondd.yaml:11: classify.classes[0].labels.codec: codec is a metadata key the classifier sets; choose another label key"},
		{"class label key class", withClassify("classify:\n  classes: [{name: c, labels: {class: video}}]\n"), "bondd.yaml:11: classify.classes[0].labels.class: class is set by the class name; choose another label key"},
		{"class label value empty", withClassify("classify:\n  classes: [{name: c, labels: {media: \"\"}}]\n"), "bondd.yaml:11: classify.classes[0].labels.media: expected a non-empty label value, like media: camera"},
		{"class label value max", withClassify("classify:\n  classes: [{name: c, labels: {media: " + strings.Repeat("v", 1024) + "}}]\n"), ""},
		{"class label value too long", withClassify("classify:\n  classes: [{name: c, labels: {media: " + strings.Repeat("v", 1025) + "}}]\n"), "bondd.yaml:11: classify.classes[0].labels.media: expected a label value of at most 1024 bytes, got 1025 bytes"},
		{"class label key max", withClassify("classify:\n  classes: [{name: c, labels: {" + strings.Repeat("k", 128) + ": v}}]\n"), ""},
		{"class label key too long", withClassify("classify:\n  classes: [{name: c, labels: {" + strings.Repeat("k", 129) + ": v}}]\n"), "bondd.yaml:11: classify.classes[0].labels." + strings.Repeat("k", 129) + ": expected a label key of at most 128 bytes, got 129 bytes"},
		{"class label set twice", withClassify("classify:\n  classes: [{name: c, labels: {media: a, media: b}}]\n"), "bondd.yaml:11: classify.classes[0].labels.media: label set twice; first set at line 11"},
		{"class labels 8", withClassify("classify:\n  classes: [{name: c, labels: " + labelMap(0, 8) + "}]\n"), ""},
		{"class labels 9", withClassify("classify:\n  classes: [{name: c, labels: " + labelMap(0, 9) + "}]\n"), "bondd.yaml:11: classify.classes[0].labels: at most 8 labels are allowed in one class, got 9"},
		{"label keys 32", classifyClasses(4, func(i int) string { return fmt.Sprintf("{name: c%d, labels: %s}", i, labelMap(8*i, 8)) }), ""},
		{"label keys shared", classifyClasses(8, func(i int) string { return fmt.Sprintf("{name: c%d, labels: %s}", i, labelMap(0, 8)) }), ""},
		{"label keys 33", classifyClasses(5, func(i int) string { return fmt.Sprintf("{name: c%d, labels: %s}", i, labelMap(8*i, 1+7*(1-i/4))) }), `bondd.yaml:16: classify.classes[4].labels.k32: "k32" is distinct label key 33 of all classes; at most 32 are allowed`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseWith("bondd.yaml", []byte(tc.in), Options{Dir: dir})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error:\n%v", err)
				}
				if c == nil {
					t.Fatal("nil Config without error")
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error:\n%v\nwant it to contain:\n%s", err, tc.want)
			}
			if c != nil {
				t.Error("non-nil Config with an error")
			}
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("error is %T, want Errors", err)
			}
			for _, e := range errs {
				if e.File != "bondd.yaml" || e.Line < 1 {
					t.Errorf("error without file:line: %q", e)
				}
			}
		})
	}
}

// withClassify appends section, which starts with "classify:", to edgeOK;
// its first line is line 10.
func withClassify(section string) string { return edgeOK + snippet(section) }

// classifyClasses returns edgeOK with a classify section of n classes, one
// flow-style item per line from line 12.
func classifyClasses(n int, item func(i int) string) string {
	var b strings.Builder
	b.WriteString(edgeOK + "classify:\n  classes:\n")
	for i := 0; i < n; i++ {
		b.WriteString("    - " + item(i) + "\n")
	}
	return b.String()
}

// numberList returns n numbers from from, comma-separated.
func numberList(from, n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = strconv.Itoa(from + i)
	}
	return strings.Join(parts, ", ")
}

// prefixList returns n distinct /24 prefixes 10.N.0.0/24 from N = from.
func prefixList(from, n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("10.%d.0.0/24", from+i)
	}
	return strings.Join(parts, ", ")
}

// labelMap returns a flow mapping of n labels kFROM: v … .
func labelMap(from, n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("k%d: v", from+i)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// uplinkItems returns block-style uplink items named cell-<from> to cell-<to>.
func uplinkItems(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "    - {name: cell-%d, interface: wwan%d}\n", i, i)
	}
	return b.String()
}

// FuzzParse checks that no input makes the config parser panic, and that
// an input that is not YAML gets an error with a line.
func FuzzParse(f *testing.F) {
	for _, s := range []string{edgeOK, concentratorOK, "", "\x7fELF\x02", "tun: {mtu: 1400}\n", "role: edge\n---\nrole: edge\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 8192 {
			return
		}
		_, err := ParseWith("f.yaml", data, Options{SkipFileChecks: true, Dir: "/nonexistent"})
		var es Errors
		if err != nil && !errors.As(err, &es) {
			t.Fatalf("error %T, want Errors: %v", err, err)
		}
		for _, e := range es {
			if strings.HasPrefix(e.Msg, "invalid YAML") && e.Line < 1 {
				t.Errorf("no line: %v", e)
			}
		}
	})
}

// TestFECVideoResidual: fec.video_residual as tunnel.FECOptions takes it.
// TestRetiredLanes: an uplink's lanes key, retired, is ignored with one
// warning per occurrence that names the change and where it was measured,
// with the key's line; the config loads as without it, and a config
// without it has no warnings.
func TestRetiredLanes(t *testing.T) {
	dir := configDir(t)
	in := edgeHead + "    - {name: cell-a, interface: wwan0, lanes: auto}\n" +
		"    - name: cell-b\n      interface: wwan1\n      lanes: 3\n"
	c, err := ParseWith("bondd.yaml", []byte(in), Options{Dir: dir})
	if err != nil {
		t.Fatalf("a config naming lanes did not load: %v", err)
	}
	if len(c.Edge.Uplinks) != 2 || c.Edge.Uplinks[1].Name != "cell-b" || c.Edge.Uplinks[1].Interface != "wwan1" {
		t.Errorf("uplinks %+v, want cell-a and cell-b as without lanes", c.Edge.Uplinks)
	}
	ws := c.Warnings()
	if len(ws) != 2 {
		t.Fatalf("%d warnings, want 2 (one per lanes key): %v", len(ws), ws)
	}
	for i, want := range []struct {
		line  int
		field string
	}{{9, "edge.uplinks[0].lanes"}, {12, "edge.uplinks[1].lanes"}} {
		w := ws[i]
		if w.File != "bondd.yaml" || w.Line != want.line || w.Field != want.field {
			t.Errorf("warning %d at %s:%d %s, want bondd.yaml:%d %s", i, w.File, w.Line, w.Field, want.line, want.field)
		}
		for _, s := range []string{"retired and ignored", "congestion controller", "one QUIC connection", "0.30–0.46", "docs/performance.md"} {
			if !strings.Contains(w.Msg, s) {
				t.Errorf("warning %d %q does not say %q", i, w.Error(), s)
			}
		}
	}
	c, err = ParseWith("bondd.yaml", []byte(edgeOK), Options{Dir: dir})
	if err != nil || len(c.Warnings()) != 0 {
		t.Errorf("a config without lanes: %v, warnings %v; want none", err, c.Warnings())
	}
}

func TestFECVideoResidual(t *testing.T) {
	for _, tt := range []struct {
		in   float64
		want float64
	}{{0, 0}, {0.001, 0.001}, {1, -1}} {
		f := FECConfig{VideoResidual: tt.in}
		if got := f.TunnelVideoResidual(); got != tt.want {
			t.Errorf("VideoResidual %v: %v, want %v", tt.in, got, tt.want)
		}
	}
}

// TestLEOReconfHold checks the hold an uplink's leo_reconf gives the path:
// the default, a set one, and none.
func TestLEOReconfHold(t *testing.T) {
	dir := configDir(t)
	for _, tc := range []struct {
		yaml string
		want time.Duration
	}{
		{"leo_reconf: true", 0},
		{"leo_reconf: {}", 0},
		{"leo_reconf: {hold_ms: 150}", 150 * time.Millisecond},
		{"leo_reconf: {hold_ms: 0}", -1},
	} {
		c, err := ParseWith("bondd.yaml", []byte(strings.Replace(edgeOK, "interface: wwan0}", "interface: wwan0, "+tc.yaml+"}", 1)), Options{Dir: dir})
		if err != nil {
			t.Fatalf("%s: %v", tc.yaml, err)
		}
		l := c.Edge.Uplinks[0].LEOReconf
		if l == nil || l.Hold != tc.want {
			t.Errorf("%s: LEOReconf %+v, want Hold %v", tc.yaml, l, tc.want)
		}
	}
}
