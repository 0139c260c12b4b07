package bind

import (
	"net/netip"
	"sync"
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

// fakeRoutes is a RouteSources whose route's source the test sets; Ask
// answers at once unless held, and the questions are counted.
type fakeRoutes struct {
	mu     sync.Mutex
	route  netip.Addr
	cache  map[netip.Addr]netip.Addr
	gen    uint64
	hold   bool // Ask only notes the question
	waited int  // Source's questions (a send waiting for the kernel)
	queued int  // Ask's questions
}

func (f *fakeRoutes) Source(dst netip.Addr) netip.Addr {
	f.mu.Lock()
	defer f.mu.Unlock()
	if src, ok := f.cache[dst]; ok {
		return src
	}
	f.waited++
	f.cache[dst] = f.route
	return f.route
}

func (f *fakeRoutes) Cached(dst netip.Addr) (netip.Addr, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	src, ok := f.cache[dst]
	return src, ok
}

func (f *fakeRoutes) Ask(dst netip.Addr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.cache[dst]; ok {
		return
	}
	f.queued++
	if !f.hold {
		f.cache[dst] = f.route
	}
}

func (f *fakeRoutes) Generation() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gen
}

// change sets the route's source and drops the answers, as a change of
// the kernel's routes does.
func (f *fakeRoutes) change(src netip.Addr, hold bool) {
	f.mu.Lock()
	f.route, f.hold = src, hold
	clear(f.cache)
	f.gen++
	f.mu.Unlock()
}

func (f *fakeRoutes) counts() (waited, queued int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.waited, f.queued
}

// TestRouteSource: an endpoint not heard from (configured, or whose
// source left the Bind) is sent to from the address the route chooses
// (Config.Source, as Linux's WireGuard sends with its route lookup's
// source) while it is one of the Bind's, else from the default of its
// family; an endpoint heard from keeps the address it reached. The
// question is queued by ParseEndpoint and never waited for by Send
// once answered; after a change of routes, Send sends from the previous
// answer until the new one is cached, and has it asked meanwhile.
func TestRouteSource(t *testing.T) {
	virt := netip.MustParseAddr("198.18.0.100")
	routes := &fakeRoutes{route: virt, cache: map[netip.Addr]netip.Addr{}}
	r := newRig(t, 1, func(c *Config) {
		c.Addrs = []netip.Addr{virt}
		c.Source = routes
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
	if waited, queued := routes.counts(); waited != 0 || queued != 1 {
		t.Errorf("ParseEndpoint: %d questions waited for, %d queued; want 0, 1", waited, queued)
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
		{virt, virt},
	} {
		if c.route != virt || routes.Generation() != 0 {
			routes.change(c.route, false)
			routes.Ask(from.Addr()) // answered in the background
		}
		if src := sentFrom(conf); src != c.conf {
			t.Errorf("route's source %v: configured endpoint sent to from %v, want %v", c.route, src, c.conf)
		}
		if src := sentFrom(heard); src != ourIP4 {
			t.Errorf("route's source %v: endpoint of a datagram to %v sent to from %v", c.route, ourIP4, src)
		}
	}
	if waited, _ := routes.counts(); waited != 0 {
		t.Errorf("Send waited for %d questions, want none (each was answered in the background)", waited)
	}

	// A change whose answer takes a while: the previous answer meanwhile,
	// asked once per send, never waited for.
	routes.change(ourIP4, true)
	_, q := routes.counts()
	for range 3 {
		if src := sentFrom(conf); src != virt {
			t.Errorf("before the new answer: sent from %v, want the previous answer %v", src, virt)
		}
	}
	if waited, queued := routes.counts(); waited != 0 || queued != q+3 {
		t.Errorf("before the new answer: %d questions waited for, %d queued; want 0, 3", waited, queued-q)
	}
	routes.change(ourIP4, false)
	routes.Ask(from.Addr()) // answered
	if src := sentFrom(conf); src != ourIP4 {
		t.Errorf("after the new answer: sent from %v, want %v", src, ourIP4)
	}

	// An endpoint never answered (its question still waits): its first
	// Send asks and waits, once.
	routes.change(virt, true)
	fresh, err := r.bind.ParseEndpoint(netip.AddrPortFrom(peerIP4, 2).String())
	if err != nil {
		t.Fatal(err)
	}
	w, _ := routes.counts()
	for range 2 {
		if src := sentFrom(fresh); src != virt {
			t.Errorf("endpoint never answered: sent from %v, want %v", src, virt)
		}
	}
	if waited, _ := routes.counts(); waited != w+1 {
		t.Errorf("endpoint never answered: Send waited for %d questions in two sends, want 1", waited-w)
	}
}
