package tundev

import (
	"bytes"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
)

// readAll reads from d until want packets came or a second passed, and
// returns their destinations.
func readAll(t *testing.T, d *PortDevice, want int) []netip.Addr {
	t.Helper()
	bufs, sizes := make([][]byte, 8), make([]int, 8)
	for i := range bufs {
		bufs[i] = make([]byte, 2000)
	}
	var got []netip.Addr
	for deadline := time.Now().Add(time.Second); len(got) < want && time.Now().Before(deadline); {
		n, err := d.Read(bufs, sizes, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			dst, _ := destination(bufs[i][:sizes[i]])
			got = append(got, dst)
		}
	}
	return got
}

// TestPortDeviceNoRoute: a received packet to a drop prefix of SetNoRoute
// is dropped, counted as no_route and answered with host unreachable (one
// over the tunnel MTU with DF gets fragmentation needed instead, counted
// over_mtu, as Linux's route into wg0 checks the MTU first); one to an
// allowed IP inside it, or elsewhere, is read; an empty drop set reads
// them all again.
func TestPortDeviceNoRoute(t *testing.T) {
	r := newPortRig(t, 1, func(c *PortConfig) { c.ICMPSource4 = lanIP })
	dropped := netip.MustParseAddr("198.18.12.5")
	inside := netip.MustParseAddr("198.18.12.200")
	v6 := netip.MustParseAddr("2001:2:0:12::5")
	r.dev.SetNoRoute([]netip.Prefix{netip.MustParsePrefix("198.18.12.0/24"), netip.MustParsePrefix("2001:2:0:13::/64")},
		[]netip.Prefix{netip.MustParsePrefix("198.18.12.128/25")})
	frames := func() [][]byte {
		return [][]byte{
			ethFrame(macGW, macHost, 0x0800, ipPacket(hostIP, dropped, []byte("x"))),
			ethFrame(macGW, macHost, 0x0800, ipPacket(hostIP, dropped, make([]byte, 1420))), // over the tunnel MTU, DF
			ethFrame(macGW, macHost, 0x0800, ipPacket(hostIP, inside, []byte("y"))),
			ethFrame(macGW, macHost, 0x86dd, ipPacket(hostIP6, v6, []byte("z"))),
		}
	}
	r.inject(t, 0, frames()...)
	got := readAll(t, r.dev, 2)
	time.Sleep(20 * time.Millisecond)
	if len(got) != 2 || got[0] != inside || got[1] != v6 {
		t.Errorf("read packets to %v, want to %v and %v", got, inside, v6)
	}
	s := r.dev.Stats()
	if s.Drops[PortDropNoRoute] != 1 || s.Drops[PortDropOverMTU] != 1 || s.Drops.Total() != 2 || s.ICMPErrors != 2 || s.Fragmented != 0 {
		t.Errorf("Stats() = %+v, want 1 no_route and 1 over_mtu drop, both answered", s)
	}
	var types []uint8
	for _, f := range r.collect(2) {
		types = append(types, f[header.EthernetLen+header.IPv4MinLen])
	}
	if len(types) != 2 || types[0] != 3 || types[1] != 3 {
		t.Errorf("answers of types %v, want two destination unreachable", types)
	}
	r.dev.SetNoRoute(nil, []netip.Prefix{netip.MustParsePrefix("198.18.12.128/25")})
	if r.dev.noRoute.Load() != nil {
		t.Error("SetNoRoute without drop prefixes left a table")
	}
	r.inject(t, 0, frames()[0], frames()[2])
	if got := readAll(t, r.dev, 2); len(got) != 2 || got[0] != dropped {
		t.Errorf("with no drop prefix, read packets to %v, want to %v and %v", got, dropped, inside)
	}
}

