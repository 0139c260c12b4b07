package tundev

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/header"
)

// TestPortDeviceNoNeighbourAnswered: a decrypted packet whose LAN next hop
// does not resolve is dropped as no_neighbour and answered into the
// tunnel (Read hands it to wireguard-go) with host unreachable (type 3
// code 1) or address unreachable (type 1 code 3) from our tunnel address
// to the packet's source, quoting the packet after the hop, as Linux's
// neighbour layer answers the packets it queued. Before, the sender got
// no answer.
func TestPortDeviceNoNeighbourAnswered(t *testing.T) {
	r := routerRig(t, func(c *PortConfig) { c.ResolveWait = 20 * time.Millisecond })
	const off = 16
	p4 := ipPacket(peerA, netip.MustParseAddr("198.18.11.99"), []byte("nobody"))
	p6 := ipPacket(peerA6, netip.MustParseAddr("2001:2:0:11::99"), []byte("nobody"))
	bufs := [][]byte{append(make([]byte, off), p4...), append(make([]byte, off), p6...)}
	if n, err := r.dev.Write(bufs, off); n != 2 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	// Both answers wait in the loop queue once Write returns (Read would
	// block for good on an empty one).
	if n := r.dev.loop.n.Load(); n != 2 {
		t.Fatalf("%d packets wait for Read, want 2 unreachable errors (stats %+v)", n, r.dev.Stats())
	}
	got := r.readAll(t, 2, 4)
	if len(got) != 2 {
		t.Fatalf("Read %d packets, want 2 unreachable errors", len(got))
	}
	for _, ip := range got {
		var pk header.Packet
		if rs := header.ParseIP(ip, &pk); rs != header.OK {
			t.Fatalf("error does not parse: %v", rs)
		}
		src, dst, typ, code, quote := tunIP, peerA, uint8(3), uint8(1), hop(p4)
		if pk.Dst.Is6() {
			src, dst, typ, code, quote = tunIP6, peerA6, 1, 3, hop(p6)
		}
		m := ip[pk.L4Off:]
		if pk.Src != src || pk.Dst != dst || m[0] != typ || m[1] != code || !bytes.Equal(m[8:], quote) {
			t.Errorf("error %v → %v type %d code %d quoting %x; want %v → %v type %d code %d quoting %x",
				pk.Src, pk.Dst, m[0], m[1], m[8:], src, dst, typ, code, quote)
		}
	}
	if f := r.collect(1); len(f) != 0 {
		t.Errorf("LAN received %d frames, want none", len(f))
	}
	if s := r.dev.Stats(); s.Drops[PortDropNoNeighbour] != 2 || s.ICMPErrors != 2 {
		t.Errorf("Stats = %+v, want 2 no_neighbour, 2 ICMP errors", s)
	}
}

// TestPortDeviceNoNeighbourBroadcast: a decrypted packet to the directed
// broadcast address of the LAN's route (198.18.11.255 of 198.18.11.0/24),
// which no neighbour answers for, is dropped as no_neighbour without an
// answer: no ICMP error answers a packet to a broadcast address (RFC 1812
// §4.3.2.7). One to a host of the LAN that does not answer still gets
// one.
func TestPortDeviceNoNeighbourBroadcast(t *testing.T) {
	r := routerRig(t, func(c *PortConfig) { c.ResolveWait = 20 * time.Millisecond })
	const off = 16
	bcast := ipPacket(peerA, netip.MustParseAddr("198.18.11.255"), []byte("all"))
	host := ipPacket(peerA, netip.MustParseAddr("198.18.11.99"), []byte("one"))
	bufs := [][]byte{append(make([]byte, off), bcast...), append(make([]byte, off), host...)}
	if n, err := r.dev.Write(bufs, off); n != 2 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if n := r.dev.loop.n.Load(); n != 1 {
		t.Fatalf("%d errors wait for Read, want 1 (for 198.18.11.99 only)", n)
	}
	got := r.readAll(t, 1, 4)
	if len(got) != 1 || !bytes.Equal(got[0][28:], hop(host)[:len(got[0])-28]) {
		t.Errorf("Read %x, want host unreachable quoting the packet to 198.18.11.99", got)
	}
	if s := r.dev.Stats(); s.Drops[PortDropNoNeighbour] != 2 || s.ICMPErrors != 1 {
		t.Errorf("Stats = %+v, want 2 no_neighbour, 1 ICMP error", s)
	}
}
