//go:build linux

package fastgw_test

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestOwnedAddressMode: gwA's kernel has no address on its WAN and LAN;
// wgpio answers ARP for 198.18.1.1 and 198.19.1.1 itself, resolves the LAN
// host and the WAN next hop itself, and carries traffic to and from the
// stock wireguard-go peer — on-link and through a router.
func TestOwnedAddressMode(t *testing.T) {
	testenv.Tool(t, "ping", "iputils-ping")
	for _, routed := range []bool{false, true} {
		t.Run(fmt.Sprintf("routed=%v", routed), func(t *testing.T) {
			s := newSite(t, twosite.Config{Owned: true, Routed: routed})
			ping(t, s.HostA, twosite.HostB4.String(), 0)
			ping(t, s.HostB, twosite.HostA4.String(), 0)
			tcpTransfer(t, s.HostA, s.HostB, twosite.HostB4, 2<<20)
			var nf uint64
			for _, q := range s.Gateway.Engine().Stats() {
				nf += q.NeighbourFrames
			}
			if nf == 0 {
				t.Error("no ARP frame reached wgpio's responder")
			}
			// The responders' counters are the gateway's (wgpio
			// stats, /metrics): the LAN host asked for the LAN
			// address, and the gateway for its next hops.
			n, ok := s.Gateway.Neighbours()
			if !ok || n["lan"].Replies == 0 || n["lan"].Requests+n["wan"].Requests == 0 {
				t.Errorf("Neighbours() = %+v, %v: want the LAN's replies and some requests", n, ok)
			}
			t.Logf("drops: %s; ARP/NDP frames handled: %d; neighbours %+v", dropsString(s.Gateway), nf, n)
		})
	}
}

// TestOwnedNeighbourMoved: in the owned address mode, a LAN host that
// moves to another MAC (a VRRP failover without a virtual MAC, a NIC
// replaced) and announces it with a gratuitous ARP is reached at its new
// MAC at once, as Linux's neighbour table takes the announcement (RFC
// 826's merge): before, the gateway kept sending to the old MAC until
// its entry failed, some 15-25 s of loss.
func TestOwnedNeighbourMoved(t *testing.T) {
	testenv.Tool(t, "ping", "iputils-ping")
	s := newSite(t, twosite.Config{Owned: true})
	ping(t, s.HostB, twosite.HostA4.String(), 0)
	out, err := s.HostA.Run("ip", "-o", "-4", "addr", "show", "to", twosite.HostA4.String())
	f := strings.Fields(out)
	if err != nil || len(f) < 2 {
		t.Fatalf("host A's interface: %v %q", err, out)
	}
	dev := f[1]
	newMAC := net.HardwareAddr{0x02, 0x47, 0, 0, 0, 0x0a}
	if _, err := s.HostA.Run("ip", "link", "set", "dev", dev, "address", newMAC.String()); err != nil {
		t.Fatal(err)
	}
	// A gratuitous ARP request (RFC 5227 §3): sender and target the
	// host's address, to the broadcast address.
	g := make([]byte, 42)
	copy(g[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(g[6:12], newMAC)
	binary.BigEndian.PutUint16(g[12:], 0x0806)
	binary.BigEndian.PutUint16(g[14:], 1)
	binary.BigEndian.PutUint16(g[16:], 0x0800)
	g[18], g[19] = 6, 4
	binary.BigEndian.PutUint16(g[20:], 1)
	copy(g[22:28], newMAC)
	a := twosite.HostA4.As4()
	copy(g[28:32], a[:])
	copy(g[38:42], a[:])
	testenv.SendFrames(t, s.HostA, dev, g)
	// At once: within the time a few pings take, far short of the old
	// entry's 30 s of reachable and its probes.
	if _, err := s.HostB.Run("ping", "-c", "1", "-w", "3", twosite.HostA4.String()); err != nil {
		t.Errorf("host A at its new MAC unreached 3 s after its gratuitous ARP (drops %s)", dropsString(s.Gateway))
	}
}

// TestOwnedLinkLocalGateway: in the owned address mode an IPv6 Gateway
// that is the router's link-local address (the usual IPv6 next hop, which
// the configuration accepts) is resolved on the WAN and carries the
// tunnel, as on Linux. Before, the start failed: "gateway ... is not
// on-link".
func TestOwnedLinkLocalGateway(t *testing.T) {
	testenv.Tool(t, "ping", "iputils-ping")
	s := newSite(t, twosite.Config{Owned: true, Routed: true, Outer6: true, NoFastPath: true})
	out, err := s.Router.Run("ip", "-6", "-o", "addr", "show", "to", "2001:db8:f1::fe/64")
	f := strings.Fields(out)
	if err != nil || len(f) < 2 {
		t.Fatalf("the router's WAN interface: %v %q", err, out)
	}
	out, err = s.Router.Run("ip", "-6", "-o", "addr", "show", "dev", f[1], "scope", "link")
	f = strings.Fields(out)
	if err != nil || len(f) < 4 {
		t.Fatalf("the router's link-local address: %v %q", err, out)
	}
	ll, err := netip.ParsePrefix(f[3])
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.FastConfig
	cfg.Gateway = ll.Addr()
	var g *fastgw.Gateway
	if err := s.GwA.Do(func() (err error) { g, err = fastgw.Start(cfg); return err }); err != nil {
		t.Fatalf("start with Gateway = %v: %v", ll.Addr(), err)
	}
	defer g.Close()
	ping(t, s.HostA, twosite.HostB4.String(), 0)
}
