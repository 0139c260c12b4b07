package fastpath

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
)

// TestICMPErrorRoutedToSource: an error about a packet from the LAN goes
// where Linux routes it, by its source address: to the MAC the LAN
// resolver gives for the source (here another router than the one the
// packet came through, as with asymmetric routes, or the real owner of a
// spoofed address), into the tunnel for a source that a peer's allowed
// IPs take, and to the frame's Ethernet source only while the source's
// MAC is unknown. Before, every error went to the frame's Ethernet
// source.
func TestICMPErrorRoutedToSource(t *testing.T) {
	r := newRig(t, rigConfig{})
	other := netip.MustParseAddr("198.19.1.77") // behind another LAN router
	res := r.a.cfg.LANResolver.(*staticResolver)
	res.mu.Lock()
	res.m = map[netip.Addr][6]byte{other: [6]byte(mac(0x77))}
	res.def = [6]byte{} // nothing else resolves
	res.mu.Unlock()

	for _, c := range []struct {
		name    string
		src     netip.Addr
		wantMAC []byte // at hostA; nil: the error reaches hostB through the tunnel
		from    netip.Addr
	}{
		{"resolved next hop", other, mac(0x77), lanAddrA},
		{"unresolved: the frame's source", hostAddrA, mac(0x0a), lanAddrA},
		{"unresolved IPv6: the frame's source", host6A, mac(0x0a), lan6A},
		{"a peer's address: into the tunnel", netip.MustParseAddr("198.19.2.99"), nil, lanAddrA},
	} {
		dst := hostAddrB
		if c.src.Is6() {
			dst = host6B
		}
		atB, atA := through(t, r, ttlFrame(t, r, c.src, dst, 100, 1, 0, true))
		got := atA
		if c.wantMAC == nil {
			got = atB
			if len(atA) != 0 {
				t.Errorf("%s: %d frames back at hostA, want none", c.name, len(atA))
			}
		} else if len(atB) != 0 {
			t.Errorf("%s: %d frames at hostB, want none", c.name, len(atB))
		}
		if len(got) != 1 {
			t.Fatalf("%s: %d errors, want 1 (A %v)", c.name, len(got), r.a.Stats()[0].Drops.List())
		}
		var p header.Packet
		if rr := header.Parse(got[0], &p); rr != header.OK || p.Src != c.from || p.Dst != c.src {
			t.Errorf("%s: error %v from %v to %v, want from %v to %v", c.name, rr, p.Src, p.Dst, c.from, c.src)
		}
		if c.wantMAC != nil && !bytes.Equal(got[0][:6], c.wantMAC) {
			t.Errorf("%s: error to MAC %x, want %x", c.name, got[0][:6], c.wantMAC)
		}
	}
}

// TestICMPErrorBudgetBeforeResolve: a flood of packets from ever new LAN
// sources that each earn an error (TTL 1) asks the LAN resolver only for
// the errors the rate limit lets through. Before, each packet's source was
// resolved (in fastgw a lock and an ARP request) before the limit was
// asked.
func TestICMPErrorBudgetBeforeResolve(t *testing.T) {
	r := newRig(t, rigConfig{icmpRate: 1, icmpBurst: 5})
	res := r.a.cfg.LANResolver.(*staticResolver)
	res.mu.Lock()
	res.def = [6]byte{} // nothing resolves: every error would ask
	res.mu.Unlock()
	var frames []dataplane.Frame
	for i := range 100 {
		src := netip.AddrFrom4([4]byte{198, 19, 1, byte(100 + i)})
		frames = append(frames, ttlFrame(t, r, src, hostAddrB, 40, 1, 0, true))
	}
	_, atA := through(t, r, frames...)
	res.mu.Lock()
	calls := res.calls
	res.mu.Unlock()
	if len(atA) > 5 || calls > len(atA) {
		t.Errorf("%d errors sent, %d resolutions asked for 100 packets; want at most the burst (5) of each", len(atA), calls)
	}
}
