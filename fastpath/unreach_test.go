package fastpath

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
)

// icmpBack is an ICMP error frame a test received: its IP source, type,
// code, bytes 4-7 and quote.
type icmpBack struct {
	src        netip.Addr
	typ, code  uint8
	word       uint32
	quote      []byte
	dstMAC     [6]byte
	checksumOK bool
}

// parseICMPBack parses the Ethernet frame d as an ICMP or ICMPv6 error.
func parseICMPBack(t *testing.T, d []byte) icmpBack {
	t.Helper()
	var p header.Packet
	if header.Parse(d, &p) != header.OK {
		t.Fatalf("frame back does not parse: %x", d)
	}
	ip := d[p.L3Off:p.L3End]
	src, m := icmpOf(ip)
	ok := header.ICMPv4(m).VerifyChecksum()
	if ip[0]>>4 == header.IPv6Version {
		ok = header.ICMPv6(m).VerifyChecksum(header.PseudoHeaderChecksum(header.ProtoICMPv6, p.Src, p.Dst, len(m)))
	}
	return icmpBack{src: src, typ: m[0], code: m[1], word: binary.BigEndian.Uint32(m[4:8]), quote: m[8:], dstMAC: [6]byte(d[0:6]), checksumOK: ok}
}

// lowered is the IP packet ip with its TTL / hop limit one lower.
func lowered(ip []byte) []byte {
	b := bytes.Clone(ip)
	header.DecrementHop(b)
	return b
}

// TestUnreachableNoRoute: a LAN host's packet to a destination no peer's
// allowed IPs hold (a removed peer's prefix, which the LAN's XDP program
// keeps redirecting) is dropped as no_route and answered as Linux's wg0
// answers it after ip_forward: host unreachable (ICMP 3/1) or address
// unreachable (ICMPv6 1/3) from our LAN address to the sender's MAC,
// quoting the packet with its TTL lowered; TTL 1 gets time exceeded
// first, and one over the tunnel MTU with DF fragmentation needed quoting
// the packet as it came, as in Linux's order (ip_forward checks the MTU
// before it lowers the TTL, wg0 answers after); an IPv4 packet without DF
// over the MTU is answered about its first fragment.
func TestUnreachableNoRoute(t *testing.T) {
	big := make([]byte, 1440) // over the tunnel MTU (1420), within the LAN's
	for _, c := range []struct {
		name      string
		ip        []byte
		typ, code uint8
		why       DropReason
		src       netip.Addr
		quote     func(ip []byte) []byte
	}{
		{"IPv4", ip4{src: pA, dst: "198.19.9.10"}.bytes(), 3, 1, DropNoRoute, lanAddrA, lowered},
		{"IPv6", ip6{src: pA6, dst: "2001:db8:9::10"}.bytes(), 1, 3, DropNoRoute, lan6A, lowered},
		{"IPv4 TTL 1", ip4{src: pA, dst: "198.19.9.10", ttl: 1}.bytes(), 11, 0, DropTTLExceeded, lanAddrA, bytes.Clone},
		{"IPv6 hop limit 1", ip6{src: pA6, dst: "2001:db8:9::10", hl: 1}.bytes(), 3, 0, DropTTLExceeded, lan6A, bytes.Clone},
		{"IPv4 DF over the MTU", ip4{src: pA, dst: "198.19.9.10", payload: big}.bytes(), 3, 4, DropTooBig, lanAddrA, bytes.Clone},
		{"IPv4 over the MTU", ip4{src: pA, dst: "198.19.9.10", payload: big}.bytes(), 3, 1, DropNoRoute, lanAddrA, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, rigConfig{})
			ip := c.ip
			if c.quote == nil { // no DF
				binary.BigEndian.PutUint16(ip[6:8], 0)
				binary.BigEndian.PutUint16(ip[10:12], 0)
				binary.BigEndian.PutUint16(ip[10:12], ^header.FoldChecksum(header.Checksum(ip[:20], 0)))
			}
			before := r.a.Stats()[0]
			sendAll(t, r.hostA, 0, []dataplane.Frame{ipFrame(t, r.hostA.Queue(0).TX(), r.lanA.MAC(), r.hostA.MAC(), ip)})
			r.a.workers[0].outbound(r.clock.Now())
			s := r.a.Stats()[0]
			back := drainPort(r.hostA)
			if len(back) != 1 {
				t.Fatalf("hostA got %d frames, want 1; drops %v", len(back), s.Drops.List())
			}
			b := parseICMPBack(t, back[0])
			if b.typ != c.typ || b.code != c.code || b.src != c.src || !b.checksumOK || b.dstMAC != [6]byte(r.hostA.MAC()) {
				t.Errorf("answer: type %d code %d from %v to %x (checksum ok %v), want %d %d from %v to %x",
					b.typ, b.code, b.src, b.dstMAC, b.checksumOK, c.typ, c.code, c.src, r.hostA.MAC())
			}
			if c.quote != nil {
				if want := c.quote(ip); !bytes.Equal(b.quote, want[:len(b.quote)]) || len(b.quote) < min(len(want), 548) {
					t.Errorf("quote %x, want %x", b.quote, want)
				}
			} else if q := header.IPv4(b.quote); q.TotalLength() > 1420 || !q.MoreFragments() || q.TTL() != 63 {
				t.Errorf("quote is not the first fragment of the packet, TTL lowered: %x", b.quote[:20])
			}
			if got := s.Drops[c.why] - before.Drops[c.why]; got != 1 || s.Drops.Total()-before.Drops.Total() != 1 {
				t.Errorf("drops %v, want %s = 1", s.Drops.List(), dropNames[c.why])
			}
			if s.ICMPSent-before.ICMPSent != 1 || s.Encrypted != before.Encrypted {
				t.Errorf("icmp %d encrypted %d, want 1 0", s.ICMPSent-before.ICMPSent, s.Encrypted-before.Encrypted)
			}
		})
	}
}

