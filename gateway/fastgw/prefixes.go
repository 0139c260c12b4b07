//go:build linux

package fastgw

import (
	"cmp"
	"container/heap"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"

	"github.com/vishvananda/netlink"

	"github.com/wgpio/wgpio/dataplane/afxdp"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/internal/logcap"
	"github.com/wgpio/wgpio/internal/plural"
)

// dataplane_ is the engine as the control plane sees it, plus keeping the
// LAN XDP prefix map and the routes into the exception TUN in step with
// the allowed IPs, change by change: a change costs its own size (and a
// logarithm of the configuration's), never a pass over the whole.
type dataplane_ struct {
	*fastpath.Engine
	lan prefixMap
	// excLink, if not nil, is the exception TUN: the allowed IPs are
	// routed into it (as wg-quick does), so that the gateway's own traffic
	// to the peers' networks takes the tunnel. Default routes (/0) are not
	// installed: they would take the gateway's WAN traffic too.
	excLink netlink.Link
	nl      *netlink.Handle
	// rs, if not nil, sends the routes into the exception TUN of a change
	// in batches (routeAll); opened in the namespace of nl. Guarded by
	// routeMu.
	rs *routeSocket

	// routeMu orders the writes of routes into the exception TUN: the
	// route worker's (routeQueue) and the restores' (restoreRoutes,
	// restoreMissingRoutes, Retake). Taken after mu, never before: the
	// worker takes it without mu, and mu after it has let it go.
	routeMu sync.Mutex
	// rwarn logs what fails per prefix in the route worker's jobs as
	// warn does for a change; guarded by routeMu.
	rwarn *logcap.Log
	// leftLog says how many routes of prefixes that left deleteLeft
	// deleted; guarded by routeMu.
	leftLog leftLog
	// rq carries the route work of the changes (UpdatePeers) to the
	// route worker, out of mu and the control plane's lock.
	rq routeQueue
	// routeHook, if not nil, is called by the route worker before each
	// job (tests: a job that blocks). Set before the first change.
	routeHook func()

	mu      sync.Mutex
	entries map[netip.Prefix]*prefixEntry // the configuration's prefixes; guarded by mu
	// pending is the part of the last change left to do
	// (UpdatePeersLater), which the next holder of mu does first (lock);
	// guarded by mu.
	pending *mapJob
	// left are the prefixes that left the configuration, whose routes
	// into the exception TUN stay (forget), at most maxLeftRoutes of a
	// family; guarded by mu.
	left *leftPrefixes
	// dropping are the prefixes taken out of left (leave) whose routes
	// the route worker deletes (UpdatePeers queues them: deleteLeft);
	// guarded by mu.
	dropping []netip.Prefix
	// kept are the prefixes that left the configuration while in the
	// LAN map of a gateway without an exception TUN: they stay in the
	// map (forget), so the engine drops what the LAN sends them; keptN
	// counts them per family, slots the configuration's prefixes take
	// back first (balance); guarded by mu.
	kept  map[netip.Prefix]struct{}
	keptN [2]int
	// hostRouted counts the entries whose key a route of the host's
	// holds (prefixEntry.hostRouted).
	hostRouted int
	peerSeq    map[*fastpath.Peer]uint64 // order the peers came in; guarded by mu
	seq        uint64                    // the last order given; guarded by mu
	inMap      [2]prefixHeap             // per family, the prefixes in the map, worst on top; guarded by mu
	waiting    [2]prefixHeap             // per family, those the full map could not take, best on top; guarded by mu
	capacity   int                       // of the LAN map, per family
	log        *slog.Logger
	// warn logs what fails per prefix, maxPrefixWarnings lines of a kind
	// per change (UpdatePeers, restoreRoutes) and a count; guarded by mu.
	warn *logcap.Log
}

// maxPrefixWarnings is how many lines of one kind a change logs about its
// prefixes before it only counts them: a change of 100,000 peers whose
// routes all fail logged 200,000 lines.
const maxPrefixWarnings = 10