// TestPortDeviceNoRouteNoAllocs: Read with drop prefixes set allocates
// nothing (a packet looked up and read, one looked up and dropped).
func TestPortDeviceNoRouteNoAllocs(t *testing.T) {
	r := newPortRig(t, 1, nil)
	r.dev.SetNoRoute([]netip.Prefix{netip.MustParsePrefix("198.18.0.0/16")}, []netip.Prefix{netip.MustParsePrefix("198.18.12.0/24")})
	in := ethFrame(macGW, macHost, 0x0800, ipPacket(hostIP, farIP, make([]byte, 64)))
	drop := ethFrame(macGW, macHost, 0x0800, ipPacket(hostIP, netip.MustParseAddr("198.18.13.1"), make([]byte, 64)))
	bufs, sizes := [][]byte{make([]byte, 2000), make([]byte, 2000)}, []int{0, 0}
	fs := make([]dataplane.Frame, 2)
	tx := r.b.Queue(0).TX()
	step := func() {
		tx.Alloc(fs)
		fs[0].SetLen(len(drop))
		copy(fs[0].Data(), drop)
		fs[1].SetLen(len(in))
		copy(fs[1].Data(), in)
		tx.Transmit(fs)
		if n, err := r.dev.Read(bufs, sizes, 0); n != 1 || err != nil {
			t.Fatalf("Read = %d, %v", n, err)
		}
	}
	step()
	if a := testing.AllocsPerRun(200, step); a != 0 {
		t.Errorf("allocs per Read with drop prefixes = %v, want 0", a)
	}
	if n := r.dev.Stats().Drops[PortDropNoRoute]; n != 202 {
		t.Errorf("no_route drops = %d, want 202 (AllocsPerRun runs step once more)", n)
	}
}

// TestPortDeviceNoRouteUnreachable: what Read drops as no_route is
// answered as Linux's wg0 answers a packet no peer takes: ICMP host
// unreachable (3/1) or ICMPv6 address unreachable (1/3), from the
// port's ICMP source of the family to the packet's Ethernet source,
// quoting the packet with its hop taken; rate-limited by Linux's defaults (a burst of 6 per
// destination, then one a second), what is held back counted as
// icmp_suppressed.
func TestPortDeviceNoRouteUnreachable(t *testing.T) {
	for _, c := range []struct {
		src, dst  netip.Addr
		et        uint16
		from      netip.Addr
		typ, code uint8
	}{
		{hostIP, netip.MustParseAddr("198.18.12.5"), 0x0800, lanIP, 3, 1},
		{hostIP6, netip.MustParseAddr("2001:2:0:13::5"), 0x86dd, lanIP6, 1, 3},
	} {
		r := newPortRig(t, 1, func(p *PortConfig) { p.ICMPSource4, p.ICMPSource6 = lanIP, lanIP6 })
		r.dev.SetNoRoute([]netip.Prefix{netip.MustParsePrefix("198.18.12.0/24"), netip.MustParsePrefix("2001:2:0:13::/64")}, nil)
		pkt := ipPacket(c.src, c.dst, []byte("unreachable"))
		quote := hop(pkt) // ip_forward's hop taken before wg_xmit answers
		var in [][]byte
		for range 10 {
			in = append(in, ethFrame(macGW, macHost, c.et, pkt))
		}
		in = append(in, ethFrame(macGW, macHost, 0x0800, ipPacket(hostIP, netip.MustParseAddr("198.18.11.7"), []byte("fits")))) // Read returns with it
		r.inject(t, 0, in...)
		readAll(t, r.dev, 1)
		got := r.collect(6)
		time.Sleep(20 * time.Millisecond)
		got = append(got, r.collect(1)...)
		if len(got) != 6 {
			t.Fatalf("%v: %d answers to 10 packets, want 6", c.dst, len(got))
		}
		var p header.Packet
		if header.Parse(got[0], &p) != header.OK || p.Src != c.from || p.Dst != c.src || [6]byte(got[0][0:6]) != [6]byte(macHost) {
			t.Fatalf("answer %x: want from %v to %v at %v", got[0], c.from, c.src, macHost)
		}
		m := got[0][p.L4Off:p.L3End]
		if m[0] != c.typ || m[1] != c.code || string(m[8:]) != string(quote) {
			t.Errorf("answer type %d code %d quoting %x, want %d %d quoting %x", m[0], m[1], m[8:], c.typ, c.code, quote)
		}
		if s := r.dev.Stats(); s.Drops[PortDropNoRoute] != 10 || s.ICMPErrors != 6 || s.ICMPSuppressed != 4 {
			t.Errorf("%v: no_route %d icmp_errors %d icmp_suppressed %d, want 10 6 4", c.dst, s.Drops[PortDropNoRoute], s.ICMPErrors, s.ICMPSuppressed)
		}
	}
}

