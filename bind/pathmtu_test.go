package bind

import (
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/arp"
	"github.com/wgpio/wgpio/dataplane/memport"
)

// TestSendPathMTU: a path MTU set toward an IPv6 endpoint (SetPathMTU,
// from a router's "packet too big") below the port's MTU makes a
// datagram to it larger than the path MTU leave as fragments within it
// that reassemble to the datagram, as Linux's kernel fragments its
// WireGuard's packets at the path MTU it learnt; datagrams to another
// endpoint, and to it within the path MTU, leave whole; forgotten (0),
// the datagram leaves whole again. IPv4 endpoints are not kept. Before,
// the Bind sent it whole, and the router on the way dropped it, every
// time.
func TestSendPathMTU(t *testing.T) {
	r := newRigPorts(t, memport.Config{MTU: 1500, RingSize: 4096}, nil)
	dst, other := netip.AddrPortFrom(peerIP6, 4321), netip.AddrPortFrom(netip.MustParseAddr("2001:2:0:9::3"), 4321)
	r.table.Set(other.Addr(), arp.MAC(macB), arp.StateReachable)
	ep, _ := r.bind.ParseEndpoint(dst.String())
	epOther, _ := r.bind.ParseEndpoint(other.String())
	if !r.bind.SetPathMTU(dst.Addr(), 1400) || !r.bind.SetPathMTU(netip.MustParseAddr("198.18.0.9"), 600) {
		t.Fatal("SetPathMTU refused")
	}
	if got := r.bind.PathMTUs(); len(got) != 1 || got[dst.Addr()] != 1400 {
		t.Fatalf("PathMTUs = %v, want %v at 1400 alone", got, dst.Addr())
	}
	big, small := fragPayload(false, 1500, 0), fragPayload(false, 1400, 1)
	if err := r.bind.Send([][]byte{big, small}, ep); err != nil {
		t.Fatal(err)
	}
	n := fragCount(1500, 48, 1400)
	got := r.collect(t, n+1, 5*time.Second)
	if len(got) != n+1 {
		t.Fatalf("peer received %d frames, want %d fragments and the datagram within the path MTU", len(got), n+1)
	}
	checkFragments(t, got[:n], 1400, dst, big, false, 0)
	if len(got[n]) != 14+1400 {
		t.Errorf("the 1,400-byte datagram left as %d bytes of frame", len(got[n]))
	}
	if err := r.bind.Send([][]byte{big}, epOther); err != nil {
		t.Fatal(err)
	}
	if got := r.collect(t, 1, 5*time.Second); len(got) != 1 || len(got[0]) != 14+1500 {
		t.Errorf("to another endpoint: %d frames, want the datagram whole", len(got))
	}
	r.bind.SetPathMTU(dst.Addr(), 0)
	if err := r.bind.Send([][]byte{big}, ep); err != nil {
		t.Fatal(err)
	}
	if got := r.collect(t, 1, 5*time.Second); len(got) != 1 || len(got[0]) != 14+1500 {
		t.Errorf("path MTU forgotten: %d frames, want the datagram whole", len(got))
	}
	if s := r.bind.Stats(); s.Fragmented != 1 || s.Fragments != uint64(n) || s.Drops.Total() != 0 {
		t.Errorf("fragmented %d, fragments %d, drops %v; want 1, %d, none", s.Fragmented, s.Fragments, s.Drops.List(), n)
	}
}

// TestSends: Sends is true for the Bind's addresses and listen port only.
func TestSends(t *testing.T) {
	r := newRigPorts(t, memport.Config{MTU: 1500, RingSize: 64}, nil)
	for _, c := range []struct {
		src  netip.Addr
		port uint16
		want bool
	}{{ourIP6, ourPort, true}, {ourIP4, ourPort, true}, {ourIP6, ourPort + 1, false}, {peerIP6, ourPort, false}} {
		if got := r.bind.Sends(c.src, c.port); got != c.want {
			t.Errorf("Sends(%v, %d) = %v, want %v", c.src, c.port, got, c.want)
		}
	}
}
