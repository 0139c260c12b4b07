package tundev

import (
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
)

// readAll reads from d until want packets came or a second passed, and
// returns their destinations.
func readAll(t *testing.T, d *PortDevice, want int) []netip.Addr {
	t.Helper()
	bufs, sizes := make([][]byte, 8), make([]int, 8)
	for i := range bufs {
		bufs[i] = make([]byte, 2000)
	}
	var got []netip.Addr
	for deadline := time.Now().Add(time.Second); len(got) < want && time.Now().Before(deadline); {
		n, err := d.Read(bufs, sizes, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			dst, _ := destination(bufs[i][:sizes[i]])
			got = append(got, dst)
		}
	}
	return got
}

// TestPortDeviceNoRoute: a received packet to a drop prefix of SetNoRoute
// (over the tunnel MTU too: neither fragmented nor answered) is dropped
// and counted as no_route; one to an allowed IP inside it, or elsewhere,
// is read; an empty drop set reads them all again.
func TestPortDeviceNoRoute(t *testing.T) {
	r := newPortRig(t, 1, func(c *PortConfig) { c.ICMPSource4 = lanIP })
	dropped := netip.MustParseAddr("198.18.12.5")
	inside := netip.MustParseAddr("198.18.12.200")
	v6 := netip.MustParseAddr("2001:2:0:12::5")
	r.dev.SetNoRoute([]netip.Prefix{netip.MustParsePrefix("198.18.12.0/24"), netip.MustParsePrefix("2001:2:0:13::/64")},
		[]netip.Prefix{netip.MustParsePrefix("198.18.12.128/25")})
	frames := func() [][]byte {
		return [][]byte{
			ethFrame(macGW, macHost, 0x0800, ipPacket(hostIP, dropped, []byte("x"))),
			ethFrame(macGW, macHost, 0x0800, ipPacket(hostIP, dropped, make([]byte, 1420))), // over the tunnel MTU, DF
			ethFrame(macGW, macHost, 0x0800, ipPacket(hostIP, inside, []byte("y"))),
			ethFrame(macGW, macHost, 0x86dd, ipPacket(hostIP6, v6, []byte("z"))),
		}
	}
	r.inject(t, 0, frames()...)
	got := readAll(t, r.dev, 2)
	time.Sleep(20 * time.Millisecond)
	if len(got) != 2 || got[0] != inside || got[1] != v6 {
		t.Errorf("read packets to %v, want to %v and %v", got, inside, v6)
	}
	s := r.dev.Stats()
	if s.Drops[PortDropNoRoute] != 2 || s.Drops.Total() != 2 || s.ICMPErrors != 0 || s.Fragmented != 0 {
		t.Errorf("Stats() = %+v, want 2 no_route drops, nothing else dropped or answered", s)
	}
	r.dev.SetNoRoute(nil, []netip.Prefix{netip.MustParsePrefix("198.18.12.128/25")})
	if r.dev.noRoute.Load() != nil {
		t.Error("SetNoRoute without drop prefixes left a table")
	}
	r.inject(t, 0, frames()[0], frames()[2])
	if got := readAll(t, r.dev, 2); len(got) != 2 || got[0] != dropped {
		t.Errorf("with no drop prefix, read packets to %v, want to %v and %v", got, dropped, inside)
	}
}

// TestPortDeviceNoRouteNoAllocs: Read with drop prefixes set allocates
// nothing (a packet looked up and read, one looked up and dropped).
func TestPortDeviceNoRouteNoAllocs(t *testing.T) {
	r := newPortRig(t, 1, nil)
	r.dev.SetNoRoute([]netip.Prefix{netip.MustParsePrefix("198.18.0.0/16")}, []netip.Prefix{netip.MustParsePrefix("198.18.12.0/24")})
	in := ethFrame(macGW, macHost, 0x0800, ipPacket(hostIP, farIP, make([]byte, 64)))
	drop := ethFrame(macGW, macHost, 0x0800, ipPacket(hostIP, netip.MustParseAddr("198.18.13.1"), make([]byte, 64)))
	bufs, sizes := [][]byte{make([]byte, 2000), make([]byte, 2000)}, []int{0, 0}
	fs := make([]dataplane.Frame, 2)
	tx := r.b.Queue(0).TX()
	step := func() {
		tx.Alloc(fs)
		fs[0].SetLen(len(drop))
		copy(fs[0].Data(), drop)
		fs[1].SetLen(len(in))
		copy(fs[1].Data(), in)
		tx.Transmit(fs)
		if n, err := r.dev.Read(bufs, sizes, 0); n != 1 || err != nil {
			t.Fatalf("Read = %d, %v", n, err)
		}
	}
	step()
	if a := testing.AllocsPerRun(200, step); a != 0 {
		t.Errorf("allocs per Read with drop prefixes = %v, want 0", a)
	}
	if n := r.dev.Stats().Drops[PortDropNoRoute]; n != 202 {
		t.Errorf("no_route drops = %d, want 202 (AllocsPerRun runs step once more)", n)
	}
}
