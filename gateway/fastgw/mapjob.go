//go:build linux

package fastgw

import (
	"container/heap"
	"fmt"
	"net/netip"
	"slices"
	"syscall"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/internal/plural"
)

// laterAbove is the size of a change, in routes, above which
// UpdatePeersLater leaves its mapJob to later: a change of up to
// laterAbove routes does it at once (a few milliseconds), as before.
const laterAbove = 4096

// mapJob is the part of a change (UpdatePeersLater) done after the
// engine's snapshot swap: the configuration's entries of the prefixes
// that entered or moved, the LAN map's inserts (balance) and the route
// worker's job of the routes into the exception TUN. err is its result,
// set under d.mu once done.
type mapJob struct {
	routes []fastpath.Route // the change's, in its order
	err    error
}

// lock takes d.mu, then does the change left to do (d.pending), if any:
// every holder of d.mu finds the changes before it whole. d.mu not held.
func (d *dataplane_) lock() {
	d.mu.Lock()
	if j := d.pending; j != nil {
		d.pending = nil
		j.err = d.doMapJob(j)
		d.warn.Flush()
	}
}

// doMapJob does j: entries for the prefixes that entered the
// configuration (ranked after the peers'), a new rank for those that
// moved to another peer, their routes queued for the route worker, the
// LAN map filled (balance). Its cost follows the number of the change's
// routes. d.mu held.
func (d *dataplane_) doMapJob(j *mapJob) error {
	// The last route of a prefix decides its owner; the prefixes are
	// ranked in the order the change first names them. The routes of a
	// change from gateway.Device name each prefix once (masked): then no
	// map is needed to tell.
	final := j.routes
	if !uniqueMasked(final) {
		final = lastRoutes(final)
	}
	var routes []routeReq
	if len(d.entries) == 0 && len(final) > 0 {
		// The first configuration: its map sized once.
		d.entries = make(map[netip.Prefix]*prefixEntry, len(final))
	}
	var fresh [2][]*prefixEntry // per family, pushed on waiting at once
	for _, r := range final {
		p, owner := r.Prefix.Masked(), r.Peer
		if owner == nil {
			continue
		}
		e := d.entries[p]
		switch {
		case e == nil:
			d.seq++
			e = &prefixEntry{pfx: p, peer: owner, rank: [2]uint64{d.peerSeq[owner], d.seq}}
			d.entries[p] = e
			// A prefix that left and comes back has its route into
			// the exception TUN still: replaced.
			ours := d.left.Has(p)
			if ours {
				d.left.Remove(p)
			}
			routes = append(routes, routeReq{p: p, replace: ours})
			if _, ok := d.kept[p]; ok { // in the map still, in its slot
				delete(d.kept, p)
				d.keptN[family(p)]--
				e.mapped = true
				heap.Push(&d.inMap[family(p)], e)
			} else {
				fresh[family(p)] = append(fresh[family(p)], e)
			}
		case e.peer != owner:
			d.seq++
			e.peer, e.rank = owner, [2]uint64{d.peerSeq[owner], d.seq}
			if e.mapped {
				heap.Fix(&d.inMap[family(p)], e.index)
			} else {
				heap.Fix(&d.waiting[family(p)], e.index)
			}
		}
	}
	for f := range fresh {
		d.waiting[f].pushAll(fresh[f])
	}
	// The route worker installs them; the LAN map takes them now
	// (balance): the XDP program redirects the LAN's packets to them
	// without the kernel's route, which the host's own packets and those
	// of the prefixes the map cannot take need.
	if d.excLink != nil {
		d.queueRoutes(routeJob{reqs: routes})
	}
	var first error
	for f := range d.inMap {
		if err := d.balance(f); err != nil && first == nil {
			first = err
		}
	}
	if n := d.waiting[0].Len() + d.waiting[1].Len(); n > 0 {
		// The others' traffic is not redirected: the kernel forwards it
		// (with IP forwarding on) into the exception TUN, routed above,
		// and the gateway encrypts it from there, slowly. Without an
		// exception TUN no route leads it into the tunnel: the kernel
		// forwards it by the host's other routes.
		if first == nil {
			first = fmt.Errorf("%w: %s of a family at most", syscall.ENOSPC, plural.Count(d.capacity, "prefix", "prefixes"))
		}
		others := "the others reach the tunnel only through the kernel's forwarding and the exception TUN (slowly): use fewer, wider prefixes, or a larger LANPrefixCapacity"
		if d.excLink == nil {
			others = "the LAN's packets to the others do not reach the tunnel: without an exception TUN (Address) the kernel forwards them by the host's other routes, in cleartext out of the WAN where a default route leads there: use fewer, wider prefixes, set Address, or a larger LANPrefixCapacity"
		}
		return fmt.Errorf("the LAN XDP prefix map holds %d of the %d allowed-IPs prefixes (%w); %s",
			d.inMap[0].Len()+d.inMap[1].Len(), len(d.entries), first, others)
	}
	return nil
}

// uniqueMasked reports whether routes name each prefix once, masked, as
// gateway.Device's changes do, checked without a map: sorted copies of
// the prefixes, compared neighbour to neighbour.
func uniqueMasked(routes []fastpath.Route) bool {
	ps := make([]netip.Prefix, len(routes))
	for i, r := range routes {
		if r.Prefix != r.Prefix.Masked() {
			return false
		}
		ps[i] = r.Prefix
	}
	slices.SortFunc(ps, netip.Prefix.Compare)
	for i := 1; i < len(ps); i++ {
		if ps[i] == ps[i-1] {
			return false
		}
	}
	return true
}

// lastRoutes is routes with masked prefixes, each named once, in the
// order routes first name it, with the owner of its last route (a change
// of fastpath.PeerChange's contract may name a prefix more than once).
func lastRoutes(routes []fastpath.Route) []fastpath.Route {
	at := make(map[netip.Prefix]int, len(routes))
	out := make([]fastpath.Route, 0, len(routes))
	for _, r := range routes {
		p := r.Prefix.Masked()
		if i, ok := at[p]; ok {
			out[i].Peer = r.Peer
			continue
		}
		at[p] = len(out)
		out = append(out, fastpath.Route{Prefix: p, Peer: r.Peer})
	}
	return out
}