// prefixMap is the LAN port's prefix match (*afxdp.Port).
type prefixMap interface {
	AddPrefix(netip.Prefix) error
	DeletePrefix(netip.Prefix) error
}

var _ prefixMap = (*afxdp.Port)(nil)

// prefixEntry is one prefix of the configuration. Its rank orders the
// claims on the map's slots when there are more prefixes than slots:
// prefixes of peers configured earlier first, then in the order they
// came (as a configuration file lists them).
type prefixEntry struct {
	pfx    netip.Prefix
	peer   *fastpath.Peer
	rank   [2]uint64 // peer's order, the prefix's own
	mapped bool      // in the LAN map (else waiting)
	index  int       // in its heap
	// hostRouted: the main table holds a route of the prefix's key that
	// is not into the exception TUN (noteTaken), which route left in
	// place; no route of ours is kept when the prefix leaves (forget).
	hostRouted bool
}

func family(p netip.Prefix) int {
	if p.Addr().Is4() {
		return 0
	}
	return 1
}

// prefixHeap is a heap of entries: with worstFirst the highest rank on
// top, else the lowest.
type prefixHeap struct {
	e          []*prefixEntry
	worstFirst bool
}

func (h *prefixHeap) Len() int { return len(h.e) }
func (h *prefixHeap) Less(i, j int) bool {
	a, b := h.e[i].rank, h.e[j].rank
	less := a[0] < b[0] || a[0] == b[0] && a[1] < b[1]
	if h.worstFirst {
		return !less && a != b
	}
	return less
}
func (h *prefixHeap) Swap(i, j int) {
	h.e[i], h.e[j] = h.e[j], h.e[i]
	h.e[i].index, h.e[j].index = i, j
}
func (h *prefixHeap) Push(x any) { e := x.(*prefixEntry); e.index = len(h.e); h.e = append(h.e, e) }

// pushAll pushes es: one by one when they are few next to the heap, else
// appended and the heap made again (heap.Init: O(len) where pushes one by
// one cost O(len log len) when each goes to the top, as ascending ranks
// do on a heap of the worst first).
func (h *prefixHeap) pushAll(es []*prefixEntry) {
	if len(es) < 64 || len(es) < h.Len()/8 {
		for _, e := range es {
			heap.Push(h, e)
		}
		return
	}
	for _, e := range es {
		e.index = len(h.e)
		h.e = append(h.e, e)
	}
	heap.Init(h)
}

// compareRank orders entries by rank, best (lowest) first.
func compareRank(a, b *prefixEntry) int {
	if c := cmp.Compare(a.rank[0], b.rank[0]); c != 0 {
		return c
	}
	return cmp.Compare(a.rank[1], b.rank[1])
}

func (h *prefixHeap) Pop() any {
	e := h.e[len(h.e)-1]
	h.e[len(h.e)-1] = nil
	h.e = h.e[:len(h.e)-1]
	return e
}

func newDataplane(e *fastpath.Engine, lan prefixMap, capacity int, log *slog.Logger, nl *netlink.Handle) *dataplane_ {
	d := &dataplane_{Engine: e, lan: lan, capacity: capacity, log: log, nl: nl, warn: logcap.New(log, maxPrefixWarnings), rwarn: logcap.New(log, maxPrefixWarnings),
		entries: make(map[netip.Prefix]*prefixEntry), peerSeq: make(map[*fastpath.Peer]uint64), left: newLeftPrefixes(maxLeftRoutes),
		kept: make(map[netip.Prefix]struct{})}
	d.inMap[0].worstFirst, d.inMap[1].worstFirst = true, true
	d.rq.cond.L = &d.rq.mu
	return d
}

