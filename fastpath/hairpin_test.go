package fastpath

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/protocol"
)

// The hub-and-spoke rig: gateway B of the two-gateway rig is the hub, with
// a second peer, C (198.19.3.0/24, 2001:db8:3::/48 unless told), whose
// endpoint is reached through the WAN wire the rig has (what B sends to C
// waits on A's WAN port, A's engine not running). A's view of B also
// holds C's networks, so that hostA's packets to C go to B.
var (
	wanAddrC = netip.MustParseAddr("198.18.1.3")
	pfxC     = []netip.Prefix{netip.MustParsePrefix("198.19.3.0/24"), netip.MustParsePrefix("2001:db8:3::/48")}
)

const (
	pC, pC6 = "198.19.3.10", "2001:db8:3::10"
	portC   = 51830
)

type hubRig struct {
	*rig
	peerC *Peer
	keyC  [32]byte // the key B seals to C with (nil keypair: unkeyed)
}

// newHubRig makes the rig with peer C at B holding allowedC (pfxC when
// nil); keyed says whether C has a session.
func newHubRig(t testing.TB, rc rigConfig, allowedC []netip.Prefix, keyed bool) *hubRig {
	t.Helper()
	r := newRig(t, rc)
	if allowedC == nil {
		allowedC = pfxC
	}
	h := &hubRig{rig: r, peerC: &Peer{SrcPorts: 1, SrcPortBase: portB}}
	if err := r.b.SetPeers([]*Peer{r.peerBA, h.peerC}, [][]netip.Prefix{
		{netip.MustParsePrefix("198.19.1.0/24"), netip.MustParsePrefix("2001:db8:1::/48")}, allowedC}); err != nil {
		t.Fatal(err)
	}
	if err := r.a.SetPeers([]*Peer{r.peerAB}, [][]netip.Prefix{append([]netip.Prefix{
		netip.MustParsePrefix("198.19.2.0/24"), netip.MustParsePrefix("2001:db8:2::/48")}, pfxC...)}); err != nil {
		t.Fatal(err)
	}
	var mA, mB [6]byte
	copy(mA[:], r.wanA.MAC())
	copy(mB[:], r.wanB.MAC())
	h.peerC.Endpoint.Store(&Endpoint{Dst: netip.AddrPortFrom(wanAddrC, portC), Src: wanAddrB, DstMAC: mA, SrcMAC: mB})
	if keyed {
		h.keyC2()
	}
	return h
}

// keyC2 gives C a session at B (B the initiator: confirmed at once).
func (h *hubRig) keyC2() {
	h.t.Helper()
	var recv [32]byte
	rand.Read(h.keyC[:])
	rand.Read(recv[:])
	idx, err := h.b.Indexes().Allocate()
	if err != nil {
		h.t.Fatal(err)
	}
	kp, err := NewKeypair(&h.keyC, &recv, idx, 0xc0ffee, true, h.clock.Now(), h.peerC)
	if err != nil {
		h.t.Fatal(err)
	}
	h.b.Indexes().Publish(idx, kp)
	h.peerC.Rotate(kp)
}

// toC opens what B sent to C (waiting on A's WAN port) and returns the
// inner packets, padding cut by their IP length.
func (h *hubRig) toC(t *testing.T) [][]byte {
	t.Helper()
	aead, err := chacha20poly1305.New(h.keyC[:])
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, d := range drainPort(h.wanA) {
		var p header.Packet
		if header.Parse(d, &p) != header.OK || p.Dst != wanAddrC || p.DstPort != portC {
			continue
		}
		msg := d[p.PayloadOff : p.PayloadOff+p.PayloadLen]
		if msg[0] != protocol.TypeTransport || binary.LittleEndian.Uint32(msg[4:8]) != 0xc0ffee {
			t.Fatalf("B sent C a message of type %d to index %#x", msg[0], binary.LittleEndian.Uint32(msg[4:8]))
		}
		var nonce [12]byte
		copy(nonce[4:], msg[8:16])
		pt, err := aead.Open(nil, nonce[:], msg[protocol.TransportHeaderSize:], nil)
		if err != nil {
			t.Fatalf("open B's message to C: %v", err)
		}
		var ip header.Packet
		if header.ParseL3(pt, &ip) != header.OK {
			t.Fatalf("B sent C an inner packet that does not parse: %x", pt)
		}
		out = append(out, pt[:ip.L3End])
	}
	return out
}

