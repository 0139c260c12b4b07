package arp_test

import (
	"log"
	"net/netip"
	"time"

	"github.com/wgpio/wgpio/arp"
)

// An owned-mode start-up on one interface: the table resolves through
// frames, the responder answers for our addresses, and a queue's loop
// hands every received frame to Handle and transmits the answers. Needs
// Linux for JoinGroups (CAP_NET_ADMIN in the interface's namespace).
func Example_ownedMode() {
	var (
		mac      = arp.MAC{0x02, 0, 0, 0, 0, 1}
		ip4      = netip.MustParseAddr("198.18.0.1")
		ip6      = netip.MustParseAddr("2001:2::1")
		transmit = func(frame []byte) error { return nil } // the queue's TX (copies the frame)
	)
	prober := &arp.FrameProber{MAC: mac, Src4: ip4, Src6: ip6, Send: func(f []byte) { _ = transmit(f) }}
	table := arp.NewTable(arp.Config{Prober: prober})
	resp, err := arp.NewResponder(arp.ResponderConfig{MAC: mac, Addrs: []netip.Addr{ip4, ip6}, Table: table})
	if err != nil {
		log.Fatal(err)
	}
	groups, err := arp.JoinGroups("eth0", resp.SolicitedNodeGroups())
	if err != nil {
		log.Print(err)
	}
	defer groups.Close()
	done := make(chan struct{})
	go table.Run(done, 100*time.Millisecond)

	// In the queue's loop, for each received frame:
	rx := func(frame []byte, out []byte) {
		if n, _ := resp.Handle(frame, out); n > 0 {
			_ = transmit(out[:n])
		}
	}
	_ = rx

	// With the loop running: DAD for the IPv6 address, then announce.
	if err := resp.DAD(transmit, 1, time.Second); err != nil {
		log.Print(err) // *arp.ConflictError: the address is in use elsewhere
	}
	_ = resp.Announce(transmit)

	// On the send path: next hop from a route, MAC from the table, and
	// frames held (per queue, bounded) while it resolves.
	routes, _ := arp.NewStaticRoutes([]arp.Route{
		{Prefix: netip.MustParsePrefix("198.18.0.0/24"), IfIndex: 2},
		{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Gateway: netip.MustParseAddr("198.18.0.254"), IfIndex: 2},
	})
	held := arp.NewHolder[int](table, 4, 64, 0)
	if nh, _, ok := routes.NextHop(netip.MustParseAddr("203.0.113.7")); ok {
		if _, ok := table.Lookup(nh); !ok && !held.Hold(nh, 42 /* frame index */) {
			// drop frame 42: counted by the holder
		}
	}
	close(done)
}
