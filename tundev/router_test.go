package tundev

import (
	"bytes"
	"encoding/binary"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/icmprate"
)

var (
	tunIP  = netip.MustParseAddr("198.18.40.1") // our tunnel address
	tunIP6 = netip.MustParseAddr("2001:2:0:40::1")
	peerA  = netip.MustParseAddr("198.18.41.2") // in peer A's allowed IPs
	peerB  = netip.MustParseAddr("198.18.42.2") // in peer B's allowed IPs
	peerA6 = netip.MustParseAddr("2001:2:0:41::2")
	peerB6 = netip.MustParseAddr("2001:2:0:42::2")
)

// routerRig is a portRig with the forwarding configuration: ICMP sources on
// both sides, and the allowed IPs of two peers.
func routerRig(t *testing.T, mod func(*PortConfig)) *portRig {
	r := newPortRig(t, 1, func(c *PortConfig) {
		c.ICMPSource4, c.ICMPSource6 = lanIP, lanIP6
		c.TunnelSource4, c.TunnelSource6 = tunIP, tunIP6
		if mod != nil {
			mod(c)
		}
	})
	r.dev.SetAllowedIPs([]netip.Prefix{
		netip.MustParsePrefix("198.18.41.0/24"), netip.MustParsePrefix("198.18.42.0/24"),
		netip.MustParsePrefix("2001:2:0:41::/64"), netip.MustParsePrefix("2001:2:0:42::/64"),
		netip.MustParsePrefix("198.18.11.64/28"), // inside the LAN's /24: the tunnel's, longer
		netip.MustParsePrefix("198.18.12.0/23"),  // holding the LAN's route 198.18.12.0/24: the LAN's
		netip.MustParsePrefix("0.0.0.0/0"),       // no route into wg0: the LAN's
	})
	return r
}

// withTTL is a copy of the IP packet p with TTL / hop limit ttl (IPv4
// header checksum recomputed).
func withTTL(p []byte, ttl uint8) []byte {
	q := bytes.Clone(p)
	if q[0]>>4 == 4 {
		q[8] = ttl
		header.IPv4(q).SetChecksum()
	} else {
		q[7] = ttl
	}
	return q
}

// badChecksum is a copy of the IPv4 packet p with a wrong header checksum.
func badChecksum(p []byte) []byte {
	q := bytes.Clone(p)
	q[10] ^= 0x55
	return q
}

// eth4, eth6 frame an IP packet as the LAN host sends it to the gateway.
func eth4(p []byte) []byte { return ethFrame(macGW, macHost, 0x0800, p) }
func eth6(p []byte) []byte { return ethFrame(macGW, macHost, 0x86dd, p) }

// TestPortDeviceTimeExceededLAN: a LAN host's packet with TTL / hop limit 1
// (traceroute's first probe) is not handed to wireguard-go: it is dropped as
// ttl_exceeded and answered with time exceeded from our LAN address to the
// host's MAC, quoting the packet as it came; TTL 2 goes on with TTL 1.
func TestPortDeviceTimeExceededLAN(t *testing.T) {
	r := routerRig(t, nil)
	p4 := withTTL(ipPacket(hostIP, peerA, []byte("probe")), 1)
	p6 := withTTL(ipPacket(hostIP6, peerA6, []byte("probe")), 1)
	ok := withTTL(ipPacket(hostIP, peerA, []byte("two")), 2)
	r.inject(t, 0, eth4(p4), eth6(p6), eth4(ok))
	if got := r.readAll(t, 1, 4); len(got) != 1 || !bytes.Equal(got[0], hop(ok)) || got[0][8] != 1 {
		t.Fatalf("Read = %x, want only the TTL 2 packet, with TTL 1", got)
	}
	replies := r.collect(2)
	if len(replies) != 2 {
		t.Fatalf("host received %d frames, want 2 time exceeded", len(replies))
	}
	for _, f := range replies {
		if !bytes.Equal(f[0:6], macHost) || !bytes.Equal(f[6:12], macGW) {
			t.Errorf("reply %x: not from the gateway's MAC to the host's", f[:12])
		}
		var pk header.Packet
		if rs := header.Parse(f, &pk); rs != header.OK {
			t.Fatalf("reply does not parse: %v", rs)
		}
		ip := f[pk.L3Off:]
		switch pk.Src {
		case lanIP:
			if m := header.ICMPv4(ip[20:]); m.Type() != 11 || m.Code() != 0 || !bytes.Equal(m[8:], p4) || pk.Dst != hostIP {
				t.Errorf("ICMPv4 reply %x, want time exceeded to %v quoting the probe", ip, hostIP)
			}
		case lanIP6:
			if m := header.ICMPv6(ip[40:]); m.Type() != 3 || m.Code() != 0 || !bytes.Equal(m[8:], p6) || pk.Dst != hostIP6 {
				t.Errorf("ICMPv6 reply %x, want time exceeded to %v quoting the probe", ip, hostIP6)
			}
		default:
			t.Errorf("reply from %v, want %v or %v", pk.Src, lanIP, lanIP6)
		}
	}
	if s := r.dev.Stats(); s.Drops[PortDropTTLExceeded] != 2 || s.ICMPErrors != 2 {
		t.Errorf("Stats = %+v, want 2 ttl_exceeded, 2 ICMP errors", s)
	}
}

