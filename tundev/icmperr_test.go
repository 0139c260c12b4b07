package tundev

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/icmprate"
)

// badRR is an IPv4 packet whose record route option is too short (length
// 2): Linux's ip_options_compile answers it with parameter problem
// pointing at the length octet, offset 21.
func badRR(src, dst netip.Addr) []byte {
	return withOptions(ipPacket(src, dst, []byte("rr")), []byte{0x07, 2, 0, 0})
}

// withOptions is the IPv4 packet p (no options) with opts (a multiple of 4
// bytes) after its fixed header.
func withOptions(p, opts []byte) []byte {
	q := append(append(append([]byte{0x45 + byte(len(opts)/4)}, p[1:20]...), opts...), p[20:]...)
	binary.BigEndian.PutUint16(q[2:4], uint16(len(q)))
	header.IPv4(q).SetChecksum()
	return q
}

// unknownHBH is an IPv6 packet with a hop-by-hop option of unknown type
// 0x80 (action 10: discard and answer, RFC 8200 §4.2), which Linux's
// ip6_parse_tlv answers with parameter problem code 2 pointing at the
// option's type, offset 42.
func unknownHBH(src, dst netip.Addr) []byte {
	p := ipPacket(src, dst, []byte("hbh"))
	hbh := []byte{17, 0, 0x80, 4, 0, 0, 0, 0}
	q := append(append(bytes.Clone(p[:40]), hbh...), p[40:]...)
	q[6] = 0 // next header: hop-by-hop
	binary.BigEndian.PutUint16(q[4:6], uint16(len(q)-40))
	return q
}

// checkParamProblem checks that ip is parameter problem from src to dst
// with pointer ptr (and ICMPv6 code 2) quoting the offending packet p.
func checkParamProblem(t *testing.T, ip []byte, src, dst netip.Addr, ptr uint32, p []byte) {
	t.Helper()
	var pk header.Packet
	if rs := header.ParseIP(ip, &pk); rs != header.OK {
		t.Fatalf("error does not parse: %v", rs)
	}
	if pk.Src != src || pk.Dst != dst {
		t.Errorf("error %v → %v, want %v → %v", pk.Src, pk.Dst, src, dst)
	}
	if src.Is4() {
		m := header.ICMPv4(ip[20:])
		if m.Type() != 12 || m.Code() != 0 || !m.VerifyChecksum() || uint32(m[4]) != ptr || !bytes.Equal(m[8:], p) {
			t.Errorf("ICMPv4 %x, want parameter problem pointer %d quoting %x", ip, ptr, p)
		}
		return
	}
	m := header.ICMPv6(ip[40:])
	if m.Type() != 4 || m.Code() != 2 || binary.BigEndian.Uint32(m[4:8]) != ptr || !bytes.Equal(m[8:], p) {
		t.Errorf("ICMPv6 %x, want parameter problem code 2 pointer %d quoting %x", ip, ptr, p)
	}
}

// TestPortDeviceParamProblemLAN: a LAN host's packet with options Linux
// answers is dropped as ip_options and answered with parameter problem
// from our LAN address to the host's MAC; a source route (which Linux
// drops silently) gets no answer.
func TestPortDeviceParamProblemLAN(t *testing.T) {
	r := routerRig(t, nil)
	p4, p6 := badRR(hostIP, peerA), unknownHBH(hostIP6, peerA6)
	sentinel := ipPacket(hostIP, peerA, []byte("sentinel"))
	r.inject(t, 0, eth4(p4), eth6(p6), eth4(lsrr(hostIP, peerA)), eth4(sentinel))
	if got := r.readAll(t, 1, 4); len(got) != 1 || !bytes.Equal(got[0], hop(sentinel)) {
		t.Fatalf("Read = %x, want only the sentinel", got)
	}
	replies := r.collect(3)
	if len(replies) != 2 {
		t.Fatalf("host received %d frames, want 2 parameter problems", len(replies))
	}
	for _, f := range replies {
		if !bytes.Equal(f[0:6], macHost) || !bytes.Equal(f[6:12], macGW) {
			t.Errorf("reply %x: not from the gateway's MAC to the host's", f[:12])
		}
		ip := f[header.EthernetLen:]
		if ip[0]>>4 == 4 {
			checkParamProblem(t, ip, lanIP, hostIP, 21, p4)
		} else {
			checkParamProblem(t, ip, lanIP6, hostIP6, 42, p6)
		}
	}
	if s := r.dev.Stats(); s.Drops[PortDropIPOptions] != 3 || s.ICMPErrors != 2 {
		t.Errorf("Stats = %+v, want 3 ip_options, 2 ICMP errors", s)
	}
}

