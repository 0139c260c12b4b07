package fastpath

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
)

// sendNoDF is orderRig.send with one packet per size (UDP payload bytes),
// numbered from first up, DF clear: those over B's LAN MTU are fragmented
// toward host B.
func (o orderRig) sendNoDF(first int, sizes ...int) {
	o.t.Helper()
	tx := o.hostA.Queue(0).TX()
	var frames []dataplane.Frame
	for i, size := range sizes {
		f := udpFrame(o.t, tx, o.lanA.MAC(), o.hostA.MAC(), hostAddrA, hostAddrB, 1, 2, seqPayload(uint32(first+i), size))
		p := header.IPv4(f.Data()[header.EthernetLen:])
		p[6] &^= 0x40
		p.SetChecksum()
		frames = append(frames, f)
	}
	sendAll(o.t, o.hostA, 0, frames)
	o.a.workers[0].outbound(o.clock.Now())
}

// receivedFragments reads want frames at host B and returns, in their
// order of arrival, the number of each packet or first fragment and -1 for
// each later fragment, and the fragments of each packet by number.
func (o orderRig) receivedFragments(want int) (seqs []int, frags map[int][][]byte) {
	o.t.Helper()
	frags = map[int][][]byte{}
	last := -1
	recvAll(o.t, o.hostB, want, time.Second, func(_ int, d []byte) {
		ip := header.IPv4(d[header.EthernetLen:])
		if ip.FragmentOffset() != 0 {
			seqs = append(seqs, -1)
			frags[last] = append(frags[last], bytes.Clone(ip))
			return
		}
		last = int(binary.BigEndian.Uint32(ip[ip.HeaderLen()+header.UDPLen:]))
		seqs = append(seqs, last)
		if ip.MoreFragments() {
			frags[last] = append(frags[last], bytes.Clone(ip))
		}
	})
	return seqs, frags
}

// TestNeighbourWaitFragments: a packet from the tunnel without DF and
// larger than the LAN MTU waits for its LAN next hop's MAC as a fitting
// packet does, counted once in the neighbour's slot, and is fragmented
// when the MAC is known, in its place among the frames that waited: Linux
// fragments first and queues the fragments for the neighbour (its
// arp_queue). One that arrives while others wait joins the wait even when
// the MAC is known by then. Before, the first was dropped (lan_too_big)
// and the second overtook the frames that waited.
func TestNeighbourWaitFragments(t *testing.T) {
	o := orderRig{newRig(t, rigConfig{lanMTUB: 1280}), t}
	resolve := o.unresolve()
	wb := o.b.workers[0]
	const small, big = 40, 1400 - header.IPv4MinLen - header.UDPLen // big: a 1400-byte IP packet, 2 fragments
	o.sendNoDF(0, small, big, small)
	wb.inbound(o.clock.Now())
	if len(wb.nbrWait) != 3 {
		t.Fatalf("%d frames wait for host B's MAC, want 3; drops B %v", len(wb.nbrWait), TotalDrops(o.b.Stats()).List())
	}
	if e := wb.nbr[nbrHash(hostAddrB)&(nbrCacheSize-1)]; e.addr != hostAddrB || e.waiting != 3 {
		t.Errorf("slot of %v: %v counts %d waiting frames, want 3", hostAddrB, e.addr, e.waiting)
	}
	checkNbrCount(t, wb)
	resolve()
	o.sendNoDF(3, big, small) // the MAC is known now: must not overtake the three
	wb.inbound(o.clock.Now())
	if len(wb.nbrWait) != 5 {
		t.Fatalf("%d frames wait after the MAC is known, want 5 (behind the others)", len(wb.nbrWait))
	}
	checkNbrCount(t, wb)
	wb.nbrTried = time.Time{} // the retry is due
	wb.flushNeighbourWait(o.clock.Now())
	o.sendNoDF(5, big)
	wb.inbound(o.clock.Now())
	got, frags := o.receivedFragments(9)
	if want := []int{0, 1, -1, 2, 3, -1, 4, 5, -1}; !slices.Equal(got, want) {
		t.Errorf("host B received %v, want %v (-1: a later fragment); drops B %v", got, want, TotalDrops(o.b.Stats()).List())
	}
	for _, seq := range []int{1, 3, 5} {
		if len(frags[seq]) != 2 {
			t.Errorf("packet %d: %d fragments, want 2", seq, len(frags[seq]))
			continue
		}
		for _, fr := range frags[seq] {
			if len(fr) > 1280 {
				t.Errorf("packet %d: fragment of %d bytes over the LAN MTU", seq, len(fr))
			}
		}
		p := reassemble4(t, frags[seq])
		if want := seqPayload(uint32(seq), big); len(p) != 1400 || !bytes.Equal(p[header.IPv4MinLen+header.UDPLen:], want) {
			t.Errorf("packet %d reassembled to %d bytes, want 1400 with its payload", seq, len(p))
		}
	}
	if d := TotalDrops(o.b.Stats()); d[DropLANTooBig] != 0 || d[DropNoNeighbour] != 0 {
		t.Errorf("drops B %v, want no lan_too_big nor no_neighbour", d)
	}
	if s := o.b.Stats()[0]; s.Held != 0 || len(wb.nbrWait) != 0 {
		t.Errorf("after the flush: held = %d, %d frames wait; want 0, 0", s.Held, len(wb.nbrWait))
	}
	checkNbrCount(t, wb)
}