// UpdatePeers implements gateway.Dataplane: it applies c to the engine and
// changes the LAN port's LPM map and the exception TUN's routes for the
// prefixes c names, so that the XDP program redirects exactly the
// destinations some peer's allowed IPs contain. When a family has more
// prefixes than the map holds, the map holds the first by rank (peers in
// configuration order, each one's prefixes in the order they came), the
// others wait for a slot, and every change reports ENOSPC while any wait.
//
// The routes into the exception TUN (the installs of the prefixes that
// entered, the deletes of those that left and no longer fit: leave) are
// queued for the route worker (routeQueue), in the order of the changes,
// not sent under d.mu and the caller's lock: WaitApplied waits for them.
// Their failures are logged, as before, not returned: the error is the
// LAN map's and the engine's. It is UpdatePeersLater with the later part
// done at once.
func (d *dataplane_) UpdatePeers(c fastpath.PeerChange) error {
	later, err := d.UpdatePeersLater(c)
	if err == nil && later != nil {
		err = later()
	}
	return err
}

// UpdatePeersLater is UpdatePeers in two parts, for a caller that holds a
// lock others wait for (gateway.Device's): what must be done before it
// returns (the prefixes that leave taken out of the LAN map, then the
// engine's snapshot swap: the workers route the whole change from then
// on), and, for a change of more than laterAbove routes, the rest (the
// configuration's tables and the LAN map's inserts of the prefixes that
// entered: mapJob), which later does, returning its error, once the
// caller let its lock go. later is nil when nothing is left to do. The
// rest is done in the order of the changes whoever comes first: later,
// WaitApplied, or the next call that takes d.mu (lock), so that every
// change finds its predecessors' whole. Until then the LAN's packets to
// the prefixes that entered are forwarded by the kernel, as before the
// change (the change's caller has not returned; at 100,000 peers of two
// prefixes each, later took 0.3-0.5 s that the control plane's lock was
// held for before).
func (d *dataplane_) UpdatePeersLater(c fastpath.PeerChange) (later func() error, err error) {
	d.lock()
	defer d.mu.Unlock()
	defer d.warn.Flush()
	// The map redirects a prefix only while the engine can route it:
	// prefixes leave the map before the engine's snapshot swap, enter it
	// after (a frame redirected for a prefix the engine does not know is
	// dropped as no_route). A prefix leaves when the last route of it in
	// c clears its owner: only those c clears somewhere are looked at,
	// so that a change that adds pays no map of its prefixes here.
	var cleared map[netip.Prefix]*fastpath.Peer // the last owner c gives each
	var clearedOrder []netip.Prefix
	for _, r := range c.Routes {
		if r.Peer != nil && len(cleared) == 0 {
			continue
		}
		p := r.Prefix.Masked()
		if r.Peer == nil {
			if cleared == nil {
				cleared = make(map[netip.Prefix]*fastpath.Peer)
			}
			if _, ok := cleared[p]; !ok {
				clearedOrder = append(clearedOrder, p)
			}
			cleared[p] = nil
		} else if _, ok := cleared[p]; ok {
			cleared[p] = r.Peer
		}
	}
	// Many leaving (a removal of most of a large configuration, Close):
	// out of their heaps at once (compactHeaps), not one heap.Remove
	// each.
	fg := forgetting{bulk: len(clearedOrder) > 64 && len(clearedOrder) >= len(d.entries)/8}
	for _, p := range clearedOrder {
		if e := d.entries[p]; e != nil && cleared[p] == nil {
			d.forget(e, &fg)
		}
	}
	if fg.bulk {
		d.compactHeaps()
	}
	for _, pfxs := range fg.del {
		d.deletePrefixes(pfxs)
	}
	d.queueRoutes(routeJob{del: d.dropping})
	d.dropping = nil
	if err := d.Engine.UpdatePeers(c); err != nil {
		return nil, err
	}
	for _, p := range c.Remove {
		delete(d.peerSeq, p)
	}
	for _, p := range c.Add {
		d.seq++
		d.peerSeq[p] = d.seq
	}
	j := &mapJob{routes: c.Routes}
	if len(c.Routes) <= laterAbove {
		return nil, d.doMapJob(j)
	}
	d.pending = j
	return func() error {
		d.lock()
		defer d.mu.Unlock()
		return j.err
	}, nil
}

