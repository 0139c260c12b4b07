package fastpath

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/protocol"
)

// wireFrames drains queue 0 of p and returns copies of the frames, each
// with its 802.1Q tag checked (vlan, when not 0: every frame tagged with
// it) and removed, so that reassembleOuter reads them as untagged.
func wireFrames(t *testing.T, p interface{ Queue(int) dataplane.Queue }, vlan uint16) [][]byte {
	t.Helper()
	var out [][]byte
	for i, d := range drainPort(p) {
		if vlan == 0 {
			out = append(out, d)
			continue
		}
		if len(d) < header.EthernetVLANLen || binary.BigEndian.Uint16(d[12:14]) != header.EtherTypeVLAN ||
			binary.BigEndian.Uint16(d[14:16])&0xfff != vlan {
			t.Fatalf("frame %d: not tagged with VLAN %d: %x", i, vlan, d[:min(len(d), 18)])
		}
		out = append(out, append(bytes.Clone(d[:12]), d[16:]...))
	}
	return out
}

// deliverAtB hands B the datagrams A sent (as B's kernel would after
// reassembly) and returns the UDP payloads B delivered on its LAN.
func deliverAtB(t *testing.T, r *rig, dgs []outerDatagram) [][]byte {
	t.Helper()
	for _, dg := range dgs {
		if !r.b.ReceiveWAN(0, dg.src, dg.dst, dg.msg) {
			t.Fatal("ReceiveWAN: mailbox full")
		}
	}
	r.b.workers[0].drainMailbox(r.clock.Now())
	var got [][]byte
	recvAll(t, r.hostB, len(dgs), 100*time.Millisecond, func(_ int, d []byte) {
		_, pl := checkUDP(t, d)
		got = append(got, bytes.Clone(pl))
	})
	return got
}

// innerUDP is an inner IP packet from hostA to hostB (or host6A to host6B)
// with a UDP payload of n bytes.
func innerUDP(t *testing.T, r *rig, v6 bool, n int, seq uint32) []byte {
	t.Helper()
	src, dst := hostAddrA, hostAddrB
	if v6 {
		src, dst = host6A, host6B
	}
	tx := r.hostA.Queue(0).TX()
	f := udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), src, dst, 1000, 2000, seqPayload(seq, n))
	p := bytes.Clone(f.Data()[header.EthernetLen:])
	tx.Free([]dataplane.Frame{f})
	return p
}

// fragCase is a WAN MTU under which a full-size outer packet of the family
// is cut.
type fragCase struct {
	name string
	wan6 bool
	mtu  int
}

var fragCases = []fragCase{{"ipv4-576", false, 576}, {"ipv6-1280", true, 1280}}

// checkFragmented reassembles what A sent (frames, untagged), checks at
// least one datagram came in more than one frame, and returns them.
func checkFragmented(t *testing.T, frames [][]byte, mtu, want int) []outerDatagram {
	t.Helper()
	got := reassembleOuter(t, frames, mtu)
	if len(got) != want {
		t.Fatalf("%d datagrams from %d frames, want %d", len(got), len(frames), want)
	}
	cut := false
	for _, dg := range got {
		cut = cut || dg.frags > 1
	}
	if !cut {
		t.Fatalf("no datagram was fragmented (%d frames)", len(frames))
	}
	return got
}

// TestOuterFragmentedHeld: full-size packets held for a handshake leave,
// once the keypair comes, as fragments within a lowered WAN MTU that
// reassemble to messages B opens (sendHeld goes through toWAN).
func TestOuterFragmentedHeld(t *testing.T) {
	for _, tc := range fragCases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, rigConfig{noKeys: true, wan6: tc.wan6})
			r.a.SetWANMTU(tc.mtu)
			sizes := []int{1392, 100, 1392}
			sendSizes(t, r, sizes)
			wa := r.a.workers[0]
			wa.outbound(r.clock.Now())
			if s := r.a.Stats()[0]; s.Held != 3 {
				t.Fatalf("held %d, want 3", s.Held)
			}
			r.installKeys()
			wa.flushHeld(r.clock.Now())
			got := deliverAtB(t, r, checkFragmented(t, wireFrames(t, r.wanB, 0), tc.mtu, len(sizes)))
			for i, n := range sizes {
				if i >= len(got) || !bytes.Equal(got[i], seqPayload(uint32(i), n)) {
					t.Fatalf("B delivered %d packets, packet %d not the one sent; drops A %v", len(got), i, TotalDrops(r.a.Stats()).List())
				}
			}
		})
	}
}

