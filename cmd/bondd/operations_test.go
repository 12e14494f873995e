package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bondd/bondd/internal/config"
)

// The deployment files and docs/operations.md describe the daemon; these
// tests keep them in step with the code.

func readDoc(t *testing.T, path ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{"..", "..", "docs"}, path...)...))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// metricNames returns the names of every metric the collector describes.
func metricNames(t *testing.T) []string {
	t.Helper()
	ch := make(chan *prometheus.Desc)
	go func() {
		newMetricsCollector(fakeReport).Describe(ch)
		close(ch)
	}()
	re := regexp.MustCompile(`fqName: "([^"]+)"`)
	var names []string
	for d := range ch {
		m := re.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read the name of %s", d)
		}
		names = append(names, m[1])
	}
	return names
}

// TestOperationsDocMetrics checks that docs/operations.md lists every
// metric, and lists no metric that does not exist.
func TestOperationsDocMetrics(t *testing.T) {
	doc := readDoc(t, "operations.md")
	names := metricNames(t)
	for _, n := range names {
		if !strings.Contains(doc, "| `"+n+"` |") {
			t.Errorf("docs/operations.md has no table row for %s", n)
		}
	}
	for _, m := range regexp.MustCompile("(?m)^\\| `(bondd_[a-z_]+)` \\|").FindAllStringSubmatch(doc, -1) {
		if !slices.Contains(names, m[1]) {
			t.Errorf("docs/operations.md lists %s, which bondd does not export", m[1])
		}
	}
}

// TestOperationsDocConfigs parses the config files in docs/operations.md.
func TestOperationsDocConfigs(t *testing.T) {
	blocks := strings.Split(readDoc(t, "operations.md"), "```yaml\n")[1:]
	if len(blocks) < 2 {
		t.Fatalf("%d YAML blocks, want the concentrator's and the edge's", len(blocks))
	}
	for i, b := range blocks {
		b, _, _ = strings.Cut(b, "```")
		if _, err := config.ParseWith("operations.md", []byte(b), config.Options{SkipFileChecks: true}); err != nil {
			t.Errorf("docs/operations.md YAML block %d:\n%v", i+1, err)
		}
	}
}

// TestGrafanaDashboard checks that docs/grafana/bondd.json is a dashboard
// whose queries use only metrics bondd exports, through the data source
// chosen at import.
func TestGrafanaDashboard(t *testing.T) {
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Type       string          `json:"type"`
			Title      string          `json:"title"`
			Datasource json.RawMessage `json:"datasource"`
			Targets    []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(readDoc(t, "grafana", "bondd.json")), &dash); err != nil {
		t.Fatal(err)
	}
	names := metricNames(t)
	used := make(map[string]bool)
	metricRE := regexp.MustCompile(`\bbondd_[a-z_]+`)
	queries := 0
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if !strings.Contains(string(p.Datasource), "${datasource}") {
			t.Errorf("panel %q: data source %s, want the ${datasource} variable", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			queries++
			if strings.Count(tg.Expr, "(") != strings.Count(tg.Expr, ")") || strings.Count(tg.Expr, "{") != strings.Count(tg.Expr, "}") {
				t.Errorf("panel %q: unbalanced query %s", p.Title, tg.Expr)
			}
			for _, m := range metricRE.FindAllString(tg.Expr, -1) {
				used[m] = true
				if !slices.Contains(names, m) {
					t.Errorf("panel %q queries %s, which bondd does not export", p.Title, m)
				}
			}
		}
	}
	if queries < 20 {
		t.Errorf("%d queries; the dashboard lost panels", queries)
	}
	for _, must := range []string{"bondd_path_status", "bondd_path_sent_bytes_total", "bondd_path_smoothed_rtt_seconds",
		"bondd_bond_dropped_packets_total", "bondd_path_dropped_packets_total", "bondd_fec_residual_loss_ratio", "bondd_rule_hits_total"} {
		if !used[must] {
			t.Errorf("no panel shows %s", must)
		}
	}
}

// TestSystemdUnits checks what the units promise against the daemon: the
// config they start, SIGHUP for reload, the control socket's directory,
// and capabilities instead of root.
func TestSystemdUnits(t *testing.T) {
	for _, tc := range []struct {
		unit, config string
		caps         string
	}{
		{"bondd-edge.service", "/etc/bondd/edge.yaml", "CAP_NET_ADMIN CAP_NET_RAW"},
		{"bondd-concentrator.service", "/etc/bondd/concentrator.yaml", "CAP_NET_ADMIN"},
	} {
		u := readDoc(t, "systemd", tc.unit)
		for _, want := range []string{
			"ExecStart=/usr/local/bin/bondd run --config " + tc.config + "\n",
			"ExecReload=/bin/kill -HUP $MAINPID\n",
			"RuntimeDirectory=" + filepath.Base(filepath.Dir(defaultControlSocket)) + "\n",
			"User=bondd\n",
			"AmbientCapabilities=" + tc.caps + "\n",
			"CapabilityBoundingSet=" + tc.caps + "\n",
			"DeviceAllow=/dev/net/tun rw\n",
			"NoNewPrivileges=yes\n",
		} {
			if !strings.Contains(u, want) {
				t.Errorf("%s: no line %q", tc.unit, strings.TrimSpace(want))
			}
		}
	}
	if !strings.HasPrefix(defaultControlSocket, "/run/") {
		t.Errorf("control socket %s is not under /run, where RuntimeDirectory puts it", defaultControlSocket)
	}
	nft := readDoc(t, "systemd", "bondd-concentrator.nft")
	for _, want := range []string{"type nat hook postrouting", "masquerade", "ct state established,related accept"} {
		if !strings.Contains(nft, want) {
			t.Errorf("bondd-concentrator.nft: no %q", want)
		}
	}
	sysctl := readDoc(t, "systemd", "99-bondd-concentrator.conf")
	for _, want := range []string{"net.ipv4.ip_forward = 1", "net.ipv6.conf.all.forwarding = 1"} {
		if !strings.Contains(sysctl, want) {
			t.Errorf("99-bondd-concentrator.conf: no %q", want)
		}
	}
}
