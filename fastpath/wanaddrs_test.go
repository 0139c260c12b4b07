package fastpath

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/header"
)

// wanAddrB2 is a further address of gateway B's WAN (a keepalived virtual
// address beside wanAddrB).
var wanAddrB2 = netip.MustParseAddr("198.18.1.100")

// outerSources has B's worker send n LAN packets toward A and returns the
// outer source addresses of what left B's WAN.
func outerSources(t *testing.T, r *rig, n int) []netip.Addr {
	t.Helper()
	var frames []dataplane.Frame
	for i := range n {
		frames = append(frames, udpFrame(t, r.hostB.Queue(0).TX(), r.lanB.MAC(), r.hostB.MAC(), hostAddrB, hostAddrA, 2000, 1000, seqPayload(uint32(i), 64)))
	}
	sendAll(t, r.hostB, 0, frames)
	r.b.workers[0].outbound(r.clock.Now())
	var srcs []netip.Addr
	recvAll(t, r.wanA, n, 20*time.Millisecond, func(_ int, d []byte) {
		var p header.Packet
		if header.Parse(d, &p) != header.OK {
			t.Errorf("WAN frame does not parse: %x", d)
			return
		}
		srcs = append(srcs, p.Src)
	})
	return srcs
}

// TestWANFurtherAddress: a datagram to a further address of the WAN
// (SetWAN's others) is ours; the endpoint the peer roams to keeps that
// address as its Src, and what the gateway sends the peer (data, control
// packets) leaves from it; once the address leaves the WAN, datagrams to
// it are not ours and the peer is sent to from the default address
// (Linux's WireGuard: the endpoint's source, cleared when unusable).
func TestWANFurtherAddress(t *testing.T) {
	r := newRig(t, rigConfig{})
	wb := r.b.workers[0]
	toB2 := func() {
		t.Helper()
		msg := capture(t, r, 1)[0]
		f := udpFrame(t, r.wanA.Queue(0).TX(), r.wanB.MAC(), r.wanA.MAC(), wanAddrA, wanAddrB2, portA, portB, msg)
		sendAll(t, r.wanA, 0, []dataplane.Frame{f})
		wb.inbound(r.clock.Now())
	}
	// Before B has the address: not B's.
	toB2()
	if d := TotalDrops(r.b.Stats())[DropNotForUs]; d != 1 {
		t.Fatalf("to %v before it is B's: not_for_us = %d, want 1", wanAddrB2, d)
	}
	if err := r.b.SetWAN(portB, wanAddrB, netip.Addr{}, wanAddrB2, wanAddrB, netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if got := r.b.WANAddrs(); !slices.Equal(got, []netip.Addr{wanAddrB2}) {
		t.Errorf("WANAddrs() = %v, want [%v] (the default and the invalid left out)", got, wanAddrB2)
	}
	wb.wan = r.b.wan.Load() // the worker's next turn
	toB2()
	if got := recvAll(t, r.hostB, 1, 20*time.Millisecond, nil); got != 1 {
		t.Fatalf("to %v: delivered %d, want 1; drops %v", wanAddrB2, got, TotalDrops(r.b.Stats()))
	}
	wb.publish(r.clock.Now())
	ep := r.peerBA.Endpoint.Load()
	if ep.Dst != netip.AddrPortFrom(wanAddrA, portA) || ep.Src != wanAddrB2 {
		t.Fatalf("endpoint after data to %v = %v from %v, want %v:%d from %v", wanAddrB2, ep.Dst, ep.Src, wanAddrA, portA, wanAddrB2)
	}
	if srcs := outerSources(t, r, 3); !slices.Equal(srcs, []netip.Addr{wanAddrB2, wanAddrB2, wanAddrB2}) {
		t.Errorf("data toward the peer left from %v, want %v", srcs, wanAddrB2)
	}
	// Control packets (handshake messages, keepalives) from the Src the
	// control plane gives; one the WAN does not have: the default.
	control := func(src netip.Addr) netip.Addr {
		t.Helper()
		var mb [6]byte
		copy(mb[:], r.wanA.MAC())
		if !r.b.Send(0, ControlPacket{Dst: netip.AddrPortFrom(wanAddrA, portA), Src: src, DstMAC: mb, Payload: []byte{1, 2, 3, 4}}) {
			t.Fatal("Send: mailbox full")
		}
		wb.drainMailbox(r.clock.Now())
		var got netip.Addr
		recvAll(t, r.wanA, 1, 20*time.Millisecond, func(_ int, d []byte) {
			var p header.Packet
			if header.Parse(d, &p) == header.OK {
				got = p.Src
			}
		})
		return got
	}
	for _, c := range []struct{ src, want netip.Addr }{
		{wanAddrB2, wanAddrB2},
		{wanAddrB, wanAddrB},
		{netip.Addr{}, wanAddrB},
		{netip.MustParseAddr("198.18.1.200"), wanAddrB},
		{netip.MustParseAddr("2001:db8::1"), wanAddrB},
	} {
		if got := control(c.src); got != c.want {
			t.Errorf("control packet with Src %v left from %v, want %v", c.src, got, c.want)
		}
	}
	// The address leaves the WAN.
	if err := r.b.SetWAN(portB, wanAddrB, netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	wb.wan = r.b.wan.Load()
	before := TotalDrops(r.b.Stats())[DropNotForUs]
	toB2()
	if d := TotalDrops(r.b.Stats())[DropNotForUs] - before; d != 1 {
		t.Errorf("to %v after it left: not_for_us +%d, want +1", wanAddrB2, d)
	}
	// A new endpoint of the same Src (the control plane's sweep races a
	// roam): the template is rebuilt from the default.
	n := *r.peerBA.Endpoint.Load()
	r.peerBA.Endpoint.Store(&n)
	if srcs := outerSources(t, r, 2); !slices.Equal(srcs, []netip.Addr{wanAddrB, wanAddrB}) {
		t.Errorf("data after %v left the WAN left from %v, want %v", wanAddrB2, srcs, wanAddrB)
	}
	// A roam on a packet that came to the address before it left keeps
	// no source the WAN lost.
	pl := wb.peerState(r.peerBA)
	pl.lastSrc, pl.lastDst = netip.AddrPortFrom(wanAddrA, portA+1), wanAddrB2
	wb.roam(pl)
	if ep := r.peerBA.Endpoint.Load(); ep.Src != wanAddrB {
		t.Errorf("roamed on a packet to the lost %v: Src %v, want the default %v", wanAddrB2, ep.Src, wanAddrB)
	}
}

// TestWANFurtherAddressBackToDefault: a peer that sends to the default
// address again after a further one roams back to it.
func TestWANFurtherAddressBackToDefault(t *testing.T) {
	r := newRig(t, rigConfig{})
	if err := r.b.SetWAN(portB, wanAddrB, netip.Addr{}, wanAddrB2); err != nil {
		t.Fatal(err)
	}
	wb := r.b.workers[0]
	wb.wan = r.b.wan.Load()
	to := func(dst netip.Addr) *Endpoint {
		t.Helper()
		r.clock.Advance(PublishInterval)
		msg := capture(t, r, 1)[0]
		f := udpFrame(t, r.wanA.Queue(0).TX(), r.wanB.MAC(), r.wanA.MAC(), wanAddrA, dst, portA, portB, msg)
		sendAll(t, r.wanA, 0, []dataplane.Frame{f})
		wb.inbound(r.clock.Now())
		if got := recvAll(t, r.hostB, 1, 20*time.Millisecond, nil); got != 1 {
			t.Fatalf("to %v: delivered %d, want 1; drops %v", dst, got, TotalDrops(r.b.Stats()))
		}
		wb.publish(r.clock.Now())
		return r.peerBA.Endpoint.Load()
	}
	if ep := to(wanAddrB2); ep.Src != wanAddrB2 {
		t.Fatalf("Src after data to %v = %v", wanAddrB2, ep.Src)
	}
	if ep := to(wanAddrB); ep.Src != wanAddrB {
		t.Errorf("Src after data to the default %v again = %v, want it", wanAddrB, ep.Src)
	}
}

// TestWANLocalMoveAtOnce: transport data from the peer's endpoint to
// another of our addresses than the endpoint's Src moves the Src there
// within the burst, before any publish, and what is sent back leaves from
// it (Linux's WireGuard sets the endpoint's source from every
// authenticated packet); a Routed endpoint (not heard from) is marked
// heard from by its first packet, its Src kept. Data from another source
// still waits for publish (roaming, whitepaper §2.1), and brings its
// destination with it.
func TestWANLocalMoveAtOnce(t *testing.T) {
	r := newRig(t, rigConfig{})
	if err := r.b.SetWAN(portB, wanAddrB, netip.Addr{}, wanAddrB2); err != nil {
		t.Fatal(err)
	}
	wb := r.b.workers[0]
	wb.wan = r.b.wan.Load()
	cur := *r.peerBA.Endpoint.Load()
	cur.Routed = true
	r.peerBA.Endpoint.Store(&cur)
	to := func(src netip.AddrPort, dst netip.Addr) *Endpoint {
		t.Helper()
		msg := capture(t, r, 1)[0]
		f := udpFrame(t, r.wanA.Queue(0).TX(), r.wanB.MAC(), r.wanA.MAC(), src.Addr(), dst, src.Port(), portB, msg)
		sendAll(t, r.wanA, 0, []dataplane.Frame{f})
		wb.inbound(r.clock.Now())
		if got := recvAll(t, r.hostB, 1, 20*time.Millisecond, nil); got != 1 {
			t.Fatalf("from %v to %v: delivered %d, want 1; drops %v", src, dst, got, TotalDrops(r.b.Stats()))
		}
		return r.peerBA.Endpoint.Load()
	}
	if ep := to(cur.Dst, cur.Src); ep.Routed || ep.Src != cur.Src || ep.Dst != cur.Dst {
		t.Errorf("after data to the Routed endpoint's Src: %+v, want %v from %v, not Routed", *ep, cur.Dst, cur.Src)
	}
	if ep := to(cur.Dst, wanAddrB2); ep.Src != wanAddrB2 || ep.Dst != cur.Dst || ep.DstMAC != cur.DstMAC {
		t.Errorf("after data to %v, before publish: endpoint %v from %v, want %v from %v", wanAddrB2, ep.Dst, ep.Src, cur.Dst, wanAddrB2)
	}
	if srcs := outerSources(t, r, 2); !slices.Equal(srcs, []netip.Addr{wanAddrB2, wanAddrB2}) {
		t.Errorf("data toward the peer left from %v, want %v", srcs, wanAddrB2)
	}
	if ep := to(cur.Dst, wanAddrB); ep.Src != wanAddrB {
		t.Errorf("after data to %v again, before publish: Src %v", wanAddrB, ep.Src)
	}
	// An interval without data from the endpoint, then data from another
	// source only.
	r.clock.Advance(PublishInterval)
	wb.publish(r.clock.Now())
	other := netip.AddrPortFrom(cur.Dst.Addr(), cur.Dst.Port()+1)
	if ep := to(other, wanAddrB2); ep.Dst != cur.Dst || ep.Src != wanAddrB {
		t.Errorf("after data from %v, before publish: endpoint %v from %v, want it kept (%v from %v)", other, ep.Dst, ep.Src, cur.Dst, wanAddrB)
	}
	r.clock.Advance(PublishInterval)
	wb.publish(r.clock.Now())
	if ep := r.peerBA.Endpoint.Load(); ep.Dst != other || ep.Src != wanAddrB2 {
		t.Errorf("after publish: endpoint %v from %v, want %v from %v", ep.Dst, ep.Src, other, wanAddrB2)
	}
}

// TestZeroAllocsFurtherAddress: a batch to a further address of the WAN
// allocates nothing.
func TestZeroAllocsFurtherAddress(t *testing.T) {
	r := newRig(t, rigConfig{})
	if err := r.b.SetWAN(portB, wanAddrB, netip.Addr{}, wanAddrB2); err != nil {
		t.Fatal(err)
	}
	r.b.workers[0].wan = r.b.wan.Load()
	ep := *r.peerAB.Endpoint.Load()
	ep.Dst = netip.AddrPortFrom(wanAddrB2, portB)
	r.peerAB.Endpoint.Store(&ep)
	frames := make([]dataplane.Frame, 64)
	tmpl := templateFrame(t, r, 64-42)
	if got := pump(t, r, frames, tmpl, 64); got != 64 {
		t.Fatalf("warm-up batch delivered %d of 64; drops B %v", got, r.b.Stats()[0].Drops)
	}
	allocs := testing.AllocsPerRun(200, func() {
		if got := pump(t, r, frames, tmpl, 64); got != 64 {
			t.Fatalf("batch delivered %d of 64", got)
		}
	})
	if allocs != 0 {
		t.Errorf("AllocsPerRun(batch of 64 to a further WAN address) = %v, want 0", allocs)
	}
}

// TestOuterDst: the outer destination of untagged and tagged IPv4 and
// IPv6 frames, and none of a short or non-IP one.
func TestOuterDst(t *testing.T) {
	v4 := netip.MustParseAddr("198.18.5.1")
	v6 := netip.MustParseAddr("2001:db8::5")
	build := func(vlan uint16, dst netip.Addr) []byte {
		b := make([]byte, 128)
		et := uint16(header.EtherTypeIPv4)
		if dst.Is6() {
			et = header.EtherTypeIPv6
		}
		l2 := header.PutEthernet(b, header.MAC{}, header.MAC{}, et)
		if vlan != 0 {
			l2 = header.PutEthernetVLAN(b, header.MAC{}, header.MAC{}, vlan, et)
		}
		if dst.Is4() {
			header.PutIPv4(b[l2:], &header.IPv4Fields{Protocol: header.ProtoUDP, Src: [4]byte{198, 18, 5, 2}, Dst: dst.As4()}, 8)
		} else {
			header.PutIPv6(b[l2:], &header.IPv6Fields{NextHeader: header.ProtoUDP, Src: netip.MustParseAddr("2001:db8::6").As16(), Dst: dst.As16()}, 8)
		}
		return b
	}
	for _, c := range []struct {
		name string
		d    []byte
		want netip.Addr
	}{
		{"ipv4", build(0, v4), v4},
		{"ipv4 tagged", build(7, v4), v4},
		{"ipv6", build(0, v6), v6},
		{"ipv6 tagged", build(7, v6), v6},
		{"short", build(0, v6)[:40], netip.Addr{}},
		{"arp", make([]byte, 64), netip.Addr{}},
	} {
		if got := outerDst(c.d); got != c.want {
			t.Errorf("outerDst(%s) = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestWANFamilies: New and SetWAN refuse a default WAN address of the
// other family (an IPv6 address given as WANAddr4, which the workers took:
// every control packet to an IPv4 peer was then dropped as
// no_wan_address, and New said nothing), and take an IPv4-mapped WANAddr4.
func TestWANFamilies(t *testing.T) {
	v4, v6 := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("2001:db8::1")
	mapped := netip.AddrFrom16(v4.As16())
	lan, host, _ := memport.NewPair(memport.Config{Name: "l"})
	wan, far, _ := memport.NewPair(memport.Config{Name: "w"})
	defer func() { lan.Close(); host.Close(); wan.Close(); far.Close() }()
	newEngine := func(a4, a6 netip.Addr) (*Engine, error) {
		return New(Config{LAN: lan, WAN: wan, ListenPort: 51820, WANAddr4: a4, WANAddr6: a6,
			WANResolver: &staticResolver{}, LANResolver: &staticResolver{}})
	}
	for _, tt := range []struct {
		a4, a6 netip.Addr
		ok     bool
	}{
		{v4, v6, true}, {v4, netip.Addr{}, true}, {netip.Addr{}, v6, true}, {mapped, v6, true},
		{v6, netip.Addr{}, false}, {v6, v6, false}, {netip.Addr{}, v4, false}, {v4, mapped, false},
	} {
		e, err := newEngine(tt.a4, tt.a6)
		if (err == nil) != tt.ok {
			t.Errorf("New(WANAddr4 %v, WANAddr6 %v) error = %v, want ok %v", tt.a4, tt.a6, err, tt.ok)
		}
		if e != nil {
			e.Close()
		}
	}
	e, err := newEngine(v4, v6)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.SetWAN(51820, v6, v6); err == nil {
		t.Errorf("SetWAN(51820, %v, %v) = nil, want an error", v6, v6)
	}
	if _, a4, a6 := e.WAN(); a4 != v4 || a6 != v6 {
		t.Errorf("after the refused SetWAN, WAN() = %v, %v; want %v, %v (unchanged)", a4, a6, v4, v6)
	}
}
