package tundev

import (
	"net/netip"

	"github.com/gaissmai/bart"
)

// SetNoRoute makes Read drop, as PortDropNoRoute, every received packet
// whose destination's longest match among drop and pass is a prefix of
// drop, before wireguard-go sees it; it replaces the previous sets, and
// empty drop turns the check off. It is for the prefixes that left
// wireguard-go's allowed IPs but stay in the LAN's XDP filter
// (gateway/compatgw, syncPrefixes), so that the LAN's traffic to them
// reaches the device instead of the host's other routes (a default route
// out of the WAN, in cleartext), and wireguard-go, which has no peer for
// it and drops it without a counter, never sees it: the drop is counted,
// and answered with host unreachable as Linux's wg0 answers it
// (unreachable; fragmentation needed first for one over the MTU with DF).
// pass are the allowed IPs inside a prefix of drop, whose packets go on
// to wireguard-go. The sets are copied into a table published whole (one
// atomic load per Read call): Read costs nothing more per packet without
// a drop prefix, and one allocation-free trie lookup per packet with one.
// Safe for concurrent use; O(len(drop)+len(pass)) per call.
func (d *PortDevice) SetNoRoute(drop, pass []netip.Prefix) {
	if len(drop) == 0 {
		d.noRoute.Store(nil)
		return
	}
	t := new(bart.Table[bool])
	for _, p := range pass {
		t.Insert(p, false)
	}
	for _, p := range drop {
		t.Insert(p, true)
	}
	d.noRoute.Store(t)
}

// dropNoRoute reports whether nr (the table of SetNoRoute) drops IP
// packet pkt, whose header Read checked.
func dropNoRoute(nr *bart.Table[bool], pkt []byte) bool {
	dst, ok := destination(pkt)
	if !ok {
		return false
	}
	drop, ok := nr.Lookup(dst)
	return ok && drop
}