// TestPortDeviceTimeExceededTunnel: a decrypted packet with TTL / hop limit
// 1 does not reach the LAN: Read hands wireguard-go time exceeded from our
// tunnel address to the packet's source, to seal to the peer it came from.
func TestPortDeviceTimeExceededTunnel(t *testing.T) {
	r := routerRig(t, nil)
	const off = 16
	p4 := withTTL(ipPacket(peerA, hostIP, []byte("probe")), 1)
	p6 := withTTL(ipPacket(peerA6, hostIP6, []byte("probe")), 1)
	if n, err := r.dev.Write([][]byte{append(make([]byte, off), p4...), append(make([]byte, off), p6...)}, off); n != 2 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	got := r.readAll(t, 2, 4)
	if len(got) != 2 {
		t.Fatalf("Read %d packets, want 2 time exceeded", len(got))
	}
	for _, ip := range got {
		var pk header.Packet
		if rs := header.ParseIP(ip, &pk); rs != header.OK {
			t.Fatalf("error does not parse: %v", rs)
		}
		switch {
		case pk.Src == tunIP && pk.Dst == peerA:
			if m := header.ICMPv4(ip[20:]); m.Type() != 11 || !m.VerifyChecksum() || !bytes.Equal(m[8:], p4) {
				t.Errorf("ICMPv4 %x, want time exceeded quoting the probe", ip)
			}
		case pk.Src == tunIP6 && pk.Dst == peerA6:
			if m := header.ICMPv6(ip[40:]); m.Type() != 3 || !bytes.Equal(m[8:], p6) {
				t.Errorf("ICMPv6 %x, want time exceeded quoting the probe", ip)
			}
		default:
			t.Errorf("error %v → %v, want from our tunnel address to the probe's source", pk.Src, pk.Dst)
		}
	}
	if f := r.collect(1); len(f) != 0 {
		t.Errorf("LAN received %d frames, want none", len(f))
	}
	if s := r.dev.Stats(); s.Drops[PortDropTTLExceeded] != 2 || s.ICMPErrors != 2 || s.TXPackets != 0 {
		t.Errorf("Stats = %+v, want 2 ttl_exceeded, 2 ICMP errors, nothing sent", s)
	}
}

// burstOnly is the per-destination interval (icmprate.Config.DestInterval)
// of the tests that count a burst of errors: so long that no token comes
// back while the test runs, so that the count is the burst's (6) however
// long a loaded machine holds the device's reader up between the answers
// (at Linux's 1 s, 250 ms for an IPv6 /64, a seventh could get through).
// The refill itself is package icmprate's tests', on a clock of their own.
const burstOnly = time.Hour

