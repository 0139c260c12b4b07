package tundev

import (
	"testing"

	"github.com/wgpio/wgpio/header"
)

// TestPortDeviceICMPErrorWithinMTU: an ICMP error is held to the MTU of
// the way it goes back, as Linux's __icmp_send holds its room to the
// route's MTU (and 576, RFC 1812 §4.3.2.3): with a tunnel MTU of 400 and
// the LAN's lowered to 300 (SetLANMTU), time exceeded and fragmentation
// needed into the tunnel are at most 400 bytes, and time exceeded and
// fragmentation needed to a LAN host at most 300, each quoting as much of
// the packet as fits. Before, each quoted up to 576 bytes in all, past
// the MTU of the link it left by.
func TestPortDeviceICMPErrorWithinMTU(t *testing.T) {
	r := routerRig(t, func(c *PortConfig) { c.MTU = 400 })
	if err := r.dev.SetLANMTU(300); err != nil {
		t.Fatal(err)
	}
	// Into the tunnel: a peer-to-peer packet with DF over 400 bytes and a
	// packet at TTL 1.
	df := bigPacket(peerA, peerB, 972, true, 1)
	ttl1 := withTTL(bigPacket(peerA, hostIP, 972, false, 2), 1)
	r.dev.Write([][]byte{df, ttl1}, 0)
	got := r.readAll(t, 2, 4)
	if len(got) != 2 {
		t.Fatalf("Read %d errors, want 2 (stats %+v)", len(got), r.dev.Stats())
	}
	for _, ip := range got {
		if len(ip) > 400 || len(ip) < 300 {
			t.Errorf("error into the tunnel of %d bytes, want as much as fits the tunnel MTU 400", len(ip))
		}
	}
	// To the LAN: a host's packet at TTL 1 and one with DF over the
	// tunnel MTU (and one that goes on, for Read to return).
	ok := ipPacket(hostIP, peerA, []byte("on"))
	r.inject(t, 0, eth4(withTTL(bigPacket(hostIP, peerA, 272, true, 3), 1)), eth4(bigPacket(hostIP, peerA, 472, true, 4)), eth4(ok))
	if got := r.readAll(t, 1, 4); len(got) != 1 {
		t.Fatalf("Read %d packets, want the one that goes on", len(got))
	}
	frames := r.collect(2)
	if len(frames) != 2 {
		t.Fatalf("the LAN host received %d frames, want 2 errors (stats %+v)", len(frames), r.dev.Stats())
	}
	for _, f := range frames {
		var pk header.Packet
		if rs := header.Parse(f, &pk); rs != header.OK {
			t.Fatalf("error does not parse: %v", rs)
		}
		if n := len(f) - pk.L3Off; n > 300 || n < 200 {
			t.Errorf("error to the LAN of %d bytes, want as much as fits the LAN MTU 300", n)
		}
	}
	if s := r.dev.Stats(); s.ICMPErrors != 4 {
		t.Errorf("Stats = %+v, want 4 ICMP errors", s)
	}
}