// TestUpdateNoRoute: random differences applied by UpdateNoRoute leave
// the table SetNoRoute makes of the resulting sets, nil while no drop
// prefix is left.
func TestUpdateNoRoute(t *testing.T) {
	var d, ref PortDevice
	drop, pass := map[netip.Prefix]bool{}, map[netip.Prefix]bool{}
	r := rand.New(rand.NewPCG(3, 4))
	pick := func() netip.Prefix {
		if r.IntN(2) == 0 {
			return netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(r.IntN(4)), byte(r.IntN(4))}), 16+r.IntN(17)).Masked()
		}
		return netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0xd, 0xb8, 15: byte(r.IntN(4))}), 120+r.IntN(9)).Masked()
	}
	for step := range 1000 {
		var add, undrop, pass1, unpass []netip.Prefix
		for range r.IntN(3) {
			switch p := pick(); {
			case drop[p]:
				undrop = append(undrop, p)
				delete(drop, p)
			case pass[p]:
				unpass = append(unpass, p)
				delete(pass, p)
			case r.IntN(2) == 0 && !slices.Contains(add, p) && !slices.Contains(pass1, p):
				add = append(add, p)
			case !slices.Contains(add, p) && !slices.Contains(pass1, p):
				pass1 = append(pass1, p)
			}
		}
		for _, p := range add {
			drop[p] = true
		}
		for _, p := range pass1 {
			pass[p] = true
		}
		d.UpdateNoRoute(add, undrop, pass1, unpass)
		ref.SetNoRoute(slices.Collect(maps.Keys(drop)), slices.Collect(maps.Keys(pass)))
		got, want := d.noRoute.Load(), ref.noRoute.Load()
		if (got == nil) != (want == nil) || (got != nil && !got.Equal(want)) {
			t.Fatalf("step %d: after UpdateNoRoute(%v, %v, %v, %v) the table is %v, SetNoRoute of the sets %v", step, add, undrop, pass1, unpass, got, want)
		}
	}
}