// TestNeighbourWaitLANMTULowered: packets that wait for their LAN next
// hop's MAC while the LAN MTU is lowered below their size are handled,
// when the MAC comes, as packets arriving then would be: IPv4 with DF and
// IPv6 dropped (lan_too_big) and answered through the tunnel with
// "fragmentation needed" / "packet too big" carrying the new MTU, IPv4
// without DF fragmented to it. Before, the first two left whole, over the
// LAN MTU (checked only when they arrived).
func TestNeighbourWaitLANMTULowered(t *testing.T) {
	r := newRig(t, rigConfig{})
	resolve := orderRig{r, t}.unresolve()
	wb := r.b.workers[0]
	atB, atA := through(t, r,
		ttlFrame(t, r, hostAddrA, hostAddrB, 1400-28, 64, 0, true), // 1400-byte IPv4 packets
		ttlFrame(t, r, host6A, host6B, 1400-48, 64, 0, true),
		ttlFrame(t, r, hostAddrA, hostAddrB, 1400-28, 64, 0, false))
	if len(atB) != 0 || len(atA) != 0 || len(wb.nbrWait) != 3 {
		t.Fatalf("at the LAN MTU of 1500, unresolved: %d frames at hostB, %d at hostA, %d waiting; want 0, 0, 3 (drops B %v)",
			len(atB), len(atA), len(wb.nbrWait), TotalDrops(r.b.Stats()).List())
	}
	r.b.SetLANMTU(1280)
	resolve()
	wb.nbrTried = time.Time{} // the retry is due
	wb.flushNeighbourWait(r.clock.Now())
	atB, atA = through(t, r)
	if len(atB) != 2 {
		t.Errorf("%d frames at hostB, want the 2 fragments of the packet without DF", len(atB))
	}
	for _, d := range atB {
		if len(d)-header.EthernetLen > 1280 {
			t.Errorf("%d bytes at hostB, over the LAN MTU of 1280", len(d)-header.EthernetLen)
		}
	}
	var types []uint8
	for _, d := range atA {
		var p header.Packet
		header.Parse(d, &p)
		typ, mtu := d[p.L4Off], int(binary.BigEndian.Uint16(d[p.L4Off+6:]))
		if p.Dst.Is6() {
			mtu = int(binary.BigEndian.Uint32(d[p.L4Off+4:]))
		}
		if mtu != 1280 {
			t.Errorf("ICMP type %d to %v carries the MTU %d, want 1280", typ, p.Dst, mtu)
		}
		types = append(types, typ)
	}
	if want := []uint8{3, 2}; !slices.Equal(types, want) {
		t.Errorf("hostA got ICMP types %v, want %v (fragmentation needed, packet too big)", types, want)
	}
	if d := TotalDrops(r.b.Stats()); d[DropLANTooBig] != 2 {
		t.Errorf("lan_too_big = %d, want 2 (drops B %v)", d[DropLANTooBig], d.List())
	}
	if len(wb.nbrWait) != 0 {
		t.Errorf("%d frames still wait", len(wb.nbrWait))
	}
	checkNbrCount(t, wb)
}

// TestOverLANMTUFragmentOrder: a packet from the tunnel without DF and
// larger than the LAN MTU, its next hop's MAC known, is fragmented in its
// place among the burst's packets for the LAN: its fragments leave after
// the packets before it, as Linux sends a flow's packets in order (and as
// flushNeighbourWait sends them). Before, deliver sent the fragments at
// once and the burst's earlier packets after them.
func TestOverLANMTUFragmentOrder(t *testing.T) {
	o := orderRig{newRig(t, rigConfig{lanMTUB: 1280}), t}
	const small, big = 40, 1400 - header.IPv4MinLen - header.UDPLen // big: 2 fragments
	o.sendNoDF(0, small, big, small)
	o.b.workers[0].inbound(o.clock.Now())
	seqs, _ := o.receivedFragments(4)
	if want := []int{0, 1, -1, 2}; !slices.Equal(seqs, want) {
		t.Errorf("host B received %v (-1: a later fragment), want %v; drops B %v", seqs, want, TotalDrops(o.b.Stats()).List())
	}
}
