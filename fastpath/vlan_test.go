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

// withTags returns frame f's bytes with tags (each a TPID and a TCI)
// inserted after the MAC addresses, in a frame of tx's pool.
func withTags(t testing.TB, tx dataplane.TX, f dataplane.Frame, tags ...[2]uint16) dataplane.Frame {
	t.Helper()
	d := append([]byte(nil), f.Data()...)
	tx.Free([]dataplane.Frame{f})
	out := append([]byte(nil), d[:12]...)
	for _, tg := range tags {
		out = binary.BigEndian.AppendUint16(out, tg[0])
		out = binary.BigEndian.AppendUint16(out, tg[1])
	}
	out = append(out, d[12:]...)
	var fr [1]dataplane.Frame
	if tx.Alloc(fr[:]) != 1 || !fr[0].SetLen(len(out)) {
		t.Fatal("no frame for a tagged copy")
	}
	copy(fr[0].Data(), out)
	return fr[0]
}

func q8021(vid uint16) [2]uint16 { return [2]uint16{header.EtherTypeVLAN, vid} }

// TestVLANIsolationMemport: with no VLAN configured, a worker on a port
// without an XDP program (memport) encrypts untagged and priority-tagged
// LAN frames only, and reads only untagged (or priority-tagged) WAN
// frames as WireGuard; every other frame is dropped as vlan or wan_vlan.
func TestVLANIsolationMemport(t *testing.T) {
	r := newRig(t, rigConfig{})
	tx := r.hostA.Queue(0).TX()
	frame := func() dataplane.Frame {
		return udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1000, 2000, []byte("vlan test"))
	}
	frames := []dataplane.Frame{
		frame(),                                                      // untagged: encrypted
		withTags(t, tx, frame(), q8021(0x6000)),                      // priority tag (PCP 3, VID 0): encrypted
		withTags(t, tx, frame(), q8021(100)),                         // VLAN 100
		withTags(t, tx, frame(), q8021(0x2064)),                      // VLAN 100, PCP 1
		withTags(t, tx, frame(), [2]uint16{header.EtherTypeQinQ, 0}), // 802.1ad
		withTags(t, tx, frame(), q8021(0), q8021(100)),               // stacked
	}
	sendAll(t, r.hostA, 0, frames)
	r.a.workers[0].outbound(r.clock.Now())
	d := TotalDrops(r.a.Stats())
	if d[DropVLAN] != 4 {
		t.Errorf("A drops[vlan] = %d, want 4 (all: %v)", d[DropVLAN], d)
	}
	if enc := r.a.Stats()[0].Encrypted; enc != 2 {
		t.Errorf("A encrypted %d, want 2 (untagged and priority-tagged)", enc)
	}
	// On B's WAN: the two messages, one tagged with VLAN 100, one with a
	// priority tag.
	rx := r.wanB.Queue(0).RX()
	buf := make([]dataplane.Frame, 8)
	m := rx.Receive(buf)
	if m != 2 {
		t.Fatalf("B's WAN received %d frames, want 2", m)
	}
	wtx := r.wanA.Queue(0).TX()
	var again []dataplane.Frame
	for i, f := range buf[:m] {
		c := copyFrame(t, wtx, f.Data())
		tag := q8021(100)
		if i == 1 {
			tag = q8021(0xe000)
		}
		again = append(again, withTags(t, wtx, c, tag))
	}
	rx.Free(buf[:m])
	sendAll(t, r.wanA, 0, again)
	r.b.workers[0].inbound(r.clock.Now())
	if d := TotalDrops(r.b.Stats()); d[DropWANVLAN] != 1 {
		t.Errorf("B drops[wan_vlan] = %d, want 1 (all: %v)", d[DropWANVLAN], d)
	}
	if dec := r.b.Stats()[0].Decrypted; dec != 1 {
		t.Errorf("B decrypted %d, want 1 (the priority-tagged message)", dec)
	}
}

// copyFrame copies b into a frame of tx's pool.
func copyFrame(t testing.TB, tx dataplane.TX, b []byte) dataplane.Frame {
	t.Helper()
	var fr [1]dataplane.Frame
	if tx.Alloc(fr[:]) != 1 || !fr[0].SetLen(len(b)) {
		t.Fatal("no frame")
	}
	copy(fr[0].Data(), b)
	return fr[0]
}

// tagOf returns a frame's 802.1Q VID and whether it has a tag.
func tagOf(d []byte) (uint16, bool) {
	if binary.BigEndian.Uint16(d[12:14]) != header.EtherTypeVLAN {
		return 0, false
	}
	return binary.BigEndian.Uint16(d[14:16]) & header.VLANIDMask, true
}

