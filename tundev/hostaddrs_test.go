package tundev

import (
	"bytes"
	"net/netip"
	"testing"
	"time"
)

// TestPortDeviceHostAddrs: a decrypted packet to one of the host's own
// addresses (SetHostAddrs: the LAN's, their directed broadcast, the
// tunnel's), which Linux delivers locally and forwards none of, is
// dropped as local at once: not sent to the LAN, no next hop resolved
// (the neighbour table asked nothing: the kernel's answer for a broadcast
// address never reaches the table, and the host's own never answers, so
// Write waited ResolveWait and held up the peer's packets behind it), no
// ICMP error; one at TTL 1 too (Linux checks the TTL of forwarded packets
// only), and one inside a peer's allowed IPs (the local table comes
// first). A packet to a LAN host beside them is forwarded. With the set
// cleared, the broadcast goes to resolution again (no_neighbour).
func TestPortDeviceHostAddrs(t *testing.T) {
	r := routerRig(t, func(c *PortConfig) { c.ResolveWait = 20 * time.Millisecond })
	a := netip.MustParseAddr
	bcast, inAllowed := a("198.18.11.255"), a("198.18.41.1")
	r.dev.SetHostAddrs([]netip.Addr{lanIP, lanIP6, bcast, tunIP, inAllowed})
	const off = 16
	pkts := [][]byte{
		ipPacket(peerA, bcast, []byte("all")),
		ipPacket(peerA, lanIP, []byte("me")),
		ipPacket(peerA6, lanIP6, []byte("me6")),
		ipPacket(peerA, tunIP, []byte("tunnel address")),
		ipPacket(peerA, inAllowed, []byte("mine, in a peer's allowed IPs")),
		withTTL(ipPacket(peerA, lanIP, []byte("ttl 1")), 1),
		ipPacket(peerA, hostIP, []byte("a LAN host")),
	}
	bufs := make([][]byte, len(pkts))
	for i, p := range pkts {
		bufs[i] = append(make([]byte, off), p...)
	}
	entries := r.tbl.Len()
	if n, err := r.dev.Write(bufs, off); n != len(bufs) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	got := r.collect(1)
	if len(got) != 1 || !bytes.Equal(got[0][14:], hop(pkts[len(pkts)-1])) {
		t.Errorf("LAN received %d frames, want only the packet to %v", len(got), hostIP)
	}
	if n := r.dev.loop.n.Load(); n != 0 {
		t.Errorf("%d packets wait for Read (ICMP errors, peer to peer), want none", n)
	}
	if n := r.tbl.Len(); n != entries {
		t.Errorf("neighbour table: %d entries after Write, %d before: a next hop was resolved for the host's addresses", n, entries)
	}
	s := r.dev.Stats()
	if s.Drops[PortDropLocal] != 6 || s.Drops.Total() != 6 || s.ICMPErrors != 0 || s.TXPackets != 1 {
		t.Errorf("Stats = %+v, want 6 local drops and no other, no ICMP error, 1 sent", s)
	}

	r.dev.SetHostAddrs(nil)
	if n, err := r.dev.Write(bufs[:1], off); n != 1 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if s := r.dev.Stats(); s.Drops[PortDropLocal] != 6 || s.Drops[PortDropNoNeighbour] != 1 {
		t.Errorf("with no host addresses, a packet to %v: drops %v, want it no_neighbour as before", bcast, s.Drops.List())
	}
}