// hop returns the TTL / hop limit of the IP packet p.
func hop(p []byte) uint8 {
	if p[0]>>4 == header.IPv4Version {
		return p[8]
	}
	return p[7]
}

// lensFunc is a RouteLengths for tests, of routes that all lead to the
// LAN.
type lensFunc func(netip.Addr) (int, bool)

func (f lensFunc) PrefixLen(a netip.Addr) (int, bool, bool) {
	bits, first := f(a)
	return bits, first, false
}

// TestPeerToPeer: a packet from peer A whose destination is in peer C's
// allowed IPs goes back into the tunnel, sealed to C, with its TTL / hop
// limit one lower and otherwise unchanged (whitepaper §2, RFC 1812
// §5.3.1); rx counts at A's peer, tx at C's. Also with the LAN on a VLAN
// (the second burst reads the tag inbound puts in front).
func TestPeerToPeer(t *testing.T) {
	for _, c := range []struct {
		name string
		ip   []byte
		vlan uint16
	}{
		{"IPv4", ip4{src: pA, dst: pC}.bytes(), 0},
		{"IPv6", ip6{src: pA6, dst: pC6}.bytes(), 0},
		{"IPv4, LAN VLAN 200", ip4{src: pA, dst: pC}.bytes(), 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHubRig(t, rigConfig{lanVLAN: c.vlan}, nil, true)
			sealToB(t, h.rig, c.ip)
			h.b.workers[0].inbound(h.clock.Now())
			if lan := drainPort(h.hostB); len(lan) != 0 {
				t.Errorf("B sent %d frames to its LAN, want 0", len(lan))
			}
			got := h.toC(t)
			if len(got) != 1 {
				t.Fatalf("B sent C %d packets, want 1; drops %v", len(got), h.b.Stats()[0].Drops.List())
			}
			if hop(got[0]) != 63 {
				t.Errorf("TTL / hop limit at C = %d, want 63", hop(got[0]))
			}
			want := append([]byte(nil), c.ip...)
			if want[0]>>4 == header.IPv4Version {
				header.DecrementHop(want)
			} else {
				want[7]--
			}
			if string(got[0]) != string(want) {
				t.Errorf("C got %x, want %x", got[0], want)
			}
			s := h.b.Stats()[0]
			if s.PeerToPeer != 1 || s.Decrypted != 1 || s.Encrypted != 1 || s.Drops.Total() != 0 {
				t.Errorf("B's stats: peer_to_peer %d decrypted %d encrypted %d drops %v, want 1 1 1 none",
					s.PeerToPeer, s.Decrypted, s.Encrypted, s.Drops.List())
			}
			w := h.b.workers[0]
			if rx := w.peerState(h.peerBA).rxBytes; rx == 0 {
				t.Error("rx bytes of the source peer = 0")
			}
			if tx := w.peerState(h.peerC).txBytes; tx == 0 {
				t.Error("tx bytes of the destination peer = 0")
			}
			if tx := w.peerState(h.peerBA).txBytes; tx != 0 {
				t.Errorf("tx bytes of the source peer = %d, want 0", tx)
			}
		})
	}
}

// TestPeerToPeerSamePeer: a packet whose destination is in the allowed IPs
// of the peer it came from goes back to that peer, as Linux's wg0 sends it
// back; A delivers it on its LAN, the TTL lowered at B and at A.
func TestPeerToPeerSamePeer(t *testing.T) {
	h := newHubRig(t, rigConfig{}, nil, true)
	// A takes 198.19.1.10 as a source from B (it is B's in this test).
	if err := h.a.SetPeers([]*Peer{h.peerAB}, [][]netip.Prefix{{netip.MustParsePrefix("198.19.2.0/24"),
		netip.MustParsePrefix("198.19.1.10/32")}}); err != nil {
		t.Fatal(err)
	}
	ip := ip4{src: pA, dst: "198.19.1.20"}.bytes()
	sealToB(t, h.rig, ip)
	h.b.workers[0].inbound(h.clock.Now())
	if s := h.b.Stats()[0]; s.PeerToPeer != 1 || s.Encrypted != 1 {
		t.Fatalf("B: peer_to_peer %d encrypted %d, want 1 1; drops %v", s.PeerToPeer, s.Encrypted, s.Drops.List())
	}
	h.a.workers[0].inbound(h.clock.Now())
	lan := drainPort(h.hostA)
	if len(lan) != 1 {
		t.Fatalf("hostA got %d frames, want 1; A's drops %v", len(lan), h.a.Stats()[0].Drops.List())
	}
	got := lan[0][header.EthernetLen:]
	if hop(got) != 62 || string(got[12:20]) != string(ip[12:20]) {
		t.Errorf("hostA got TTL %d from %x, want 62 from %x", hop(got), got[12:20], ip[12:20])
	}
}

