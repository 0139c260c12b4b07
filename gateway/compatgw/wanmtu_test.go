//go:build linux

package compatgw

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/bind"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestWANMTUFollowed: the WAN's MTU lowered under a running compat
// gateway (ip link set dev WAN mtu 1300) is logged with the numbers, as
// in fast-path mode, and bounds what the bind sends: host A's 1400-byte
// pings with DF, 1460-byte tunnel packets, leave as IP fragments of at
// most 1300 bytes, which the stock peer's kernel reassembles for its
// socket, so that they reach host B, counted as the bind's fragmented
// and fragments, none as too_big, as Linux fragments its WireGuard's
// outer packets. Before, compat mode logged nothing and sent them whole,
// counted as transmitted, in frames the link does not carry; then it
// dropped them as too_big. (The 1400-byte replies do not come back: the
// peer's side of the link still has an MTU of 1500, and gwA's veth of
// MTU 1300 takes no longer frame.) The WAN link set down and up is
// logged both ways, as the LAN's is, and the MTU raised again lets the
// pings through both ways. At 1000 the kernel has removed the WAN's IPv6
// addresses, and the warning names IPv4 peers alone.
func TestWANMTUFollowed(t *testing.T) {
	s, g, logs := loggedSite(t, "cwm", nil)
	ip := func(args ...string) {
		t.Helper()
		if out, err := s.GwA.Run("ip", args...); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	// logged waits for a line holding every one of parts (netlink
	// brings the change; a minute bounds only its never coming).
	logged := func(parts ...string) {
		t.Helper()
		if !testenv.PollUntil(time.Minute, func() bool {
			for _, l := range strings.Split(logs.String(), "\n") {
				all := true
				for _, p := range parts {
					all = all && strings.Contains(l, p)
				}
				if all {
					return true
				}
			}
			return false
		}) {
			t.Fatalf("no line with %q logged:\n%s", parts, logs.String())
		}
	}
	snmp := func(ns *topo.NS, group, name string) uint64 { t.Helper(); return testenv.SNMP(t, ns, group, name) }
	ip("link", "set", "dev", s.WANA, "mtu", "1300")
	logged("WAN MTU changed: full-size tunnel packets do not fit it whole", "mtu=1300 ", "leave as IP fragments", "fragmented")
	before := g.Stats().Bind
	echos, reasm := snmp(s.HostB, "Icmp", "InEchos"), snmp(s.GwB, "Ip", "ReasmOKs")
	const n = 3
	out, _ := s.HostA.Run("ping", "-c", strconv.Itoa(n), "-i", "0.2", "-W", "1", "-M", "do", "-s", "1372", twosite.HostB4.String())
	// wireguard-go may hand the bind the last after ping gave up on its
	// reply: wait for host B to have them (a minute bounds only their
	// never coming).
	testenv.PollUntil(time.Minute, func() bool { return snmp(s.HostB, "Icmp", "InEchos")-echos >= n })
	after := g.Stats().Bind
	if got := snmp(s.HostB, "Icmp", "InEchos") - echos; got < n {
		t.Errorf("%d pings of 1400 bytes with DF over a WAN of MTU 1300: host B received %d, want %d (bind %+v)\n%s", n, got, n, after, out)
	}
	if got := snmp(s.GwB, "Ip", "ReasmOKs") - reasm; got < n {
		t.Errorf("the peer's kernel reassembled %d datagrams, want %d at least", got, n)
	}
	// Each 1460-byte datagram takes two fragments of at most 1300.
	if f, fs, tb := after.Fragmented-before.Fragmented, after.Fragments-before.Fragments, after.Drops[bind.DropTooBig]-before.Drops[bind.DropTooBig]; f < n || fs != 2*f || tb != 0 {
		t.Errorf("bind fragmented %d, fragments %d, too_big %d; want %d or more, twice that, 0 (bind %+v)", f, fs, tb, n, after)
	}
	ip("link", "set", "dev", s.WANA, "down")
	logged("WAN link down", "no_wan_route")
	ip("link", "set", "dev", s.WANA, "up", "mtu", "1500")
	logged("WAN link up again")
	logged("WAN MTU changed; the tunnel MTU fits", "mtu=1500 ")
	if err := s.HostA.Ping(twosite.HostB4, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	if out, err := s.HostA.Run("ping", "-c", "1", "-W", "5", "-M", "do", "-s", "1372", twosite.HostB4.String()); err != nil {
		t.Errorf("a 1400-byte ping with DF after the WAN MTU went back to 1500: %v\n%s", err, out)
	}
	// Below 1280 the kernel removes the WAN's IPv6 addresses: the
	// warning names the families of then, IPv4 alone (it named those of
	// start, IPv6 too).
	ip("link", "set", "dev", s.WANA, "mtu", "1000")
	logged("WAN MTU changed: full-size tunnel packets do not fit it whole", "mtu=1000 ", "full-size tunnel packets to IPv4 peers leave as IP fragments")
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "mtu=1000 ") && strings.Contains(l, "IPv6") {
			t.Errorf("WAN MTU at 1000, its IPv6 addresses gone: logged\n%s\nwant no word of IPv6", l)
		}
	}
}
