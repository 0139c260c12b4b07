package arp

import (
	"errors"
	"net/netip"
	"testing"
	"time"
)

func newTestResponder(t testing.TB, tb *Table, skipDAD bool) *Responder {
	t.Helper()
	r, err := NewResponder(ResponderConfig{MAC: macA, Addrs: []netip.Addr{ip4A, ip6A}, SkipDAD: skipDAD, Table: tb})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func arpFrame(t testing.TB, p ARP) []byte {
	t.Helper()
	b := make([]byte, MinFrameLen)
	if _, err := p.Marshal(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestResponderARP(t *testing.T) {
	other := netip.MustParseAddr("198.18.0.77")
	tests := []struct {
		name   string
		in     ARP
		want   Reason
		reply  bool
		learnt bool
	}{
		{"broadcast request for us", ARP{EthDst: Broadcast, EthSrc: macB, Op: ARPRequest, SenderMAC: macB, SenderIP: ip4B, TargetIP: ip4A}, ReasonNone, true, true},
		{"unicast request for us", ARP{EthDst: macA, EthSrc: macB, Op: ARPRequest, SenderMAC: macB, SenderIP: ip4B, TargetMAC: macA, TargetIP: ip4A}, ReasonNone, true, true},
		{"probe from 0.0.0.0", ARP{EthDst: Broadcast, EthSrc: macB, Op: ARPRequest, SenderMAC: macB, SenderIP: netip.IPv4Unspecified(), TargetIP: ip4A}, ReasonNone, true, false},
		{"request for another", ARP{EthDst: Broadcast, EthSrc: macB, Op: ARPRequest, SenderMAC: macB, SenderIP: ip4B, TargetIP: other}, ReasonNotOurAddress, false, false},
		{"request to another mac", ARP{EthDst: MAC{2, 9, 9, 9, 9, 9}, EthSrc: macB, Op: ARPRequest, SenderMAC: macB, SenderIP: ip4B, TargetIP: ip4A}, ReasonNotForUs, false, false},
		{"broadcast reply", ARP{EthDst: Broadcast, EthSrc: macB, Op: ARPReply, SenderMAC: macB, SenderIP: ip4B, TargetIP: ip4A}, ReasonNotForUs, false, false},
		{"multicast source", ARP{EthDst: Broadcast, EthSrc: MAC{3, 0, 0, 0, 0, 1}, Op: ARPRequest, SenderMAC: macB, SenderIP: ip4B, TargetIP: ip4A}, ReasonSourceMAC, false, false},
		{"multicast sender", ARP{EthDst: Broadcast, EthSrc: macB, Op: ARPRequest, SenderMAC: Broadcast, SenderIP: ip4B, TargetIP: ip4A}, ReasonSourceMAC, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb, _, _ := newTestTable()
			r := newTestResponder(t, tb, true)
			out := make([]byte, 128)
			n, rs := r.Handle(arpFrame(t, tt.in), out)
			if rs != tt.want || (n > 0) != tt.reply {
				t.Fatalf("Handle(%s) = %d, %v, want reply %v, %v", tt.name, n, rs, tt.reply, tt.want)
			}
			if rs != ReasonNone && r.Drops(rs) != 1 {
				t.Errorf("Drops(%v) = %d, want 1", rs, r.Drops(rs))
			}
			if st, _ := tb.State(ip4B); (st != StateNone) != tt.learnt {
				t.Errorf("State(%v) = %v, want learnt %v", ip4B, st, tt.learnt)
			}
			if !tt.reply {
				return
			}
			got, rs := ParseARP(out[:n])
			want := ARP{EthDst: macB, EthSrc: macA, Op: ARPReply, SenderMAC: macA, SenderIP: ip4A, TargetMAC: macB, TargetIP: tt.in.SenderIP}
			if rs != ReasonNone || got != want {
				t.Errorf("reply = %+v, %v, want %+v", got, rs, want)
			}
		})
	}
}

func TestResponderARPReplyConfirms(t *testing.T) {
	tb, _, _ := newTestTable()
	r := newTestResponder(t, tb, true)
	tb.Resolve(ip4B)
	out := make([]byte, 128)
	if n, rs := r.Handle(arpFrame(t, ARP{EthDst: macA, EthSrc: macB, Op: ARPReply, SenderMAC: macB, SenderIP: ip4B, TargetMAC: macA, TargetIP: ip4A}), out); n != 0 || rs != ReasonNone {
		t.Fatalf("Handle(reply) = %d, %v, want 0, none", n, rs)
	}
	checkState(t, tb, ip4B, StateReachable)
	// Another host using our address is a conflict, and its frame is
	// dropped as one (it was counted as not-our-address, which it is the
	// opposite of).
	if _, rs := r.Handle(arpFrame(t, ARP{EthDst: Broadcast, EthSrc: macB, Op: ARPRequest, SenderMAC: macB, SenderIP: ip4A, TargetIP: ip4A}), out); rs != ReasonAddressConflict {
		t.Errorf("Handle(a claim of our address) = %v, want %v", rs, ReasonAddressConflict)
	}
	if c := r.Conflicts(); len(c) != 1 || c[0].Addr != ip4A || c[0].MAC != macB {
		t.Errorf("Conflicts = %+v, want %v at %v", c, ip4A, macB)
	}
	// The same host again and again is one conflict, many claims; another
	// host is recorded after it. Before, each frame was a conflict, and
	// after 64 frames of one host no other was recorded.
	for range 100 {
		r.Handle(arpFrame(t, ARP{EthDst: Broadcast, EthSrc: macB, Op: ARPRequest, SenderMAC: macB, SenderIP: ip4A, TargetIP: ip4A}), out)
	}
	other := MAC{2, 0, 0, 0, 0, 0x0c}
	r.Handle(arpFrame(t, ARP{EthDst: Broadcast, EthSrc: other, Op: ARPRequest, SenderMAC: other, SenderIP: ip4A, TargetIP: ip4A}), out)
	if c := r.Conflicts(); len(c) != 2 || c[1].MAC != other || r.Claims() != 102 {
		t.Errorf("Conflicts = %+v, Claims = %d; want two hosts, 102 claims", c, r.Claims())
	}
}

func ndpFrame(t testing.TB, m NDP) []byte {
	t.Helper()
	b := make([]byte, NDPFrameLen)
	n, err := m.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return b[:n]
}

func TestResponderNS(t *testing.T) {
	snm := SolicitedNode(ip6A)
	tests := []struct {
		name string
		in   NDP
		want Reason
		// expected NA
		dst       netip.Addr
		ethDst    MAC
		solicited bool
	}{
		{"multicast ns", NDP{EthDst: MulticastMAC(snm), EthSrc: macB, Src: ip6B, Dst: snm, Type: ICMPv6NS, Target: ip6A, HasLinkAddr: true, LinkAddr: macB},
			ReasonNone, ip6B, macB, true},
		{"unicast ns without slla", NDP{EthDst: macA, EthSrc: macB, Src: ip6B, Dst: ip6A, Type: ICMPv6NS, Target: ip6A},
			ReasonNone, ip6B, macB, true},
		{"ns from ::", NDP{EthDst: MulticastMAC(snm), EthSrc: macB, Src: netip.IPv6Unspecified(), Dst: snm, Type: ICMPv6NS, Target: ip6A},
			ReasonNone, allNodes, MulticastMAC(allNodes), false},
		{"ns for another", NDP{EthDst: MulticastMAC(SolicitedNode(ip6B)), EthSrc: macB, Src: ip6B, Dst: SolicitedNode(ip6B), Type: ICMPv6NS, Target: ip6B},
			ReasonNotOurAddress, netip.Addr{}, MAC{}, false},
		{"ns to wrong group", NDP{EthDst: MulticastMAC(allNodes), EthSrc: macB, Src: ip6B, Dst: allNodes, Type: ICMPv6NS, Target: ip6A},
			ReasonNotForUs, netip.Addr{}, MAC{}, false},
		{"ns to another mac", NDP{EthDst: MAC{2, 9, 9, 9, 9, 9}, EthSrc: macB, Src: ip6B, Dst: ip6A, Type: ICMPv6NS, Target: ip6A},
			ReasonNotForUs, netip.Addr{}, MAC{}, false},
		{"multicast slla", NDP{EthDst: MulticastMAC(snm), EthSrc: macB, Src: ip6B, Dst: snm, Type: ICMPv6NS, Target: ip6A, HasLinkAddr: true, LinkAddr: Broadcast},
			ReasonSourceMAC, netip.Addr{}, MAC{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb, _, _ := newTestTable()
			r := newTestResponder(t, tb, true)
			out := make([]byte, 128)
			n, rs := r.Handle(ndpFrame(t, tt.in), out)
			if rs != tt.want {
				t.Fatalf("Handle(%s) = %d, %v, want %v", tt.name, n, rs, tt.want)
			}
			if rs != ReasonNone {
				return
			}
			got, rs := ParseNDP(out[:n])
			want := NDP{EthDst: tt.ethDst, EthSrc: macA, Src: ip6A, Dst: tt.dst, Type: ICMPv6NA, Target: ip6A,
				Solicited: tt.solicited, Override: true, HasLinkAddr: true, LinkAddr: macA}
			if rs != ReasonNone || got != want {
				t.Errorf("reply = %+v, %v\nwant %+v", got, rs, want)
			}
		})
	}
}

func TestResponderNAConfirms(t *testing.T) {
	tb, _, _ := newTestTable()
	r := newTestResponder(t, tb, true)
	tb.Resolve(ll6B)
	out := make([]byte, 128)
	na := NDP{EthDst: macA, EthSrc: macB, Src: ll6B, Dst: ip6A, Type: ICMPv6NA, Target: ll6B, Solicited: true, HasLinkAddr: true, LinkAddr: macB}
	if _, rs := r.Handle(ndpFrame(t, na), out); rs != ReasonNone {
		t.Fatalf("Handle(solicited NA) = %v, want none", rs)
	}
	checkState(t, tb, ll6B, StateReachable)
	// Unsolicited NA: no entry made.
	un := NDP{EthDst: MulticastMAC(allNodes), EthSrc: macB, Src: ip6B, Dst: allNodes, Type: ICMPv6NA, Target: ip6B, Override: true, HasLinkAddr: true, LinkAddr: macB}
	if _, rs := r.Handle(ndpFrame(t, un), out); rs != ReasonNotForUs {
		t.Errorf("Handle(unsolicited NA) = %v, want not-for-us", rs)
	}
	checkState(t, tb, ip6B, StateNone)
	// An NA of another host for our address: a conflict; our own
	// looped back: not for us.
	claim := NDP{EthDst: MulticastMAC(allNodes), EthSrc: macB, Src: ip6A, Dst: allNodes, Type: ICMPv6NA, Target: ip6A, Override: true, HasLinkAddr: true, LinkAddr: macB}
	if _, rs := r.Handle(ndpFrame(t, claim), out); rs != ReasonAddressConflict {
		t.Errorf("Handle(NA of another host for our address) = %v, want %v", rs, ReasonAddressConflict)
	}
	claim.EthSrc, claim.LinkAddr = macA, macA
	if _, rs := r.Handle(ndpFrame(t, claim), out); rs != ReasonNotForUs {
		t.Errorf("Handle(our own NA) = %v, want not-for-us", rs)
	}
}

func TestResponderDAD(t *testing.T) {
	tests := []struct {
		name     string
		other    *NDP // frame from another host during DAD
		conflict bool
	}{
		{"no answer", nil, false},
		{"na for our address", &NDP{EthDst: MulticastMAC(allNodes), EthSrc: macB, Src: ip6A, Dst: allNodes, Type: ICMPv6NA, Target: ip6A, Override: true, HasLinkAddr: true, LinkAddr: macB}, true},
		{"another prober", &NDP{EthDst: MulticastMAC(SolicitedNode(ip6A)), EthSrc: macB, Src: netip.IPv6Unspecified(), Dst: SolicitedNode(ip6A), Type: ICMPv6NS, Target: ip6A}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newTestResponder(t, nil, false)
			out := make([]byte, 128)
			ns := NDP{EthDst: MulticastMAC(SolicitedNode(ip6A)), EthSrc: macB, Src: ip6B, Dst: SolicitedNode(ip6A), Type: ICMPv6NS, Target: ip6A, HasLinkAddr: true, LinkAddr: macB}
			if _, rs := r.Handle(ndpFrame(t, ns), out); rs != ReasonTentative {
				t.Errorf("Handle(NS for tentative) = %v, want tentative", rs)
			}
			var sent [][]byte
			send := func(f []byte) error {
				sent = append(sent, append([]byte(nil), f...))
				if tt.other != nil {
					r.Handle(ndpFrame(t, *tt.other), out)
				}
				return nil
			}
			err := r.DAD(send, 1, 10*time.Millisecond)
			var ce *ConflictError
			if got := errors.As(err, &ce); got != tt.conflict {
				t.Fatalf("DAD() = %v, want conflict %v", err, tt.conflict)
			}
			if len(sent) != 1 {
				t.Fatalf("DAD sent %d frames, want 1", len(sent))
			}
			p, rs := ParseNDP(sent[0])
			if rs != ReasonNone || p.Type != ICMPv6NS || !p.Src.IsUnspecified() || p.Dst != SolicitedNode(ip6A) || p.HasLinkAddr || p.Target != ip6A {
				t.Errorf("DAD probe = %+v, %v; want NS from :: to %v for %v without SLLA", p, rs, SolicitedNode(ip6A), ip6A)
			}
			n, rs := r.Handle(ndpFrame(t, ns), out)
			if tt.conflict != (rs == ReasonTentative) || tt.conflict == (n > 0) {
				t.Errorf("Handle(NS) after DAD = %d, %v; conflict %v", n, rs, tt.conflict)
			}
		})
	}
}

func TestResponderAnnounce(t *testing.T) {
	r := newTestResponder(t, nil, true)
	var got []string
	err := r.Announce(func(f []byte) error {
		if p, rs := ParseARP(f); rs == ReasonNone {
			if p.Op != ARPRequest || p.EthDst != Broadcast || p.SenderIP != ip4A || p.TargetIP != ip4A || p.SenderMAC != macA {
				t.Errorf("gratuitous ARP = %+v", p)
			}
			got = append(got, "arp")
		}
		if m, rs := ParseNDP(f); rs == ReasonNone {
			if m.Type != ICMPv6NA || m.Dst != allNodes || m.Solicited || !m.Override || m.LinkAddr != macA || m.Target != ip6A {
				t.Errorf("unsolicited NA = %+v", m)
			}
			got = append(got, "na")
		}
		return nil
	})
	if err != nil || len(got) != 2 {
		t.Errorf("Announce() = %v, sent %v; want nil, [arp na]", err, got)
	}
}

func TestFrameProber(t *testing.T) {
	var frames [][]byte
	p := &FrameProber{MAC: macA, Src4: ip4A, Src6LinkLocal: netip.MustParseAddr("fe80::1"), Src6: ip6A,
		Send: func(f []byte) { frames = append(frames, append([]byte(nil), f...)) }}
	p.Probe(ip4B, MAC{}, false)
	p.Probe(ip4B, macB, true)
	p.Probe(ll6B, MAC{}, false)
	p.Probe(ip6B, macB, true)
	if len(frames) != 4 {
		t.Fatalf("sent %d frames, want 4", len(frames))
	}
	if a, _ := ParseARP(frames[0]); a.EthDst != Broadcast || a.Op != ARPRequest || a.TargetIP != ip4B || a.SenderIP != ip4A {
		t.Errorf("broadcast request = %+v", a)
	}
	if a, _ := ParseARP(frames[1]); a.EthDst != macB {
		t.Errorf("unicast request to %v, want %v", a.EthDst, macB)
	}
	if m, rs := ParseNDP(frames[2]); rs != ReasonNone || m.Src != netip.MustParseAddr("fe80::1") || m.Dst != SolicitedNode(ll6B) || m.EthDst != MulticastMAC(SolicitedNode(ll6B)) || m.LinkAddr != macA {
		t.Errorf("multicast NS = %+v, %v", m, rs)
	}
	if m, rs := ParseNDP(frames[3]); rs != ReasonNone || m.Src != ip6A || m.Dst != ip6B || m.EthDst != macB {
		t.Errorf("unicast NS = %+v, %v", m, rs)
	}
}

func TestHandleNoAllocs(t *testing.T) {
	tb, _, _ := newTestTable()
	r := newTestResponder(t, tb, true)
	req := arpFrame(t, ARP{EthDst: Broadcast, EthSrc: macB, Op: ARPRequest, SenderMAC: macB, SenderIP: ip4B, TargetIP: ip4A})
	snm := SolicitedNode(ip6A)
	ns := ndpFrame(t, NDP{EthDst: MulticastMAC(snm), EthSrc: macB, Src: ip6B, Dst: snm, Type: ICMPv6NS, Target: ip6A, HasLinkAddr: true, LinkAddr: macB})
	var out [NDPFrameLen]byte
	r.Handle(req, out[:]) // the first learns B (allocates the entry)
	r.Handle(ns, out[:])
	for _, tt := range []struct {
		name  string
		frame []byte
	}{{"arp request", req}, {"neighbour solicitation", ns}} {
		allocs := testing.AllocsPerRun(1000, func() {
			if n, rs := r.Handle(tt.frame, out[:]); n == 0 {
				t.Fatalf("Handle(%s) = %d, %v", tt.name, n, rs)
			}
		})
		if allocs != 0 {
			t.Errorf("Handle(%s) allocs = %v, want 0", tt.name, allocs)
		}
	}
}

// BenchmarkARPReply answers one ARP request into a caller buffer; the
// reference builds the same reply with Marshal alone.
func BenchmarkARPReply(b *testing.B) {
	tb := NewTable(Config{})
	r := newTestResponder(b, tb, true)
	req := arpFrame(b, ARP{EthDst: Broadcast, EthSrc: macB, Op: ARPRequest, SenderMAC: macB, SenderIP: ip4B, TargetIP: ip4A})
	var out [MinFrameLen]byte
	b.Run("handle", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(req)))
		for b.Loop() {
			r.Handle(req, out[:])
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pps")
	})
	b.Run("marshal", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(MinFrameLen)
		p := ARP{EthDst: macB, EthSrc: macA, Op: ARPReply, SenderMAC: macA, SenderIP: ip4A, TargetMAC: macB, TargetIP: ip4B}
		for b.Loop() {
			p.Marshal(out[:])
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pps")
	})
	snm := SolicitedNode(ip6A)
	ns := ndpFrame(b, NDP{EthDst: MulticastMAC(snm), EthSrc: macB, Src: ip6B, Dst: snm, Type: ICMPv6NS, Target: ip6A, HasLinkAddr: true, LinkAddr: macB})
	var out6 [NDPFrameLen]byte
	b.Run("handle-ns", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(ns)))
		for b.Loop() {
			r.Handle(ns, out6[:])
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pps")
	})
}

