package fastpath

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/wgpio/wgpio/dataplane"
)

// The "Internet" of the full-tunnel tests: destinations whose LAN
// resolver's route is a default route out of another interface (the WAN).
const (
	pNet, pNet6 = "198.18.200.1", "2001:db8:c8::1"
)

// wanDefault is a RouteLengths of a host whose LAN holds 198.19.2.0/24 and
// 2001:db8:2::/48 and whose default routes lead out of another interface.
type wanDefault struct{ asked int }

func (d *wanDefault) PrefixLen(a netip.Addr) (int, bool, bool) {
	d.asked++
	for _, p := range []netip.Prefix{netip.MustParsePrefix("198.19.2.0/24"), netip.MustParsePrefix("2001:db8:2::/48")} {
		if p.Contains(a) {
			return p.Bits(), false, false
		}
	}
	return 0, false, true
}

// TestToHost: a decrypted packet whose route leads out of another
// interface than the LAN (a full-tunnel road warrior's Internet traffic)
// goes to Config.Exception, for the host's kernel to forward, with the TTL
// / hop limit and checksum it came out of the tunnel with (the kernel
// takes the hop: one in all, as with Linux's wg0); also one over the LAN
// MTU (the kernel's route, not the LAN, bounds it). It counts as ToHost
// and as decrypted from its peer, and nothing reaches the LAN.
func TestToHost(t *testing.T) {
	var got [][]byte
	r := newRig(t, rigConfig{exception: func(p []byte) { got = append(got, bytes.Clone(p)) }})
	lens := &wanDefault{}
	r.b.lanLens = lens
	r.b.SetLANMTU(1280)
	big := make([]byte, 1300)
	for _, ip := range [][]byte{
		ip4{src: pA, dst: pNet}.bytes(),
		ip6{src: "2001:db8:1::10", dst: pNet6}.bytes(),
		ip4{src: pA, dst: pNet, ttl: 2}.bytes(), // leaves the kernel with 1
		ip4{src: pA, dst: "198.18.200.2", payload: big}.bytes(),
	} {
		got = nil
		sealToB(t, r, ip)
		r.b.workers[0].inbound(r.clock.Now())
		if len(got) != 1 || !bytes.Equal(got[0], ip) {
			t.Fatalf("exception got %x, want %x (B's drops %v)", got, ip, r.b.Stats()[0].Drops.List())
		}
	}
	if lan := drainPort(r.hostB); len(lan) != 0 {
		t.Errorf("B sent %d frames to its LAN, want 0", len(lan))
	}
	s := r.b.Stats()[0]
	if s.ToHost != 4 || s.Decrypted != 4 || s.Exception != 0 || s.Held != 0 || s.Drops.Total() != 0 {
		t.Errorf("B: to_host %d decrypted %d exception %d held %d drops %v, want 4 4 0 0 none",
			s.ToHost, s.Decrypted, s.Exception, s.Held, s.Drops.List())
	}
	if rx := r.b.workers[0].peerState(r.peerBA).rxBytes; rx == 0 {
		t.Error("rx bytes of the source peer = 0")
	}
	// The LAN's own destinations still go to the LAN.
	sealToB(t, r, ip4{src: pA, dst: pB}.bytes())
	r.b.workers[0].inbound(r.clock.Now())
	if lan := drainPort(r.hostB); len(lan) != 1 {
		t.Errorf("to the LAN's %s: %d frames on the LAN, want 1 (B's drops %v)", pB, len(lan), r.b.Stats()[0].Drops.List())
	}
	// TTL 1: answered here (time exceeded into the tunnel), not handed on.
	got = nil
	sealToB(t, r, ip4{src: pA, dst: pNet, ttl: 1}.bytes())
	r.b.workers[0].inbound(r.clock.Now())
	if s := r.b.Stats()[0]; len(got) != 0 || s.Drops[DropTTLExceeded] != 1 {
		t.Errorf("TTL 1: exception got %d packets, ttl_exceeded %d; want 0, 1", len(got), s.Drops[DropTTLExceeded])
	}
}

// TestToHostNoException: without an exception interface there is no way
// into the host's kernel: the packet is dropped at once and counted
// (off_lan), not held for a LAN neighbour that never answers.
func TestToHostNoException(t *testing.T) {
	r := newRig(t, rigConfig{})
	r.b.lanLens = &wanDefault{}
	sealToB(t, r, ip4{src: pA, dst: pNet}.bytes())
	sealToB(t, r, ip6{src: "2001:db8:1::10", dst: pNet6}.bytes())
	r.b.workers[0].inbound(r.clock.Now())
	if lan := drainPort(r.hostB); len(lan) != 0 {
		t.Errorf("B sent %d frames to its LAN, want 0", len(lan))
	}
	s := r.b.Stats()[0]
	if s.Drops[DropOffLAN] != 2 || s.Drops.Total() != 2 || s.Held != 0 || s.ToHost != 0 || s.Decrypted != 2 {
		t.Errorf("B: drops %v held %d to_host %d decrypted %d, want off_lan=2 0 0 2", s.Drops.List(), s.Held, s.ToHost, s.Decrypted)
	}
}

// TestToHostAllowedIPsFirst: a destination a peer's allowed IPs hold goes
// to that peer even when the host's route toward it (the default) leads
// out of the WAN, as Linux's more specific route into wg0 wins.
func TestToHostAllowedIPsFirst(t *testing.T) {
	var exc int
	h := newHubRig(t, rigConfig{exception: func([]byte) { exc++ }}, nil, true)
	h.b.lanLens = &wanDefault{}
	sealToB(t, h.rig, ip4{src: pA, dst: pC}.bytes())
	h.b.workers[0].inbound(h.clock.Now())
	if got := h.toC(t); len(got) != 1 || exc != 0 {
		t.Errorf("to C %d, to the host %d; want 1, 0", len(got), exc)
	}
}

