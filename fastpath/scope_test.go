package fastpath

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/protocol"
)

// The link-local addresses of the tests: a LAN host's (hostA's, or a peer's
// behind A), and gateway A's on its LAN.
var (
	llHost = netip.MustParseAddr("fe80::a")
	llGWA  = netip.MustParseAddr("fe80::1a")
)

// scopeError checks that ip is an ICMPv6 error of type typ and code code
// from src to llHost quoting quote whole.
func scopeError(t *testing.T, what string, ip []byte, src netip.Addr, typ, code uint8, quote []byte) {
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

// TestLinkLocalSourceFromLAN: a LAN host's packet from its link-local
// address to a destination in the tunnel is dropped (martian) and answered
// as Linux's ip6_forward answers it: destination unreachable, beyond scope
// of source address (type 1 code 2, RFC 4443 §3.1), from the gateway's
// link-local address on the LAN (its global one when it has none, as
// Linux's source address selection), quoting the packet as received; at
// hop limit 1 time exceeded (type 3) comes first, counted ttl_exceeded.
// The errors spend the ICMP rate limits (icmp_suppressed). Before, the
// packet was dropped as martian without an answer.
func TestLinkLocalSourceFromLAN(t *testing.T) {
	r := newRig(t, rigConfig{icmpDest: -1})
	r.a.SetLANLinkLocal(llGWA)
	for _, c := range []struct {
		name      string
		ll        netip.Addr // A's link-local address on the LAN
		hl        uint8
		from      netip.Addr
		typ, code uint8
		drop      DropReason
	}{
		{"beyond scope", llGWA, 64, llGWA, 1, 2, DropMartian},
		{"hop limit 1", llGWA, 1, llGWA, 3, 0, DropTTLExceeded},
		{"beyond scope, no link-local address", netip.Addr{}, 64, lan6A, 1, 2, DropMartian},
	} {
		r.a.SetLANLinkLocal(c.ll)
		ip := ip6{src: llHost.String(), dst: pB6, hl: c.hl}.bytes()
		before := r.a.Stats()[0]
		atB, atA := through(t, r, ipFrame(t, r.hostA.Queue(0).TX(), r.lanA.MAC(), r.hostA.MAC(), ip))
		after := r.a.Stats()[0]
		if len(atB) != 0 {
			t.Errorf("%s: %d frames reached hostB, want none", c.name, len(atB))
		}
		if len(atA) != 1 {
			t.Fatalf("%s: %d frames back at hostA, want 1 (drops %v)", c.name, len(atA), after.Drops.List())
		}
		if !bytes.Equal(atA[0][0:6], r.hostA.MAC()) || !bytes.Equal(atA[0][6:12], r.lanA.MAC()) {
			t.Errorf("%s: answer from MAC %x to %x, want %x to hostA's %x", c.name, atA[0][6:12], atA[0][0:6], r.lanA.MAC(), r.hostA.MAC())
		}
		scopeError(t, c.name, atA[0][header.EthernetLen:], c.from, c.typ, c.code, ip)
		if after.Drops[c.drop] != before.Drops[c.drop]+1 || after.ICMPSent != before.ICMPSent+1 {
			t.Errorf("%s: %v drops %d → %d, ICMP sent %d → %d; want one more of each", c.name, c.drop,
				before.Drops[c.drop], after.Drops[c.drop], before.ICMPSent, after.ICMPSent)
		}
	}
}

// TestLinkLocalSourceRateLimited: the "beyond scope" errors spend the ICMP
// rate limits as Linux's (icmp_ratemask holds destination unreachable):
// past the burst they are suppressed and counted, every packet still
// dropped as martian.
func TestLinkLocalSourceRateLimited(t *testing.T) {
	r := newRig(t, rigConfig{icmpRate: 100, icmpBurst: 2, icmpDest: -1})
	var frames []dataplane.Frame
	for range 5 {
		frames = append(frames, ipFrame(t, r.hostA.Queue(0).TX(), r.lanA.MAC(), r.hostA.MAC(), ip6{src: llHost.String(), dst: pB6}.bytes()))
	}
	_, atA := through(t, r, frames...)
	s := r.a.Stats()[0]
	if len(atA) != 2 || s.ICMPSent != 2 || s.ICMPSuppressed != 3 || s.Drops[DropMartian] != 5 {
		t.Errorf("%d errors at hostA, ICMP sent %d suppressed %d, martian %d; want 2, 2, 3, 5", len(atA), s.ICMPSent, s.ICMPSuppressed, s.Drops[DropMartian])
	}
}

// knownSession gives the rig a new session whose keys the test knows and
// returns the key B seals to A with and A's receiver index.
func knownSession(t *testing.T, r *rig) (bToA [32]byte, idxA uint32) {
	t.Helper()
	var aToB [32]byte
	rand.Read(aToB[:])
	rand.Read(bToA[:])
	ia, err := r.a.Indexes().Allocate()
	if err != nil {
		t.Fatal(err)
	}
	ib, err := r.b.Indexes().Allocate()
	if err != nil {
		t.Fatal(err)
	}
	now := r.clock.Now()
	ka, err := NewKeypair(&aToB, &bToA, ia, ib, true, now, r.peerAB)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := NewKeypair(&bToA, &aToB, ib, ia, false, now, r.peerBA)
	if err != nil {
		t.Fatal(err)
	}
	r.a.Indexes().Publish(ia, ka)
	r.b.Indexes().Publish(ib, kb)
	r.peerAB.Rotate(ka)
	r.peerBA.Rotate(kb)
	r.a.Kick()
	r.b.Kick()
	return bToA, ia
}

// fromB opens what B sent to A (waiting on A's WAN port) with key and
// returns the inner packets, padding cut by their IP length.
func fromB(t *testing.T, r *rig, key [32]byte, idx uint32) [][]byte {
	t.Helper()
	aead, err := chacha20poly1305.New(key[:])
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, d := range drainPort(r.wanA) {
		var p header.Packet
		if header.Parse(d, &p) != header.OK || p.Proto != header.ProtoUDP {
			continue
		}
		msg := d[p.PayloadOff : p.PayloadOff+p.PayloadLen]
		if msg[0] != protocol.TypeTransport || binary.LittleEndian.Uint32(msg[4:8]) != idx {
			continue
		}
		var nonce [12]byte
		copy(nonce[4:], msg[8:16])
		pt, err := aead.Open(nil, nonce[:], msg[protocol.TransportHeaderSize:], nil)
		if err != nil {
			t.Fatalf("open B's message to A: %v", err)
		}
		if len(pt) == 0 {
			continue // a keepalive
		}
		var ip header.Packet
		if header.ParseL3(pt, &ip) != header.OK {
			t.Fatalf("B sent A an inner packet that does not parse: %x", pt)
		}
		out = append(out, pt[:ip.L3End])
	}
	return out
}

// TestLinkLocalSourceFromTunnel: a peer's packet from a link-local source
// its allowed IPs hold, for B's LAN, is dropped (martian) and answered
// into the tunnel as Linux's wg0 answers it: beyond scope of source
// address, or time exceeded at hop limit 1 (ttl_exceeded), from B's
// tunnel address, quoting the packet as received. Without an IPv6 tunnel
// address nothing is sent: Linux's source address selection for a
// link-local destination takes wg0's own addresses alone (seen on Linux
// 6.18), where other errors into the tunnel come from the LAN address. To
// B's own tunnel address the packet is delivered (the exception
// interface), as Linux delivers it locally. Before, each was dropped as
// martian without an answer.
func TestLinkLocalSourceFromTunnel(t *testing.T) {
	own4, own6 := netip.MustParseAddr("198.19.2.254"), netip.MustParseAddr("2001:db8:2::fe")
	for _, tc := range []struct {
		name   string
		tunnel []netip.Addr
		from   netip.Addr // invalid: no error
	}{
		{"IPv6 tunnel address", []netip.Addr{own4, own6}, own6},
		{"IPv4 tunnel address only", []netip.Addr{own4}, netip.Addr{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var exc [][]byte
			r := newRig(t, rigConfig{icmpDest: -1, tunnelAddrs: tc.tunnel, exception: func(p []byte) { exc = append(exc, bytes.Clone(p)) }})
			if err := r.b.SetPeers([]*Peer{r.peerBA}, [][]netip.Prefix{{netip.MustParsePrefix("198.19.1.0/24"),
				netip.MustParsePrefix("2001:db8:1::/48"), netip.MustParsePrefix("fe80::/64")}}); err != nil {
				t.Fatal(err)
			}
			key, idx := knownSession(t, r)
			for _, c := range []struct {
				hl        uint8
				typ, code uint8
				drop      DropReason
			}{{64, 1, 2, DropMartian}, {1, 3, 0, DropTTLExceeded}} {
				ip := ip6{src: llHost.String(), dst: pB6, hl: c.hl}.bytes()
				before := r.b.Stats()[0]
				sealToB(t, r, ip)
				r.b.workers[0].inbound(r.clock.Now())
				after := r.b.Stats()[0]
				if lan := drainPort(r.hostB); len(lan) != 0 {
					t.Errorf("hop limit %d: %d frames reached hostB, want none", c.hl, len(lan))
				}
				if after.Drops[c.drop] != before.Drops[c.drop]+1 {
					t.Errorf("hop limit %d: %v drops %d → %d, want one more", c.hl, c.drop, before.Drops[c.drop], after.Drops[c.drop])
				}
				got := fromB(t, r, key, idx)
				if !tc.from.IsValid() {
					if len(got) != 0 || after.ICMPSent != before.ICMPSent {
						t.Errorf("hop limit %d: B sent A %x (ICMP sent %d → %d), want nothing", c.hl, got, before.ICMPSent, after.ICMPSent)
					}
					continue
				}
				if len(got) != 1 {
					t.Fatalf("hop limit %d: B sent A %d packets, want the error", c.hl, len(got))
				}
				scopeError(t, fmt.Sprintf("hop limit %d", c.hl), got[0], tc.from, c.typ, c.code, ip)
			}
			ip := ip6{src: llHost.String(), dst: own6.String()}.bytes()
			sealToB(t, r, ip)
			r.b.workers[0].inbound(r.clock.Now())
			if len(tc.tunnel) == 2 && (len(exc) != 1 || !bytes.Equal(exc[0], ip)) {
				t.Errorf("to B's own address: exception got %x, want the packet as received", exc)
			}
		})
	}
}

// TestLinkLocalSourcePeerToPeer: a peer's packet from a link-local source
// for another peer goes on to that peer, its hop limit one lower, as
// Linux's wg0 forwards it: a packet that leaves by the interface it came
// in by is not judged by its source (ip6_forward's redirect branch; seen
// on Linux 6.18). Before, it was dropped as martian.
func TestLinkLocalSourcePeerToPeer(t *testing.T) {
	h := newHubRig(t, rigConfig{}, nil, true)
	if err := h.b.SetPeers([]*Peer{h.peerBA, h.peerC}, [][]netip.Prefix{{netip.MustParsePrefix("198.19.1.0/24"),
		netip.MustParsePrefix("2001:db8:1::/48"), netip.MustParsePrefix("fe80::/64")}, pfxC}); err != nil {
		t.Fatal(err)
	}
	ip := ip6{src: llHost.String(), dst: pC6}.bytes()
	sealToB(t, h.rig, ip)
	h.b.workers[0].inbound(h.clock.Now())
	got := h.toC(t)
	want := bytes.Clone(ip)
	header.DecrementHop(want)
	if len(got) != 1 || !bytes.Equal(got[0], want) {
		t.Errorf("B sent C %x, want %x", got, want)
	}
	if s := h.b.Stats()[0]; s.PeerToPeer != 1 || s.Drops.Total() != 0 {
		t.Errorf("B: peer_to_peer %d, drops %v; want 1, none", s.PeerToPeer, s.Drops.List())
	}
}
