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
// Safe for concurrent use; O(len(drop)+len(pass)) per call (UpdateNoRoute
// changes them by a difference).
func (d *PortDevice) SetNoRoute(drop, pass []netip.Prefix) {
	d.noRouteMu.Lock()
	defer d.noRouteMu.Unlock()
	t := new(bart.Table[bool])
	for _, p := range pass {
		t.Insert(p, false)
	}
	for _, p := range drop {
		t.Insert(p, true)
	}
	d.noRouteAll, d.noRouteDrops = t, len(drop)
	d.publishNoRoute()
}

// UpdateNoRoute changes SetNoRoute's sets by a difference: the prefixes
// of undrop leave the drop set and those of unpass the pass set, then
// those of drop and pass enter them. The caller names real changes only:
// a prefix of drop is not a drop prefix yet, one of undrop is (the drop
// prefixes are counted, to turn the check off when none is left), and a
// prefix is in at most one of the two sets. The table is copied along the
// changed paths only (bart's persistent insert and delete) and published
// whole, nil while no drop prefix is left: O(len of the four), not O(the
// sets), so that gateway/compatgw follows a `wg set` that removes a peer
// in microseconds at any number of peers. Safe for concurrent use with
// Read and SetNoRoute.
func (d *PortDevice) UpdateNoRoute(drop, undrop, pass, unpass []netip.Prefix) {
	d.noRouteMu.Lock()
	defer d.noRouteMu.Unlock()
	t := d.noRouteAll
	if t == nil {
		t = new(bart.Table[bool])
	}
	for _, p := range undrop {
		t = t.DeletePersist(p)
	}
	for _, p := range unpass {
		t = t.DeletePersist(p)
	}
	for _, p := range pass {
		t = t.InsertPersist(p, false)
	}
	for _, p := range drop {
		t = t.InsertPersist(p, true)
	}
	d.noRouteAll, d.noRouteDrops = t, d.noRouteDrops+len(drop)-len(undrop)
	d.publishNoRoute()
}

// publishNoRoute publishes noRouteAll, or nil while it has no drop
// prefix. noRouteMu must be held.
func (d *PortDevice) publishNoRoute() {
	if d.noRouteDrops <= 0 {
		d.noRoute.Store(nil)
		return
	}
	d.noRoute.Store(d.noRouteAll)
}