// forget takes e out of the configuration: out of the map (or the
// waiting heap). Its route into the exception TUN stays (leave: the
// maxLeftRoutes of its family that left last), as wg-quick's
// route into wg0 stays after `wg set wg0 peer KEY remove`: the LAN's
// packets to it, which the XDP program now passes to the kernel, go on
// into the exception TUN and the engine drops them, counted as
// no_route. Deleted, the kernel forwarded them by its other routes,
// through a default route out of the WAN in cleartext (TestChurnLedger:
// 166 of host A's datagrams in the 50 ms between a peer's removal and
// its addition again). `ip route del PREFIX dev NAME` hands such a
// prefix back to the host's routes; a route of its key added then keeps
// it theirs (restoreLeft). Without an exception TUN there is no route to
// keep: a prefix in the map stays there instead (kept), so the XDP
// program goes on redirecting its packets to the engine, which drops
// them as no_route, until the prefix enters the configuration again,
// the map needs its slot for one of the configuration's (balance) or the
// gateway stops (TestRemovedPeerNoCleartextNoTUN). Default routes (/0)
// are kept by neither, as no route into the exception TUN is made for
// them. What forget leaves to its caller is in fg: the prefixes to take
// out of the map (deletePrefixes, before the engine's swap) and, in bulk,
// the entries to take out of their heaps (compactHeaps).
func (d *dataplane_) forget(e *prefixEntry, fg *forgetting) {
	f := family(e.pfx)
	h := &d.waiting[f]
	if e.mapped {
		if d.excLink == nil && e.pfx.Bits() > 0 {
			d.kept[e.pfx] = struct{}{}
			d.keptN[f]++
		} else {
			fg.del[f] = append(fg.del[f], e.pfx)
		}
		h = &d.inMap[f]
	}
	if fg.bulk {
		e.index = -1
	} else {
		heap.Remove(h, e.index)
	}
	delete(d.entries, e.pfx)
	if e.hostRouted {
		d.hostRouted--
	} else {
		d.leave(e.pfx)
	}
}

// forgetting is what forget leaves to its caller for the prefixes of one
// change.
type forgetting struct {
	del [2][]netip.Prefix // per family, to take out of the LAN map
	// bulk: forget marks the entries (index -1) rather than taking each
	// out of its heap (O(log n) each: 30-40 ms more under the lock for
	// 180,000 of 200,000, TestLargeSetLockWait); compactHeaps takes them
	// all out after, in O(entries).
	bulk bool
}

// compactHeaps takes the entries forget marked (index -1) out of the
// four heaps and makes each a heap again: O(entries). d.mu held.
func (d *dataplane_) compactHeaps() {
	for _, h := range []*prefixHeap{&d.inMap[0], &d.inMap[1], &d.waiting[0], &d.waiting[1]} {
		kept := h.e[:0]
		for _, e := range h.e {
			if e.index >= 0 {
				e.index = len(kept)
				kept = append(kept, e)
			}
		}
		clear(h.e[len(kept):])
		h.e = kept
		heap.Init(h)
	}
}

// unkeep takes one prefix of family f that left the configuration out of
// the LAN map (forget), to free its slot for one of the configuration's:
// the kernel forwards what the LAN sends it by the host's routes again.
func (d *dataplane_) unkeep(f int) error {
	for p := range d.kept {
		if family(p) != f {
			continue
		}
		if err := d.lan.DeletePrefix(p); err != nil {
			return fmt.Errorf("delete %v: %w", p, err)
		}
		delete(d.kept, p)
		d.keptN[f]--
		d.warn.Log(slog.LevelInfo, "the LAN XDP prefix map is full: a prefix that left the configuration is no longer kept in it, the kernel forwards its packets by the host's routes", "prefix", p)
		return nil
	}
	return fmt.Errorf("%s of family %d kept, none found", plural.Count(d.keptN[f], "prefix", "prefixes"), f)
}