// TestPeerToPeerRouteChoice: the destination goes where Linux's longest
// prefix match over the LAN's routes and the routes of the allowed IPs
// into wg0 sends it (hairpin.go): a more specific LAN route wins, an equal
// one loses unless Linux prefers it (its metric), a /0 alone routes
// nothing into wg0, and a more specific allowed-IPs prefix wins over a
// wider LAN route.
func TestPeerToPeerRouteChoice(t *testing.T) {
	for _, c := range []struct {
		name     string
		allowedC []netip.Prefix
		lanBits  int  // -1: no LAN route
		first    bool // at equal lengths Linux prefers the LAN's route
		tunnel   bool
	}{
		{"LAN /32 over allowed /24", nil, 32, false, false},
		{"LAN /25 over allowed /24", nil, 25, false, false},
		{"allowed /24 and LAN /24", nil, 24, false, true},
		{"allowed /24 and LAN /24 of a lower metric", nil, 24, true, false},
		{"allowed /24 over LAN /16", nil, 16, false, true},
		{"allowed /24 over LAN /16 of a lower metric", nil, 16, true, true},
		{"allowed /24 over a default route", nil, 0, false, true},
		{"allowed /24, no LAN route", nil, -1, false, true},
		{"allowed /0 only", []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}, -1, false, false},
		{"allowed /0 only, LAN /24", []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}, 24, false, false},
		{"allowed /32 over LAN /24", []netip.Prefix{netip.MustParsePrefix(pC + "/32")}, 24, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHubRig(t, rigConfig{}, c.allowedC, true)
			var asked int
			h.b.lanLens = lensFunc(func(a netip.Addr) (int, bool) {
				asked++
				if a != netip.MustParseAddr(pC) {
					t.Errorf("PrefixLen(%v), want only %v", a, pC)
				}
				return c.lanBits, c.first
			})
			// Two packets to one destination: one question per burst.
			sealToB(t, h.rig, ip4{src: pA, dst: pC}.bytes())
			sealToB(t, h.rig, ip4{src: pA, dst: pC}.bytes())
			h.b.workers[0].inbound(h.clock.Now())
			lan, toC := drainPort(h.hostB), h.toC(t)
			if c.tunnel && (len(toC) != 2 || len(lan) != 0) || !c.tunnel && (len(toC) != 0 || len(lan) != 2) {
				t.Errorf("to C %d, to the LAN %d; want the tunnel %v", len(toC), len(lan), c.tunnel)
			}
			if c.allowedC == nil && asked != 1 {
				t.Errorf("PrefixLen asked %d times for a burst to one destination, want 1", asked)
			}
		})
	}
}

// TestPeerToPeerTTLExceeded: a packet for another peer that came with TTL
// 1 is answered with time exceeded into the tunnel, to its source (RFC
// 1812 §5.3.1), and not forwarded.
func TestPeerToPeerTTLExceeded(t *testing.T) {
	h := newHubRig(t, rigConfig{}, nil, true)
	sealToB(t, h.rig, ip4{src: pA, dst: pC, ttl: 1}.bytes())
	h.b.workers[0].inbound(h.clock.Now())
	if got := h.toC(t); len(got) != 0 {
		t.Errorf("B sent C %d packets, want 0", len(got))
	}
	// toC drained A's WAN: seal again and let A open the answer.
	sealToB(t, h.rig, ip6{src: pA6, dst: pC6, hl: 1}.bytes())
	h.b.workers[0].inbound(h.clock.Now())
	h.a.workers[0].inbound(h.clock.Now())
	back := drainPort(h.hostA)
	if len(back) != 1 || icmpType(back[0]) != 3 { // ICMPv6 time exceeded
		t.Errorf("hostA got %d frames (ICMP type %v), want one time exceeded", len(back), icmpTypes(back))
	}
	if s := h.b.Stats()[0]; s.Drops[DropTTLExceeded] != 2 || s.PeerToPeer != 0 {
		t.Errorf("B: ttl_exceeded %d peer_to_peer %d, want 2 0", s.Drops[DropTTLExceeded], s.PeerToPeer)
	}
}