// TestPortDeviceICMPRateLimit: time exceeded to one source follows Linux's
// per-destination limit (icmp_ratelimit: a burst of 6, the interval
// burstOnly here), and the suppressed ones are counted.
func TestPortDeviceICMPRateLimit(t *testing.T) {
	r := routerRig(t, func(c *PortConfig) { c.ICMPRate = icmprate.Config{Rate: -1, DestInterval: burstOnly} })
	const n = 10
	var frames [][]byte
	for i := range n {
		frames = append(frames, eth4(withTTL(ipPacket(hostIP, peerA, []byte{byte(i)}), 1)))
	}
	sentinel := ipPacket(hostIP, peerA, []byte("last"))
	r.inject(t, 0, append(frames, eth4(sentinel))...)
	if got := r.readAll(t, 1, 4); len(got) != 1 {
		t.Fatalf("Read %d packets, want the sentinel", len(got))
	}
	if got := r.collect(icmprate.DestBurst + 1); len(got) != icmprate.DestBurst {
		t.Errorf("host received %d errors, want %d", len(got), icmprate.DestBurst)
	}
	if s := r.dev.Stats(); s.Drops[PortDropTTLExceeded] != n || s.ICMPErrors != icmprate.DestBurst || s.ICMPSuppressed != n-icmprate.DestBurst {
		t.Errorf("Stats = %+v, want %d ttl_exceeded, %d errors, %d suppressed", s, n, icmprate.DestBurst, n-icmprate.DestBurst)
	}
}

// lsrr is an IPv4 packet with a loose source route option, which a Linux
// router drops (accept_source_route 0).
func lsrr(src, dst netip.Addr) []byte {
	p := ipPacket(src, dst, []byte("route"))
	opt := []byte{0x83, 7, 4, 198, 18, 9, 9, 1} // LSRR, one hop, then EOL
	q := append(append(append([]byte{0x47}, p[1:20]...), opt...), p[20:]...)
	binary.BigEndian.PutUint16(q[2:4], uint16(len(q)))
	header.IPv4(q).SetChecksum()
	return q
}

// TestPortDeviceJudges: packets Linux's forwarding path drops by their
// addresses or options are dropped either way and counted by reason.
func TestPortDeviceJudges(t *testing.T) {
	a := netip.MustParseAddr
	cases := []struct {
		name string
		pkt  []byte
		why  PortDropReason
	}{
		{"loopback source", ipPacket(a("127.0.0.1"), peerB, nil), PortDropMartian},
		{"zero destination", ipPacket(hostIP, a("0.0.0.0"), nil), PortDropMartian},
		{"multicast source", ipPacket(a("224.0.0.9"), peerB, nil), PortDropMartian},
		{"multicast", ipPacket(hostIP, a("239.1.2.3"), nil), PortDropMulticast},
		{"broadcast", ipPacket(hostIP, a("255.255.255.255"), nil), PortDropMulticast},
		// To a destination of neither side's routes' choice: a
		// decrypted one for a peer goes back into the tunnel (scope_test.go).
		{"link-local v6 source", ipPacket(a("fe80::1"), a("2001:2:0:99::1"), nil), PortDropMartian},
		{"multicast v6", ipPacket(hostIP6, a("ff0e::1"), nil), PortDropMulticast},
		{"source route", lsrr(hostIP, peerB), PortDropIPOptions},
		// Dropped as the fast path drops it (header.ParseL3): the TTL
		// decrement's incremental update would forward it still wrong.
		{"bad header checksum", badChecksum(ipPacket(hostIP, peerB, nil)), PortDropMalformed},
	}
	for _, c := range cases {
		t.Run(c.name+"/lan", func(t *testing.T) {
			r := routerRig(t, nil)
			f := eth4(c.pkt)
			if c.pkt[0]>>4 == 6 {
				f = eth6(c.pkt)
			}
			sentinel := ipPacket(hostIP, peerA, []byte("sentinel"))
			r.inject(t, 0, f, eth4(sentinel))
			if got := r.readAll(t, 1, 4); len(got) != 1 || !bytes.Equal(got[0], hop(sentinel)) {
				t.Fatalf("Read = %x, want only the sentinel", got)
			}
			if s := r.dev.Stats(); s.Drops[c.why] != 1 || s.Drops.Total() != 1 {
				t.Errorf("drops = %v, want %v=1", s.Drops.List(), c.why)
			}
		})
		t.Run(c.name+"/tunnel", func(t *testing.T) {
			r := routerRig(t, nil)
			sentinel := ipPacket(peerA, hostIP, []byte("sentinel"))
			r.dev.Write([][]byte{bytes.Clone(c.pkt), bytes.Clone(sentinel)}, 0)
			if f := r.collect(1); len(f) != 1 || !bytes.Equal(f[0][header.EthernetLen:], hop(sentinel)) {
				t.Errorf("LAN received %x, want only the sentinel", f)
			}
			if s := r.dev.Stats(); s.Drops[c.why] != 1 || s.Drops.Total() != 1 || s.PeerToPeer != 0 {
				t.Errorf("Stats = %+v, want %v=1", s, c.why)
			}
		})
	}
}