// TestVLANConfigured: both gateways' LANs on VLAN 100 and WANs on VLAN 7.
// Tagged LAN traffic crosses both ways and arrives tagged, the outer
// frames carry VLAN 7, untagged LAN frames are dropped as vlan, an ICMP
// error goes back tagged, and a message through the kernel path is read
// as one of the WAN's VLAN.
func TestVLANConfigured(t *testing.T) {
	r := newRig(t, rigConfig{lanVLAN: 100, wanVLAN: 7, mtu: 1280})
	txA := r.hostA.Queue(0).TX()
	frame := func(tx dataplane.TX, dst, src []byte, from, to netip.Addr, size int) dataplane.Frame {
		return udpFrame(t, tx, dst, src, from, to, 1000, 2000, seqPayload(1, size))
	}
	// Outer frames: tagged with the WAN's VLAN.
	sendAll(t, r.hostA, 0, []dataplane.Frame{
		withTags(t, txA, frame(txA, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 100), q8021(100)),
		frame(txA, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 100), // untagged: not VLAN 100's
	})
	r.a.workers[0].outbound(r.clock.Now())
	if d := TotalDrops(r.a.Stats())[DropVLAN]; d != 1 {
		t.Errorf("A drops[vlan] = %d, want 1 (the untagged frame)", d)
	}
	var msg []byte // kept back from B, for the kernel path below
	n := recvAll(t, r.wanB, 1, time.Second, func(_ int, d []byte) {
		if vid, ok := tagOf(d); !ok || vid != 7 {
			t.Errorf("outer frame tag = %d, %v; want VLAN 7", vid, ok)
		}
		var p header.Packet
		if rr := header.Parse(d, &p); rr != header.OK || p.DstPort != portB {
			t.Errorf("outer frame: %v, port %d", rr, p.DstPort)
		}
		msg = append([]byte(nil), d[p.PayloadOff:p.PayloadOff+p.PayloadLen]...)
	})
	if n != 1 {
		t.Fatalf("B's WAN got %d frames, want 1", n)
	}

	// Both ways through running workers.
	r.a.Start()
	r.b.Start()
	const count = 50
	var frames []dataplane.Frame
	for range count {
		frames = append(frames, withTags(t, txA, frame(txA, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 200), q8021(100)))
	}
	sendAll(t, r.hostA, 0, frames)
	check := func(d []byte) {
		if vid, ok := tagOf(d); !ok || vid != 100 {
			t.Errorf("delivered frame tag = %d, %v; want VLAN 100", vid, ok)
		}
		checkUDP(t, d)
	}
	if got := recvAll(t, r.hostB, count, 5*time.Second, func(_ int, d []byte) { check(d) }); got != count {
		t.Fatalf("A→B delivered %d, want %d; drops A %v B %v", got, count, TotalDrops(r.a.Stats()), TotalDrops(r.b.Stats()))
	}
	txB := r.hostB.Queue(0).TX()
	sendAll(t, r.hostB, 0, []dataplane.Frame{withTags(t, txB, frame(txB, r.lanB.MAC(), r.hostB.MAC(), hostAddrB, hostAddrA, 300), q8021(100))})
	if got := recvAll(t, r.hostA, 1, 5*time.Second, func(_ int, d []byte) { check(d) }); got != 1 {
		t.Fatalf("B→A delivered %d, want 1; drops B %v A %v", got, TotalDrops(r.b.Stats()), TotalDrops(r.a.Stats()))
	}
	// The held-back message through the host kernel's socket.
	if !r.b.ReceiveWAN(0, netip.AddrPortFrom(wanAddrA, portA), netip.AddrPortFrom(wanAddrB, portB), msg) {
		t.Fatal("ReceiveWAN: mailbox full")
	}
	if got := recvAll(t, r.hostB, 1, 5*time.Second, func(_ int, d []byte) { check(d) }); got != 1 {
		t.Fatalf("the message through ReceiveWAN delivered %d, want 1; drops B %v", got, TotalDrops(r.b.Stats()))
	}
	// Too big for the tunnel MTU: "fragmentation needed", tagged.
	sendAll(t, r.hostA, 0, []dataplane.Frame{withTags(t, txA, frame(txA, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1400), q8021(100))})
	if got := recvAll(t, r.hostA, 1, 5*time.Second, func(_ int, d []byte) {
		if vid, ok := tagOf(d); !ok || vid != 100 {
			t.Errorf("ICMP error tag = %d, %v; want VLAN 100", vid, ok)
		}
		var p header.Packet
		if rr := header.Parse(d, &p); rr != header.OK || p.Proto != header.ProtoICMPv4 || d[p.L4Off] != 3 || p.Dst != hostAddrA {
			t.Errorf("ICMP error: %v, proto %d, to %v", rr, p.Proto, p.Dst)
		}
	}); got != 1 {
		t.Fatalf("ICMP errors %d, want 1", got)
	}
	if d := TotalDrops(r.b.Stats()); d != (DropCounts{}) {
		t.Errorf("B drops = %v, want none", d)
	}
}

