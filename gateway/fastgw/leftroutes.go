//go:build linux

package fastgw

import (
	"container/list"
	"iter"
	"maps"
	"net/netip"
)

// maxLeftRoutes is how many prefixes of each family that left the
// configuration keep their routes into the exception TUN (forget): the
// last to leave. Past it the route of the one that left first is deleted
// (deleteLeft). Without a bound, a gateway whose peers come and go with
// addresses not seen before (an orchestrator handing out /128s, the
// soak's dummy peers: scripts/soak.sh) kept one route and one entry per
// prefix it ever configured, about 0.5 KB of kernel memory each (README,
// "Peers at scale"): 65,536 of them hold some 32 MiB a family.
const maxLeftRoutes = 65536

// leftPrefixes are the prefixes that left the configuration whose routes
// into the exception TUN stay, per family in the order they left, oldest
// first; guarded by dataplane_.mu.
type leftPrefixes struct {
	at    map[netip.Prefix]*list.Element // of order[family], Value the prefix
	order [2]list.List
	max   int // per family
}

func newLeftPrefixes(max int) *leftPrefixes {
	return &leftPrefixes{at: make(map[netip.Prefix]*list.Element), max: max}
}

func (l *leftPrefixes) Len() int { return len(l.at) }

// Add records p as the latest to leave and returns the prefixes of its
// family that no longer fit, oldest first (taken out already).
func (l *leftPrefixes) Add(p netip.Prefix) []netip.Prefix {
	l.Remove(p)
	o := &l.order[family(p)]
	l.at[p] = o.PushBack(p)
	var out []netip.Prefix
	for o.Len() > l.max {
		old := o.Remove(o.Front()).(netip.Prefix)
		delete(l.at, old)
		out = append(out, old)
	}
	return out
}

// Remove forgets p (it entered the configuration again, or is routed
// elsewhere now).
func (l *leftPrefixes) Remove(p netip.Prefix) {
	if e, ok := l.at[p]; ok {
		l.order[family(p)].Remove(e)
		delete(l.at, p)
	}
}

// Has reports whether p is one of them.
func (l *leftPrefixes) Has(p netip.Prefix) bool {
	_, ok := l.at[p]
	return ok
}

// All is every prefix, in no particular order; l must not change while
// it is ranged over.
func (l *leftPrefixes) All() iter.Seq[netip.Prefix] { return maps.Keys(l.at) }

// leave records that p left the configuration, its route into the
// exception TUN kept; d.mu held. The prefixes that no longer fit
// (maxLeftRoutes) are taken out and their routes deleted by the route
// worker (UpdatePeers queues them: deleteLeft).
func (d *dataplane_) leave(p netip.Prefix) {
	if d.excLink == nil || p.Bits() == 0 {
		return // no route to keep (forget)
	}
	d.dropping = append(d.dropping, d.left.Add(p)...)
}
