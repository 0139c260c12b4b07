//go:build linux

package fastgw_test

import (
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
	"github.com/wgpio/wgpio/noise"
)

// TestNeighbourAskedOnlyToSend: the gateway asks for a WAN next hop's MAC
// only when something waits to be sent there, as Linux's wg0 resolves a
// neighbour when it sends: a peer configured with an on-link endpoint
// that nothing is sent to makes no request and no kernel neighbour entry
// (before, each such peer made three ARP requests and left a failed
// entry: a concentrator's table of on-link endpoints filled the kernel's
// neighbour table), and a next hop that never answered is no longer asked
// for once a second for good once the packets held for it went (before,
// until it answered or the route changed).
func TestNeighbourAskedOnlyToSend(t *testing.T) {
	s := newSite(t, twosite.Config{Routed: true})
	g := s.Gateway
	logOnFailure(t, g)
	ping(t, s.HostA, twosite.HostB4.String(), 0)

	asked := fastgw.WANRequests(g)
	priv, err := noise.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	wgCmd(t, "set", s.GwName, "peer", priv.PublicKey().String(), "endpoint", "198.18.1.77:51820", "allowed-ips", "198.19.77.0/24")
	time.Sleep(1500 * time.Millisecond) // some 30 ticks
	if n := fastgw.WANRequests(g) - asked; n != 0 {
		t.Errorf("%d ARP requests for a configured endpoint nothing was sent to, want 0", n)
	}
	if out, _ := s.GwA.Run("ip", "neigh", "show", "198.18.1.77"); strings.TrimSpace(out) != "" {
		t.Errorf("a kernel neighbour entry for the configured endpoint nothing was sent to: %s", out)
	}

	gwRoute(t, s, "replace", "198.18.2.0/24", "via", "198.18.1.252")
	waitNoNextHop(t, s)
	s.HostA.Run("ping", "-c", "3", "-i", "0.2", "-W", "1", twosite.HostB4.String())
	held := func() (n uint64) {
		for _, q := range g.Engine().Stats() {
			n += q.Held
		}
		return n
	}
	if !testenv.PollUntil(6*time.Second, func() bool { return held() == 0 }) {
		t.Fatalf("packets still held 6 s after the next hop went silent; drops %s", dropsString(g))
	}
	if n := fastpath.TotalDrops(g.Engine().Stats())[fastpath.DropNoNeighbour]; n == 0 {
		t.Errorf("no packet dropped as no_neighbour; drops %s", dropsString(g))
	}
	time.Sleep(500 * time.Millisecond)
	asked = fastgw.WANRequests(g)
	time.Sleep(3 * time.Second) // the backoff's 1 s three times over; the peer's keepalive is due later
	if n := fastgw.WANRequests(g) - asked; n != 0 {
		t.Errorf("%d ARP requests for the silent next hop in 3 s after its held packets went, nothing sent since; want 0", n)
	}
	gwRoute(t, s, "replace", "198.18.2.0/24", "via", "198.18.1.254")
	ping(t, s.HostA, twosite.HostB4.String(), 0)
}

// TestIdleFlushAsksNothing: the WAN's neighbour entries flushed (`ip neigh
// flush`, as the kernel's garbage collector removes entries nothing used)
// while the peer is idle: the gateway asks for no next hop until the
// peer's next packet, as Linux's wg0 resolves a neighbour when it sends;
// that packet then goes through. Before, the sweep that follows a change
// of the WAN's neighbours asked at once for the next hop of every idle
// peer that had a MAC (100 idle on-link peers: a burst of ARP requests and
// 100 kernel entries back).
func TestIdleFlushAsksNothing(t *testing.T) {
	s := newSite(t, twosite.Config{})
	g := s.Gateway
	logOnFailure(t, g)
	ping(t, s.HostA, twosite.HostB4.String(), 0)
	time.Sleep(500 * time.Millisecond) // a few ticks: the peer is idle
	asked := fastgw.WANRequests(g)
	if _, err := s.GwA.Run("ip", "-4", "neigh", "flush", "dev", s.WANA); err != nil {
		t.Fatal(err)
	}
	// The sweep's gap is 1 s; the peer's passive keepalive is due 10 s
	// after the reply it received.
	time.Sleep(2 * time.Second)
	if n := fastgw.WANRequests(g) - asked; n != 0 {
		t.Errorf("%d ARP requests for an idle peer's next hop after a flush, nothing sent since; want 0", n)
	}
	if _, err := s.HostA.Run("ping", "-c", "1", "-W", "2", twosite.HostB4.String()); err != nil {
		t.Errorf("the first packet after the flush: %v; drops %s", err, dropsString(g))
	}
}
