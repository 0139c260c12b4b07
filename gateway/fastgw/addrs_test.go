package fastgw_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestLANAddressFollowed: an address added to the LAN interface of a
// running gateway (a keepalived virtual address, a renumbering) is the
// host's. With AllowedIPs = 0.0.0.0/0, a LAN host's ping to it is answered
// by the host, not sent into the tunnel; and a ping from the far site
// through the tunnel is handed to the host (the exception TUN), not
// forwarded to the LAN. Removed again, it is forwarded like any other
// destination.
func TestLANAddressFollowed(t *testing.T) {
	testenv.Tool(t, "ping", "iputils-ping")
	t.Run("from-lan", func(t *testing.T) {
		s := newSite(t, twosite.Config{AllowedA: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}})
		ping(t, s.HostA, "198.19.2.10", 0) // through the tunnel
		runOK(t, s.GwA, "ip", "addr", "add", "198.19.1.2/24", "dev", s.LANA)
		ping(t, s.HostA, "198.19.1.2", 0)
		runOK(t, s.GwA, "ip", "addr", "del", "198.19.1.2/24", "dev", s.LANA)
		ping(t, s.HostA, "198.19.1.1", 0) // the address of start, still the host's
		ping(t, s.HostA, "198.19.2.10", 0)
	})
	t.Run("from-tunnel", func(t *testing.T) {
		s := newSite(t, twosite.Config{})
		ping(t, s.HostB, "198.19.1.1", 0) // the address of start
		runOK(t, s.GwA, "ip", "addr", "add", "198.19.1.2/24", "dev", s.LANA)
		ping(t, s.HostB, "198.19.1.2", 0)
	})
}

// TestLANAddressChurn: a burst of address changes on the LAN interface
// (hundreds added and removed at once, IPv4 and IPv6, as a script or a
// failover does) ends the address subscription when its socket
// overflows (ENOBUFS). The gateway subscribes again and reads the
// addresses of now: an address added after the burst is still the
// host's (a LAN host's ping to it answered, with AllowedIPs = 0.0.0.0/0),
// and none of the burst's is left behind.
func TestLANAddressChurn(t *testing.T) {
	testenv.Tool(t, "ping", "iputils-ping")
	s := newSite(t, twosite.Config{AllowedA: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}})
	ping(t, s.HostA, "198.19.2.10", 0)
	testenv.AddressChurn(t, s.GwA, s.LANA)
	runOK(t, s.GwA, "ip", "addr", "add", "198.19.1.2/24", "dev", s.LANA)
	ping(t, s.HostA, "198.19.1.2", 0)
	ping(t, s.HostA, "198.19.2.10", 0)
}

// TestLANRenumberedICMPSource: after the LAN interface is renumbered, the
// gateway's "packet too big" toward LAN hosts comes from the new address.
// Before, it kept the address of start; a LAN that got its IPv6 address
// after start had none to send from, and its hosts' large packets into the
// tunnel vanished without an answer.
func TestLANRenumberedICMPSource(t *testing.T) {
	testenv.Tool(t, "ping", "iputils-ping")
	s := newSite(t, twosite.Config{})
	tooBig := func(dst, from string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		var out string
		for time.Now().Before(deadline) {
			// ping exits 1 on the error; its output says who sent it.
			out, _ = s.HostA.Run("ping", "-6", "-c", "1", "-W", "1", "-M", "do", "-s", "1450", dst)
			if strings.Contains(out, "From "+from) && strings.Contains(out, "Packet too big: mtu=1420") {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("ping -6 -s 1450 %s: want packet too big from %s, got:\n%s", dst, from, out)
	}
	tooBig("2001:db8:2::11", "2001:db8:1::1")
	runOK(t, s.GwA, "ip", "addr", "add", "2001:db8:1::5/64", "dev", s.LANA, "nodad")
	runOK(t, s.GwA, "ip", "addr", "del", "2001:db8:1::1/64", "dev", s.LANA)
	runOK(t, s.HostA, "ip", "-6", "route", "replace", "2001:db8::/32", "via", "2001:db8:1::5")
	// Another destination each time: the host keeps the path MTU it
	// learnt for the first.
	tooBig("2001:db8:2::12", "2001:db8:1::5")
}
