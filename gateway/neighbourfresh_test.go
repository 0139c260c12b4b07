package gateway

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/wgpio/wgpio/arp"
)

// probeLog is an arp.Prober that records what it was asked to probe.
type probeLog struct {
	mu  sync.Mutex
	got []netip.Addr
	n   int
}

func (p *probeLog) Probe(ip netip.Addr, _ arp.MAC, _ bool) {
	p.mu.Lock()
	p.got = append(p.got, ip)
	p.n++
	p.mu.Unlock()
}

// take returns and forgets the addresses probed since the last call.
func (p *probeLog) take() []netip.Addr {
	p.mu.Lock()
	defer p.mu.Unlock()
	got := p.got
	p.got = nil
	return got
}

// TestActivePeerNextHopKeptFresh: a peer that sends and receives at every
// tick, its next hop alive and answering every probe, keeps its MAC for
// good, with owned mode's table behind the resolver as fastgw has it
// (Resolve a Lookup, which marks the entry used, or a request; Known a
// Peek). With Known for every peer nothing waited for, nothing marked an
// active peer's neighbour used: the table deleted it a minute after it
// went stale, and the peer's packets waited for an ARP round trip every
// 90 s (the reviewer's finding; in shared mode a kernel entry is
// reconfirmed only when used).
func TestActivePeerNextHopKeptFresh(t *testing.T) {
	var r *rig
	pr := &probeLog{}
	tb := arp.NewTable(arp.Config{Prober: pr, Now: func() time.Time {
		if r == nil {
			return time.Unix(0, fakeEpoch)
		}
		return time.Unix(0, r.now())
	}})
	nh := netip.MustParseAddr("198.18.0.2")
	mac := arp.MAC{2, 0, 0, 0, 0, 7}
	resolve := func(a netip.Addr) ([6]byte, bool) {
		if m, ok := tb.Lookup(a); ok {
			return m, true
		}
		tb.Resolve(a)
		return [6]byte{}, false
	}
	known := func(a netip.Addr) ([6]byte, bool) { return tb.Peek(a) }
	r = newRig(t, rigOptions{ourEP: "127.0.0.1:1", wgEP: "198.18.0.2:51820", resolve: resolve, known: known,
		routed: func(netip.Addr) bool { return true }, resolveChanges: tb.Changes})
	tb.Resolve(nh)
	tb.Confirm(nh, mac)
	fp := r.fp()
	for i := range 2400 { // 120 s
		r.f.clock.Add(int64(DefaultTickInterval))
		fp.Stamps.LastSent.Store(r.now())
		fp.Stamps.LastReceived.Store(r.now())
		r.f.stamp(fp)
		if i%2 == 0 {
			tb.Tick()
			for _, a := range pr.take() {
				tb.Confirm(a, mac) // the neighbour is alive
			}
		}
		r.dev.Tick(r.now())
		if ep := fp.Endpoint.Load(); i > 40 && ep.DstMAC != mac {
			t.Fatalf("the active peer's endpoint lost its live next hop's MAC after %v (%d probes): its packets would wait for an ARP round trip",
				time.Duration(i)*DefaultTickInterval, pr.n)
		}
	}
}