// synPacket is a TCP SYN from src to dst with an MSS option of mss.
func synPacket(src, dst netip.Addr, mss uint16) []byte {
	tcp := make([]byte, 24)
	binary.BigEndian.PutUint16(tcp[0:], 40000)
	binary.BigEndian.PutUint16(tcp[2:], 80)
	tcp[12] = 6 << 4 // data offset: 24 bytes
	tcp[13] = 0x02   // SYN
	tcp[20], tcp[21] = 2, 4
	binary.BigEndian.PutUint16(tcp[22:], mss)
	p := ipPacket(src, dst, nil)
	if src.Is4() {
		p = append(p[:20], tcp...)
		p[9] = header.ProtoTCP
		binary.BigEndian.PutUint16(p[2:4], uint16(len(p)))
		header.IPv4(p).SetChecksum()
		return p
	}
	p = append(p[:40], tcp...)
	p[6] = header.ProtoTCP
	binary.BigEndian.PutUint16(p[4:6], uint16(len(tcp)))
	return p
}

// synMSS is the MSS option of synPacket's packet p.
func synMSS(p []byte) uint16 {
	l3 := 20
	if p[0]>>4 == 6 {
		l3 = 40
	}
	return binary.BigEndian.Uint16(p[l3+22:])
}

// TestPortDeviceMSSClamp: a SYN's MSS is clamped to MSSClamp4/6 both ways.
func TestPortDeviceMSSClamp(t *testing.T) {
	r := routerRig(t, func(c *PortConfig) { c.MSSClamp4, c.MSSClamp6 = 1380, 1360 })
	r.inject(t, 0, eth4(synPacket(hostIP, peerA, 1460)), eth6(synPacket(hostIP6, peerA6, 1440)))
	got := r.readAll(t, 2, 4)
	if len(got) != 2 {
		t.Fatalf("Read %d packets, want 2", len(got))
	}
	for _, p := range got {
		want := uint16(1380)
		if p[0]>>4 == 6 {
			want = 1360
		}
		if m := synMSS(p); m != want {
			t.Errorf("LAN → tunnel: MSS %d, want %d", m, want)
		}
	}
	r.dev.Write([][]byte{synPacket(peerA, hostIP, 1460), synPacket(peerA6, hostIP6, 1440)}, 0)
	out := r.collect(2)
	if len(out) != 2 {
		t.Fatalf("LAN received %d frames, want 2", len(out))
	}
	for _, f := range out {
		p, want := f[header.EthernetLen:], uint16(1380)
		if p[0]>>4 == 6 {
			want = 1360
		}
		if m := synMSS(p); m != want {
			t.Errorf("tunnel → LAN: MSS %d, want %d", m, want)
		}
	}
}