// balance fills family f's free slots with the best waiting prefixes and
// gives a slot held by a prefix of lower rank to a waiting one of higher.
// Each step is a map operation and a heap operation: the work follows the
// number of prefixes that move.
func (d *dataplane_) balance(f int) error {
	in, wait := &d.inMap[f], &d.waiting[f]
	for wait.Len() > 0 {
		best := wait.e[0]
		if in.Len()+d.keptN[f] >= d.capacity && d.keptN[f] > 0 {
			if err := d.unkeep(f); err != nil {
				return err
			}
			continue
		}
		if in.Len() >= d.capacity {
			worst := in.e[0]
			if !(best.rank[0] < worst.rank[0] || best.rank[0] == worst.rank[0] && best.rank[1] < worst.rank[1]) {
				return nil
			}
			if err := d.lan.DeletePrefix(worst.pfx); err != nil {
				return fmt.Errorf("delete %v: %w", worst.pfx, err)
			}
			heap.Pop(in)
			worst.mapped = false
			heap.Push(wait, worst)
			continue
		}
		// Free slots: the best waiting prefixes take them, added in one
		// call (addPrefixes: a batch of the map's).
		free := d.capacity - in.Len() - d.keptN[f]
		var batch []*prefixEntry
		if free >= wait.Len() {
			// All of them, best first: sorted rather than popped one
			// by one (a sort of a heap made of ascending pushes, as a
			// configuration's, finds it sorted).
			batch, wait.e = wait.e, nil
			slices.SortFunc(batch, compareRank)
		} else {
			batch = make([]*prefixEntry, 0, free)
			for len(batch) < free && wait.Len() > 0 {
				batch = append(batch, heap.Pop(wait).(*prefixEntry))
			}
		}
		pfxs := make([]netip.Prefix, len(batch))
		for i, e := range batch {
			pfxs[i] = e.pfx
		}
		n, err := addPrefixes(d.lan, pfxs)
		for _, e := range batch[:n] {
			e.mapped = true
		}
		in.pushAll(batch[:n])
		wait.pushAll(batch[n:])
		if err != nil {
			if n < len(batch) {
				return fmt.Errorf("add %v: %w", batch[n].pfx, err)
			}
			return fmt.Errorf("add prefixes: %w", err)
		}
	}
	return nil
}

// addPrefixes adds pfxs, of one family, to m in one call where m takes a
// batch (*afxdp.Port: AddPrefixes), else one by one; it returns how many,
// from the first, are in the map, and the error of the one after them.
func addPrefixes(m prefixMap, pfxs []netip.Prefix) (int, error) {
	if b, ok := m.(interface {
		AddPrefixes([]netip.Prefix) (int, error)
	}); ok {
		return b.AddPrefixes(pfxs)
	}
	for i, p := range pfxs {
		if err := m.AddPrefix(p); err != nil {
			return i, err
		}
	}
	return len(pfxs), nil
}

// deletePrefixes takes pfxs, prefixes of one family that left the
// configuration, out of the LAN map: in one call where the map takes a
// batch (*afxdp.Port: DeletePrefixes, BPF_MAP_DELETE_BATCH), else one by
// one. Each that fails is logged (d.warn, capped per change) and the
// others go on: after a failure in a batch, the rest go one by one, so
// that a map that fails every call costs one call a prefix, as before,
// not one batch a prefix. d.mu held.
func (d *dataplane_) deletePrefixes(pfxs []netip.Prefix) {
	if b, ok := d.lan.(interface {
		DeletePrefixes([]netip.Prefix) (int, error)
	}); ok && len(pfxs) > 1 {
		n, err := b.DeletePrefixes(pfxs)
		if err == nil {
			return
		}
		if n < len(pfxs) {
			d.warn.Warn("delete prefix from the LAN XDP map", "prefix", pfxs[n], "err", err)
			n++
		} else {
			d.warn.Warn("delete prefixes from the LAN XDP map", "prefixes", len(pfxs), "err", err)
		}
		pfxs = pfxs[n:]
	}
	for _, p := range pfxs {
		if err := d.lan.DeletePrefix(p); err != nil {
			d.warn.Warn("delete prefix from the LAN XDP map", "prefix", p, "err", err)
		}
	}
}
