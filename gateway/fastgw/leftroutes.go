//go:build linux

package fastgw

import (
	"container/list"
	"errors"
	"iter"
	"log/slog"
	"maps"
	"net/netip"

	"golang.org/x/sys/unix"
)

// maxLeftRoutes is how many prefixes of each family that left the
// configuration keep their routes into the exception TUN (forget): the
// last to leave. Past it the route of the one that left first is deleted
// (dropLeft). Without a bound, a gateway whose peers come and go with
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
// (maxLeftRoutes) are taken out and their routes deleted at dropLeft.
func (d *dataplane_) leave(p netip.Prefix) {
	if d.excLink == nil || p.Bits() == 0 {
		return // no route to keep (forget)
	}
	d.dropping = append(d.dropping, d.left.Add(p)...)
}

// dropLeft deletes the routes into the exception TUN of the prefixes that
// left the configuration and no longer fit (leave), in batches as
// routeAll installs them, each logged (capped as the other per-prefix
// lines): the LAN's traffic to them follows the host's other routes
// again, as after `ip route del PREFIX dev NAME`. d.mu held.
func (d *dataplane_) dropLeft() {
	old := d.dropping
	d.dropping = nil
	if len(old) == 0 {
		return
	}
	errs := make([]error, len(old))
	if d.rs != nil && len(old) > 1 {
		d.rs.do(routeDelete, old, d.excLink.Attrs().Index, errs)
	} else {
		for i := range errs {
			errs[i] = errNoAck
		}
	}
	for i, p := range old {
		err := errs[i]
		if err == errNoAck {
			err = d.nl.RouteDel(d.excRoute(p))
		}
		// ESRCH: the kernel removed it (the interface went down) or it
		// is another's now (restoreLeft); either way not ours to delete.
		if err != nil && !errors.Is(err, unix.ESRCH) {
			d.warn.Warn("delete the route into the exception TUN of a prefix that left the configuration", "prefix", p, "err", err)
			continue
		}
		d.warn.Log(slog.LevelInfo, "too many prefixes that left the configuration: the route into the exception TUN of the one that left first is deleted, the LAN's traffic to it follows the host's other routes",
			"prefix", p, "kept", d.left.max)
	}
}
