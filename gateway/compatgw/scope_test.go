//go:build linux

package compatgw

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/tundev"
)

// linkLocalOf waits until dev in ns has a link-local address past
// duplicate address detection and returns it.
func linkLocalOf(t *testing.T, ns *topo.NS, dev string) netip.Addr {
	t.Helper()
	l, err := ns.Handle().LinkByName(dev)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		addrs, err := ns.Handle().AddrList(l, netlink.FAMILY_V6)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range addrs {
			ip, _ := netip.AddrFromSlice(a.IP)
			if ip.IsLinkLocalUnicast() && a.Flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED) == 0 {
				return ip
			}
		}
	}
	t.Fatalf("no link-local address on %s in %s past duplicate address detection", dev, ns.Name)
	return netip.Addr{}
}

// linkLocalSource is TestRouterStock's: the LAN host hl, routing the
// warriors' IPv6 prefix through the hub's link-local address (the LAN has
// no global IPv6), pings a warrior from its own link-local address and
// gets "destination unreachable, beyond scope of source address" from the
// hub's link-local address, as a Linux router answers (RFC 4443 §3.1;
// ip6_forward), the packet dropped as martian. Before, it was dropped
// unanswered.
func linkLocalSource(t *testing.T, g *Gateway, hub, hl *topo.NS, lan *topo.Veth) {
	hubLL, hlLL := linkLocalOf(t, hub, lan.A), linkLocalOf(t, hl, lan.B)
	if out, err := hl.Run("ip", "-6", "route", "replace", "2001:db8:65::/64", "via", hubLL.String(), "dev", lan.B); err != nil {
		t.Fatalf("route the warriors' IPv6 through the hub: %v\n%s", err, out)
	}
	before := g.Stats().LAN.Drops[tundev.PortDropMartian]
	want := "From " + hubLL.String() + "%" + lan.B + " icmp_seq=1 Destination unreachable: Beyond scope of source address"
	// The address follower sees the end of the hub's duplicate address
	// detection after the test did: wait until the LAN device answers
	// from the address (the precondition), then ping.
	for deadline := time.Now().Add(10 * time.Second); g.lanDev.ICMPLinkLocal() != hubLL; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the LAN device's link-local source is %v 10 s after the hub's %v passed duplicate address detection", g.lanDev.ICMPLinkLocal(), hubLL)
		}
	}
	var out string
	for deadline := time.Now().Add(5 * time.Second); ; {
		out, _ = hl.Run("ping", "-6", "-c", "1", "-W", "1", "-I", hlLL.String()+"%"+lan.B, "2001:db8:65::2")
		if strings.Contains(out, want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(out, want) {
		s := g.Stats().LAN
		t.Errorf("ping a warrior from %v: want %q, got:\n%s\nLAN device: %d ICMP errors sent, %d suppressed, drops %v", hlLL, want, out, s.ICMPErrors, s.ICMPSuppressed, s.Drops)
	}
	if after := g.Stats().LAN.Drops[tundev.PortDropMartian]; after <= before {
		t.Errorf("the hub's martian drops %d → %d, want more", before, after)
	}
}
