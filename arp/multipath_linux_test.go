package arp

import (
	"net"
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// TestFromKernelMultipath: a netlink multipath route becomes a Route over
// its next hops that are not dead (RTNH_F_DEAD), with weights rtnh_hops+1,
// an IPv6 next hop of an IPv4 route (RTA_VIA) included; a single next hop
// left is a plain route.
func TestFromKernelMultipath(t *testing.T) {
	ll := netip.MustParseAddr("fe80::1")
	r := netlink.Route{Family: netlink.FAMILY_V4, Type: unix.RTN_UNICAST, MultiPath: []*netlink.NexthopInfo{
		{LinkIndex: 2, Gw: net.IP(mpA.AsSlice()), Hops: 0},
		{LinkIndex: 3, Gw: net.IP(mpB.AsSlice()), Hops: 0, Flags: unix.RTNH_F_DEAD},
		{LinkIndex: 2, Via: &netlink.Via{AddrFamily: netlink.FAMILY_V6, Addr: net.IP(ll.AsSlice())}, Hops: 2},
	}}
	kr, ok := fromKernelRoute(r)
	if !ok {
		t.Fatal("not converted")
	}
	want := []Path{{Gateway: mpA, IfIndex: 2, Weight: 1}, {Gateway: ll, IfIndex: 2, Weight: 3}}
	got := kr.Paths()
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("paths %+v, want %+v", got, want)
	}
	if kr.Gateway != mpA || kr.IfIndex != 2 || kr.Prefix != netip.MustParsePrefix("0.0.0.0/0") {
		t.Errorf("route %+v", kr.Route)
	}
	r.MultiPath[2].Flags = unix.RTNH_F_DEAD
	kr, _ = fromKernelRoute(r)
	if kr.Paths() != nil || kr.Gateway != mpA || kr.IfIndex != 2 {
		t.Errorf("one next hop alive: %+v, paths %+v", kr.Route, kr.Paths())
	}
	r.MultiPath[0].Flags = unix.RTNH_F_DEAD
	kr, _ = fromKernelRoute(r)
	if len(kr.Paths()) != 3 {
		t.Errorf("every next hop dead: paths %+v, want all three", kr.Paths())
	}
}