func icmpTypes(frames [][]byte) []uint8 {
	var ts []uint8
	for _, f := range frames {
		ts = append(ts, icmpType(f))
	}
	return ts
}

// TestPeerToPeerTooBig: a packet for another peer over the tunnel MTU is
// answered into the tunnel with "fragmentation needed" (DF) or "packet
// too big" (IPv6) carrying the MTU (RFC 1812 §4.3.2.7, RFC 4443 §3.2),
// and IPv4 without DF is sent to the peer in fragments (RFC 791).
func TestPeerToPeerTooBig(t *testing.T) {
	const mtu = 1280
	big := make([]byte, 1400)
	t.Run("answered", func(t *testing.T) {
		h := newHubRig(t, rigConfig{mtu: mtu}, nil, true)
		for _, ip := range [][]byte{ip4{src: pA, dst: pC, payload: big}.bytes(), bigIP6(pA6, pC6, len(big))} {
			sealToB(t, h.rig, ip)
			h.b.workers[0].inbound(h.clock.Now())
			h.a.workers[0].inbound(h.clock.Now())
			back := drainPort(h.hostA)
			want := uint8(3) // fragmentation needed
			if ip[0]>>4 == 6 {
				want = 2 // packet too big
			}
			if len(back) != 1 || icmpType(back[0]) != want {
				t.Fatalf("hostA got ICMP types %v, want [%d]", icmpTypes(back), want)
			}
			var p header.Packet
			header.Parse(back[0], &p)
			icmp := back[0][p.L4Off:]
			if m := int(binary.BigEndian.Uint16(icmp[6:8])); want == 3 && m != mtu {
				t.Errorf("fragmentation needed with MTU %d, want %d", m, mtu)
			} else if m := int(binary.BigEndian.Uint32(icmp[4:8])); want == 2 && m != mtu {
				t.Errorf("packet too big with MTU %d, want %d", m, mtu)
			}
		}
		if s := h.b.Stats()[0]; s.Drops[DropTooBig] != 2 || s.PeerToPeer != 0 || s.Encrypted != 2 {
			t.Errorf("B: too_big %d peer_to_peer %d encrypted %d, want 2 0 2 (the errors)",
				s.Drops[DropTooBig], s.PeerToPeer, s.Encrypted)
		}
	})
	t.Run("fragmented", func(t *testing.T) {
		h := newHubRig(t, rigConfig{mtu: mtu}, nil, true)
		ip := ip4{src: pA, dst: pC, payload: big}.bytes()
		binary.BigEndian.PutUint16(ip[6:8], 0) // no DF
		binary.BigEndian.PutUint16(ip[10:12], 0)
		binary.BigEndian.PutUint16(ip[10:12], ^header.FoldChecksum(header.Checksum(ip[:header.IPv4MinLen], 0)))
		sealToB(t, h.rig, ip)
		h.b.workers[0].inbound(h.clock.Now())
		got := h.toC(t)
		if len(got) != 2 {
			t.Fatalf("C got %d packets, want 2 fragments; B's drops %v", len(got), h.b.Stats()[0].Drops.List())
		}
		total := 0
		for i, f := range got {
			if len(f) > mtu || hop(f) != 63 {
				t.Errorf("fragment %d: %d bytes, TTL %d; want at most %d, 63", i, len(f), hop(f), mtu)
			}
			total += len(f) - header.IPv4MinLen
			if mf := f[6]&0x20 != 0; mf != (i == 0) {
				t.Errorf("fragment %d: MF %v", i, mf)
			}
		}
		if total != len(big) {
			t.Errorf("fragments carry %d bytes, want %d", total, len(big))
		}
		if s := h.b.Stats()[0]; s.Fragmented != 1 || s.PeerToPeer != 1 {
			t.Errorf("B: fragmented %d peer_to_peer %d, want 1 1", s.Fragmented, s.PeerToPeer)
		}
	})
}

// bigIP6 is an IPv6 UDP packet of n payload bytes.
func bigIP6(src, dst string, n int) []byte {
	b := make([]byte, header.IPv6Len+n)
	f := header.IPv6Fields{NextHeader: header.ProtoUDP, HopLimit: 64, Src: netip.MustParseAddr(src).As16(), Dst: netip.MustParseAddr(dst).As16()}
	header.PutIPv6(b, &f, n)
	return b
}