// TestPortDevicePeerToPeer: a decrypted packet to another peer's allowed
// IPs (or the sender's own) goes back to Read with its TTL lowered once,
// not to the LAN; so does one to a LAN address the allowed IPs hold by a
// longer prefix than the LAN's route. One the allowed IPs hold only by a
// /0 (no route into wg0), or by a shorter prefix than a LAN route's, or
// not at all, goes to the LAN.
func TestPortDevicePeerToPeer(t *testing.T) {
	r := routerRig(t, nil)
	a := netip.MustParseAddr
	loop := [][]byte{
		ipPacket(peerA, peerB, []byte("a to b")),
		ipPacket(peerA6, peerB6, []byte("a to b, v6")),
		ipPacket(peerA, a("198.18.41.7"), []byte("a to a")),
		ipPacket(peerA, a("198.18.11.70"), []byte("allowed /28 in the LAN's /24")),
	}
	lan := [][]byte{
		ipPacket(peerA, hostIP, []byte("the LAN's /24, outside the /28")),
		ipPacket(peerA, farIP, []byte("the LAN's route /24 inside the allowed /23")),
		ipPacket(peerA6, hostIP6, []byte("no allowed IPs")),
	}
	var bufs [][]byte
	for _, p := range append(append([][]byte{}, loop...), lan...) {
		bufs = append(bufs, bytes.Clone(p))
	}
	if n, err := r.dev.Write(bufs, 0); n != len(bufs) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	got := r.readAll(t, len(loop), 8)
	if len(got) != len(loop) {
		t.Fatalf("Read %d packets, want %d", len(got), len(loop))
	}
	for i, p := range loop {
		if !bytes.Equal(got[i], hop(p)) {
			t.Errorf("Read packet %d = %x, want %x (in order, TTL − 1)", i, got[i], hop(p))
		}
	}
	out := r.collect(len(lan) + 1)
	if len(out) != len(lan) {
		t.Fatalf("LAN received %d frames, want %d", len(out), len(lan))
	}
	for i, f := range out {
		if !bytes.Equal(f[header.EthernetLen:], hop(lan[i])) {
			t.Errorf("LAN frame %d carries %x, want %x", i, f[header.EthernetLen:], hop(lan[i]))
		}
	}
	if s := r.dev.Stats(); s.PeerToPeer != uint64(len(loop)) || s.Drops.Total() != 0 {
		t.Errorf("Stats = %+v, want %d peer to peer, no drops", s, len(loop))
	}
}

// TestPortDeviceLoopFull: a burst of peer-to-peer packets beyond the loop
// queue's slots is dropped (no_buffer), the rest read in order.
func TestPortDeviceLoopFull(t *testing.T) {
	r := routerRig(t, nil)
	const n = loopSlots + 5
	var bufs [][]byte
	for i := range n {
		bufs = append(bufs, ipPacket(peerA, peerB, []byte{byte(i)}))
	}
	r.dev.Write(bufs, 0)
	got := r.readAll(t, loopSlots, loopSlots)
	if len(got) != loopSlots {
		t.Fatalf("Read %d packets, want %d", len(got), loopSlots)
	}
	for i, p := range got {
		if p[len(p)-1] != byte(i) {
			t.Fatalf("packet %d carries %d: out of order", i, p[len(p)-1])
		}
	}
	if s := r.dev.Stats(); s.PeerToPeer != loopSlots || s.Drops[PortDropNoBuffer] != 5 {
		t.Errorf("Stats = %+v, want %d peer to peer, 5 no_buffer", s, loopSlots)
	}
}

// TestPortDeviceRouterNoAllocs: the forwarding work allocates nothing: a
// peer-to-peer packet written and read back, time exceeded into the tunnel
// and to the LAN, a martian.
func TestPortDeviceRouterNoAllocs(t *testing.T) {
	r := routerRig(t, func(c *PortConfig) {
		c.MSSClamp4 = 1380
		c.ICMPRate = icmprate.Config{Rate: -1, DestInterval: -1}
	})
	p2p := ipPacket(peerA, peerB, make([]byte, 64))
	expired := withTTL(ipPacket(peerA, hostIP, make([]byte, 64)), 1)
	martian := ipPacket(a127, peerB, nil)
	bufs := [][]byte{bytes.Clone(p2p), bytes.Clone(expired), bytes.Clone(martian)}
	in := eth4(withTTL(ipPacket(hostIP, peerA, make([]byte, 64)), 1))
	rbufs, sizes := [][]byte{make([]byte, 2000), make([]byte, 2000), make([]byte, 2000)}, []int{0, 0, 0}
	fs := make([]dataplane.Frame, 4)
	txB, rxB := r.b.Queue(0).TX(), r.b.Queue(0).RX()
	step := func() {
		copy(bufs[0], p2p) // Write lowered the TTL in place
		r.dev.Write(bufs, 0)
		txB.Alloc(fs[:1])
		fs[0].SetLen(len(in))
		copy(fs[0].Data(), in)
		txB.Transmit(fs[:1])
		if n, err := r.dev.Read(rbufs, sizes, 0); n != 2 || err != nil {
			t.Fatalf("Read = %d, %v; want the peer-to-peer packet and time exceeded", n, err)
		}
		n := rxB.Receive(fs)
		rxB.Free(fs[:n])
	}
	step()
	if a := testing.AllocsPerRun(200, step); a != 0 {
		t.Errorf("allocs per step = %v, want 0", a)
	}
	s := r.dev.Stats()
	if s.PeerToPeer != 202 || s.Drops[PortDropMartian] != 202 || s.Drops[PortDropTTLExceeded] != 404 || s.ICMPErrors != 404 {
		t.Errorf("Stats = %+v, want 202 peer to peer, 202 martians, 404 time exceeded (AllocsPerRun's warm-up run included)", s)
	}
}