// TestOuterFragmentedSendTunnel: a full-size packet from the host (the
// exception interface, Engine.SendTunnel) leaves as fragments that
// reassemble (sendInner goes through toWAN).
func TestOuterFragmentedSendTunnel(t *testing.T) {
	for _, tc := range fragCases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, rigConfig{wan6: tc.wan6})
			r.a.SetWANMTU(tc.mtu)
			p := innerUDP(t, r, tc.wan6, 1420-28-20*b2i(tc.wan6), 7)
			if !r.a.SendTunnel(0, p) {
				t.Fatal("SendTunnel refused")
			}
			r.a.workers[0].drainMailbox(r.clock.Now())
			got := deliverAtB(t, r, checkFragmented(t, wireFrames(t, r.wanB, 0), tc.mtu, 1))
			if len(got) != 1 || !bytes.Equal(got[0], p[len(p)-len(got[0]):]) {
				t.Fatalf("B delivered %d packets, want the one sent; drops A %v", len(got), TotalDrops(r.a.Stats()).List())
			}
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestOuterFragmentedControl: a control packet over the WAN MTU (Engine.Send;
// handshake messages are 148 bytes, but at IPv4's least MTU they too are
// over it) leaves as fragments that reassemble to its payload, whether its
// next hop is known or waited for (sendControl, flushControlWait).
func TestOuterFragmentedControl(t *testing.T) {
	cases := append([]fragCase{{"ipv4-68", false, 68}}, fragCases...)
	for _, tc := range cases {
		for _, wait := range []bool{false, true} {
			name := tc.name
			if wait {
				name += "-neighbour-wait"
			}
			t.Run(name, func(t *testing.T) {
				r := newRig(t, rigConfig{noKeys: true, wan6: tc.wan6})
				r.a.SetWANMTU(tc.mtu)
				dst := netip.AddrPortFrom(wanAddrB, portB)
				if tc.wan6 {
					dst = netip.AddrPortFrom(wan6B, portB)
				}
				var mB [6]byte
				copy(mB[:], r.wanB.MAC())
				payloads := [][]byte{seqPayload(1, protocol.InitiationSize), seqPayload(2, 1400)}
				for _, pl := range payloads {
					pkt := ControlPacket{Dst: dst, Payload: pl, Peer: r.peerAB}
					if !wait {
						pkt.DstMAC = mB
					}
					if !r.a.Send(0, pkt) {
						t.Fatal("Send refused")
					}
				}
				wa := r.a.workers[0]
				wa.drainMailbox(r.clock.Now())
				if wait {
					if s := r.a.Stats()[0]; s.Held != 2 {
						t.Fatalf("held %d control packets, want 2", s.Held)
					}
					res := r.a.cfg.WANResolver.(*staticResolver)
					res.mu.Lock()
					res.m = map[netip.Addr][6]byte{dst.Addr(): mB}
					res.mu.Unlock()
					wa.flushControlWait(time.Now())
				}
				got := checkFragmented(t, wireFrames(t, r.wanB, 0), tc.mtu, len(payloads))
				for i, dg := range got {
					if !bytes.Equal(dg.msg, payloads[i]) || dg.dst != dst {
						t.Errorf("datagram %d: %d bytes to %v, want payload %d (%d bytes) to %v", i, len(dg.msg), dg.dst, i, len(payloads[i]), dst)
					}
				}
				if s := r.a.Stats()[0]; s.ControlSent != 2 || s.Drops.Total() != 0 || s.WAN.Drops.Total() != 0 {
					t.Errorf("control sent %d, drops %v, WAN port drops %v; want 2, none", s.ControlSent, s.Drops.List(), s.WAN.Drops.List())
				}
			})
		}
	}
}

// TestOuterFragmentedPeerToPeer: a full-size packet from peer A to peer C
// through hub B (hairpin) leaves B as fragments within B's lowered WAN
// MTU that reassemble to a message C opens.
func TestOuterFragmentedPeerToPeer(t *testing.T) {
	for _, tc := range fragCases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHubRig(t, rigConfig{wan6: tc.wan6}, nil, true)
			if tc.wan6 {
				var mA, mB [6]byte
				copy(mA[:], h.wanA.MAC())
				copy(mB[:], h.wanB.MAC())
				h.peerC.Endpoint.Store(&Endpoint{Dst: netip.AddrPortFrom(netip.MustParseAddr("2001:db8:ff::3"), portC), Src: wan6B, DstMAC: mA, SrcMAC: mB})
			}
			h.b.SetWANMTU(tc.mtu)
			// A full-size inner packet from A's side to C (A's own WAN MTU
			// is not lowered: it reaches B whole).
			ip := ip4{src: pA, dst: pC, payload: seqPayload(9, 1420-20)}.bytes()
			sealToB(t, h.rig, ip)
			h.b.workers[0].inbound(h.clock.Now())
			got := checkFragmented(t, wireFrames(t, h.wanA, 0), tc.mtu, 1)
			aead, err := chacha20poly1305.New(h.keyC[:])
			if err != nil {
				t.Fatal(err)
			}
			msg := got[0].msg
			var nonce [12]byte
			copy(nonce[4:], msg[8:16])
			pt, err := aead.Open(nil, nonce[:], msg[protocol.TransportHeaderSize:], nil)
			if err != nil {
				t.Fatalf("open B's message to C: %v", err)
			}
			want := bytes.Clone(ip)
			header.DecrementHop(want)
			if !bytes.Equal(pt[:len(want)], want) {
				t.Errorf("C got a different packet")
			}
			if s := h.b.Stats()[0]; s.PeerToPeer != 1 || s.OuterFragmented != 1 || s.Drops.Total() != 0 {
				t.Errorf("B: peer_to_peer %d, outer_fragmented %d, drops %v; want 1, 1, none", s.PeerToPeer, s.OuterFragmented, s.Drops.List())
			}
		})
	}
}

