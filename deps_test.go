package bondd_test

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// layer is each bondd package's place in the import order: a package may
// import only bondd packages of a strictly lower layer (see docs/design.md).
var layer = map[string]int{
	"classify": 0, "classify/capture": 0, "fec": 0, "tun": 0, "tun/tuntest": 0, "emu": 0, "internal/testbed": 0, "internal/yamlfile": 0, "internal/fleet": 0, "internal/testkit": 0, "internal/monoclock": 0,
	"rules": 1, "internal/emuconfig": 1, "internal/timerheap": 1,
	"policy": 2, "tunnel/ctrlmsg": 2,
	"tunnel": 3, "internal/usage": 3,
	"internal/config": 4, "internal/demo": 4, "internal/status": 5,
	"internal/bench": 5, "internal/inspect": 5,
	"internal/node": 6, "internal/quicfork": 6, "cmd/bondd-plot": 6, "internal/debpkg": 6, "internal/web": 6,
	"cmd/bondd": 7,
}

// restricted lists third-party packages only some bondd packages may import.
var restricted = map[string][]string{
	"golang.zx2c4.com/wireguard/tun": {"tun", "tun/tuntest"},
	"github.com/quic-go/quic-go":     {"tunnel", "cmd/bondd", "internal/quicfork"},
	// Prometheus: only the daemon's metrics endpoint (docs/design.md).
	"github.com/prometheus": {"cmd/bondd"},
	// Plotting: only the plot command, never the daemon.
	"gonum.org/v1/plot": {"cmd/bondd-plot"},
	// BGP: only the fleet speaker; packaging: only the .deb builder.
	"github.com/osrg/gobgp/v4":      {"internal/fleet"},
	"github.com/goreleaser/nfpm/v2": {"internal/debpkg"},
	// The usage store: only its package.
	"go.etcd.io/bbolt": {"internal/usage"},
}

const module = "github.com/bondd/bondd/"

// TestDependencyDirection fails on any import that points up the layers or
// reaches a restricted third-party package from the wrong place.
func TestDependencyDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(p.ImportPath, module)
		if rel == "github.com/bondd/bondd" {
			continue
		}
		own, known := layer[rel]
		if !known {
			t.Errorf("package %s has no layer: add it to the table in deps_test.go", rel)
			continue
		}
		for _, imp := range p.Imports {
			if dep, ok := strings.CutPrefix(imp, module); ok {
				if l, ok := layer[dep]; ok && l >= own && !(rel == "tun/tuntest" && dep == "tun") {
					t.Errorf("%s (layer %d) imports %s (layer %d): imports must point down", rel, own, dep, l)
				}
			}
			for prefix, allowed := range restricted {
				if (imp == prefix || strings.HasPrefix(imp, prefix+"/")) && !contains(allowed, rel) {
					t.Errorf("%s imports %s; only %v may", rel, imp, allowed)
				}
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// daemonTestDoubles are the test doubles and test beds the bondd binary may
// link, because `bondd demo` runs them: the in-memory TUN device
// (tun/tuntest) and, as root, the network-namespace hosts
// (internal/testbed). Nothing else of the kind, since bench lives in
// internal/bench and links only these too.
var daemonTestDoubles = []string{"tun/tuntest", "internal/testbed"}

// TestDaemonDependencies fails when the bondd binary (./cmd/bondd) links a
// plotting library or a test double it does not run. Plots are drawn by
// cmd/bondd-plot (see README.md).
func TestDaemonDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "./cmd/bondd").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps ./cmd/bondd listed %d packages; expected the daemon's closure", len(deps))
	}
	for _, dep := range deps {
		if isPlotting(dep) {
			t.Errorf("bondd links %s, a plotting package; draw plots in cmd/bondd-plot", dep)
		}
		if rel, ok := strings.CutPrefix(dep, module); ok && isTestDouble(rel) && !contains(daemonTestDoubles, rel) {
			t.Errorf("bondd links the test double %s; only %v may be linked", rel, daemonTestDoubles)
		}
	}
}

// isPlotting reports whether an import path is a plotting or charting
// library.
func isPlotting(path string) bool {
	for _, p := range []string{"gonum.org/v1/plot", "github.com/go-echarts/", "github.com/wcharczuk/go-chart", "github.com/vicanete/gochart"} {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return strings.Contains(path, "/plot") || strings.Contains(path, "chart")
}

// isTestDouble reports whether a bondd package is a test double or test
// bed: a package named *test (tuntest) or internal/testbed.
func isTestDouble(rel string) bool {
	last := rel[strings.LastIndex(rel, "/")+1:]
	return strings.HasSuffix(last, "test") || strings.HasPrefix(last, "testbed") || strings.HasPrefix(last, "fake")
}

func TestIsPlottingAndTestDouble(t *testing.T) {
	for _, tt := range []struct {
		path           string
		plot, isDouble bool
	}{
		{"gonum.org/v1/plot/vg", true, false},
		{"github.com/wcharczuk/go-chart/v2", true, false},
		{"github.com/quic-go/quic-go", false, false},
		{module + "tun/tuntest", false, true},
		{module + "internal/testbed", false, true},
		{module + "tunnel", false, false},
	} {
		rel := strings.TrimPrefix(tt.path, module)
		if isPlotting(tt.path) != tt.plot || (rel != tt.path && isTestDouble(rel) != tt.isDouble) {
			t.Errorf("%s: plotting %v, test double %v", tt.path, isPlotting(tt.path), isTestDouble(rel))
		}
	}
}
