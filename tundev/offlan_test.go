package tundev

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/wgpio/wgpio/arp"
	"github.com/wgpio/wgpio/header"
)

// The interfaces of offLANRig's routes: the LAN's, and another link's.
const (
	offLANIndex   = 2
	otherLinkIdx  = 3
	unreachableIx = -1 // arp's IfIndex of a route that sends nowhere
)

// offLANRig is a routerRig whose routes are a whole host's (LANIndex
// set): the LAN's on-link prefixes and its default router (host), another
// link with networks behind it, an unreachable route, and none for the
// rest of IPv6.
func offLANRig(t *testing.T) *portRig {
	other, other6 := netip.MustParseAddr("198.18.60.1"), netip.MustParseAddr("2001:2:0:60::1")
	routes, err := arp.NewStaticRoutes([]arp.Route{
		{Prefix: netip.MustParsePrefix("198.18.11.0/24"), IfIndex: offLANIndex},
		{Prefix: netip.MustParsePrefix("2001:2:0:11::/64"), IfIndex: offLANIndex},
		{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Gateway: hostIP, IfIndex: offLANIndex},
		{Prefix: netip.MustParsePrefix("198.18.60.0/24"), IfIndex: otherLinkIdx},
		{Prefix: netip.MustParsePrefix("2001:2:0:60::/64"), IfIndex: otherLinkIdx},
		{Prefix: netip.MustParsePrefix("198.18.50.0/24"), Gateway: other, IfIndex: otherLinkIdx},
		{Prefix: netip.MustParsePrefix("2001:2:0:50::/64"), Gateway: other6, IfIndex: otherLinkIdx},
		// Longer than peer B's 198.18.42.0/24: the other link's.
		{Prefix: netip.MustParsePrefix("198.18.42.128/25"), Gateway: other, IfIndex: otherLinkIdx},
		// Shorter than peer A's 198.18.41.0/24: the tunnel's.
		{Prefix: netip.MustParsePrefix("198.18.40.0/22"), Gateway: other, IfIndex: otherLinkIdx},
		{Prefix: netip.MustParsePrefix("198.18.51.0/24"), IfIndex: unreachableIx},
	})
	if err != nil {
		t.Fatal(err)
	}
	return routerRig(t, func(c *PortConfig) { c.Routes, c.LANIndex = routes, offLANIndex })
}

// TestPortDeviceOffLAN: with LANIndex, a decrypted packet whose route in
// the host's table leads out of another interface (a network behind
// another link, by a route more specific than the LAN's default; one more
// specific than a peer's allowed IPs), sends nowhere (unreachable) or is
// not in the table (an IPv4-mapped IPv6 address among them) is dropped as off_lan and never put on the LAN, where
// it was sent to the LAN's default router (or dropped as no_route); what
// the LAN's routes take reaches the LAN, what a peer's allowed IPs take
// by a longer prefix goes back into the tunnel, and one with TTL 1 toward
// another link is answered with time exceeded, as Linux's forwarding
// answers it before it routes it out.
func TestPortDeviceOffLAN(t *testing.T) {
	r := offLANRig(t)
	const off = 16
	in := func(p []byte) []byte { return append(make([]byte, off), p...) }
	offLAN := []netip.Addr{
		netip.MustParseAddr("198.18.50.5"),     // behind the other link
		netip.MustParseAddr("198.18.51.5"),     // unreachable
		netip.MustParseAddr("2001:2:0:50::5"),  // behind the other link
		netip.MustParseAddr("2001:2:0:99::5"),  // no route
		netip.MustParseAddr("198.18.42.130"),   // the other link's /25 inside peer B's /24
		netip.MustParseAddr("198.18.60.7"),     // on the other link
		netip.MustParseAddr("2001:2:0:60::7"),  // on the other link
		netip.MustParseAddr("198.18.50.6"),     // behind the other link, again
		netip.MustParseAddr("198.18.51.255"),   // unreachable, again
		netip.MustParseAddr("2001:2:0:50::ff"), // behind the other link, again
		// IPv6 with no route, though the LAN's 198.18.11.0/24 holds the
		// IPv4 address inside it
		netip.MustParseAddr("::ffff:198.18.11.5"),
	}
	var bufs [][]byte
	for _, dst := range offLAN {
		src := peerA
		if dst.Is6() {
			src = peerA6
		}
		bufs = append(bufs, in(ipPacket(src, dst, []byte("off"))))
	}
	toLAN := ipPacket(peerA, netip.MustParseAddr("198.18.70.5"), []byte("lan default")) // the LAN's default router
	onLAN := ipPacket(peerA, hostIP, []byte("lan"))
	back := ipPacket(peerB, netip.MustParseAddr("198.18.41.7"), []byte("peer")) // peer A's /24 inside the other link's /22
	probe := withTTL(ipPacket(peerA, netip.MustParseAddr("198.18.50.5"), []byte("probe")), 1)
	bufs = append(bufs, in(toLAN), in(onLAN), in(back), in(probe))
	if n, err := r.dev.Write(bufs, off); n != len(bufs) || err != nil {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(bufs))
	}
	frames := r.collect(3)
	if len(frames) != 2 {
		t.Fatalf("the LAN received %d frames, want 2 (to its default router, to a host on it)", len(frames))
	}
	for i, want := range [][]byte{hop(toLAN), hop(onLAN)} {
		if f := frames[i]; !bytes.Equal(f[0:6], macHost) || !bytes.Equal(f[header.EthernetLen:], want) {
			t.Errorf("LAN frame %d = %x, want %x to %v", i, f, want, macHost)
		}
	}
	// Read: the peer-to-peer packet, and time exceeded (queued at once,
	// before the batch's peer-to-peer packets).
	got := r.readAll(t, 2, 4)
	if len(got) != 2 {
		t.Fatalf("Read %d packets (%x), want the peer-to-peer packet and time exceeded", len(got), got)
	}
	if bytes.Equal(got[0], hop(back)) {
		got[0], got[1] = got[1], got[0]
	}
	var pk header.Packet
	if rs := header.ParseIP(got[0], &pk); rs != header.OK || pk.Dst != peerA || header.ICMPv4(got[0][20:]).Type() != 11 || !bytes.Equal(got[1], hop(back)) {
		t.Errorf("Read %x, want time exceeded to %v and %x", got, peerA, hop(back))
	}
	s := r.dev.Stats()
	if s.Drops[PortDropOffLAN] != uint64(len(offLAN)) || s.Drops[PortDropTTLExceeded] != 1 || s.Drops.Total() != uint64(len(offLAN))+1 {
		t.Errorf("drops %v, want off_lan=%d ttl_exceeded=1", s.Drops.List(), len(offLAN))
	}
	if s.TXPackets != 2 || s.PeerToPeer != 1 {
		t.Errorf("tx %d, peer_to_peer %d; want 2, 1", s.TXPackets, s.PeerToPeer)
	}
}

