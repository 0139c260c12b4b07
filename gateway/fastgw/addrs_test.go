//go:build linux

package fastgw_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
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

// TestAddressReReadRetried: an address change whose re-reads of the
// interface fail (ENOBUFS or ENOMEM while the kernel builds the dump, or
// a dump interrupted again and again by more changes) is followed once a
// re-read succeeds: the LAN address added is the host's, a LAN host's
// ping to it answered (AllowedIPs = 0.0.0.0/0). Before, the failed
// re-read was logged and dropped, and the address went on being sent
// into the tunnel until another address change on the LAN.
//
// The LAN's change reads the WAN too (its addresses are the host's as
// well): with that read failing, the try again redoes the whole change.
func TestAddressReReadRetried(t *testing.T) {
	testenv.Tool(t, "ping", "iputils-ping")
	for _, side := range []string{"lan", "wan"} {
		t.Run(side, func(t *testing.T) {
			arm, failed, restore := fastgw.FailReads()
			t.Cleanup(restore) // after the site's Close, registered later
			s := newSite(t, twosite.Config{AllowedA: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}})
			ping(t, s.HostA, "198.19.2.10", 0)
			dev := s.LANA
			if side == "wan" {
				dev = s.WANA
			}
			arm(dev, 2)
			runOK(t, s.GwA, "ip", "addr", "add", "198.19.1.2/24", "dev", s.LANA)
			ping(t, s.HostA, "198.19.1.2", 0)
			if n := failed(); n != 2 {
				t.Errorf("%d re-reads of %s failed, want the 2 armed", n, dev)
			}
		})
	}
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

// TestLANRenumberedICMPSource: after the LAN interface is renumbered
// (198.19.1.1 and 2001:db8:1::1 replaced by .7 and ::7), the time exceeded
// errors the gateway sends toward LAN hosts come from the new addresses,
// as Linux sends them from an address of the interface they leave by
// (RFC 1812 §4.3.2.4, RFC 4443 §2.2), and so does the IPv6 one it sends
// into the tunnel (the gateway has no IPv6 tunnel address: its LAN
// address stands in). Before, they kept the addresses of start, which the
// gateway no longer has.
func TestLANRenumberedICMPSource(t *testing.T) {
	testenv.Tool(t, "ping", "iputils-ping")
	s := newSite(t, twosite.Config{})
	ping(t, s.HostA, twosite.HostB4.String(), 0)
	ping(t, s.HostA, twosite.HostB6.String(), 0)
	// The secondary .7 becomes primary when .1 goes, rather than going
	// with it.
	if err := s.GwA.Sysctl("net.ipv4.conf."+s.LANA+".promote_secondaries", "1"); err != nil {
		t.Fatal(err)
	}
	runOK(t, s.GwA, "ip", "addr", "add", "198.19.1.7/24", "dev", s.LANA)
	runOK(t, s.GwA, "ip", "-6", "addr", "add", "2001:db8:1::7/64", "dev", s.LANA, "nodad")
	runOK(t, s.GwA, "ip", "addr", "del", "198.19.1.1/24", "dev", s.LANA)
	runOK(t, s.GwA, "ip", "-6", "addr", "del", "2001:db8:1::1/64", "dev", s.LANA)
	runOK(t, s.HostA, "ip", "route", "replace", "198.19.0.0/16", "via", "198.19.1.7")
	runOK(t, s.HostA, "ip", "-6", "route", "replace", "2001:db8::/32", "via", "2001:db8:1::7")
	ping(t, s.HostA, twosite.HostB4.String(), 0)
	ping(t, s.HostA, twosite.HostB6.String(), 0)
	for _, c := range []struct {
		from *topo.NS
		dst  string
		ttl  string
		want string
	}{
		{s.HostA, twosite.HostB4.String(), "1", "From 198.19.1.7 icmp_seq=1 Time to live exceeded"},
		{s.HostA, twosite.HostB6.String(), "1", "From 2001:db8:1::7 icmp_seq=1 Time exceeded: Hop limit"},
		// hostB's packet leaves gwB with hop limit 1 and expires at gwA.
		{s.HostB, twosite.HostA6.String(), "2", "From 2001:db8:1::7 icmp_seq=1 Time exceeded: Hop limit"},
	} {
		var out string
		// The address follower runs beside the test: give it a moment.
		for deadline := time.Now().Add(5 * time.Second); ; {
			out, _ = c.from.Run("ping", "-c", "1", "-W", "1", "-t", c.ttl, c.dst)
			if strings.Contains(out, c.want) || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !strings.Contains(out, c.want) {
			t.Errorf("ping -t %s %s from %s after renumbering: want %q, got:\n%s", c.ttl, c.dst, c.from.Name, c.want, out)
		}
	}
}

// TestLANSecondSubnetICMPSource: with a second subnet and a second IPv6
// prefix on the LAN, a host of each gets the time exceeded from our
// address of its own subnet (IPv4: the preferred source of Linux's
// connected route back; IPv6: the longest matching prefix, RFC 6724 §5
// rule 8), as a Linux router sends it. Every error came from the LAN's
// first address of the family, and for IPv6 the newest prefix is the
// first the kernel lists: hosts of the old /64 got errors from the new.
func TestLANSecondSubnetICMPSource(t *testing.T) {
	testenv.Tool(t, "ping", "iputils-ping")
	s := newSite(t, twosite.Config{})
	ping(t, s.HostA, twosite.HostB4.String(), 0)
	runOK(t, s.GwA, "ip", "addr", "add", "198.19.7.1/24", "dev", s.LANA)
	runOK(t, s.GwA, "ip", "-6", "addr", "add", "2001:db8:1:7::1/64", "dev", s.LANA, "nodad")
	devA := hostLANDev(t, s.HostA)
	runOK(t, s.HostA, "ip", "addr", "add", "198.19.7.10/24", "dev", devA)
	runOK(t, s.HostA, "ip", "-6", "addr", "add", "2001:db8:1:7::10/64", "dev", devA, "nodad")
	for _, c := range []struct{ args, want string }{
		{"-I 198.19.7.10 " + twosite.HostB4.String(), "From 198.19.7.1 icmp_seq=1 Time to live exceeded"},
		{"-I 198.19.1.10 " + twosite.HostB4.String(), "From 198.19.1.1 icmp_seq=1 Time to live exceeded"},
		{"-I 2001:db8:1:7::10 " + twosite.HostB6.String(), "From 2001:db8:1:7::1 icmp_seq=1 Time exceeded: Hop limit"},
		{"-I " + twosite.HostA6.String() + " " + twosite.HostB6.String(), "From 2001:db8:1::1 icmp_seq=1 Time exceeded: Hop limit"},
	} {
		var out string
		// The address follower runs beside the test: give it a moment.
		for deadline := time.Now().Add(5 * time.Second); ; {
			out, _ = s.HostA.Run("ping", append([]string{"-c", "1", "-W", "1", "-t", "1"}, strings.Fields(c.args)...)...)
			if strings.Contains(out, c.want) || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !strings.Contains(out, c.want) {
			t.Errorf("ping -t 1 %s: want %q, got:\n%s", c.args, c.want, out)
		}
	}
}

// hostLANDev returns the name of the one interface of host ns besides lo
// (its LAN veth).
func hostLANDev(t *testing.T, ns *topo.NS) string {
	t.Helper()
	for _, l := range strings.Split(runOK(t, ns, "ip", "-o", "link", "show"), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[1] != "lo:" {
			return strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0]
		}
	}
	t.Fatalf("no interface in %s besides lo", ns.Name)
	return ""
}
