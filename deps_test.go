package bondd_test

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// layer is each bondd package's place in the import order: a package may
// import only bondd packages of a strictly lower layer (see DESIGN.md).
var layer = map[string]int{
	"classify": 0, "classify/capture": 0, "fec": 0, "tun": 0, "tun/tuntest": 0, "emu": 0, "internal/testbed": 0, "internal/fleet": 0,
	"rules":     1,
	"policy":    2,
	"tunnel":    3,
	"cmd/bondd": 4, "internal/debpkg": 4,
}

// restricted lists third-party packages only some bondd packages may import.
var restricted = map[string][]string{
	"golang.zx2c4.com/wireguard/tun": {"tun", "tun/tuntest"},
	"github.com/quic-go/quic-go":     {"tunnel", "cmd/bondd"},
	"github.com/osrg/gobgp/v4":       {"internal/fleet"},
	"github.com/goreleaser/nfpm/v2":  {"internal/debpkg"},
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