// TestPortDeviceNoRouteRouterOrder: a LAN packet to a no_route prefix
// meets a Linux router's checks in their order, as Linux's wg0 route
// takes it through ip_forward / ip6_forward before wg_xmit finds no peer:
// at TTL / hop limit 1 time exceeded (ttl_exceeded), from an IPv6
// link-local source "beyond scope of source address" from our link-local
// address (martian), and only then host / address unreachable
// (no_route), as the fast path orders them (unreach.go). Before, each got
// host / address unreachable, the link-local source's from our global
// address (an error Linux never sends it). The unreachable quotes what
// wg_xmit is handed, as the fast path's: the packet with its hop taken
// (ip_forward lowered it), of IPv4 without DF over the tunnel MTU its
// first fragment; before, the packet as received.
func TestPortDeviceNoRouteRouterOrder(t *testing.T) {
	to4, to6 := netip.MustParseAddr("198.18.12.5"), netip.MustParseAddr("2001:2:0:13::5")
	for _, c := range []struct {
		name      string
		pkt       []byte
		et        uint16
		from      netip.Addr
		typ, code uint8
		quote     []byte
		why       PortDropReason
	}{
		{"IPv4 TTL 1", withTTL(ipPacket(hostIP, to4, []byte("ttl")), 1), 0x0800, lanIP, 11, 0, nil, PortDropTTLExceeded},
		{"IPv6 hop limit 1", withTTL(ipPacket(hostIP6, to6, []byte("ttl")), 1), 0x86dd, lanIP6, 3, 0, nil, PortDropTTLExceeded},
		{"link-local source", ipPacket(llHost, to6, []byte("scope")), 0x86dd, llGW, 1, 2, nil, PortDropMartian},
		{"link-local source, hop limit 1", withTTL(ipPacket(llHost, to6, []byte("scope")), 1), 0x86dd, llGW, 3, 0, nil, PortDropTTLExceeded},
		{"IPv4 no route", ipPacket(hostIP, to4, []byte("unreachable")), 0x0800, lanIP, 3, 1, hop(ipPacket(hostIP, to4, []byte("unreachable"))), PortDropNoRoute},
		{"IPv6 no route", ipPacket(hostIP6, to6, []byte("unreachable")), 0x86dd, lanIP6, 1, 3, hop(ipPacket(hostIP6, to6, []byte("unreachable"))), PortDropNoRoute},
		{"IPv4 no route, over the MTU without DF", noDF(ipPacket(hostIP, to4, make([]byte, 1450))), 0x0800, lanIP, 3, 1, firstFragment(t, hop(noDF(ipPacket(hostIP, to4, make([]byte, 1450)))), 1420), PortDropNoRoute},
	} {
		r := newPortRig(t, 1, func(p *PortConfig) { p.ICMPSource4, p.ICMPSource6, p.ICMPLinkLocal6 = lanIP, lanIP6, llGW })
		r.dev.SetNoRoute([]netip.Prefix{netip.MustParsePrefix("198.18.12.0/24"), netip.MustParsePrefix("2001:2:0:13::/64")}, nil)
		sentinel := ipPacket(hostIP, netip.MustParseAddr("198.18.11.7"), []byte("fits")) // Read returns with it
		r.inject(t, 0, ethFrame(macGW, macHost, c.et, c.pkt), ethFrame(macGW, macHost, 0x0800, sentinel))
		readAll(t, r.dev, 1)
		got := r.collect(1)
		if len(got) != 1 {
			t.Fatalf("%s: %d answers, want 1", c.name, len(got))
		}
		var p header.Packet
		if header.Parse(got[0], &p) != header.OK || p.Src != c.from || [6]byte(got[0][0:6]) != [6]byte(macHost) {
			t.Fatalf("%s: answer %x: want from %v at %v", c.name, got[0], c.from, macHost)
		}
		quote := c.quote
		if quote == nil {
			quote = c.pkt
		}
		if m := got[0][p.L4Off:p.L3End]; m[0] != c.typ || m[1] != c.code || !bytes.Equal(m[8:], quote) {
			t.Errorf("%s: answer type %d code %d quoting %x, want %d %d quoting %x", c.name, m[0], m[1], m[8:], c.typ, c.code, quote)
		}
		if s := r.dev.Stats(); s.Drops[c.why] != 1 || s.Drops.Total() != 1 || s.ICMPErrors != 1 {
			t.Errorf("%s: drops %v, ICMP errors %d; want one %v drop and one error", c.name, s.Drops.List(), s.ICMPErrors, c.why)
		}
	}
}

// noDF is a copy of the IPv4 packet p without DF (checksum recomputed).
func noDF(p []byte) []byte {
	q := bytes.Clone(p)
	q[6] &^= 0x40
	header.IPv4(q).SetChecksum()
	return q
}

// firstFragment is the first fragment of the IPv4 packet p cut to mtu
// bytes, as much of it as an ICMPv4 error quotes (576 bytes in all).
func firstFragment(t *testing.T, p []byte, mtu int) []byte {
	t.Helper()
	var fr header.IPv4Fragmenter
	if r := fr.Reset(p, mtu); r != header.OK {
		t.Fatal(r)
	}
	return p[:min(fr.PutFirst(), 576-header.IPv4MinLen-8)]
}
