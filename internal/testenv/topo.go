//go:build linux

package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/internal/topo"
)

// Topology returns a topology for a test that needs network namespaces: it
// requires root, the ip tool (topo.NS.Run runs commands through `ip netns
// exec`) and ping (every such test checks its paths with it), and removes
// everything the topology made when the test ends, failed or not.
func Topology(t testing.TB, prefix string) *topo.Topology {
	t.Helper()
	Root(t)
	Tool(t, "ip", "iproute2")
	// Every test on a topology checks its paths with ping(8) (directly,
	// through topo.NS.Ping or a site's helpers): without it such a test
	// would fail on "exec: not found" instead of naming the package.
	Tool(t, "ping", "iputils-ping")
	tp := topo.New(prefix)
	t.Cleanup(func() {
		if err := tp.Close(); err != nil {
			t.Errorf("remove topology: %v", err)
		}
	})
	return tp
}

// NS makes a namespace in tp or fails the test.
func NS(t testing.TB, tp *topo.Topology, role string) *topo.NS {
	t.Helper()
	ns, err := tp.NewNS(role)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// Veth makes a veth pair between a and b in tp (topo.VethConfig{}), or
// fails the test.
func Veth(t testing.TB, tp *topo.Topology, a, b *topo.NS) *topo.Veth {
	t.Helper()
	v, err := tp.NewVeth(a, b, topo.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// AddressChurn adds and removes, in one `ip -batch` in ns, 200 IPv4 and
// 200 IPv6 addresses on dev, twice: a burst of address notifications
// (some 1,600) that overflows an address subscription's socket, as a
// script or a failover can. No address of the burst is left.
func AddressChurn(t testing.TB, ns *topo.NS, dev string) {
	t.Helper()
	var b strings.Builder
	for round := range 4 {
		verb := "add"
		if round%2 == 1 {
			verb = "del"
		}
		for i := range 200 {
			fmt.Fprintf(&b, "addr %s 198.18.%d.%d/32 dev %s\n", verb, 200+i/250, 1+i%250, dev)
			fmt.Fprintf(&b, "addr %s 2001:db8:77::%x/128 dev %s nodad\n", verb, i+1, dev)
		}
	}
	batch := filepath.Join(t.TempDir(), "churn")
	if err := os.WriteFile(batch, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := ns.Run("ip", "-batch", batch); err != nil {
		t.Fatalf("ip -batch in %s: %v\n%s", ns.Name, err, out)
	}
}

// Unreachables sends dst n pings from ns at once (ping's preload: they
// reach a rate limit together, in less than any interval of it, also on
// a busy machine, where pings 2 ms apart were spread over more than
// IPv6's 250 ms and a seventh answer came) and returns how many
// "destination unreachable" answers came; an answer from another address
// than from is an error of the test.
func Unreachables(t testing.TB, ns *topo.NS, dst, from string, n int) int {
	t.Helper()
	out, _ := ns.Run("ping", "-n", "-c", fmt.Sprint(n), "-l", fmt.Sprint(n), "-W", "1", dst) // fails: no echo reply
	got := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(strings.ToLower(l), "unreachable") {
			if !strings.HasPrefix(l, "From "+from+" ") {
				t.Errorf("answer %q, want one from %s", l, from)
			}
			got++
		}
	}
	return got
}