// TestPortDeviceParamProblemTunnel: a decrypted packet with options Linux
// answers does not reach the LAN: Read hands wireguard-go parameter
// problem from our tunnel address to the packet's source.
func TestPortDeviceParamProblemTunnel(t *testing.T) {
	r := routerRig(t, nil)
	const off = 16
	p4, p6 := badRR(peerA, hostIP), unknownHBH(peerA6, hostIP6)
	bufs := [][]byte{append(make([]byte, off), p4...), append(make([]byte, off), p6...), append(make([]byte, off), lsrr(peerA, hostIP)...)}
	if n, err := r.dev.Write(bufs, off); n != 3 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	got := r.readAll(t, 2, 4)
	if len(got) != 2 {
		t.Fatalf("Read %d packets, want 2 parameter problems", len(got))
	}
	for _, ip := range got {
		if ip[0]>>4 == 4 {
			checkParamProblem(t, ip, tunIP, peerA, 21, p4)
		} else {
			checkParamProblem(t, ip, tunIP6, peerA6, 42, p6)
		}
	}
	if f := r.collect(1); len(f) != 0 {
		t.Errorf("LAN received %d frames, want none", len(f))
	}
	if s := r.dev.Stats(); s.Drops[PortDropIPOptions] != 3 || s.ICMPErrors != 2 || s.TXPackets != 0 {
		t.Errorf("Stats = %+v, want 3 ip_options, 2 ICMP errors, nothing sent", s)
	}
}

// TestPortDeviceParamProblemRateLimit: parameter problem to one source
// follows Linux's per-destination limit (a burst of 6), the rest counted
// as suppressed; for IPv6 the interval is shortened by the route back,
// but not the burst.
func TestPortDeviceParamProblemRateLimit(t *testing.T) {
	r := routerRig(t, func(c *PortConfig) { c.ICMPRate = icmprate.Config{Rate: -1, DestInterval: burstOnly} })
	const n = 10
	var frames [][]byte
	for range n {
		frames = append(frames, eth4(badRR(hostIP, peerA)))
	}
	sentinel := ipPacket(hostIP, peerA, []byte("last"))
	r.inject(t, 0, append(frames, eth4(sentinel))...)
	if got := r.readAll(t, 1, 4); len(got) != 1 {
		t.Fatalf("Read %d packets, want the sentinel", len(got))
	}
	if got := r.collect(icmprate.DestBurst + 1); len(got) != icmprate.DestBurst {
		t.Errorf("host received %d errors, want %d", len(got), icmprate.DestBurst)
	}
	if s := r.dev.Stats(); s.Drops[PortDropIPOptions] != n || s.ICMPErrors != icmprate.DestBurst || s.ICMPSuppressed != n-icmprate.DestBurst {
		t.Errorf("Stats = %+v, want %d ip_options, %d errors, %d suppressed", s, n, icmprate.DestBurst, n-icmprate.DestBurst)
	}
}

// TestPortDeviceErrorRoutedToSource: an error about a LAN packet goes
// where Linux routes it, by the packet's source: to the MAC of the source's
// next hop by Routes (the router 198.18.12.0/24 lies behind, not the
// other host the frame came from), to the frame's Ethernet source while
// the next hop's MAC is unknown, and into the tunnel for a source a
// peer's allowed IPs take. Before, each went to the frame's source.
func TestPortDeviceErrorRoutedToSource(t *testing.T) {
	r := routerRig(t, nil)
	other := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x99}
	unknown := netip.MustParseAddr("198.18.11.50") // on-link, no neighbour entry
	peerSrc := netip.MustParseAddr("198.18.11.70") // the tunnel's /28 inside the LAN's /24
	frame := func(src netip.Addr) []byte {
		return ethFrame(macGW, other, 0x0800, withTTL(ipPacket(src, peerB, []byte("probe")), 1))
	}
	r.inject(t, 0, frame(farIP), frame(unknown), frame(peerSrc))
	// Read blocks while it has nothing: each round a sentinel it returns,
	// after which the error into the tunnel is looked for among what
	// it returned (it may come a call later than the frames).
	sentinel := ipPacket(hostIP, peerA, []byte("sentinel"))
	var pk header.Packet
	var toTunnel int
	for range 2 {
		r.inject(t, 0, eth4(sentinel))
		for _, ip := range r.readAll(t, 1, 4) {
			if bytes.Equal(ip, hop(sentinel)) {
				continue
			}
			toTunnel++
			if rs := header.ParseIP(ip, &pk); rs != header.OK || pk.Src != tunIP || pk.Dst != peerSrc {
				t.Errorf("into the tunnel: %v %v → %v, want %v → %v", rs, pk.Src, pk.Dst, tunIP, peerSrc)
			}
		}
	}
	if toTunnel != 1 {
		t.Errorf("%d errors into the tunnel, want 1", toTunnel)
	}
	replies := r.collect(2)
	if len(replies) != 2 {
		t.Fatalf("LAN received %d frames, want 2 errors", len(replies))
	}
	for _, f := range replies {
		if rs := header.Parse(f, &pk); rs != header.OK {
			t.Fatalf("reply does not parse: %v", rs)
		}
		want := map[netip.Addr]net.HardwareAddr{farIP: macHost, unknown: other}[pk.Dst]
		if want == nil || !bytes.Equal(f[0:6], want) {
			t.Errorf("error to %v sent to MAC %x, want %x", pk.Dst, f[0:6], want)
		}
	}
}