var a127 = netip.MustParseAddr("127.0.0.1")

// FuzzPortWrite feeds arbitrary packets to Write's forwarding (what
// wireguard-go writes is trimmed to its IP length, nothing more): no
// panic, and each is counted once at most as dropped, sent or handed back.
func FuzzPortWrite(f *testing.F) {
	// Seeds: a peer-to-peer packet, one to the LAN, TTL 1, a source route,
	// an IPv4 header with IHL 4, an IPv6 hop-by-hop header.
	f.Add(ipPacket(peerA, peerB, []byte("x")))
	f.Add(ipPacket(peerA6, hostIP6, []byte("y")))
	f.Add(withTTL(ipPacket(peerA, hostIP, nil), 1))
	f.Add(lsrr(peerA, hostIP))
	f.Add(append([]byte{0x44}, ipPacket(peerA, hostIP, nil)[1:]...))
	hbh := ipPacket(peerA6, peerB6, []byte{17, 0, 5, 2, 0, 0, 1, 0})
	hbh[6] = header.ProtoHopByHop
	f.Add(hbh)
	f.Fuzz(func(t *testing.T, pkt []byte) {
		r := routerRig(t, func(c *PortConfig) { c.ResolveWait = time.Millisecond })
		if n, err := r.dev.Write([][]byte{pkt}, 0); n != 1 || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
		s := r.dev.Stats()
		if got := s.Drops.Total() + s.TXPackets + s.PeerToPeer; got > 1 {
			t.Fatalf("one packet counted %d times: %+v", got, s)
		}
	})
}

// TestUpdateAllowedIPs: random differences applied by UpdateAllowedIPs
// leave the table SetAllowedIPs makes of the resulting set (a /0 left
// out), and the table published before a change is not changed by it.
func TestUpdateAllowedIPs(t *testing.T) {
	var d, ref PortDevice
	set := map[netip.Prefix]bool{}
	r := rand.New(rand.NewPCG(1, 2))
	pick := func() netip.Prefix {
		if r.IntN(2) == 0 {
			return netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(r.IntN(4)), byte(r.IntN(4))}), r.IntN(33)).Masked()
		}
		return netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0xd, 0xb8, 15: byte(r.IntN(4))}), r.IntN(129)).Masked()
	}
	for step := range 500 {
		var add, del []netip.Prefix
		for range r.IntN(4) {
			p := pick()
			add = append(add, p)
		}
		for range r.IntN(4) {
			del = append(del, pick())
		}
		before := d.allowed.Load()
		var frozen []netip.Prefix
		if before != nil {
			for p := range before.All() {
				frozen = append(frozen, p)
			}
		}
		d.UpdateAllowedIPs(add, del)
		for _, p := range del {
			delete(set, p)
		}
		for _, p := range add {
			set[p] = true
		}
		ref.SetAllowedIPs(slices.Collect(maps.Keys(set)))
		if !d.allowed.Load().Equal(ref.allowed.Load()) {
			t.Fatalf("step %d: after UpdateAllowedIPs(%v, %v) the table holds %v, SetAllowedIPs of the set %v", step, add, del, d.allowed.Load(), ref.allowed.Load())
		}
		if before != nil {
			var after []netip.Prefix
			for p := range before.All() {
				after = append(after, p)
			}
			if !slices.Equal(frozen, after) {
				t.Fatalf("step %d: UpdateAllowedIPs changed the table published before it", step)
			}
		}
	}
}
