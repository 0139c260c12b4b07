package tundev

import (
	"bytes"
	"testing"

	"github.com/wgpio/wgpio/header"
)

// TestPortDeviceIPv6Off: with a tunnel MTU below 1280 the device carries
// IPv4 and no IPv6, as Linux's wg0 of that MTU, which has IPv6 off: a LAN
// host's IPv6 packet into the tunnel is answered "no route to destination"
// (ICMPv6 1/0) from our LAN address, quoting it as it came, at hop limit 1
// too (the route lookup comes before ip6_forward's checks), and counted
// as ipv6_off, never handed to wireguard-go; a decrypted IPv6 packet, for
// the LAN or peer to peer, is dropped as ipv6_off, nothing sent into the
// tunnel. IPv4 goes on both ways. Before, the IPv6 went through, and one
// over the MTU got "packet too big" with 1200, which hosts do not take
// (RFC 8201 §4).
func TestPortDeviceIPv6Off(t *testing.T) {
	r := routerRig(t, func(c *PortConfig) { c.MTU = 1200 })
	for _, hl := range []uint8{64, 1} {
		before := r.dev.Stats()
		p := withTTL(ipPacket(hostIP6, peerA6, []byte("probe")), hl)
		sentinel := ipPacket(hostIP, peerA, []byte("sentinel"))
		r.inject(t, 0, eth6(p), eth4(sentinel))
		if got := r.readAll(t, 1, 4); len(got) != 1 || !bytes.Equal(got[0], hop(sentinel)) {
			t.Fatalf("hop limit %d: Read = %x, want only the sentinel", hl, got)
		}
		replies := r.collect(1)
		if len(replies) != 1 {
			t.Fatalf("hop limit %d: host received %d frames, want the error", hl, len(replies))
		}
		ip := replies[0][header.EthernetLen:]
		var q header.Packet
		if res := header.ParseL3(ip, &q); res != header.OK || q.Proto != header.ProtoICMPv6 {
			t.Fatalf("hop limit %d: answer %x does not parse as ICMPv6 (%v)", hl, ip, res)
		}
		m := ip[q.L4Off:q.L3End]
		if q.Src != lanIP6 || q.Dst != hostIP6 || m[0] != 1 || m[1] != 0 || !bytes.Equal(m[8:], p) ||
			!header.ICMPv6(m).VerifyChecksum(header.PseudoHeaderChecksum(header.ProtoICMPv6, q.Src, q.Dst, len(m))) {
			t.Errorf("hop limit %d: ICMPv6 %v → %v type %d code %d quoting %x; want %v → %v type 1 code 0 quoting %x",
				hl, q.Src, q.Dst, m[0], m[1], m[8:], lanIP6, hostIP6, p)
		}
		if s := r.dev.Stats(); s.Drops[PortDropIPv6Off] != before.Drops[PortDropIPv6Off]+1 || s.Drops.Total() != before.Drops.Total()+1 {
			t.Errorf("hop limit %d: drops %v, want one more ipv6_off", hl, s.Drops.List())
		}
	}
	for _, dst := range []string{"LAN", "peer"} {
		before := r.dev.Stats()
		p := ipPacket(peerA6, hostIP6, []byte("to the LAN"))
		if dst == "peer" {
			p = ipPacket(peerA6, peerB6, []byte("to a peer"))
		}
		sentinel := ipPacket(peerA, hostIP, []byte("sentinel"))
		if n, err := r.dev.Write([][]byte{bytes.Clone(p), bytes.Clone(sentinel)}, 0); n != 2 || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
		if f := r.collect(1); len(f) != 1 || !bytes.Equal(f[0][header.EthernetLen:], hop(sentinel)) {
			t.Errorf("IPv6 to the %s: LAN received %x, want only the sentinel", dst, f)
		}
		s := r.dev.Stats()
		if s.Drops[PortDropIPv6Off] != before.Drops[PortDropIPv6Off]+1 || s.Drops.Total() != before.Drops.Total()+1 ||
			s.PeerToPeer != before.PeerToPeer || s.ICMPErrors != before.ICMPErrors {
			t.Errorf("IPv6 to the %s: Stats = %+v, want one more ipv6_off, nothing else", dst, s)
		}
		if n := r.dev.loop.n.Load(); n != 0 {
			t.Errorf("IPv6 to the %s: %d packets wait for the tunnel, want none", dst, n)
		}
	}
}