// TestUnreachableRateLimit: host unreachable spends the ICMP budget as
// Linux's does with its defaults (icmp_ratemask has type 3; icmp_ratelimit
// 1000 ms per destination with a burst of 6, XRLIM_BURST_FACTOR): 20
// packets from one LAN host to a removed peer's prefix get 6 answers at
// once, the others are counted as suppressed (and as no_route drops), and
// one more second buys one more answer; for IPv6 four more (a LAN host
// behind a /64 route: Linux's icmpv6_xrlim_allow shrinks the interval to
// 1000 >> 2 ms).
func TestUnreachableRateLimit(t *testing.T) {
	for _, c := range []struct {
		dst   string
		later int
	}{{"198.19.9.10", 1}, {"2001:db8:9::10", 4}} {
		dst := c.dst
		r := newRig(t, rigConfig{})
		src := pA
		if netip.MustParseAddr(dst).Is6() {
			src = pA6
		}
		send := func(n int) int {
			var fr []dataplane.Frame
			for range n {
				var ip []byte
				if netip.MustParseAddr(dst).Is4() {
					ip = ip4{src: src, dst: dst}.bytes()
				} else {
					ip = ip6{src: src, dst: dst}.bytes()
				}
				fr = append(fr, ipFrame(t, r.hostA.Queue(0).TX(), r.lanA.MAC(), r.hostA.MAC(), ip))
			}
			sendAll(t, r.hostA, 0, fr)
			r.a.workers[0].outbound(r.clock.Now())
			return len(drainPort(r.hostA))
		}
		if got := send(20); got != 6 {
			t.Errorf("%s: 20 packets at once got %d answers, want 6", dst, got)
		}
		r.clock.Advance(time.Second)
		if got := send(5); got != c.later {
			t.Errorf("%s: 5 packets a second later got %d answers, want %d", dst, got, c.later)
		}
		s := r.a.Stats()[0]
		if s.Drops[DropNoRoute] != 25 || s.ICMPSent != uint64(6+c.later) || s.ICMPSuppressed != uint64(19-c.later) {
			t.Errorf("%s: no_route %d icmp %d suppressed %d, want 25 %d %d", dst, s.Drops[DropNoRoute], s.ICMPSent, s.ICMPSuppressed, 6+c.later, 19-c.later)
		}
	}
}

