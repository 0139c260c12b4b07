package fastpath

import (
	"bytes"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
)

// TestIPv6OffBelow1280: a tunnel MTU below 1280 (gateway B at 1200, with
// IPv6 endpoints) carries IPv4 and no IPv6, as Linux's wg0 of that MTU,
// which has IPv6 off (no IPv6 route into it, the IPv6 packets it receives
// dropped): a LAN host's IPv6 packet to a peer's prefix is answered "no
// route to destination" (ICMPv6 1/0) from our LAN address, at hop limit 1
// too (the route lookup comes first), and counted as ipv6_off, nothing
// sealed; the peer's IPv6 packet (A at 1280 sends it) is dropped as
// ipv6_off, unanswered, nothing delivered; the host's (SendTunnel) too.
// IPv4 goes both ways. Before, the IPv6 went through up to 1200 bytes, and
// a larger one was answered "packet too big" with 1200, which hosts do
// not take below 1280 (RFC 8201 §4): their flows stalled.
func TestIPv6OffBelow1280(t *testing.T) {
	r := newRig(t, rigConfig{wan6: true, mtu: 1280, mtuB: 1200})
	if !r.b.no6() || r.a.no6() {
		t.Fatalf("no6: A %v B %v, want false true", r.a.no6(), r.b.no6())
	}
	now := r.clock.Now()
	for _, c := range []struct {
		name string
		ip   []byte
	}{
		{"IPv6", ip6{src: pB6, dst: pA6}.bytes()},
		{"IPv6 hop limit 1", ip6{src: pB6, dst: pA6, hl: 1}.bytes()},
		{"IPv6 to no peer", ip6{src: pB6, dst: "2001:db8:9::10"}.bytes()},
	} {
		before := r.b.Stats()[0]
		sendAll(t, r.hostB, 0, []dataplane.Frame{ipFrame(t, r.hostB.Queue(0).TX(), r.lanB.MAC(), r.hostB.MAC(), c.ip)})
		r.b.workers[0].outbound(now)
		s := r.b.Stats()[0]
		back := drainPort(r.hostB)
		if len(back) != 1 {
			t.Fatalf("%s: hostB got %d frames, want 1; drops %v", c.name, len(back), s.Drops.List())
		}
		b := parseICMPBack(t, back[0])
		if b.typ != 1 || b.code != 0 || b.src != lan6B || !b.checksumOK || !bytes.Equal(b.quote, c.ip) {
			t.Errorf("%s: answer type %d code %d from %v (checksum ok %v), quote %x; want 1 0 from %v quoting %x",
				c.name, b.typ, b.code, b.src, b.checksumOK, b.quote, lan6B, c.ip)
		}
		if s.Drops[DropIPv6Off]-before.Drops[DropIPv6Off] != 1 || s.Drops.Total()-before.Drops.Total() != 1 || s.Encrypted != before.Encrypted {
			t.Errorf("%s: drops %v, encrypted %d; want ipv6_off = 1, none sealed", c.name, s.Drops.List(), s.Encrypted-before.Encrypted)
		}
	}

	// From the peer: A (1280) seals IPv6 and IPv4; B delivers the IPv4.
	before := r.b.Stats()[0]
	sendAll(t, r.hostA, 0, []dataplane.Frame{
		ipFrame(t, r.hostA.Queue(0).TX(), r.lanA.MAC(), r.hostA.MAC(), ip6{src: pA6, dst: pB6}.bytes()),
		ipFrame(t, r.hostA.Queue(0).TX(), r.lanA.MAC(), r.hostA.MAC(), ip4{src: pA, dst: pB}.bytes()),
	})
	r.a.workers[0].outbound(now)
	r.b.workers[0].inbound(now)
	got := drainPort(r.hostB)
	s := r.b.Stats()[0]
	if len(got) != 1 || got[0][12] != 0x08 || got[0][13] != 0x00 {
		t.Errorf("peer's packets: hostB got %d frames, want the IPv4 one alone; drops %v", len(got), s.Drops.List())
	}
	if s.Decrypted-before.Decrypted != 2 || s.Drops[DropIPv6Off]-before.Drops[DropIPv6Off] != 1 || s.ICMPSent != before.ICMPSent {
		t.Errorf("peer's packets: decrypted %d, drops %v, icmp %d; want 2, ipv6_off = 1, no ICMP",
			s.Decrypted-before.Decrypted, s.Drops.List(), s.ICMPSent-before.ICMPSent)
	}
	if n := recvAll(t, r.wanA, 1, 20*time.Millisecond, nil); n != 0 {
		t.Errorf("B sent %d datagrams back to A, want none", n)
	}

	// IPv4 from B's LAN is sealed (B's keys confirmed by A's data).
	before = r.b.Stats()[0]
	sendAll(t, r.hostB, 0, []dataplane.Frame{ipFrame(t, r.hostB.Queue(0).TX(), r.lanB.MAC(), r.hostB.MAC(), ip4{src: pB, dst: pA}.bytes())})
	r.b.workers[0].outbound(now)
	if s := r.b.Stats()[0]; s.Encrypted-before.Encrypted != 1 {
		t.Errorf("IPv4 from B's LAN: encrypted %d, want 1; drops %v", s.Encrypted-before.Encrypted, s.Drops.List())
	}
	r.a.workers[0].inbound(now)
	drainPort(r.hostA)

	// The host's own IPv6 into the tunnel.
	before = r.b.Stats()[0]
	r.b.SendTunnel(0, ip6{src: pB6, dst: pA6}.bytes())
	r.b.workers[0].drainMailbox(now)
	if s := r.b.Stats()[0]; s.Drops[DropIPv6Off]-before.Drops[DropIPv6Off] != 1 || s.Encrypted != before.Encrypted {
		t.Errorf("SendTunnel IPv6: drops %v, encrypted %d; want ipv6_off = 1, none sealed", s.Drops.List(), s.Encrypted-before.Encrypted)
	}
}
