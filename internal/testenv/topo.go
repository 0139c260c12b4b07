package testenv

import (
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