// TestUnreachableNoEndpoint: a packet for a peer whose endpoint the
// gateway does not know is dropped at once (no_endpoint) and answered
// with host unreachable / address unreachable, as Linux's wg_xmit
// answers -EDESTADDRREQ; nothing is held and no handshake is asked for. A
// peer with an endpoint and no session holds the packet for the
// handshake, unanswered (Linux stages it).
func TestUnreachableNoEndpoint(t *testing.T) {
	for _, c := range []struct {
		name      string
		ip        []byte
		typ, code uint8
	}{
		{"IPv4", ip4{src: pA, dst: pB}.bytes(), 3, 1},
		{"IPv6", ip6{src: pA6, dst: pB6}.bytes(), 1, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, rigConfig{noKeys: true})
			r.peerAB.Endpoint.Store(nil)
			sendAll(t, r.hostA, 0, []dataplane.Frame{ipFrame(t, r.hostA.Queue(0).TX(), r.lanA.MAC(), r.hostA.MAC(), c.ip)})
			r.a.workers[0].outbound(r.clock.Now())
			s := r.a.Stats()[0]
			back := drainPort(r.hostA)
			if len(back) != 1 {
				t.Fatalf("hostA got %d frames, want 1; drops %v", len(back), s.Drops.List())
			}
			if b := parseICMPBack(t, back[0]); b.typ != c.typ || b.code != c.code || !bytes.Equal(b.quote, lowered(c.ip)) {
				t.Errorf("answer type %d code %d quoting %x, want %d %d quoting %x", b.typ, b.code, b.quote, c.typ, c.code, lowered(c.ip))
			}
			if s.Drops[DropNoEndpoint] != 1 || s.Held != 0 || r.peerAB.HandshakeNeeded.Load() {
				t.Errorf("no_endpoint %d held %d handshake asked %v, want 1 0 false", s.Drops[DropNoEndpoint], s.Held, r.peerAB.HandshakeNeeded.Load())
			}

			// With an endpoint and no session: held, no answer.
			var mA, mB [6]byte
			copy(mA[:], r.wanA.MAC())
			copy(mB[:], r.wanB.MAC())
			r.peerAB.Endpoint.Store(&Endpoint{Dst: netip.AddrPortFrom(wanAddrB, portB), Src: wanAddrA, DstMAC: mB, SrcMAC: mA})
			sendAll(t, r.hostA, 0, []dataplane.Frame{ipFrame(t, r.hostA.Queue(0).TX(), r.lanA.MAC(), r.hostA.MAC(), c.ip)})
			r.a.workers[0].outbound(r.clock.Now())
			s = r.a.Stats()[0]
			if back := drainPort(r.hostA); len(back) != 0 || s.Held != 1 || !r.peerAB.HandshakeNeeded.Load() {
				t.Errorf("with an endpoint: %d frames back, held %d, handshake asked %v; want 0 1 true", len(back), s.Held, r.peerAB.HandshakeNeeded.Load())
			}
		})
	}
}

// TestUnreachablePeerToPeer: a peer's packet for another peer that has no
// endpoint (a hub's offline road warrior) is answered back into the
// tunnel, as Linux's wg0 routes its error back out of wg0: host
// unreachable from the hub's tunnel address (here, with none, its LAN
// address, as Linux's primary one), sealed to the sender, whose gateway
// delivers it to the LAN host that sent the packet.
func TestUnreachablePeerToPeer(t *testing.T) {
	tun4 := lanAddrB
	h := newHubRig(t, rigConfig{}, nil, false)
	h.peerC.Endpoint.Store(nil)
	ip := ip4{src: pA, dst: pC}.bytes()
	sealToB(t, h.rig, ip)
	h.b.workers[0].inbound(h.clock.Now())
	s := h.b.Stats()[0]
	if s.Drops[DropNoEndpoint] != 1 || s.ICMPSent != 1 || s.Encrypted != 1 {
		t.Fatalf("B: no_endpoint %d icmp %d encrypted %d, want 1 1 1 (the error); drops %v", s.Drops[DropNoEndpoint], s.ICMPSent, s.Encrypted, s.Drops.List())
	}
	h.a.workers[0].inbound(h.clock.Now())
	lan := drainPort(h.hostA)
	if len(lan) != 1 {
		t.Fatalf("hostA got %d frames, want 1; A's drops %v", len(lan), h.a.Stats()[0].Drops.List())
	}
	// The quote shows B's hop (sealToB seals at A without one).
	if b := parseICMPBack(t, lan[0]); b.typ != 3 || b.code != 1 || b.src != tun4 || !bytes.Equal(b.quote, lowered(ip)) {
		t.Errorf("hostA got type %d code %d from %v quoting %x; want 3 1 from %v quoting %x", b.typ, b.code, b.src, b.quote, tun4, lowered(ip))
	}
}

