package fastpath

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
)

// TestSharedOuterSource: peers reached from the WAN's default IPv4
// address share the worker's source (12 bytes of outer headers each in
// their first line), peers reached from a further address keep a whole
// template, and both send the headers their endpoints call for. After the
// WAN is renumbered, the first peer built with the new address replaces
// the source, once, and every peer built with the old one is built again
// at its next message (from the new address, the endpoint's being gone);
// a generation that comes round again (255 replacements) is never taken
// for the old one.
func TestSharedOuterSource(t *testing.T) {
	r := newRig(t, rigConfig{})
	w := r.a.workers[0]
	kp := r.peerAB.Current.Load()
	addrA, addrB, addrF := netip.MustParseAddr("198.18.0.11"), netip.MustParseAddr("198.18.0.12"), netip.MustParseAddr("198.18.0.13")
	w.wan = newWANState(51820, addrA, netip.Addr{}, []netip.Addr{addrF})
	srcMAC := [6]byte{2, 0, 0, 0, 0, 0x2a}
	endpoint := func(src netip.Addr, dst string, mac byte) *Endpoint {
		return &Endpoint{Dst: netip.MustParseAddrPort(dst), Src: src, DstMAC: [6]byte{2, 0, 0, 0, 1, mac}, SrcMAC: srcMAC}
	}
	peers := []*Peer{{ID: 10, SrcPorts: 1}, {ID: 11, SrcPorts: 1}, {ID: 12, SrcPorts: 1}}
	// send seals a message of p toward ep and checks its outer headers:
	// from src, to ep, a valid IPv4 header checksum. It returns p's state.
	send := func(p *Peer, ep *Endpoint, src netip.Addr) *peerLocal {
		t.Helper()
		var fr [1]dataplane.Frame
		if w.lanTX.Alloc(fr[:]) != 1 {
			t.Fatal("Alloc: pool empty")
		}
		defer w.lanTX.Free(fr[:])
		f := &fr[0]
		f.SetLen(32)
		clear(f.Data())
		pl := w.peerState(p)
		c, _ := kp.ReserveNonces(1)
		if !w.seal(f, pl, kp, ep, c) {
			t.Fatal("seal failed")
		}
		d := f.Data()
		var pkt header.Packet
		if res := header.Parse(d, &pkt); res != header.OK {
			t.Fatalf("outer headers: Parse = %v", res)
		}
		if pkt.Src != src || pkt.Dst != ep.Dst.Addr() || pkt.DstPort != ep.Dst.Port() ||
			[6]byte(d[0:6]) != ep.DstMAC || [6]byte(d[6:12]) != ep.SrcMAC {
			t.Fatalf("outer headers %v → %v port %d, MACs % x, want %v → %v, %x → %x",
				pkt.Src, pkt.Dst, pkt.DstPort, d[:12], src, ep.Dst, ep.SrcMAC, ep.DstMAC)
		}
		if header.FoldChecksum(header.Checksum(d[14:34], 0)) != 0xffff {
			t.Fatalf("outer IPv4 header checksum %#x wrong", binary.BigEndian.Uint16(d[24:26]))
		}
		return pl
	}
	ep0, ep1 := endpoint(addrA, "198.18.1.1:51820", 1), endpoint(addrA, "198.18.1.2:1000", 2)
	ep2 := endpoint(addrF, "198.18.1.3:51821", 3)
	if pl := send(peers[0], ep0, addrA); pl.srcGen == 0 || pl.srcGen != w.srcGen {
		t.Fatalf("peer 0 from the default address: srcGen %d, worker's %d", pl.srcGen, w.srcGen)
	}
	gen := w.srcGen
	if pl := send(peers[1], ep1, addrA); pl.srcGen != gen {
		t.Fatalf("peer 1 from the default address: srcGen %d, want %d", pl.srcGen, gen)
	}
	if pl := send(peers[2], ep2, addrF); pl.srcGen != 0 {
		t.Fatalf("peer 2 from a further address: srcGen %d, want 0 (its own template)", pl.srcGen)
	}
	send(peers[0], ep0, addrA) // again, from the shared source

	// Renumbered: A is gone, B the default, F still a further address.
	// A peer from F, built first after the change, keeps its own
	// template: it does not take the shared source from the default's.
	w.wan = newWANState(51820, addrB, netip.Addr{}, []netip.Addr{addrF})
	if pl := send(peers[2], endpoint(addrF, "198.18.1.3:51821", 5), addrF); pl.srcGen != 0 || w.srcGen != gen {
		t.Fatalf("a further address first after a change: srcGen %d (want 0), worker's %d (want %d)", pl.srcGen, w.srcGen, gen)
	}
	ep1 = endpoint(addrB, "198.18.1.2:1000", 2)
	if pl := send(peers[1], ep1, addrB); pl.srcGen == gen || pl.srcGen != w.srcGen {
		t.Fatalf("peer 1 from the new address: srcGen %d, old %d, worker's %d", pl.srcGen, gen, w.srcGen)
	}
	gen = w.srcGen
	if pl := send(peers[0], ep0, addrB); pl.srcGen != gen { // its endpoint's address is gone
		t.Fatalf("peer 0 built again: srcGen %d, want %d", pl.srcGen, gen)
	}
	// Another source (another MAC) after the same change: its own
	// template, the shared source kept.
	epMAC := endpoint(addrB, "198.18.1.4:1", 4)
	epMAC.SrcMAC = [6]byte{2, 0, 0, 0, 0, 0x77}
	if pl := send(peers[2], epMAC, addrB); pl.srcGen != 0 || w.srcGen != gen {
		t.Fatalf("a second source after one change: srcGen %d (want 0), worker's %d (want %d)", pl.srcGen, w.srcGen, gen)
	}
	send(peers[0], ep0, addrB)

	// 255 renumberings, each replacing the source through peer 1, bring
	// the generation round to peer 0's: peer 0, untouched since, must be
	// built again, not taken for one of the current source.
	gen0 := w.peerState(peers[0]).srcGen
	var last netip.Addr
	for i := range 255 {
		last = netip.AddrFrom4([4]byte{198, 19, byte(i >> 8), byte(i)})
		w.wan = newWANState(51820, last, netip.Addr{}, nil)
		send(peers[1], endpoint(last, "198.18.1.2:1000", 2), last)
		if w.srcGen == 0 {
			t.Fatal("srcGen 0 after a replacement")
		}
	}
	if pl := w.peerState(peers[0]); w.srcGen != gen0 || pl.tmplEp != nil && pl.srcGen == w.srcGen {
		t.Fatalf("after 255 replacements: worker's srcGen %d (peer 0's was %d), peer 0's %d, its headers kept", w.srcGen, gen0, pl.srcGen)
	}
	if pl := send(peers[0], ep0, last); pl.srcGen != w.srcGen {
		t.Fatalf("peer 0 after 255 replacements: srcGen %d, worker's %d", pl.srcGen, w.srcGen)
	}
}