// TestPeerToPeerUnkeyed: a packet for a peer without a session is held
// and a handshake asked for, as outbound does with the LAN's packets; it
// goes once the session exists.
func TestPeerToPeerUnkeyed(t *testing.T) {
	h := newHubRig(t, rigConfig{}, nil, false)
	sealToB(t, h.rig, ip4{src: pA, dst: pC}.bytes())
	w := h.b.workers[0]
	w.inbound(h.clock.Now())
	if got := h.toC(t); len(got) != 0 {
		t.Fatalf("B sent C %d packets without a session", len(got))
	}
	if !h.peerC.HandshakeNeeded.Load() || w.heldTotal != 1 {
		t.Fatalf("handshake needed %v, held %d; want true, 1", h.peerC.HandshakeNeeded.Load(), w.heldTotal)
	}
	h.keyC2()
	w.flushHeld(h.clock.Now())
	if got := h.toC(t); len(got) != 1 || hop(got[0]) != 63 {
		t.Fatalf("after the session B sent C %d packets, want 1 with TTL 63", len(got))
	}
}

// TestPeerToPeerZeroAllocs: the hub's burst that goes back into the
// tunnel allocates nothing (hostA → A → B → C, 64 packets a burst).
func TestPeerToPeerZeroAllocs(t *testing.T) {
	h := newHubRig(t, rigConfig{}, nil, true)
	frames := make([]dataplane.Frame, 64)
	f := udpFrame(t, h.hostA.Queue(0).TX(), h.lanA.MAC(), h.hostA.MAC(), hostAddrA, netip.MustParseAddr(pC), 1000, 2000, seqPayload(1, 22))
	tmpl := append([]byte(nil), f.Data()...)
	h.hostA.Queue(0).TX().Free([]dataplane.Frame{f})
	burst := func() int {
		tx := h.hostA.Queue(0).TX()
		got := tx.Alloc(frames)
		for i := range got {
			frames[i].SetLen(len(tmpl))
			copy(frames[i].Data(), tmpl)
		}
		tx.Transmit(frames[:got])
		now := h.clock.Now()
		h.a.workers[0].outbound(now)
		h.b.workers[0].inbound(now)
		rx := h.wanA.Queue(0).RX()
		m := rx.Receive(frames)
		rx.Free(frames[:m])
		return m
	}
	if got := burst(); got != 64 {
		t.Fatalf("warm-up burst: C got %d of 64; B's drops %v", got, h.b.Stats()[0].Drops.List())
	}
	allocs := testing.AllocsPerRun(200, func() {
		if got := burst(); got != 64 {
			t.Fatalf("burst: C got %d of 64", got)
		}
	})
	if allocs != 0 {
		t.Errorf("AllocsPerRun(burst of 64 peer to peer) = %v, want 0", allocs)
	}
}

// TestPeerToPeerDecisionCached: lanRoute's answer is kept per
// destination: a change of the LAN's routes applies once the entry is
// older than NeighbourCacheTTL, a new allowed-IPs snapshot at once.
func TestPeerToPeerDecisionCached(t *testing.T) {
	h := newHubRig(t, rigConfig{}, nil, true)
	lanBits := -1
	asked := 0
	h.b.lanLens = lensFunc(func(netip.Addr) (int, bool) { asked++; return lanBits, false })
	send := func() (toC, lan int) {
		t.Helper()
		sealToB(t, h.rig, ip4{src: pA, dst: pC}.bytes())
		h.b.workers[0].inbound(h.clock.Now())
		return len(h.toC(t)), len(drainPort(h.hostB))
	}
	if c, l := send(); c != 1 || l != 0 {
		t.Fatalf("first packet: to C %d, LAN %d; want 1, 0", c, l)
	}
	lanBits = 32 // a LAN route of its own now
	if c, l := send(); c != 1 || l != 0 || asked != 1 {
		t.Fatalf("within NeighbourCacheTTL: to C %d, LAN %d, asked %d; want 1, 0, 1 (cached)", c, l, asked)
	}
	h.clock.Advance(NeighbourCacheTTL)
	if c, l := send(); c != 0 || l != 1 || asked != 2 {
		t.Fatalf("after NeighbourCacheTTL: to C %d, LAN %d, asked %d; want 0, 1, 2", c, l, asked)
	}
	lanBits = -1
	// C's networks move to A: a new snapshot, decided again at once.
	if err := h.b.SetPeers([]*Peer{h.peerBA, h.peerC}, [][]netip.Prefix{
		{netip.MustParsePrefix("198.19.1.0/24"), pfxC[0]}, {pfxC[1]}}); err != nil {
		t.Fatal(err)
	}
	sealToB(t, h.rig, ip4{src: pA, dst: pC}.bytes())
	h.b.workers[0].inbound(h.clock.Now())
	if s := h.b.Stats()[0]; asked != 3 || s.PeerToPeer != 3 {
		t.Errorf("after a new snapshot: asked %d, peer_to_peer %d; want 3, 3", asked, s.PeerToPeer)
	}
}

