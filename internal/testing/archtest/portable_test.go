package archtest

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// linuxOnly are the packages that are Linux only by nature (README,
// "Portability"): AF_XDP, netlink, TUN, network namespaces, procfs, the
// gateways and the binaries. On other systems a library among them holds
// its doc.go alone and a command nothing, so that `go build ./...` passes
// there. Every other package builds, vets and tests on macOS and FreeBSD
// (.ci/run vets them), with a portable fallback where Linux has a call of
// its own (dataplane's doorbell, memport's wait fds: internal/wakefd;
// fastpath's thread pinning; huge-page advice) or a stub that answers
// "not implemented" (arp's kernel tables, dataplane/afxdp's Open).
var linuxOnly = []string{
	"bench",
	"bench/cmd/wggw",
	"bench/internal/gwproc",
	"bench/internal/inproc",
	"bench/internal/rig",
	"bench/internal/sink",
	"bench/scale",
	"cmd/wgpio",
	"examples/gateway",
	"examples/lb",
	"examples/wggo",
	"gateway/compatgw",
	"gateway/fastgw",
	"internal/kernelsock",
	"internal/linkfollow",
	"internal/nldump",
	"internal/nlrcvbuf",
	"internal/srcaddr",
	"internal/testing/kwg",
	"internal/testing/wgpeer",
	"internal/threadns",
	"internal/topo",
	"internal/twosite",
	"tools/cntaudit",
	"tools/xdpreflect",
}

// otherSystems are the systems the portable packages are held to.
var otherSystems = []string{"darwin", "freebsd"}

// listed is what go list says of one package for a GOOS.
type listed struct {
	ImportPath                         string
	GoFiles, TestGoFiles, XTestGoFiles []string
	Error                              *struct{ Err string }
	DepsErrors                         []struct{ Err string }
}

// listFor lists the module's packages as go list sees them on goos.
func listFor(t *testing.T, goos string) map[string]listed {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,GoFiles,TestGoFiles,XTestGoFiles,Error,DepsErrors", module+"/...")
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH=amd64", "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("GOOS=%s go list: %v\n%s", goos, err, ee.Stderr)
		}
		t.Fatalf("GOOS=%s go list: %v", goos, err)
	}
	pkgs := make(map[string]listed)
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs[strings.TrimPrefix(p.ImportPath, module+"/")] = p
	}
	return pkgs
}

// code returns p's Go files, tests included, but doc.go.
func code(p listed) []string {
	var out []string
	for _, f := range slices.Concat(p.GoFiles, p.TestGoFiles, p.XTestGoFiles) {
		if f != "doc.go" {
			out = append(out, f)
		}
	}
	return out
}

// TestPortability: on macOS and FreeBSD, a package of linuxOnly holds no
// code (its doc.go at most; a command is not listed at all), and every
// other package of the module holds code and lists without an error, its
// imports' included (a Linux-only import, a file set that builds to
// nothing). go vet, in .ci/run, then type-checks the code itself. A
// package added to the module is one or the other: this list and README's
// "Portability" say which.
func TestPortability(t *testing.T) {
	all := modulePackages(t) // as this system (Linux) lists them
	if len(all) < 20 {
		t.Fatalf("go list found %d packages; the module's were expected", len(all))
	}
	for _, name := range linuxOnly {
		if _, ok := all[name]; !ok {
			t.Errorf("linuxOnly names %s, which is not a package of the module", name)
		}
	}
	for _, goos := range otherSystems {
		pkgs := listFor(t, goos)
		for name := range all {
			p, listed := pkgs[name]
			if slices.Contains(linuxOnly, name) {
				if files := code(p); len(files) > 0 {
					t.Errorf("GOOS=%s: %s is Linux only but builds %v there: give them //go:build linux (README, Portability)", goos, name, files)
				}
				continue
			}
			if !listed || len(code(p)) == 0 {
				t.Errorf("GOOS=%s: %s builds nothing but its doc there: a portable package lost its code (or add it to linuxOnly and to README, Portability)", goos, name)
				continue
			}
			if p.Error != nil {
				t.Errorf("GOOS=%s: %s: %s", goos, name, p.Error.Err)
			}
			for _, e := range p.DepsErrors {
				t.Errorf("GOOS=%s: %s: %s", goos, name, e.Err)
			}
		}
	}
}