// TestUnreachableToHost: a packet from the exception interface that no
// peer takes, or whose peer has no endpoint, is answered with host
// unreachable: one of the host's own back through Config.Exception, from
// the destination it could not reach (an error from the host's own
// address would be a martian on wg0), so that the host's socket gets its
// error; one the host's kernel forwarded from a LAN host (a removed
// peer's prefix, whose route the exception TUN keeps) back to that host
// from our LAN address, as Linux routes its error out of the LAN.
func TestUnreachableToHost(t *testing.T) {
	var got [][]byte
	tun4 := netip.MustParseAddr("198.19.100.1")
	r := newRig(t, rigConfig{noKeys: true, tunnelAddrs: []netip.Addr{tun4, netip.MustParseAddr("2001:db8:100::1")},
		exception: func(p []byte) { got = append(got, bytes.Clone(p)) }})
	r.peerAB.Endpoint.Store(nil)
	for _, c := range []struct {
		ip  []byte
		why DropReason
		lan bool // a LAN host's packet, the kernel forwarded
	}{
		{ip4{src: tun4.String(), dst: "198.19.9.10"}.bytes(), DropNoRoute, false},
		{ip4{src: tun4.String(), dst: pB}.bytes(), DropNoEndpoint, false},
		{ip6{src: "2001:db8:100::1", dst: pB6}.bytes(), DropNoEndpoint, false},
		{lowered(ip4{src: pA, dst: "198.19.9.10"}.bytes()), DropNoRoute, true},
	} {
		got = nil
		before := r.a.Stats()[0]
		if !r.a.SendTunnel(0, c.ip) {
			t.Fatal("SendTunnel: mailbox full")
		}
		r.a.workers[0].drainMailbox(r.clock.Now())
		s := r.a.Stats()[0]
		lan := drainPort(r.hostA)
		if c.lan {
			if s.Drops[c.why]-before.Drops[c.why] != 1 || len(got) != 0 || len(lan) != 1 {
				t.Fatalf("%x: %s %d, %d packets to the exception, %d frames to the LAN; want 1 0 1", c.ip, dropNames[c.why], s.Drops[c.why]-before.Drops[c.why], len(got), len(lan))
			}
			if b := parseICMPBack(t, lan[0]); b.typ != 3 || b.code != 1 || b.src != lanAddrA || !bytes.Equal(b.quote, c.ip) || b.dstMAC != [6]byte(r.hostA.MAC()) {
				t.Errorf("LAN got type %d code %d from %v to %x quoting %x, want 3 1 from %v to %x quoting %x", b.typ, b.code, b.src, b.dstMAC, b.quote, lanAddrA, r.hostA.MAC(), c.ip)
			}
			continue
		}
		if s.Drops[c.why]-before.Drops[c.why] != 1 || len(got) != 1 || len(lan) != 0 {
			t.Fatalf("%x: %s %d, exception got %d packets, LAN %d frames; want 1 1 0", c.ip, dropNames[c.why], s.Drops[c.why]-before.Drops[c.why], len(got), len(lan))
		}
		src, m := icmpOf(got[0])
		var dst netip.Addr
		if c.ip[0]>>4 == header.IPv4Version {
			dst = netip.AddrFrom4(header.IPv4(c.ip).DstBytes())
		} else {
			dst = netip.AddrFrom16(header.IPv6(c.ip).DstBytes())
		}
		if src != dst || !bytes.Equal(m[8:], c.ip) || (m[0] != 3 || m[1] != 1) && (m[0] != 1 || m[1] != 3) {
			t.Errorf("exception got %x, want host unreachable from %v quoting %x", got[0], dst, c.ip)
		}
	}
}

// TestUnreachableNoAllocs: a packet to a removed peer's prefix, answered
// with host unreachable (the rare path: noPeer, icmpErrorToLAN), and one
// for a peer without an endpoint (noEndpoint), allocate nothing.
func TestUnreachableNoAllocs(t *testing.T) {
	r := newRig(t, rigConfig{noKeys: true, icmpDest: -1, icmpRate: -1})
	r.peerAB.Endpoint.Store(nil)
	w := r.a.workers[0]
	tx, rx := r.hostA.Queue(0).TX(), r.hostA.Queue(0).RX()
	for _, dst := range []string{"198.19.9.10", pB} {
		ip := ip4{src: pA, dst: dst}.bytes()
		var fr, back [1]dataplane.Frame
		answered := 0
		allocs := testing.AllocsPerRun(100, func() {
			if tx.Alloc(fr[:]) != 1 {
				return
			}
			f := &fr[0]
			f.SetLen(header.EthernetLen + len(ip))
			header.PutEthernet(f.Data(), header.MAC(r.lanA.MAC()), header.MAC(r.hostA.MAC()), header.EtherTypeIPv4)
			copy(f.Data()[header.EthernetLen:], ip)
			tx.Transmit(fr[:])
			w.outbound(r.clock.Now())
			n := rx.Receive(back[:])
			answered += n
			rx.Free(back[:n])
		})
		if allocs != 0 || answered != 101 {
			t.Errorf("to %s: %v allocations per packet, %d of 101 answered; want 0 and all", dst, allocs, answered)
		}
	}
}