// TestPortDeviceOffLANNoAllocs: Write with LANIndex, a packet dropped as
// off_lan and one sent to the LAN per call, allocates nothing: the routes
// are one snapshot per call, looked up without an interface call per
// packet.
func TestPortDeviceOffLANNoAllocs(t *testing.T) {
	r := offLANRig(t)
	const off = 16
	offPkt := append(make([]byte, off), ipPacket(peerA, netip.MustParseAddr("198.18.50.5"), make([]byte, 64))...)
	lanPkt := append(make([]byte, off), ipPacket(peerA, netip.MustParseAddr("198.18.70.5"), make([]byte, 64))...)
	pkts := [][]byte{offPkt, lanPkt}
	orig := [][]byte{bytes.Clone(offPkt), bytes.Clone(lanPkt)}
	step := func() {
		copy(offPkt, orig[0]) // Write lowers the TTL in place
		copy(lanPkt, orig[1])
		if n, err := r.dev.Write(pkts, off); n != 2 || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	step()
	if a := testing.AllocsPerRun(100, step); a != 0 {
		t.Errorf("allocs per Write with LANIndex = %v, want 0", a)
	}
	if s := r.dev.Stats(); s.Drops[PortDropOffLAN] != 102 || s.TXPackets != 102 {
		t.Errorf("off_lan %d, tx %d; want 102 each (AllocsPerRun runs step once more)", s.Drops[PortDropOffLAN], s.TXPackets)
	}
}

// TestPortDeviceOffLANMapped: an IPv6 packet to an IPv4-mapped address
// (::ffff:a.b.c.d), which Linux forwards as IPv6 by its IPv6 routes
// (header.TransitAddrs), is judged by offLANRig's IPv6 routes, which hold
// none for it, and dropped as off_lan, never sent to the LAN by the IPv4
// route of the address it maps (its default router's, an on-link host's).
func TestPortDeviceOffLANMapped(t *testing.T) {
	r := offLANRig(t)
	const off = 16
	var bufs [][]byte
	for _, dst := range []string{"::ffff:198.18.70.5", "::ffff:198.18.11.1", "::ffff:198.18.70.5"} {
		bufs = append(bufs, append(make([]byte, off), ipPacket(peerA6, netip.MustParseAddr(dst), []byte("mapped"))...))
	}
	if n, err := r.dev.Write(bufs, off); n != len(bufs) || err != nil {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(bufs))
	}
	if frames := r.collect(1); len(frames) != 0 {
		t.Errorf("the LAN received %x, want nothing (no IPv6 route holds an IPv4-mapped address)", frames)
	}
	if s := r.dev.Stats(); s.Drops[PortDropOffLAN] != uint64(len(bufs)) || s.TXPackets != 0 {
		t.Errorf("drops %v, tx %d; want off_lan=%d, tx 0", s.Drops.List(), s.TXPackets, len(bufs))
	}
}