// FuzzResponderHandle feeds any frame to a Responder: it never panics,
// and every reply it writes parses as a valid ARP reply or NA from us.
func FuzzResponderHandle(f *testing.F) {
	snm := SolicitedNode(ip6A)
	f.Add(arpFrame(f, ARP{EthDst: Broadcast, EthSrc: macB, Op: ARPRequest, SenderMAC: macB, SenderIP: ip4B, TargetIP: ip4A}))                                   // request for us
	f.Add(arpFrame(f, ARP{EthDst: macA, EthSrc: macB, Op: ARPReply, SenderMAC: macB, SenderIP: ip4B, TargetMAC: macA, TargetIP: ip4A}))                         // reply to us
	f.Add(ndpFrame(f, NDP{EthDst: MulticastMAC(snm), EthSrc: macB, Src: ip6B, Dst: snm, Type: ICMPv6NS, Target: ip6A, HasLinkAddr: true, LinkAddr: macB}))      // NS for us
	f.Add(ndpFrame(f, NDP{EthDst: MulticastMAC(snm), EthSrc: macB, Src: netip.IPv6Unspecified(), Dst: snm, Type: ICMPv6NS, Target: ip6A}))                      // DAD NS
	f.Add(ndpFrame(f, NDP{EthDst: macA, EthSrc: macB, Src: ip6B, Dst: ip6A, Type: ICMPv6NA, Target: ip6B, Solicited: true, HasLinkAddr: true, LinkAddr: macB})) // solicited NA
	f.Add([]byte{})                                                                                                                                             // empty
	f.Fuzz(func(t *testing.T, frame []byte) {
		tb := NewTable(Config{MaxEntries: 4})
		r, err := NewResponder(ResponderConfig{MAC: macA, Addrs: []netip.Addr{ip4A, ip6A}, SkipDAD: true, Table: tb})
		if err != nil {
			t.Fatal(err)
		}
		var out [NDPFrameLen]byte
		n, _ := r.Handle(frame, out[:])
		if n == 0 {
			return
		}
		if a, rs := ParseARP(out[:n]); rs == ReasonNone {
			if a.Op != ARPReply || a.SenderMAC != macA || a.SenderIP != ip4A || a.EthSrc != macA {
				t.Fatalf("Handle(%x) wrote ARP %+v", frame, a)
			}
			return
		}
		m, rs := ParseNDP(out[:n])
		if rs != ReasonNone || m.Type != ICMPv6NA || m.Target != ip6A || m.LinkAddr != macA || m.EthSrc != macA {
			t.Fatalf("Handle(%x) wrote %x: %+v, %v", frame, out[:n], m, rs)
		}
	})
}

