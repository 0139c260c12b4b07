//go:build linux

package fastgw_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/internal/twosite"
)

// linkLocal waits until a link of ns other than the loopback (dev, or the
// first when dev is "") has a link-local address past duplicate address
// detection, and returns it and the link's name.
func linkLocal(t *testing.T, ns *topo.NS, dev string) (netip.Addr, string) {
	t.Helper()
	h := ns.Handle()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		links, err := h.LinkList()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links {
			name := l.Attrs().Name
			if name == "lo" || dev != "" && name != dev {
				continue
			}
			addrs, err := h.AddrList(l, netlink.FAMILY_V6)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range addrs {
				ip, _ := netip.AddrFromSlice(a.IP)
				if ip.IsLinkLocalUnicast() && a.Flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED) == 0 {
					return ip, name
				}
			}
		}
	}
	t.Fatalf("no link-local address in %s past duplicate address detection", ns.Name)
	return netip.Addr{}, ""
}

// TestLinkLocalSourceBeyondScope: a LAN host's ping from its link-local
// address to a host at the far site gets "destination unreachable, beyond
// scope of source address" from the gateway's link-local address on the
// LAN, and with hop limit 1 time exceeded from it, as a Linux router
// answers (RFC 4443 §3.1; ip6_forward), the packets dropped as martian.
// Before, they were dropped without an answer.
func TestLinkLocalSourceBeyondScope(t *testing.T) {
	testenv.Tool(t, "ping", "iputils-ping")
	s := newSite(t, twosite.Config{})
	ping(t, s.HostA, twosite.HostB6.String(), 0)
	gwLL, _ := linkLocal(t, s.GwA, s.LANA)
	hostLL, dev := linkLocal(t, s.HostA, "")
	before := fastpath.TotalDrops(s.Gateway.Engine().Stats())[fastpath.DropMartian]
	for _, c := range []struct {
		hl   string
		want string
	}{
		{"64", "From " + gwLL.String() + "%" + dev + " icmp_seq=1 Destination unreachable: Beyond scope of source address"},
		{"1", "From " + gwLL.String() + "%" + dev + " icmp_seq=1 Time exceeded: Hop limit"},
	} {
		var out string
		// The address follower may see the gateway's link-local
		// address after the test did: give it a moment.
		for deadline := time.Now().Add(5 * time.Second); ; {
			out, _ = s.HostA.Run("ping", "-6", "-c", "1", "-W", "1", "-t", c.hl, "-I", hostLL.String()+"%"+dev, twosite.HostB6.String())
			if strings.Contains(out, c.want) || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !strings.Contains(out, c.want) {
			t.Errorf("ping -t %s from %v: want %q, got:\n%s", c.hl, hostLL, c.want, out)
		}
	}
	// The fast path answered, not the host's kernel (forwarding is off
	// in gwA: it would not have).
	if after := fastpath.TotalDrops(s.Gateway.Engine().Stats())[fastpath.DropMartian]; after <= before {
		t.Errorf("martian drops %d → %d, want more", before, after)
	}
}
