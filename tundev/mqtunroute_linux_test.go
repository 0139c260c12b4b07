package tundev

import (
	"net/netip"
	"testing"

	"github.com/gaissmai/bart"

	"github.com/wgpio/wgpio/header"
)

// memTUN is a MultiQueueTUN without a kernel: a test hands Read batches
// through its channels.
func memTUN() *MultiQueueTUN {
	return &MultiQueueTUN{batches: make(chan *tunBatch, 1), free: make(chan *tunBatch, 1), closed: make(chan struct{}), readErr: make(chan error, 1)}
}

// batchOf returns a tunBatch of pkts.
func batchOf(pkts ...[]byte) *tunBatch {
	b := &tunBatch{n: len(pkts)}
	for i, p := range pkts {
		b.bufs[i], b.sizes[i] = p, len(p)
	}
	return b
}

// ip6 returns a bare IPv6 header from src to dst.
func ip6(src, dst netip.Addr) []byte {
	p := make([]byte, header.IPv6Len)
	p[0] = 0x60
	s, d := src.As16(), dst.As16()
	copy(p[8:24], s[:])
	copy(p[24:40], d[:])
	return p
}

// TestMultiQueueTUNAllowed: with SetAllowed, Read passes the packets to
// the allowed IPs and drops, counted, those to other destinations
// (no_route; host_multicast to a multicast group) and those that are not IP or are shorter than their header
// (malformed), as stock wireguard-go would drop them uncounted; with it
// off it passes everything, and a packet larger than the buffer is
// dropped as too_big either way. Read allocates nothing.
func TestMultiQueueTUNAllowed(t *testing.T) {
	src := netip.MustParseAddr("198.18.9.1")
	in4 := udp4(src, netip.MustParseAddr("198.19.1.7"))
	out4 := udp4(src, netip.MustParseAddr("198.19.2.7"))
	in6 := ip6(netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8:1::7"))
	out6 := ip6(netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8:2::7"))
	rs := ip6(netip.MustParseAddr("fe80::1"), netip.MustParseAddr("ff02::2")) // a router solicitation's header
	short := in4[:header.IPv4MinLen-1]
	notIP := append([]byte{0x00}, in4[1:]...)
	big := make([]byte, 300)
	copy(big, in4)
	all := [][]byte{in4, out4, in6, out6, rs, short, notIP, big}
	for _, tc := range []struct {
		name    string
		allowed []netip.Prefix
		pass    [][]byte
		drops   TUNDropCounts
	}{
		{"off", nil, [][]byte{in4, out4, in6, out6, rs, short, notIP}, TUNDropCounts{TUNDropTooBig: 1}},
		{"allowed IPs", []netip.Prefix{netip.MustParsePrefix("198.19.1.0/24"), netip.MustParsePrefix("2001:db8:1::/48")},
			[][]byte{in4, in6}, TUNDropCounts{TUNDropTooBig: 1, TUNDropNoRoute: 2, TUNDropHostMulticast: 1, TUNDropMalformed: 2}},
		{"no peers", []netip.Prefix{}, nil, TUNDropCounts{TUNDropTooBig: 1, TUNDropNoRoute: 4, TUNDropHostMulticast: 1, TUNDropMalformed: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := memTUN()
			d.SetAllowed(tc.allowed)
			d.batches <- batchOf(all...)
			const off = 16
			bufs := make([][]byte, 8)
			for i := range bufs {
				bufs[i] = make([]byte, off+200)
			}
			sizes := make([]int, len(bufs))
			n, err := d.Read(bufs, sizes, off)
			if err != nil {
				t.Fatal(err)
			}
			if n != len(tc.pass) {
				t.Fatalf("Read = %d packets, want %d", n, len(tc.pass))
			}
			for i, want := range tc.pass {
				if got := bufs[i][off : off+sizes[i]]; string(got) != string(want) {
					t.Errorf("packet %d = % x, want % x", i, got, want)
				}
			}
			want := TUNStats{RXPackets: uint64(len(tc.pass)), Drops: tc.drops}
			if got := d.Stats(); got != want {
				t.Errorf("Stats = %+v, want %+v", got, want)
			}
			allocs := testing.AllocsPerRun(100, func() {
				b := <-d.free
				b.next = 0
				d.batches <- b
				d.Read(bufs, sizes, off)
			})
			if allocs != 0 {
				t.Errorf("Read: %v allocations a call, want 0", allocs)
			}
		})
	}
}

// TestMultiQueueTUNUpdateAllowed: UpdateAllowed changes SetAllowed's set
// by the difference it is given (a prefix in both add and del stays),
// leaves the table it replaces as it was (Read may still hold it), and
// does nothing while the check is off.
func TestMultiQueueTUNUpdateAllowed(t *testing.T) {
	a := netip.MustParsePrefix("198.19.1.0/24")
	b := netip.MustParsePrefix("198.19.2.7/32")
	c := netip.MustParsePrefix("2001:db8:1::/48")
	in := func(tb *bart.Table[struct{}], addr string) bool {
		_, ok := tb.Lookup(netip.MustParseAddr(addr))
		return ok
	}
	tun := memTUN()
	tun.UpdateAllowed([]netip.Prefix{a}, nil)
	if tun.allowed.Load() != nil {
		t.Fatal("UpdateAllowed turned the check on")
	}
	tun.SetAllowed([]netip.Prefix{a})
	old := tun.allowed.Load()
	tun.UpdateAllowed([]netip.Prefix{b, c, netip.MustParsePrefix("198.19.1.9/24")}, []netip.Prefix{a, netip.MustParsePrefix("198.19.9.0/24")})
	now := tun.allowed.Load()
	for addr, want := range map[string]bool{"198.19.1.5": true, "198.19.2.7": true, "198.19.2.8": false, "2001:db8:1::9": true, "2001:db8:2::9": false} {
		if got := in(now, addr); got != want {
			t.Errorf("after the update, %s allowed = %v, want %v", addr, got, want)
		}
	}
	if !in(old, "198.19.1.5") || in(old, "198.19.2.7") || in(old, "2001:db8:1::9") {
		t.Error("UpdateAllowed changed the table it replaced")
	}
	tun.UpdateAllowed(nil, []netip.Prefix{a, c})
	if now = tun.allowed.Load(); in(now, "198.19.1.5") || in(now, "2001:db8:1::9") || !in(now, "198.19.2.7") {
		t.Error("del did not take 198.19.1.0/24 and 2001:db8:1::/48 out, or took 198.19.2.7/32")
	}
}