// TestOuterFragmentedVLAN: with the WAN on an 802.1Q VLAN, every fragment
// carries the tag and is at most MTU + 18 bytes of frame.
func TestOuterFragmentedVLAN(t *testing.T) {
	for _, tc := range append(fragCases, fragCase{"ipv4-1400", false, 1400}) {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, rigConfig{wan6: tc.wan6, wanVLAN: 42})
			r.a.SetWANMTU(tc.mtu)
			sizes := []int{1392, 100, 1392}
			sendSizes(t, r, sizes)
			r.a.workers[0].outbound(r.clock.Now())
			wire := wireFrames(t, r.wanB, 42) // each checked tagged, then untagged
			got := deliverAtB(t, r, checkFragmented(t, wire, tc.mtu, len(sizes)))
			if len(got) != len(sizes) {
				t.Fatalf("B delivered %d of %d", len(got), len(sizes))
			}
			if s := r.a.Stats()[0]; s.OuterFragmented != 2 || s.WAN.Drops.Total() != 0 {
				t.Errorf("outer_fragmented %d, WAN port drops %v; want 2, none", s.OuterFragmented, s.WAN.Drops.List())
			}
		})
	}
}

// TestOuterFragmentedControlOverTunnelMTU: where every tunnel packet fits
// the WAN MTU whole (tunnel MTU 1280 + 80 ≤ 1400), toWAN skips looking at
// a batch of them, but not at control frames, whose payload has no such
// bound: a 1,400-byte control payload still leaves as fragments.
func TestOuterFragmentedControlOverTunnelMTU(t *testing.T) {
	r := newRig(t, rigConfig{noKeys: true, mtu: 1280})
	r.a.SetWANMTU(1400)
	dst := netip.AddrPortFrom(wanAddrB, portB)
	var mB [6]byte
	copy(mB[:], r.wanB.MAC())
	payload := seqPayload(3, 1400)
	if !r.a.Send(0, ControlPacket{Dst: dst, Payload: payload, DstMAC: mB}) {
		t.Fatal("Send refused")
	}
	r.a.workers[0].drainMailbox(r.clock.Now())
	got := checkFragmented(t, wireFrames(t, r.wanB, 0), 1400, 1)
	if len(got) != 1 || !bytes.Equal(got[0].msg, payload) || got[0].frags < 2 {
		t.Errorf("control payload of 1400 bytes over a WAN MTU of 1400: %d datagrams, want it in fragments", len(got))
	}
}
