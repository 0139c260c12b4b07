package tundev

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/wgpio/wgpio/header"
)

// The link-local addresses of the tests: a LAN host's (or a peer's), and
// the gateway's on the LAN.
var (
	llHost = netip.MustParseAddr("fe80::b")
	llGW   = netip.MustParseAddr("fe80::a")
)

// checkScopeError checks that ip is an ICMPv6 error of type typ and code
// code from src to llHost quoting quote whole, its checksum right.
func checkScopeError(t *testing.T, what string, ip []byte, src netip.Addr, typ, code uint8, quote []byte) {
	t.Helper()
	var p header.Packet
	if r := header.ParseL3(ip, &p); r != header.OK || p.Proto != header.ProtoICMPv6 {
		t.Fatalf("%s: answer %x does not parse as ICMPv6 (%v)", what, ip, r)
	}
	m := ip[p.L4Off:p.L3End]
	if p.Src != src || p.Dst != llHost || m[0] != typ || m[1] != code || !bytes.Equal(m[8:], quote) ||
		!header.ICMPv6(m).VerifyChecksum(header.PseudoHeaderChecksum(header.ProtoICMPv6, p.Src, p.Dst, len(m))) {
		t.Errorf("%s: ICMPv6 %v → %v type %d code %d quoting %x; want %v → %v type %d code %d quoting %x, checksum right",
			what, p.Src, p.Dst, m[0], m[1], m[8:], src, llHost, typ, code, quote)
	}
}

// TestPortDeviceLinkLocalSourceLAN: a LAN host's packet from its
// link-local address into the tunnel is not handed to wireguard-go: it is
// dropped (martian) and answered as Linux's ip6_forward answers it,
// destination unreachable, beyond scope of source address (type 1 code 2,
// RFC 4443 §3.1), from our link-local address on the LAN (our global one
// without it, as Linux's source address selection), to the host's MAC,
// quoting the packet as it came; at hop limit 1 time exceeded first
// (ttl_exceeded). Before, it was dropped unanswered.
func TestPortDeviceLinkLocalSourceLAN(t *testing.T) {
	r := routerRig(t, func(c *PortConfig) { c.ICMPLinkLocal6 = llGW })
	for _, c := range []struct {
		name      string
		ll        netip.Addr
		hl        uint8
		from      netip.Addr
		typ, code uint8
		why       PortDropReason
	}{
		{"beyond scope", llGW, 64, llGW, 1, 2, PortDropMartian},
		{"hop limit 1", llGW, 1, llGW, 3, 0, PortDropTTLExceeded},
		{"beyond scope, no link-local address", netip.Addr{}, 64, lanIP6, 1, 2, PortDropMartian},
	} {
		r.dev.SetICMPLinkLocal(c.ll)
		before := r.dev.Stats()
		p := withTTL(ipPacket(llHost, peerA6, []byte("probe")), c.hl)
		sentinel := ipPacket(hostIP, peerA, []byte("sentinel"))
		r.inject(t, 0, eth6(p), eth4(sentinel))
		if got := r.readAll(t, 1, 4); len(got) != 1 || !bytes.Equal(got[0], hop(sentinel)) {
			t.Fatalf("%s: Read = %x, want only the sentinel", c.name, got)
		}
		replies := r.collect(1)
		if len(replies) != 1 {
			t.Fatalf("%s: host received %d frames, want the error", c.name, len(replies))
		}
		if f := replies[0]; !bytes.Equal(f[0:6], macHost) || !bytes.Equal(f[6:12], macGW) {
			t.Errorf("%s: reply %x: not from the gateway's MAC to the host's", c.name, f[:12])
		}
		checkScopeError(t, c.name, replies[0][header.EthernetLen:], c.from, c.typ, c.code, p)
		if s := r.dev.Stats(); s.Drops[c.why] != before.Drops[c.why]+1 || s.ICMPErrors != before.ICMPErrors+1 {
			t.Errorf("%s: Stats = %+v, want one more %v drop and ICMP error", c.name, s, c.why)
		}
	}
}