// icmpOf returns the source and the ICMP message of the IP packet ip.
func icmpOf(ip []byte) (netip.Addr, []byte) {
	if ip[0]>>4 == header.IPv4Version {
		return netip.AddrFrom4(header.IPv4(ip).SrcBytes()), ip[header.IPv4(ip).HeaderLen():header.IPv4(ip).TotalLength()]
	}
	return netip.AddrFrom16(header.IPv6(ip).SrcBytes()), ip[header.IPv6Len : header.IPv6Len+header.IPv6(ip).PayloadLength()]
}

// TestUnreachableToHostFromTunnel: a peer's packet that the host's kernel
// forwarded back into the exception interface (its destination, in the
// tunnel subnet, has no peer) is answered as Linux's wg0 answers it: host
// unreachable into the tunnel, to the peer's host, from our tunnel address,
// under the per-destination limit (6 at once). It went to the host from
// the address it could not reach, under the global limit only: 20 errors
// for 20 packets.
func TestUnreachableToHostFromTunnel(t *testing.T) {
	tun4 := netip.MustParseAddr("198.19.1.77") // in B's allowed IPs for A
	r := newRig(t, rigConfig{tunnelAddrs: []netip.Addr{tun4}, exception: func(p []byte) {
		t.Errorf("an error to the host: %x", p)
	}})
	r.b.cfg.TunnelAddrs = nil // the address is A's alone
	r.b.SetHostAddrs(nil)
	ip := ip4{src: pB, dst: "198.19.100.9"}.bytes()
	for range 20 {
		if !r.a.SendTunnel(0, lowered(ip)) {
			t.Fatal("SendTunnel: mailbox full")
		}
	}
	r.a.workers[0].drainMailbox(r.clock.Now())
	s := r.a.Stats()[0]
	if s.Drops[DropNoRoute] != 20 || s.ICMPSent != 6 || s.ICMPSuppressed != 14 {
		t.Fatalf("no_route %d icmp %d suppressed %d, want 20 6 14", s.Drops[DropNoRoute], s.ICMPSent, s.ICMPSuppressed)
	}
	r.b.workers[0].inbound(r.clock.Now())
	lan := drainPort(r.hostB)
	if len(lan) != 6 {
		t.Fatalf("hostB got %d errors, want 6; drops A %v, B %v", len(lan), s.Drops.List(), r.b.Stats()[0].Drops.List())
	}
	if b := parseICMPBack(t, lan[0]); b.typ != 3 || b.code != 1 || b.src != tun4 || !bytes.Equal(b.quote, lowered(ip)) {
		t.Errorf("hostB got type %d code %d from %v quoting %x; want 3 1 from %v quoting %x", b.typ, b.code, b.src, b.quote, tun4, lowered(ip))
	}
}

// TestHostBroadcastNotAnswered: the host's broadcast into the exception
// interface that no peer takes (the tunnel subnet's directed broadcast,
// one of our own addresses, or 255.255.255.255) gets no host unreachable
// (RFC 1122 §3.2.2; Linux's wg0 sends none for a broadcast route) and
// counts as the host's multicast does, not as no_route. Before, the
// directed broadcast was answered and counted no_route, each time the
// host broadcast.
func TestHostBroadcastNotAnswered(t *testing.T) {
	tun4 := netip.MustParseAddr("198.19.100.1")
	var got [][]byte
	r := newRig(t, rigConfig{noKeys: true, tunnelAddrs: []netip.Addr{tun4, netip.MustParseAddr("198.19.100.255")},
		exception: func(p []byte) { got = append(got, bytes.Clone(p)) }})
	for _, dst := range []string{"198.19.100.255", "255.255.255.255"} {
		before := r.a.Stats()[0]
		if !r.a.SendTunnel(0, ip4{src: tun4.String(), dst: dst}.bytes()) {
			t.Fatal("SendTunnel: mailbox full")
		}
		r.a.workers[0].drainMailbox(r.clock.Now())
		s := r.a.Stats()[0]
		if lan := drainPort(r.hostA); len(got) != 0 || len(lan) != 0 {
			t.Errorf("to %s: %d packets to the exception, %d frames to the LAN; want no error", dst, len(got), len(lan))
		}
		if m, n := s.Drops[DropHostMulticast]-before.Drops[DropHostMulticast], s.Drops[DropNoRoute]-before.Drops[DropNoRoute]; m != 1 || n != 0 {
			t.Errorf("to %s: host_multicast %d, no_route %d; want 1 and 0", dst, m, n)
		}
	}
}