// TestToHostZeroAllocs: a burst of 64 packets to the host is handed to
// Config.Exception in one call (an exception TUN coalesces a flow's
// packets of one call into one write), allocates nothing and asks the
// routes once per destination.
func TestToHostZeroAllocs(t *testing.T) {
	var n, calls int
	r := newRig(t, rigConfig{hostBatch: func(q int, pkts [][]byte) {
		if q != 0 {
			t.Errorf("Exception called with queue %d, want 0 (the worker's)", q)
		}
		n += len(pkts)
		calls++
	}})
	lens := &wanDefault{}
	r.b.lanLens = lens
	frames := make([]dataplane.Frame, 64)
	f := udpFrame(t, r.hostA.Queue(0).TX(), r.lanA.MAC(), r.hostA.MAC(), hostAddrA, netip.MustParseAddr(pNet), 1000, 2000, seqPayload(1, 22))
	tmpl := append([]byte(nil), f.Data()...)
	r.hostA.Queue(0).TX().Free([]dataplane.Frame{f})
	if err := r.a.SetPeers([]*Peer{r.peerAB}, [][]netip.Prefix{{netip.MustParsePrefix("0.0.0.0/0")}}); err != nil {
		t.Fatal(err)
	}
	burst := func() {
		tx := r.hostA.Queue(0).TX()
		got := tx.Alloc(frames)
		for i := range got {
			frames[i].SetLen(len(tmpl))
			copy(frames[i].Data(), tmpl)
		}
		tx.Transmit(frames[:got])
		now := r.clock.Now()
		r.a.workers[0].outbound(now)
		r.b.workers[0].inbound(now)
	}
	burst()
	if n != 64 || calls != 1 {
		t.Fatalf("warm-up burst: %d of 64 to the host in %d calls, want 64 in 1; B's drops %v", n, calls, r.b.Stats()[0].Drops.List())
	}
	allocs := testing.AllocsPerRun(200, burst)
	if allocs != 0 {
		t.Errorf("AllocsPerRun(burst of 64 to the host) = %v, want 0", allocs)
	}
	// The warm-up, AllocsPerRun's own and its 200 runs.
	if calls != 202 || n != 64*202 {
		t.Errorf("%d packets in %d calls of Exception for 202 bursts of 64, want one call a burst", n, calls)
	}
	if lens.asked > 2 {
		t.Errorf("routes asked %d times for one destination within NeighbourCacheTTL, want 1", lens.asked)
	}
}

// noMainRoute is a RouteLengths of a host whose LAN holds 198.19.2.0/24
// and whose other routes the resolver does not see (policy routing: the
// default route in another table): no route, offLAN, for the rest.
type noMainRoute struct{}

func (noMainRoute) PrefixLen(a netip.Addr) (int, bool, bool) {
	if netip.MustParsePrefix("198.19.2.0/24").Contains(a) {
		return 24, false, false
	}
	return -1, false, true
}

// TestToHostNoRoute: a destination the LAN resolver has no route for, but
// says the host's kernel may route (offLAN: its rules may choose another
// table), goes to the host, not held for a LAN neighbour no route names;
// a peer's allowed IPs still come first.
func TestToHostNoRoute(t *testing.T) {
	var got int
	h := newHubRig(t, rigConfig{exception: func([]byte) { got++ }}, nil, true)
	h.b.lanLens = noMainRoute{}
	sealToB(t, h.rig, ip4{src: pA, dst: pNet}.bytes())
	h.b.workers[0].inbound(h.clock.Now())
	if s := h.b.Stats()[0]; got != 1 || s.ToHost != 1 || s.Held != 0 {
		t.Errorf("no route: to the host %d, to_host %d, held %d; want 1, 1, 0 (drops %v)", got, s.ToHost, s.Held, s.Drops.List())
	}
	sealToB(t, h.rig, ip4{src: pA, dst: pC}.bytes())
	h.b.workers[0].inbound(h.clock.Now())
	if c := h.toC(t); len(c) != 1 || got != 1 {
		t.Errorf("to C's allowed IPs: to C %d, to the host %d; want 1, 1", len(c), got)
	}
}

// TestToHostBatchInOrder: the packets of one burst for the host go to
// Config.Exception in one call, in the order they arrived, those for the
// LAN between them to the LAN.
func TestToHostBatchInOrder(t *testing.T) {
	var batches [][][]byte
	r := newRig(t, rigConfig{hostBatch: func(_ int, pkts [][]byte) {
		var b [][]byte
		for _, p := range pkts {
			b = append(b, bytes.Clone(p))
		}
		batches = append(batches, b)
	}})
	r.b.lanLens = &wanDefault{}
	var want [][]byte
	for i := range 3 {
		p := ip4{src: pA, dst: pNet, payload: bytes.Repeat([]byte{byte(i)}, 40)}.bytes()
		want = append(want, p)
		sealToB(t, r, p)
		sealToB(t, r, ip4{src: pA, dst: pB}.bytes())
	}
	r.b.workers[0].inbound(r.clock.Now())
	if len(batches) != 1 || len(batches[0]) != 3 {
		t.Fatalf("Exception got %d calls (%v packets), want 1 of 3; B's drops %v", len(batches), batches, r.b.Stats()[0].Drops.List())
	}
	for i, p := range batches[0] {
		if !bytes.Equal(p, want[i]) {
			t.Errorf("packet %d to the host %x, want %x", i, p, want[i])
		}
	}
	if lan := drainPort(r.hostB); len(lan) != 3 {
		t.Errorf("B sent %d frames to its LAN, want 3", len(lan))
	}
}
