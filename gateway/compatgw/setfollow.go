//go:build linux

package compatgw

import (
	"fmt"
	"net/netip"

	"golang.zx2c4.com/wireguard/device"
)

// followSet brings the LAN filter, the kept prefixes and the PortDevice's
// tables from the allowed IPs before a set to those after it, given the
// difference the set made (add entered the allowed IPs, del left them,
// disjoint: allowedips.Peers.Follow) and g.model already changed by it,
// to exactly the state syncLocked would reach from the same state with
// the same allowed IPs (TestFollowSetDifferential), without a read of
// the whole configuration: O(len(add) + len(del)) filter changes and trie
// look-ups, plus the kept prefixes inside add and the allowed IPs inside
// a prefix whose kept state changed. It relies on what a successful sync
// or followSet leaves: every allowed IP in the filter, and of the
// filter's other prefixes only kept ones, none inside an allowed IP; so
// only del can become kept or leave the filter, and only add can cover
// (and so take out) a kept prefix. Which kept prefix gives its slot to
// an allowed IP when the filter is full is any, as in syncLocked. The
// PortDevice is told the difference too: of the kept prefixes and the
// allowed IPs inside them (updateKept, UpdateNoRoute) when the kept set
// changed or the difference touches a kept prefix, of the allowed IPs
// (UpdateAllowedIPs). After an error g.model is nil, so that the next set
// syncs whole. g.mu must be held.
func (g *Gateway) followSet(add, del []netip.Prefix) error {
	want := g.model.Owners()
	g.keptChanges = g.keptChanges[:0]
	for _, p := range del {
		g.allowedTable.Delete(p)
	}
	for _, p := range add {
		g.allowedTable.Insert(p, struct{}{})
	}
	var errs prefixErrors
	keptChanged, added, unkept, firstUnkept := false, false, 0, netip.Prefix{}
	for _, p := range add {
		if _, kept := g.kept[p]; kept { // back in the configuration, in its slot
			g.unmarkKept(p)
			keptChanged, added = true, true
		}
	}
	for _, p := range add {
		if g.prefixes[p] {
			continue
		}
		q, err := g.addToFilter(p)
		if q.IsValid() {
			keptChanged = true
			if unkept++; unkept == 1 {
				firstUnkept = q
			}
		}
		if err != nil {
			errs.add(err)
			continue
		}
		added = true
	}
	for _, p := range del {
		if !g.prefixes[p] {
			continue
		}
		if p.Bits() > 0 && !covered(p, want) {
			g.markKept(p)
			keptChanged = true
			continue
		}
		if err := g.deleteFiltered(p); err != nil {
			errs.add(err)
		}
	}
	if added { // only a prefix added or back can cover a kept one
		var inside []netip.Prefix
		for _, p := range add {
			for q := range g.keptTable.Subnets(p) {
				inside = append(inside, q)
			}
		}
		for _, q := range inside {
			if _, kept := g.kept[q]; !kept { // inside two of add
				continue
			}
			g.unmarkKept(q)
			keptChanged = true
			if err := g.deleteFiltered(q); err != nil {
				errs.add(err)
			}
		}
	}
	if g.keepTunnelNets(want, &errs) { // one a removed 0.0.0.0/0 held
		keptChanged = true
	}
	if unkept > 0 {
		g.logUnkept(unkept, firstUnkept)
	}
	if g.noRoute != nil && (keptChanged || g.insideKept(add) || g.insideKept(del)) {
		if u, ok := g.noRoute.(noRouteUpdater); ok {
			g.updateKept(u, add, del, want)
		} else {
			g.publishKept(want)
		}
	}
	if len(add) > 0 || len(del) > 0 {
		g.updateAllowed(add, del, want)
	}
	err := errs.err()
	if err != nil {
		g.model = nil
	}
	return err
}

// deleteFiltered takes p, not kept, out of the LAN filter. g.mu must be
// held.
func (g *Gateway) deleteFiltered(p netip.Prefix) error {
	if err := g.filter.DeletePrefix(p); err != nil {
		return fmt.Errorf("delete %v: %w", p, err)
	}
	delete(g.prefixes, p)
	g.inFilter[family(p)]--
	return nil
}

// insideKept reports whether a kept prefix holds one of ps (which then
// enters or leaves publishKept's pass set). g.mu must be held.
func (g *Gateway) insideKept(ps []netip.Prefix) bool {
	if len(g.kept) == 0 {
		return false
	}
	for _, p := range ps {
		if _, ok := g.keptTable.LookupPrefix(p); ok {
			return true
		}
	}
	return false
}

// noRouteUpdater is a PortDevice's no_route table changed by a
// difference (tundev.PortDevice.UpdateNoRoute).
type noRouteUpdater interface {
	UpdateNoRoute(drop, undrop, pass, unpass []netip.Prefix)
}

// updateKept hands u what publishKept would, by its difference from what
// it was last told: the prefixes whose kept state changed in this set
// (keptChanges) enter or leave its drop set, and the allowed IPs inside
// them or in the set's difference (add, del) whose place inside a kept
// prefix changed enter or leave its pass set (g.pass). O(len(add) +
// len(del) + the allowed IPs inside the prefixes whose kept state
// changed) trie look-ups. g.mu must be held.
func (g *Gateway) updateKept(u noRouteUpdater, add, del []netip.Prefix, want map[netip.Prefix]device.NoisePublicKey) {
	var drop, undrop, pass, unpass []netip.Prefix
	flips := make(map[netip.Prefix]int, len(g.keptChanges))
	for _, k := range g.keptChanges {
		flips[k]++
	}
	touched := make(map[netip.Prefix]struct{}, len(add)+len(del))
	for _, ps := range [][]netip.Prefix{add, del} {
		for _, p := range ps {
			touched[p] = struct{}{}
		}
	}
	for k, n := range flips {
		if n%2 == 1 {
			if _, kept := g.kept[k]; kept {
				drop = append(drop, k)
			} else {
				undrop = append(undrop, k)
			}
		}
		for p := range g.allowedTable.Subnets(k) {
			touched[p] = struct{}{}
		}
	}
	for p := range touched {
		now := false
		if _, ok := want[p]; ok {
			_, now = g.keptTable.LookupPrefix(p)
		}
		_, was := g.pass[p]
		switch {
		case now && !was:
			pass = append(pass, p)
			g.pass[p] = struct{}{}
		case was && !now:
			unpass = append(unpass, p)
			delete(g.pass, p)
		}
	}
	u.UpdateNoRoute(drop, undrop, pass, unpass)
}

// allowedUpdater is a PortDevice's peer-to-peer table changed by a
// difference (tundev.PortDevice.UpdateAllowedIPs).
type allowedUpdater interface {
	UpdateAllowedIPs(add, del []netip.Prefix)
}

// updateAllowed hands g.noRoute the difference of the allowed IPs, or
// the whole set want when it takes no difference. g.mu must be held.
func (g *Gateway) updateAllowed(add, del []netip.Prefix, want map[netip.Prefix]device.NoisePublicKey) {
	if u, ok := g.noRoute.(allowedUpdater); ok {
		u.UpdateAllowedIPs(add, del)
		return
	}
	g.publishAllowed(want)
}

// hasPeer reports whether wireguard-go has peer k
// (allowedips.Peers.Follow's check).
func (g *Gateway) hasPeer(k device.NoisePublicKey) bool { return g.dev.LookupPeer(k) != nil }
