package fastpath

import (
	"net/netip"
	"testing"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
)

// TestICMPBudgetNotSpentOnForbidden: TTL-1 packets that no ICMP error may
// answer (ICMP errors themselves, RFC 1812 §4.3.2.7; RFC 4443 §2.4(e))
// spend none of the rate limiter's budget and are not counted as
// suppressed, as Linux's __icmp_send applies those rules before
// icmp_global_allow: a flood of them does not silence the time exceeded
// a traceroute behind it is owed.
func TestICMPBudgetNotSpentOnForbidden(t *testing.T) {
	r := newRig(t, rigConfig{icmpRate: 100, icmpBurst: 10, icmpDest: -1})
	for _, c := range []struct{ src, dst netip.Addr }{{hostAddrA, hostAddrB}, {host6A, host6B}} {
		before := r.a.Stats()[0]
		var in []dataplane.Frame
		for range 20 {
			f := ttlFrame(t, r, c.src, c.dst, 64, 1, 0, true)
			p := f.Data()[header.EthernetLen:]
			// The UDP packet becomes an ICMP destination unreachable
			// (type 3 in both versions; ICMPv6 type 1 is also an error).
			if c.src.Is4() {
				p[9] = header.ProtoICMPv4
				p[20], p[21] = 3, 1
				header.IPv4(p).SetChecksum()
			} else {
				p[6] = header.ProtoICMPv6
				p[40], p[41] = 1, 0
			}
			in = append(in, f)
		}
		in = append(in, ttlFrame(t, r, c.src, c.dst, 64, 1, 0, true))
		_, atA := through(t, r, in...)
		s := r.a.Stats()[0]
		if got := s.Drops[DropTTLExceeded] - before.Drops[DropTTLExceeded]; got != 21 {
			t.Errorf("%v: ttl_exceeded drops = %d, want 21", c.dst, got)
		}
		if got := s.ICMPSuppressed - before.ICMPSuppressed; got != 0 {
			t.Errorf("%v: icmp suppressed = %d, want 0 (no error may answer the 20 ICMP errors)", c.dst, got)
		}
		if len(atA) != 1 {
			t.Fatalf("%v: %d answers at hostA, want 1: the time exceeded for the UDP packet after 20 ICMP errors", c.dst, len(atA))
		}
		r.clock.Advance(1e9) // refill the bucket for the next family
	}
}

// TestICMPSentRingFull: icmp_sent counts the errors the LAN port took;
// one its full ring refused counts in ring_full instead (it counted in
// both).
func TestICMPSentRingFull(t *testing.T) {
	r := newRig(t, rigConfig{icmpRate: -1, icmpDest: -1})
	const n = 640 // over the host's receive ring: it does not read meanwhile
	for range n / 64 {
		in := make([]dataplane.Frame, 64)
		for i := range in {
			in[i] = ttlFrame(t, r, hostAddrA, hostAddrB, 1472, 64, 0, true)
		}
		sendAll(t, r.hostA, 0, in)
		r.a.workers[0].outbound(r.clock.Now())
	}
	s := r.a.Stats()[0]
	got := uint64(len(drainPort(r.hostA)))
	if s.Drops[DropTooBig] != n || s.Drops[DropRingFull] == 0 {
		t.Fatalf("too_big %d, ring_full %d: want %d, and some refused", s.Drops[DropTooBig], s.Drops[DropRingFull], n)
	}
	if s.ICMPSent != got || s.ICMPSent+s.Drops[DropRingFull] != n {
		t.Errorf("icmp_sent %d, ring_full %d, %d at the host: want icmp_sent = what arrived, and the two adding up to %d",
			s.ICMPSent, s.Drops[DropRingFull], got, n)
	}
}