// TestResponderRouterFlag: with Router (a gateway's responder) every
// neighbour advertisement carries the Router flag, as Linux's with
// forwarding on (RFC 4861 §4.4, §7.2.4): the solicited one, the one to
// all-nodes for a DAD probe and the unsolicited one of Announce. A host
// that took the gateway for a router stopped using it as one on an
// advertisement without it (§7.2.5). Without Router (a host), none does.
func TestResponderRouterFlag(t *testing.T) {
	snm := SolicitedNode(ip6A)
	for _, router := range []bool{true, false} {
		r, err := NewResponder(ResponderConfig{MAC: macA, Addrs: []netip.Addr{ip4A, ip6A}, SkipDAD: true, Router: router})
		if err != nil {
			t.Fatal(err)
		}
		out := make([]byte, 128)
		for _, ns := range []NDP{
			{EthDst: MulticastMAC(snm), EthSrc: macB, Src: ip6B, Dst: snm, Type: ICMPv6NS, Target: ip6A, HasLinkAddr: true, LinkAddr: macB},
			{EthDst: MulticastMAC(snm), EthSrc: macB, Src: netip.IPv6Unspecified(), Dst: snm, Type: ICMPv6NS, Target: ip6A},
		} {
			n, rs := r.Handle(ndpFrame(t, ns), out)
			if rs != ReasonNone {
				t.Fatalf("Handle(NS from %v) = %v", ns.Src, rs)
			}
			if na, _ := ParseNDP(out[:n]); na.Router != router {
				t.Errorf("Router %v: the NA to an NS from %v has the Router flag %v", router, ns.Src, na.Router)
			}
		}
		err = r.Announce(func(f []byte) error {
			if na, rs := ParseNDP(f); rs == ReasonNone && na.Router != router {
				t.Errorf("Router %v: the unsolicited NA has the Router flag %v", router, na.Router)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestResponderNeighbourMoved: a neighbour we have an entry for that
// announces itself at another MAC (a gratuitous ARP, request or reply,
// RFC 5227 §3; an unsolicited NA with the Override flag, RFC 4861
// §7.2.6) is used at the new MAC at once, STALE (RFC 826's merge, RFC
// 4861 §7.2.5), as Linux's table takes it; an announcement of a host we
// have no entry for makes none, and an NA without Override changes
// nothing. Before, every such frame was dropped and the old MAC used
// until the entry failed (15-25 s of a router replaced or a VRRP
// failover).
func TestResponderNeighbourMoved(t *testing.T) {
	tb, _, _ := newTestTable()
	r := newTestResponder(t, tb, true)
	out := make([]byte, 128)
	macC := MAC{2, 0, 0, 0, 0, 0x0c}
	macD := MAC{2, 0, 0, 0, 0, 0x0d}
	// ip4B at macB, confirmed.
	tb.Resolve(ip4B)
	r.Handle(arpFrame(t, ARP{EthDst: macA, EthSrc: macB, Op: ARPReply, SenderMAC: macB, SenderIP: ip4B, TargetMAC: macA, TargetIP: ip4A}), out)
	checkState(t, tb, ip4B, StateReachable)
	for _, c := range []struct {
		name string
		op   uint16
		mac  MAC
	}{{"gratuitous request", ARPRequest, macC}, {"gratuitous reply", ARPReply, macD}} {
		g := ARP{EthDst: Broadcast, EthSrc: c.mac, Op: c.op, SenderMAC: c.mac, SenderIP: ip4B, TargetIP: ip4B}
		if n, rs := r.Handle(arpFrame(t, g), out); n != 0 || rs != ReasonNone {
			t.Errorf("%s: Handle = %d, %v, want 0, none (used)", c.name, n, rs)
		}
		if st, mac := tb.State(ip4B); st != StateStale || mac != c.mac {
			t.Errorf("%s: State(%v) = %v, %v; want stale at %v", c.name, ip4B, st, mac, c.mac)
		}
	}
	// A host we have no entry for: none made.
	unknown := netip.MustParseAddr("198.18.0.77")
	g := ARP{EthDst: Broadcast, EthSrc: macC, Op: ARPRequest, SenderMAC: macC, SenderIP: unknown, TargetIP: unknown}
	if _, rs := r.Handle(arpFrame(t, g), out); rs != ReasonNotOurAddress {
		t.Errorf("gratuitous ARP of a host we do not know: Handle = %v, want not-our-address", rs)
	}
	checkState(t, tb, unknown, StateNone)

	// IPv6: ip6B learnt at macB, then an unsolicited NA.
	tb.Learn(ip6B, macB)
	na := NDP{EthDst: MulticastMAC(allNodes), EthSrc: macC, Src: ip6B, Dst: allNodes, Type: ICMPv6NA, Target: ip6B, HasLinkAddr: true, LinkAddr: macC}
	if _, rs := r.Handle(ndpFrame(t, na), out); rs != ReasonNotForUs {
		t.Errorf("unsolicited NA without Override: Handle = %v, want not-for-us", rs)
	}
	if _, mac := tb.State(ip6B); mac != macB {
		t.Errorf("after an NA without Override: %v at %v, want still %v", ip6B, mac, macB)
	}
	na.Override = true
	if _, rs := r.Handle(ndpFrame(t, na), out); rs != ReasonNone {
		t.Errorf("unsolicited NA with Override: Handle = %v, want none (used)", rs)
	}
	if st, mac := tb.State(ip6B); st != StateStale || mac != macC {
		t.Errorf("after an NA with Override: State(%v) = %v, %v; want stale at %v", ip6B, st, mac, macC)
	}
}
