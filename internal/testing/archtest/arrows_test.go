package archtest

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/wgpio/wgpio"

// pkg is what go list says of one package (non-test imports only).
type pkg struct {
	ImportPath    string
	Imports, Deps []string
}

// listModule lists the module's packages by path relative to the module
// root, each with its module-internal imports (direct: Imports) and
// dependencies (transitive: Deps), relative too, as this system builds
// them.
func listModule(t *testing.T) map[string]pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,Deps", module+"/...")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	inModule := func(paths []string) []string {
		var rel []string
		for _, d := range paths {
			if r, ok := strings.CutPrefix(d, module+"/"); ok {
				rel = append(rel, r)
			}
		}
		return rel
	}
	pkgs := make(map[string]pkg)
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		name := strings.TrimPrefix(p.ImportPath, module+"/")
		pkgs[name] = pkg{ImportPath: name, Imports: inModule(p.Imports), Deps: inModule(p.Deps)}
	}
	return pkgs
}

// modulePackages lists the module's packages with their transitive
// dependencies inside the module, by path relative to the module root.
func modulePackages(t *testing.T) map[string][]string {
	t.Helper()
	deps := make(map[string][]string)
	for name, p := range listModule(t) {
		deps[name] = p.Deps
	}
	return deps
}

// under reports whether path is dir or inside it.
func under(path, dir string) bool { return path == dir || strings.HasPrefix(path, dir+"/") }

// rule forbids the packages that from selects to depend, directly or not,
// on a package that to selects.
type rule struct {
	what     string
	from, to func(string) bool
}

func anyOf(dirs ...string) func(string) bool {
	return func(p string) bool {
		for _, d := range dirs {
			if under(p, d) {
				return true
			}
		}
		return false
	}
}

// TestArrows checks "Arrows that must never exist" of ARCHITECTURE.md.
func TestArrows(t *testing.T) {
	rules := []rule{
		{"the data path and the leaves do not reach up into the control plane's wiring, compat mode or the binaries",
			anyOf("protocol", "replay", "internal/counts", "header", "dataplane", "arp", "noise", "fastpath"),
			anyOf("gateway", "bind", "tundev", "config", "cmd", "examples", "bench", "tools")},
		{"the fast path knows no handshake code",
			anyOf("fastpath"), anyOf("noise", "gateway")},
		{"a dataplane knows nothing of WireGuard",
			anyOf("dataplane"), anyOf("header", "replay", "noise", "fastpath", "protocol", "arp")},
		{"byte-slice packages know no queues",
			anyOf("replay", "noise", "arp", "header", "protocol"), anyOf("dataplane")},
		{"protocol is a leaf",
			anyOf("protocol"), func(string) bool { return true }},
		{"the two modes are wired apart: compat mode does not pull in the fast path's wiring",
			anyOf("gateway/compatgw"), anyOf("gateway/fastgw")},
		{"the two modes are wired apart: the fast path's wiring does not pull in compat mode",
			anyOf("gateway/fastgw"), anyOf("gateway/compatgw")},
		{"library code does not use test harnesses",
			func(p string) bool {
				return !anyOf("cmd", "examples", "bench", "tools", "internal/testing", "internal/twosite")(p)
			},
			anyOf("internal/testing", "internal/twosite")},
	}
	pkgs := modulePackages(t)
	if _, ok := pkgs["fastpath"]; !ok || len(pkgs) < 20 {
		t.Fatalf("go list found %d packages; the module's were expected", len(pkgs))
	}
	for _, r := range rules {
		for p, deps := range pkgs {
			if !r.from(p) {
				continue
			}
			for _, d := range deps {
				if r.to(d) {
					t.Errorf("%s depends on %s: %s (ARCHITECTURE.md, Arrows that must never exist)", p, d, r.what)
				}
			}
		}
	}
}

// TestRuleCatches makes sure a rule can fail: a made-up fast path that
// imports noise is caught.
func TestRuleCatches(t *testing.T) {
	r := rule{"", anyOf("fastpath"), anyOf("noise")}
	if !(r.from("fastpath") && r.to("noise")) || r.to("noisy") || r.from("fastpathx") {
		t.Error("rule selection wrong")
	}
}