// echoNbr is a NeighbourHandler that keeps the frame it was handed and
// replies with it.
type echoNbr struct{ got []byte }

func (h *echoNbr) Handle(frame, out []byte) int {
	h.got = append(h.got[:0], frame...)
	return copy(out, frame[:min(len(frame), 64)])
}

// TestNeighbourUntagsAnyLength: a tagged ARP/NDP frame reaches the
// handler untagged, its addresses and everything after the tag intact,
// and the reply leaves with the port's tag, whatever the frame's length
// (one longer than 1,536 bytes, padded, was silently neither answered nor
// counted).
func TestNeighbourUntagsAnyLength(t *testing.T) {
	r := newRig(t, rigConfig{})
	w := r.a.workers[0]
	tx := r.lanA.Queue(0).TX()
	for _, n := range []int{60, 1536 + header.VLANTagLen + 1, 1800} {
		frame := make([]byte, n)
		for i := range frame {
			frame[i] = byte(i)
		}
		binary.BigEndian.PutUint16(frame[12:], header.EtherTypeVLAN)
		binary.BigEndian.PutUint16(frame[14:], 7)
		binary.BigEndian.PutUint16(frame[16:], header.EtherTypeARP)
		want := append(append([]byte(nil), frame[:12]...), frame[16:]...)
		h := &echoNbr{}
		w.neighbour(h, tx, frame, header.EthernetVLANLen, 7)
		if !bytes.Equal(h.got, want) {
			t.Fatalf("%d bytes: the handler got %d bytes % x..., want the frame untagged (%d bytes % x...)", n, len(h.got), h.got[:min(len(h.got), 20)], len(want), want[:20])
		}
		rx := r.hostA.Queue(0).RX()
		frames := make([]dataplane.Frame, 4)
		m := rx.Receive(frames)
		if m != 1 {
			t.Fatalf("%d bytes: %d replies on the LAN, want 1", n, m)
		}
		d := frames[0].Data()
		if binary.BigEndian.Uint16(d[12:]) != header.EtherTypeVLAN || binary.BigEndian.Uint16(d[14:])&header.VLANIDMask != 7 || !bytes.Equal(d[:12], want[:12]) {
			t.Errorf("%d bytes: reply % x..., want the echo tagged with VLAN 7", n, d[:18])
		}
		rx.Free(frames[:m])
	}
}

// TestNeighbourL2MLDQuery: on a port of a VLAN, an MLD query of that VLAN
// (behind its 8-byte Hop-by-Hop header) goes to the neighbour handler,
// which answers it for our solicited-node groups (the kernel, without a
// VLAN device, cannot); an untagged port leaves queries to the kernel's
// own MLD, and reports are no handler's business.
func TestNeighbourL2MLDQuery(t *testing.T) {
	mld := func(tagged bool, typ byte) []byte {
		var d []byte
		d = append(d, 0x33, 0x33, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2)
		if tagged {
			d = append(d, 0x81, 0x00, 0, 7)
		}
		d = append(d, 0x86, 0xdd, 0x60, 0, 0, 0, 0, 36, 0, 1)
		d = append(d, make([]byte, 32)...)
		d = append(d, 58, 0, 5, 2, 0, 0, 1, 0)
		return append(d, append([]byte{typ}, make([]byte, 27)...)...)
	}
	for _, tt := range []struct {
		name   string
		frame  []byte
		vlan   uint16
		wantL2 int
	}{
		{"query on VLAN 7", mld(true, 130), 7, header.EthernetVLANLen},
		{"query on another VLAN", mld(true, 130), 8, 0},
		{"untagged query, untagged port", mld(false, 130), 0, 0},
		{"report on VLAN 7", mld(true, 143), 7, 0},
		{"truncated query", mld(true, 130)[:header.EthernetVLANLen+header.IPv6Len+8], 7, 0},
	} {
		if got := neighbourL2(tt.frame, tt.vlan); got != tt.wantL2 {
			t.Errorf("%s: neighbourL2 = %d, want %d", tt.name, got, tt.wantL2)
		}
	}
}