// TestPortDeviceLinkLocalSourceTunnel: a decrypted packet from a
// link-local source for the LAN does not reach it: it is dropped
// (martian) and answered into the tunnel from our tunnel address, beyond
// scope of source address, or time exceeded at hop limit 1
// (ttl_exceeded), quoting it as it came. Without a tunnel address of ours
// nothing is sent (Linux picks the source of an error to a link-local
// address among wg0's own addresses alone), where other errors into the
// tunnel come from the LAN address. One for a peer goes back into the
// tunnel, its hop limit one lower, as Linux's wg0 forwards it (peer to
// peer: it leaves by the interface it came in by). Before, all were
// dropped unanswered.
func TestPortDeviceLinkLocalSourceTunnel(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*PortConfig)
		from netip.Addr // invalid: no error
	}{
		{"tunnel address", nil, tunIP6},
		{"no tunnel address", func(c *PortConfig) { c.TunnelSource6 = netip.Addr{} }, netip.Addr{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := routerRig(t, tc.mod)
			for _, c := range []struct {
				hl        uint8
				typ, code uint8
				why       PortDropReason
			}{{64, 1, 2, PortDropMartian}, {1, 3, 0, PortDropTTLExceeded}} {
				before := r.dev.Stats()
				p := withTTL(ipPacket(llHost, hostIP6, []byte("probe")), c.hl)
				sentinel := ipPacket(peerA, hostIP, []byte("sentinel"))
				if n, err := r.dev.Write([][]byte{bytes.Clone(p), bytes.Clone(sentinel)}, 0); n != 2 || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
				if f := r.collect(1); len(f) != 1 || !bytes.Equal(f[0][header.EthernetLen:], hop(sentinel)) {
					t.Errorf("hop limit %d: LAN received %x, want only the sentinel", c.hl, f)
				}
				s := r.dev.Stats()
				if s.Drops[c.why] != before.Drops[c.why]+1 {
					t.Errorf("hop limit %d: Stats = %+v, want one more %v drop", c.hl, s, c.why)
				}
				if !tc.from.IsValid() {
					if n := r.dev.loop.n.Load(); n != 0 || s.ICMPErrors != before.ICMPErrors {
						t.Errorf("hop limit %d: %d packets wait for Read (%d ICMP errors), want none", c.hl, n, s.ICMPErrors)
					}
					continue
				}
				got := r.readAll(t, 1, 4)
				if len(got) != 1 {
					t.Fatalf("hop limit %d: Read = %x, want the error", c.hl, got)
				}
				checkScopeError(t, "hop limit", got[0], tc.from, c.typ, c.code, p)
			}
			// Peer to peer: forwarded.
			p := ipPacket(llHost, peerB6, []byte("to B"))
			before := r.dev.Stats()
			r.dev.Write([][]byte{bytes.Clone(p)}, 0)
			if got := r.readAll(t, 1, 4); len(got) != 1 || !bytes.Equal(got[0], hop(p)) {
				t.Errorf("peer to peer: Read = %x, want %x", got, hop(p))
			}
			if s := r.dev.Stats(); s.PeerToPeer != before.PeerToPeer+1 || s.Drops.Total() != before.Drops.Total() {
				t.Errorf("peer to peer: Stats = %+v, want one more peer_to_peer, no drop", s)
			}
		})
	}
}

// TestPortDeviceLinkLocalDestTunnel: a decrypted packet to an IPv6
// link-local address is dropped (martian) and answered "no route to
// destination" (type 1 code 0) into the tunnel from our tunnel address,
// quoting it as it came, at any hop limit, as Linux's wg0 (no link-local
// prefix) answers it and as the fast path does. Before, compat mode
// dropped it unanswered.
func TestPortDeviceLinkLocalDestTunnel(t *testing.T) {
	r := routerRig(t, nil)
	for _, hl := range []uint8{64, 1} {
		before := r.dev.Stats()
		p := withTTL(ipPacket(peerA6, llHost, []byte("probe")), hl)
		if n, err := r.dev.Write([][]byte{bytes.Clone(p)}, 0); n != 1 || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
		if f := r.collect(0); len(f) != 0 {
			t.Errorf("hop limit %d: LAN received %x, want nothing", hl, f)
		}
		if n := r.dev.loop.n.Load(); n != 1 { // Read would wait for one
			t.Fatalf("hop limit %d: %d packets wait for Read, want the error", hl, n)
		}
		got := r.readAll(t, 1, 4)
		if len(got) != 1 {
			t.Fatalf("hop limit %d: Read = %x, want the error", hl, got)
		}
		var e header.Packet
		if res := header.ParseL3(got[0], &e); res != header.OK || e.Proto != header.ProtoICMPv6 {
			t.Fatalf("hop limit %d: answer %x does not parse as ICMPv6 (%v)", hl, got[0], res)
		}
		m := got[0][e.L4Off:e.L3End]
		if e.Src != tunIP6 || e.Dst != peerA6 || m[0] != 1 || m[1] != 0 || !bytes.Equal(m[8:], p) ||
			!header.ICMPv6(m).VerifyChecksum(header.PseudoHeaderChecksum(header.ProtoICMPv6, e.Src, e.Dst, len(m))) {
			t.Errorf("hop limit %d: ICMPv6 %v → %v type %d code %d quoting %x; want %v → %v type 1 code 0 quoting %x, checksum right",
				hl, e.Src, e.Dst, m[0], m[1], m[8:], tunIP6, peerA6, p)
		}
		if s := r.dev.Stats(); s.Drops[PortDropMartian] != before.Drops[PortDropMartian]+1 || s.ICMPErrors != before.ICMPErrors+1 {
			t.Errorf("hop limit %d: Stats = %+v, want one more martian drop and ICMP error", hl, s)
		}
	}
}
