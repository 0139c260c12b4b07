package fastpath

import (
	"bytes"
	"net/netip"
	"testing"
)

// TestUnreachableFromWAN: a WAN host's packet that the host's kernel
// forwarded into the exception interface (to the tunnel's prefix, no peer
// holds its destination) is answered as Linux's wg0 answers it: host
// unreachable (ICMP 3/1, ICMPv6 1/3) from our WAN address, out of the WAN
// to the next hop toward its source, under the per-destination limit (6
// at once to one source). It went to the host from the very address that
// could not be reached, which the host's kernel then routed out of the
// WAN as its source, under the global limit only: 20 for 20 packets.
func TestUnreachableFromWAN(t *testing.T) {
	r := newRig(t, rigConfig{noKeys: true, wan6: true, tunnelAddrs: []netip.Addr{netip.MustParseAddr("198.19.100.1")},
		exception: func(p []byte) { t.Errorf("an error to the host: %x", p) }})
	r.a.lanLens = &wanDefault{} // the WAN host's source is routed off the LAN
	var mB [6]byte
	copy(mB[:], r.wanB.MAC())
	r.a.cfg.WANResolver.(*staticResolver).def = mB
	for _, c := range []struct {
		ip       []byte
		from     netip.Addr
		typ, cod uint8
	}{
		{lowered(ip4{src: "198.18.77.5", dst: "198.19.100.9"}.bytes()), wanAddrA, 3, 1},
		{lowered(ip6{src: "2001:db8:77::5", dst: "2001:db8:100::9"}.bytes()), wan6A, 1, 3},
	} {
		before := r.a.Stats()[0]
		for range 20 {
			if !r.a.SendTunnel(0, c.ip) {
				t.Fatal("SendTunnel: mailbox full")
			}
		}
		r.a.workers[0].drainMailbox(r.clock.Now())
		s := r.a.Stats()[0]
		if d, sent, sup := s.Drops[DropNoRoute]-before.Drops[DropNoRoute], s.ICMPSent-before.ICMPSent, s.ICMPSuppressed-before.ICMPSuppressed; d != 20 || sent != 6 || sup != 14 {
			t.Fatalf("%x: no_route %d icmp %d suppressed %d, want 20 6 14", c.ip, d, sent, sup)
		}
		wan := drainPort(r.wanB)
		if len(wan) != 6 || len(drainPort(r.hostA)) != 0 {
			t.Fatalf("%x: %d errors out of the WAN, want 6", c.ip, len(wan))
		}
		if b := parseICMPBack(t, wan[0]); b.typ != c.typ || b.code != c.cod || b.src != c.from || !bytes.Equal(b.quote, c.ip) || b.dstMAC != mB || !b.checksumOK {
			t.Errorf("WAN got type %d code %d from %v to %x quoting %x (checksum ok %v), want %d %d from %v to %x quoting %x",
				b.typ, b.code, b.src, b.dstMAC, b.quote, b.checksumOK, c.typ, c.cod, c.from, mB, c.ip)
		}
	}
}
