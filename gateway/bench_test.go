package gateway

import (
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wgpio/wgpio/arp"
	"github.com/wgpio/wgpio/noise"
)

// BenchmarkTick measures one evaluation of every peer's timers (what
// Start does every 50 ms), idle peers without sessions.
func BenchmarkTick(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("peers=%d", n), func(b *testing.B) {
			f := newFakeDP(nil)
			priv, _ := noise.NewPrivateKey()
			d, err := New(Options{PrivateKey: priv, Dataplane: f})
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			for i := 0; i < n; i++ {
				k, _ := noise.NewPrivateKey()
				if err := d.AddPeer(PeerConfig{PublicKey: k.PublicKey()}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			now := f.Now()
			for i := 0; i < b.N; i++ {
				now += int64(50 * time.Millisecond)
				d.Tick(now)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/peer")
		})
	}
}

// BenchmarkTickNeedNeighbour measures a tick while n peers hold packets
// for an endpoint whose next hop has no MAC (NeedNeighbour, the resolver
// answering no), as when the WAN router stops answering ARP: each is
// evaluated and resolved every tick until its MAC comes.
func BenchmarkTickNeedNeighbour(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("peers=%d", n), func(b *testing.B) {
			f := newFakeDP(nil)
			priv, _ := noise.NewPrivateKey()
			// fastgw's resolver: the next hop (one router for all)
			// looked up in the neighbour table, asked for on a miss.
			var resolves atomic.Int64
			table := arp.NewTable(arp.Config{})
			router := netip.MustParseAddr("198.18.255.1")
			d, err := New(Options{PrivateKey: priv, Dataplane: f, Resolve: func(netip.Addr) ([6]byte, bool) {
				resolves.Add(1)
				if mac, ok := table.Lookup(router); ok {
					return mac, true
				}
				table.Resolve(router)
				return [6]byte{}, false
			}})
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			for i := range n {
				k, _ := noise.NewPrivateKey()
				ep := netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), 51820)
				if err := d.AddPeer(PeerConfig{PublicKey: k.PublicKey(), Endpoint: ep}); err != nil {
					b.Fatal(err)
				}
				d.byKey[k.PublicKey()].fp.NeedNeighbour.Store(true)
			}
			now := f.Now()
			for range 2 { // the peers' first evaluations
				now += int64(50 * time.Millisecond)
				d.Tick(now)
			}
			resolves.Store(0)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				now += int64(50 * time.Millisecond)
				d.Tick(now)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/tick")
			b.ReportMetric(float64(resolves.Load())/float64(b.N), "resolves/tick")
		})
	}
}

// BenchmarkSweepNextHops: what a sweep of every peer's next hop costs a
// tick (sweepNextHops, after a change of the resolver's answers), each
// peer's endpoint with its MAC, fastgw's resolver looking the router up
// in the neighbour table. ns/peer times 100,000 is the sweep of a full
// concentrator (7 December, Zen 5 VM, -benchtime 20x with 100,000 in the
// list: 17 ms a sweep, 114 ns a peer; adding the peers takes minutes); it
// runs once a nextHopSweepGap at most.
func BenchmarkSweepNextHops(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("peers=%d", n), func(b *testing.B) {
			f := newFakeDP(nil)
			priv, _ := noise.NewPrivateKey()
			var changes atomic.Uint64
			table := arp.NewTable(arp.Config{})
			router := netip.MustParseAddr("198.18.255.1")
			table.Set(router, arp.MAC{2, 0, 0, 0, 0, 1}, arp.StateReachable)
			d, err := New(Options{PrivateKey: priv, Dataplane: f, ResolveChanges: changes.Load, Resolve: func(netip.Addr) ([6]byte, bool) {
				if mac, ok := table.Lookup(router); ok {
					return mac, true
				}
				return [6]byte{}, false
			}})
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			for i := range n {
				k, _ := noise.NewPrivateKey()
				ep := netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18 + byte(i>>16), byte(i >> 8), byte(i)}), 51820)
				if err := d.AddPeer(PeerConfig{PublicKey: k.PublicKey(), Endpoint: ep}); err != nil {
					b.Fatal(err)
				}
				fp := d.byKey[k.PublicKey()].fp
				e := *fp.Endpoint.Load()
				e.DstMAC = [6]byte{2, 0, 0, 0, 0, 1}
				fp.Endpoint.Store(&e)
			}
			now := f.Now()
			for range 2 {
				now += int64(50 * time.Millisecond)
				d.Tick(now)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				changes.Add(1)
				now += nextHopSweepGap
				d.Tick(now)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/peer")
		})
	}
}
