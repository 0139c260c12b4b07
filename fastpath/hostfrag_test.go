package fastpath

import (
	"bytes"
	"testing"
	"time"

	"github.com/wgpio/wgpio/header"
)

// hostFragments is innerUDP's packet of n payload bytes cut into
// fragments of at most mtu bytes, as the host's stack cuts what it sends
// through the exception TUN when it exceeds the TUN's MTU.
func hostFragments(t *testing.T, r *rig, v6 bool, n, mtu int) [][]byte {
	t.Helper()
	p := innerUDP(t, r, v6, n, 9)
	var out [][]byte
	if v6 {
		var fr header.IPv6Fragmenter
		if why := fr.Reset(p, mtu, 0x5eed); why != header.OK {
			t.Fatalf("IPv6Fragmenter.Reset: %v", why)
		}
		for i := 1; i < fr.Count(); i++ {
			b := make([]byte, fr.Len(i))
			out = append(out, b[:fr.Put(b, i)])
		}
		b := make([]byte, fr.Len(0))
		return append([][]byte{b[:fr.PutFirst(b)]}, out...)
	}
	var fr header.IPv4Fragmenter
	if why := fr.Reset(p, mtu); why != header.OK {
		t.Fatalf("IPv4Fragmenter.Reset: %v", why)
	}
	for i := 1; i < fr.Count(); i++ {
		b := make([]byte, fr.Len(i))
		out = append(out, b[:fr.Put(b, i)])
	}
	return append([][]byte{p[:fr.PutFirst()]}, out...)
}

// TestHostFragmentsIntoTunnel: the host's own packet over the tunnel MTU
// reaches the exception TUN as IP fragments (the kernel cuts it there, as
// it would on wg0), and each fragment is sealed into the tunnel as a
// packet of its own, as wg0 seals it. sendInner parsed them as whole
// datagrams and dropped every one as inner_malformed: a ping of 1,393
// bytes or more to the gateway's tunnel address went unanswered.
func TestHostFragmentsIntoTunnel(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		name := "ipv4"
		if v6 {
			name = "ipv6"
		}
		t.Run(name, func(t *testing.T) {
			r := newRig(t, rigConfig{})
			frags := hostFragments(t, r, v6, 2400, 1280)
			if len(frags) < 2 {
				t.Fatalf("%d fragments, want 2 or more", len(frags))
			}
			for _, p := range frags {
				if !r.a.SendTunnel(0, p) {
					t.Fatal("SendTunnel refused")
				}
			}
			r.a.workers[0].drainMailbox(r.clock.Now())
			if d := TotalDrops(r.a.Stats()); d.Total() != 0 {
				t.Fatalf("A dropped the host's fragments: %v", d.List())
			}
			r.b.workers[0].inbound(r.clock.Now())
			var got [][]byte
			recvAll(t, r.hostB, len(frags), 100*time.Millisecond, func(_ int, d []byte) {
				got = append(got, bytes.Clone(d[header.EthernetLen:]))
			})
			if len(got) != len(frags) {
				t.Fatalf("B delivered %d of %d fragments; drops A %v, B %v", len(got), len(frags),
					TotalDrops(r.a.Stats()).List(), TotalDrops(r.b.Stats()).List())
			}
			for i, want := range frags {
				// B forwards as a router: one hop less (and the IPv4
				// checksum to match); the rest is the fragment sent.
				g, w := bytes.Clone(got[i]), bytes.Clone(want)
				if v6 {
					g[7], w[7] = 0, 0
				} else {
					g[8], g[10], g[11], w[8], w[10], w[11] = 0, 0, 0, 0, 0, 0
				}
				if !bytes.Equal(g, w) {
					t.Fatalf("fragment %d delivered as\n%x\nwant\n%x", i, got[i], want)
				}
			}
		})
	}
}