// nbrCount counts the frames handed to it as a NeighbourHandler.
type nbrCount struct{ n int }

func (c *nbrCount) Handle(frame, out []byte) int { c.n++; return 0 }

// TestPeerToPeerNDPNotTheLANs: in the owned address mode (a LAN
// NeighbourHandler), a peer's ICMPv6 neighbour solicitation to another
// peer's address is that peer's packet: sent to it, not answered as the
// LAN's NDP.
func TestPeerToPeerNDPNotTheLANs(t *testing.T) {
	h := newHubRig(t, rigConfig{}, nil, true)
	nb := &nbrCount{}
	h.b.cfg.LANNeighbours = nb
	ip := bigIP6(pA6, pC6, 24)
	ip[6] = header.ProtoICMPv6
	ip[header.IPv6Len] = ndpNeighbourSolicitation
	sealToB(t, h.rig, ip)
	h.b.workers[0].inbound(h.clock.Now())
	if got := h.toC(t); len(got) != 1 || nb.n != 0 {
		t.Errorf("C got %d packets, the neighbour handler %d; want 1, 0", len(got), nb.n)
	}
}

// BenchmarkPeerToPeerPath measures the hub's path per packet of a peer's
// traffic for another peer (parse, open in place, replay check, allowed
// IPs, the route back into the tunnel, then outbound's burst: seal, outer
// headers, WAN TX) in bursts of 64, fed as BenchmarkDecryptPath is.
// path-ns/pkt is the worker's inbound call alone (both bursts): set it
// beside BenchmarkDecryptPath's plus BenchmarkEncryptPath's.
func BenchmarkPeerToPeerPath(b *testing.B) {
	for _, size := range []int{64, 1420} {
		b.Run(fmt.Sprintf("ip%d", size), func(b *testing.B) {
			h := newHubRig(b, rigConfig{onePool: true}, nil, true)
			f := udpFrame(b, h.hostA.Queue(0).TX(), h.lanA.MAC(), h.hostA.MAC(), hostAddrA, netip.MustParseAddr(pC), 1000, 2000, seqPayload(1, udpPayloadFor(size)))
			tmpl := append([]byte(nil), f.Data()...)
			h.hostA.Queue(0).TX().Free([]dataplane.Frame{f})
			const ring = 1 << 14
			sealed := sealMany(b, h.rig, tmpl, ring)
			frames := make([]dataplane.Frame, 64)
			wtx, crx := h.wanA.Queue(0).TX(), h.wanA.Queue(0).RX()
			w := h.b.workers[0]
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			var path time.Duration
			k := 0
			for done := 0; done < b.N; done += 64 {
				if k+64 > ring {
					b.StopTimer()
					sealed = sealMany(b, h.rig, tmpl, ring)
					k = 0
					b.StartTimer()
				}
				n := wtx.Alloc(frames)
				for i := range n {
					f := &frames[i]
					f.SetLen(len(sealed[k+i]))
					copy(f.Data(), sealed[k+i])
				}
				k += n
				if t := wtx.Transmit(frames[:n]); t != n {
					b.Fatalf("WAN transmit took %d of %d frames", t, n)
				}
				t0 := time.Now()
				w.inbound(0)
				path += time.Since(t0)
				m := crx.Receive(frames)
				crx.Free(frames[:m])
				if m != n {
					b.Fatalf("%d packets in, %d sent to C (drops %v)", n, m, TotalDrops(h.b.Stats()).List())
				}
			}
			b.ReportMetric(float64(path.Nanoseconds())/float64(b.N), "path-ns/pkt")
		})
	}
}
