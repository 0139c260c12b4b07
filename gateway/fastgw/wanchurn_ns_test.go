//go:build linux

package fastgw_test

import (
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane/afxdp"
	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/internal/twosite"
)

// openFDs is the number of the process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	return len(fdTargets(t))
}

// fdTargets maps each of the process's open file descriptors to what it
// is open on ("socket:[123]", "pipe:[45]", a path).
func fdTargets(t *testing.T) map[string]string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string]string, len(ents))
	for _, e := range ents {
		target, _ := os.Readlink("/proc/self/fd/" + e.Name()) // gone meanwhile: ""
		m[e.Name()] = target
	}
	return m
}

// newFDs lists the descriptors of now that before did not have (or had
// open on something else), with their targets: what a failed count is
// made of.
func newFDs(before, now map[string]string) string {
	var out []string
	for fd, target := range now {
		if before[fd] != target {
			out = append(out, fd+" "+target)
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// TestWANAddressChurn: WAN addresses added and removed in a loop while the
// site peer's traffic flows leave no kernel socket (file descriptor) or
// reader goroutine behind, and the tunnel keeps working; a WAN with more
// addresses than the XDP match holds is taken at afxdp.MaxUDPAddrs of
// them (the default counted), one kernel socket each, and all of them
// close when the addresses go.
func TestWANAddressChurn(t *testing.T) {
	testenv.Short(t, "builds namespaces and runs a gateway and a stock peer")
	testenv.Tool(t, "ping", "iputils-ping")
	tp := testenv.Topology(t, "wc")
	s, err := twosite.Build(tp, twosite.Config{Routed: true, NoFastPath: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	var g *fastgw.Gateway
	if err := s.GwA.Do(func() (err error) {
		g, err = fastgw.Start(s.FastConfig)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	ping(t, s.HostB, "198.19.1.10", 0)
	fdsBefore, gs := fdTargets(t), runtime.NumGoroutine()
	fds := len(fdsBefore)
	has := func(a netip.Addr) bool { return slices.Contains(engineWAN(g), a) }
	// Churn: five addresses in, then out, 20 times, pinging meanwhile.
	addrs := make([]netip.Addr, 5)
	for i := range addrs {
		addrs[i] = netip.AddrFrom4([4]byte{198, 18, 1, byte(100 + i)})
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				s.HostB.Run("ping", "-c", "5", "-i", "0.01", "-W", "1", "198.19.1.10")
			}
		}
	}()
	for round := range 20 {
		for _, a := range addrs {
			if err := s.GwA.AddAddr(s.WANA, a.String()+"/24"); err != nil {
				t.Fatal(err)
			}
		}
		if !testenv.PollUntil(5*time.Second, func() bool { return has(addrs[4]) }) {
			t.Fatalf("round %d: engine's WAN %v lacks %v", round, engineWAN(g), addrs[4])
		}
		for _, a := range addrs {
			delAddr(t, s.GwA, s.WANA, a.String()+"/24")
		}
		if !testenv.PollUntil(5*time.Second, func() bool { return !has(addrs[0]) && !has(addrs[4]) }) {
			t.Fatalf("round %d: engine's WAN %v still has the addresses", round, engineWAN(g))
		}
	}
	close(stop)
	<-done
	if !testenv.PollUntil(5*time.Second, func() bool { return openFDs(t) <= fds && runtime.NumGoroutine() <= gs }) {
		t.Errorf("after the churn: %d fds, %d goroutines; before %d, %d; new: %s", openFDs(t), runtime.NumGoroutine(), fds, gs, newFDs(fdsBefore, fdTargets(t)))
	}
	ping(t, s.HostB, "198.19.1.10", 0)

	// More addresses than the match holds.
	const n = afxdp.MaxUDPAddrs + 44
	var many []string
	for i := range n {
		many = append(many, fmt.Sprintf("198.18.%d.%d/32", 16+i/250, 1+i%250))
	}
	for _, c := range many {
		if err := s.GwA.AddAddr(s.WANA, c); err != nil {
			t.Fatal(err)
		}
	}
	want := afxdp.MaxUDPAddrs - 1 // the default counts
	if !testenv.PollUntil(10*time.Second, func() bool { return len(g.Engine().WANAddrs()) == want }) {
		t.Fatalf("engine's further WAN addresses: %d, want %d", len(g.Engine().WANAddrs()), want)
	}
	// One kernel socket each, and the default's.
	v4 := func() int {
		n := 0
		for _, a := range listening(t, s.GwA, s.FastConfig.ListenPort) {
			if a.Is4() {
				n++
			}
		}
		return n
	}
	if !testenv.PollUntil(5*time.Second, func() bool { return v4() == want+1 }) {
		t.Errorf("%d IPv4 sockets at port %d with %d further addresses, want %d (a kernel socket each and the default's)",
			v4(), s.FastConfig.ListenPort, want, want+1)
	}
	ping(t, s.HostB, "198.19.1.10", 0)
	for _, c := range many {
		delAddr(t, s.GwA, s.WANA, c)
	}
	if !testenv.PollUntil(10*time.Second, func() bool { return len(g.Engine().WANAddrs()) == 0 && openFDs(t) <= fds }) {
		t.Errorf("after removing them: %d further addresses, %d fds (before %d; new: %s)", len(g.Engine().WANAddrs()), openFDs(t), fds, newFDs(fdsBefore, fdTargets(t)))
	}
	ping(t, s.HostB, "198.19.1.10", 0)
	t.Logf("drops %s", dropsString(g))
}

// TestWANTentativeAddress: an IPv6 address added to the WAN with duplicate
// address detection is taken once detection ends (the kernel announces
// the address again), with its kernel socket; before, no socket can bind
// it, and none is left failed: a further, deprecated address (preferred
// lifetime 0) is taken as well, as the kernel still receives at it.
func TestWANTentativeAddress(t *testing.T) {
	testenv.Short(t, "builds namespaces and runs a gateway and a stock peer")
	testenv.Tool(t, "ping", "iputils-ping")
	tp := testenv.Topology(t, "wt")
	s, err := twosite.Build(tp, twosite.Config{Routed: true, NoFastPath: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	var g *fastgw.Gateway
	if err := s.GwA.Do(func() (err error) {
		g, err = fastgw.Start(s.FastConfig)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	ping(t, s.HostB, "198.19.1.10", 0)
	a6, dep := netip.MustParseAddr("2001:db8:f1::200"), netip.MustParseAddr("2001:db8:f1::201")
	if _, err := s.GwA.Run("ip", "-6", "addr", "add", a6.String()+"/64", "dev", s.WANA); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GwA.Run("ip", "-6", "addr", "add", dep.String()+"/64", "dev", s.WANA, "nodad", "preferred_lft", "0"); err != nil {
		t.Fatal(err)
	}
	has := func(a netip.Addr) bool { return slices.Contains(engineWAN(g), a) }
	if !testenv.PollUntil(10*time.Second, func() bool { return has(a6) && has(dep) }) {
		out, _ := s.GwA.Run("ip", "-6", "addr", "show", "dev", s.WANA)
		t.Fatalf("engine's WAN %v, want %v and %v in it; %s", engineWAN(g), a6, dep, out)
	}
	if !testenv.PollUntil(5*time.Second, func() bool {
		l := listening(t, s.GwA, s.FastConfig.ListenPort)
		return slices.Contains(l, a6) && slices.Contains(l, dep)
	}) {
		t.Errorf("sockets at port %d on %v, want %v and %v among them", s.FastConfig.ListenPort, listening(t, s.GwA, s.FastConfig.ListenPort), a6, dep)
	}
}

// listening returns the local addresses of the UDP sockets at port in ns
// (ss(8)).
func listening(t *testing.T, ns *topo.NS, port uint16) []netip.Addr {
	t.Helper()
	out, err := ns.Run("ss", "-H", "-uln", fmt.Sprintf("sport = :%d", port))
	if err != nil {
		t.Fatal(err)
	}
	var addrs []netip.Addr
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 4 {
			continue
		}
		if ap, err := netip.ParseAddrPort(f[3]); err == nil {
			addrs = append(addrs, ap.Addr().Unmap())
		}
	}
	return addrs
}
