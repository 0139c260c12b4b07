package bind

import (
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/conn"

	"github.com/wgpio/wgpio/header"
)

// TestFurtherAddress: a datagram to one of the Bind's further addresses
// (Config.Addrs, SetAddrs' others: a keepalived virtual address) is taken,
// its endpoint's source is that address (SrcIP), and Send answers from
// it, while a configured endpoint and a datagram to the default are sent
// from the default; once the address is no longer the Bind's, the same
// endpoint is sent to from the default (ClearSrc's effect on
// wireguard-go's StdNetBind) and datagrams to it are not ours.
func TestFurtherAddress(t *testing.T) {
	virt := netip.MustParseAddr("198.18.0.100")
	r := newRig(t, 1, func(c *Config) { c.Addrs = []netip.Addr{virt} })
	from := netip.AddrPortFrom(peerIP4, 1)
	r.inject(t, 0, udpFrame(from, netip.AddrPortFrom(virt, ourPort), []byte("virt"), false))
	r.inject(t, 0, udpFrame(from, netip.AddrPortFrom(ourIP4, ourPort), []byte("def"), false))
	bufs, sizes, eps := recvBufs()
	n, err := r.fns[0](bufs, sizes, eps)
	if err != nil || n != 2 || string(bufs[0][:sizes[0]]) != "virt" {
		t.Fatalf("ReceiveFunc = %d, %v, want the datagrams to %v and %v", n, err, virt, ourIP4)
	}
	if got := eps[0].SrcIP(); got != virt {
		t.Errorf("SrcIP of the endpoint of a datagram to %v = %v", virt, got)
	}
	if got := eps[1].SrcIP(); got != ourIP4 {
		t.Errorf("SrcIP of the endpoint of a datagram to %v = %v", ourIP4, got)
	}
	sentFrom := func(e any) netip.Addr {
		t.Helper()
		ep, ok := e.(*Endpoint)
		if !ok {
			t.Fatalf("endpoint %T", e)
		}
		if err := r.bind.Send([][]byte{[]byte("x")}, ep); err != nil {
			t.Fatal(err)
		}
		out := r.collect(t, 1, time.Second)
		if len(out) != 1 {
			t.Fatalf("peer received %d frames, want 1", len(out))
		}
		return netip.AddrFrom4([4]byte(out[0][header.EthernetLen+12 : header.EthernetLen+16]))
	}
	if src := sentFrom(eps[0]); src != virt {
		t.Errorf("answer to a datagram to %v sent from %v", virt, src)
	}
	if src := sentFrom(eps[1]); src != ourIP4 {
		t.Errorf("answer to a datagram to %v sent from %v", ourIP4, src)
	}
	conf, err := r.bind.ParseEndpoint(from.String())
	if err != nil {
		t.Fatal(err)
	}
	if src := sentFrom(conf); src != ourIP4 {
		t.Errorf("configured endpoint sent to from %v, want %v", src, ourIP4)
	}
	// The address leaves the interface.
	r.bind.SetAddrs(ourIP4, ourIP6)
	if src := sentFrom(eps[0]); src != ourIP4 {
		t.Errorf("after %v left, its endpoint sent to from %v, want %v", virt, src, ourIP4)
	}
	before := r.bind.Stats().Drops[DropNotOurs]
	r.inject(t, 0, udpFrame(from, netip.AddrPortFrom(virt, ourPort), []byte("virt"), false))
	r.inject(t, 0, udpFrame(from, netip.AddrPortFrom(ourIP4, ourPort), []byte("def"), false))
	if n, err := r.fns[0](bufs, sizes, eps); err != nil || n != 1 {
		t.Errorf("ReceiveFunc after %v left = %d, %v, want the one datagram to %v", virt, n, err, ourIP4)
	}
	if d := r.bind.Stats().Drops[DropNotOurs] - before; d != 1 {
		t.Errorf("not_ours after %v left = +%d, want +1", virt, d)
	}
}

// TestRouteSource: an endpoint not heard from (configured, or whose
// source left the Bind) is sent to from the address the route chooses
// (Config.Source, as Linux's WireGuard sends with its route lookup's
// source) while it is one of the Bind's, else from the default of its
// family; an endpoint heard from keeps the address it reached.
func TestRouteSource(t *testing.T) {
	virt := netip.MustParseAddr("198.18.0.100")
	var route atomic.Pointer[netip.Addr]
	route.Store(&virt)
	r := newRig(t, 1, func(c *Config) {
		c.Addrs = []netip.Addr{virt}
		c.Source = func(netip.Addr) netip.Addr { return *route.Load() }
	})
	from := netip.AddrPortFrom(peerIP4, 1)
	sentFrom := func(ep conn.Endpoint) netip.Addr {
		t.Helper()
		if err := r.bind.Send([][]byte{[]byte("x")}, ep); err != nil {
			t.Fatal(err)
		}
		out := r.collect(t, 1, time.Second)
		if len(out) != 1 {
			t.Fatalf("peer received %d frames, want 1", len(out))
		}
		return netip.AddrFrom4([4]byte(out[0][header.EthernetLen+12 : header.EthernetLen+16]))
	}
	conf, err := r.bind.ParseEndpoint(from.String())
	if err != nil {
		t.Fatal(err)
	}
	r.inject(t, 0, udpFrame(from, netip.AddrPortFrom(ourIP4, ourPort), []byte("def"), false))
	bufs, sizes, eps := recvBufs()
	if n, err := r.fns[0](bufs, sizes, eps); err != nil || n != 1 {
		t.Fatalf("ReceiveFunc = %d, %v, want the datagram to %v", n, err, ourIP4)
	}
	heard := eps[0]
	for _, c := range []struct {
		route, conf netip.Addr
	}{
		{virt, virt},           // the route's src
		{ourIP4, ourIP4},       // the route changed
		{peerIP4, ourIP4},      // not the Bind's: the default
		{netip.Addr{}, ourIP4}, // no route
		{ourIP6, ourIP4},       // another family: the default
	} {
		route.Store(&c.route)
		if src := sentFrom(conf); src != c.conf {
			t.Errorf("route's source %v: configured endpoint sent to from %v, want %v", c.route, src, c.conf)
		}
		if src := sentFrom(heard); src != ourIP4 {
			t.Errorf("route's source %v: endpoint of a datagram to %v sent to from %v", c.route, ourIP4, src)
		}
	}
}
