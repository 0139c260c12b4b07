//go:build linux

package fastgw_test

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
)

// nstatValue returns the kernel counter name in out, the output of nstat
// -az, or 0 if out does not list it.
func nstatValue(t *testing.T, out, name string) uint64 {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == name {
			v, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				t.Fatalf("nstat %s: %v", name, err)
			}
			return v
		}
	}
	return 0
}

// TestIPv4OptionsThroughFastPath: an IPv4 packet with options (ping -R,
// record route) from the LAN crosses the tunnel through the fast path, as
// Linux forwards it into wg0. Before, the XDP program redirected only
// IPv4 headers of 20 bytes and left the rest to the host kernel, which
// with AllowedIPs = 0.0.0.0/0 (no route into the exception TUN) and
// forwarding on sent it out of the WAN by its default route, unencrypted,
// and with forwarding off dropped it.
func TestIPv4OptionsThroughFastPath(t *testing.T) {
	testenv.Tool(t, "ping", "iputils-ping")
	testenv.Tool(t, "nstat", "iproute2")
	s := newSite(t, twosite.Config{AllowedA: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}})
	// gwA as the Linux router it replaced: forwarding on, a default
	// route out of the WAN.
	if err := s.GwA.Forwarding(); err != nil {
		t.Fatal(err)
	}
	if err := s.GwA.AddRoute("default", "198.18.1.2", ""); err != nil {
		t.Fatal(err)
	}
	ping(t, s.HostA, twosite.HostB4.String(), 0)
	before := s.Gateway.Engine().Stats()[0].Encrypted
	out, err := s.HostA.Run("ping", "-c", "1", "-W", "2", "-R", twosite.HostB4.String())
	if err != nil {
		t.Fatalf("ping -R: %v\n%s", err, out)
	}
	st := runOK(t, s.GwA, "nstat", "-asz")
	if fwd := nstatValue(t, st, "IpForwDatagrams"); fwd != 0 {
		t.Errorf("gwA's kernel forwarded %d datagrams (the record-route ping left the fast path):\n%s", fwd, out)
	}
	if enc := s.Gateway.Engine().Stats()[0].Encrypted; enc == before {
		t.Errorf("ping -R answered, but the fast path encrypted nothing")
	}
}

// TestDirectedBroadcastFromTunnel: a packet from the tunnel to the LAN's
// directed broadcast address (198.19.1.255) reaches the host's kernel
// through the exception TUN, which delivers it locally, as Linux's wg0
// does (its local table's broadcast route; bc_forwarding off), and is
// neither sent onto the LAN nor held for a neighbour that never answers.
// Before, it waited 3 s for an ARP answer and was dropped (no_neighbour).
func TestDirectedBroadcastFromTunnel(t *testing.T) {
	testenv.Tool(t, "ping", "iputils-ping")
	testenv.Tool(t, "nstat", "iproute2")
	s := newSite(t, twosite.Config{})
	ping(t, s.HostB, twosite.HostA4.String(), 0)
	// Absolute counts (-a), and none written to nstat's history (-s):
	// that file is one for every namespace (/tmp/.nstat.u0), so the
	// increments since an earlier run are those of whichever namespace
	// another test ran nstat in last.
	bcast0 := nstatValue(t, runOK(t, s.GwA, "nstat", "-asz", "IpExtInBcastPkts"), "IpExtInBcastPkts")
	before := s.Gateway.Engine().Stats()[0]
	s.HostB.Run("ping", "-c", "1", "-W", "1", "-b", "198.19.1.255")
	// Both counts, each in its own time: the worker counts a packet for
	// the exception TUN after handing it on, and the kernel may have
	// received it before.
	var bcast uint64
	var after fastpath.QueueStats
	testenv.PollUntil(20*time.Second, func() bool {
		bcast = nstatValue(t, runOK(t, s.GwA, "nstat", "-asz", "IpExtInBcastPkts"), "IpExtInBcastPkts") - bcast0
		after = s.Gateway.Engine().Stats()[0]
		return bcast > 0 && after.Exception > before.Exception
	})
	if bcast == 0 || after.Exception == before.Exception {
		t.Errorf("gwA's kernel received %d broadcasts, the exception TUN %d packets; want both (drops %s)", bcast, after.Exception-before.Exception, dropsString(s.Gateway))
	}
	if d := fastpath.TotalDrops(s.Gateway.Engine().Stats())[fastpath.DropNoNeighbour]; d != 0 {
		t.Errorf("%d no_neighbour drops, want none", d)
	}
	if after.Held != 0 {
		t.Errorf("%d packets held, want none", after.Held)
	}
}

// TestSubnetRouterAnycastFromTunnel: a peer's echo request to the LAN's
// IPv6 subnet-router anycast address (2001:db8:1::, RFC 4291 §2.6.1),
// which Linux joins on the LAN while it forwards IPv6, reaches the host's
// kernel through the exception TUN and is answered, as through Linux's
// wg0. Before, the fast path sent it onto the LAN as a host's, waited 3 s
// for a neighbour that never answered and dropped it (no_neighbour).
func TestSubnetRouterAnycastFromTunnel(t *testing.T) {
	testenv.Tool(t, "ping", "iputils-ping")
	s := newSite(t, twosite.Config{})
	runOK(t, s.GwA, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
	ping(t, s.HostB, twosite.HostA6.String(), 0)
	before := s.Gateway.Engine().Stats()[0]
	if err := s.HostB.Ping(netip.MustParseAddr("2001:db8:1::"), 10*time.Second); err != nil {
		t.Errorf("ping of the LAN's subnet-router anycast from site B: %v (drops %s)", err, dropsString(s.Gateway))
	}
	after := s.Gateway.Engine().Stats()[0]
	if after.Exception == before.Exception {
		t.Error("the exception TUN took nothing")
	}
	if d := fastpath.TotalDrops(s.Gateway.Engine().Stats())[fastpath.DropNoNeighbour]; d != 0 {
		t.Errorf("%d no_neighbour drops, want none", d)
	}
}
