package gateway

import (
	"cmp"
	"errors"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/noise"
)

func (d *Device) clearAllowedLocked(p *peer) {
	for pfx := range p.allowed.All {
		if d.allowed[pfx] == p {
			delete(d.allowed, pfx)
			d.dirtyPrefixLocked(pfx, nil)
		}
	}
	p.allowed.Reset()
}

// dirtyPrefixLocked records that pfx's owner is now owner (nil: none;
// d.allowed[pfx] as the caller left it), for the next publish, in the
// order the prefixes are first touched: the publish then looks up no
// owner (200,000 map look-ups, 40-60 ms under d.mu, after a set of
// 100,000 peers).
func (d *Device) dirtyPrefixLocked(pfx netip.Prefix, owner *peer) {
	var fp *fastpath.Peer
	if owner != nil {
		fp = owner.fp
	}
	if i, ok := d.dirtyPrefixes[pfx]; ok {
		d.dirtyRoutes[i].Peer = fp
		return
	}
	d.dirtyPrefixes[pfx] = len(d.dirtyRoutes)
	d.dirtyRoutes = append(d.dirtyRoutes, fastpath.Route{Prefix: pfx, Peer: fp})
}

// addAllowedLocked gives pfx to p, at the end of p's list even when p held
// it already (wireguard-go's allowedips moves a re-inserted prefix to the
// back of its peer's list, so that wg show lists it there).
func (d *Device) addAllowedLocked(p *peer, pfx netip.Prefix) {
	pfx = pfx.Masked()
	if old := d.allowed[pfx]; old != nil && old != p {
		old.allowed.Remove(pfx)
	}
	d.allowed[pfx] = p
	p.allowed.Add(pfx)
	d.dirtyPrefixLocked(pfx, p)
}

func (d *Device) removeAllowedLocked(p *peer, pfx netip.Prefix) {
	pfx = pfx.Masked()
	if d.allowed[pfx] != p {
		return
	}
	delete(d.allowed, pfx)
	p.allowed.Remove(pfx)
	d.dirtyPrefixLocked(pfx, nil)
}

// publishLocked hands the dataplane what changed since the last publish
// (peers created or forgotten, prefixes whose owner changed) as one
// fastpath.PeerChange, and returns (and logs) its error: what it could not
// take. Its cost follows the size of the change, not the configuration's
// (O(k log k) for k peers added). It is publishLaterLocked with the
// later part done under d.mu.
func (d *Device) publishLocked() error {
	later, err := d.publishLaterLocked()
	if later != nil {
		err = later()
	}
	return err
}

// publishLaterLocked is publishLocked for a caller that calls later (not
// nil when the dataplane left part of the change to do:
// laterDataplane) once it has released d.mu, so that the handshakes,
// the timers and `wg show` do not wait for that part; later returns (and
// logs) its error.
//
// The peers it adds are in configuration order (Device.peers) and the
// prefixes it routes in the order the change first touched them (a file's
// or a request's order), not in the dirty maps' random order: a dataplane
// that cannot take every prefix ranks them so (fastgw's LAN prefix map
// keeps those of the peers configured first, each one's in its order).
func (d *Device) publishLaterLocked() (later func() error, err error) {
	var c fastpath.PeerChange
	var added []*peer
	for p := range d.dirtyPeers {
		// In the list exactly while d.byFP holds it (lookupOrCreateLocked,
		// removePeerLocked, removeAllPeersLocked): no look-up of a map.
		live := p.listIdx >= 0
		switch {
		case live && !p.published:
			added = append(added, p)
			p.published = true
		case !live && p.published:
			c.Remove = append(c.Remove, p.fp)
			p.published = false
		}
	}
	if n := len(d.peers.items); len(added) > 64 && len(added) >= n/8 {
		// Many: placed by their positions in the list, in O(n), rather
		// than sorted (a sort of 100,000 peers, 20 ms under d.mu).
		at := make([]*peer, n)
		for _, p := range added {
			at[p.listIdx] = p
		}
		added = slices.DeleteFunc(at, func(p *peer) bool { return p == nil })
	} else {
		slices.SortFunc(added, func(a, b *peer) int { return cmp.Compare(a.listIdx, b.listIdx) })
	}
	c.Add = make([]*fastpath.Peer, len(added))
	for i, p := range added {
		c.Add[i] = p.fp
	}
	// The dataplane keeps them (fastgw, until the later part of the
	// change): the next change starts a slice of its own.
	c.Routes, d.dirtyRoutes = d.dirtyRoutes, nil
	d.resetCreatedLocked()
	// clear costs the maps' capacity: after a large change, new ones.
	if len(d.dirtyPeers)+len(d.dirtyPrefixes) > 1024 {
		d.dirtyPeers, d.dirtyPrefixes = make(map[*peer]struct{}), make(map[netip.Prefix]int)
	} else {
		clear(d.dirtyPeers)
		clear(d.dirtyPrefixes)
	}
	if len(d.precompute) > 0 {
		select {
		case <-d.done: // closing: the handshakes are being zeroed
		default:
			d.bg.Add(1)
			d.precomputing.Add(1)
			go func(hs []*noise.Handshake) {
				defer d.bg.Done()
				defer d.precomputing.Add(-1)
				precompute(hs, d.done)
			}(d.precompute)
		}
		d.precompute = nil
	}
	if c.Empty() {
		return nil, nil
	}
	ld, ok := d.dp.(laterDataplane)
	if !ok {
		return nil, d.logDataplane(d.dp.UpdatePeers(c))
	}
	l, err := ld.UpdatePeersLater(c)
	if err != nil || l == nil {
		return nil, d.logDataplane(err)
	}
	return func() error { return d.logDataplane(l()) }, nil
}

// joinCreatedLocked hands the dataplane the peers created since the last
// publish that are still configured, without their routes (the next
// publish gives them), so that none is known to the handshakes and the
// timers without being in the dataplane's set: ipcSetConn calls it before
// it releases d.mu between the batches of a set. A peer the dataplane has
// not taken has no ID of its own (fastpath.Engine.UpdatePeers assigns
// it): before, an initiation answered between two batches posted its
// response, and installed a keypair, for a peer of ID 0 whose per-queue
// state is another peer's, and the engine wrote the ID at the set's end
// behind its workers (TestSetBatchPeersJoinAtOnce). The routes wait for
// the end, so that the workers see the request's routes whole (a
// replace_peers, a prefix moved from a peer to another); until then the
// new peers' packets meet the routes from before (what is sent to their
// allowed IPs is not theirs yet, and what they send is dropped as from
// outside their allowed IPs, counted). It costs the change's size: one
// call for the batch's new peers, in configuration order, which the
// dataplane ranks (fastgw's LAN map). d.mu held.
func (d *Device) joinCreatedLocked() {
	var add []*fastpath.Peer
	for _, p := range d.created {
		if p.listIdx >= 0 && !p.published {
			p.published = true
			add = append(add, p.fp)
		}
	}
	d.resetCreatedLocked()
	if len(add) == 0 {
		return
	}
	// A full LAN map (ENOSPC), which a dataplane reports for every
	// change while prefixes wait for a slot, is the request's to report
	// once, at its end (finishSetLocked), not once a batch.
	if err := d.dp.UpdatePeers(fastpath.PeerChange{Add: add}); !errors.Is(err, syscall.ENOSPC) {
		d.logDataplane(err)
	}
}

// resetCreatedLocked empties d.created, giving back the capacity of a
// large change's. d.mu held.
func (d *Device) resetCreatedLocked() {
	if cap(d.created) > 1024 {
		d.created = nil
		return
	}
	clear(d.created)
	d.created = d.created[:0]
}

// logDataplane logs err, the error of a change the dataplane did not
// take whole (UpdatePeers), if not nil, and returns it.
func (d *Device) logDataplane(err error) error {
	if err != nil {
		d.log.Error("the dataplane did not take the whole configuration", "err", err)
	}
	return err
}

// Settle waits until the background work of earlier configuration
// changes (the static-static DH of new peers, see precompute) has finished
// or the device is closing, as in a gateway that has run for a while; for
// tests and benchmarks that count Curve25519 operations or CPU time. Safe
// for concurrent use; changes made while it waits may extend the wait.
func (d *Device) Settle() {
	for d.precomputing.Load() > 0 {
		select {
		case <-d.done:
			return
		case <-time.After(time.Millisecond):
		}
	}
}

// precompute computes the static-static DH of hs (noise.Handshake.Precompute)
// on half the CPUs (at least one), until done closes: after a large
// configuration, so that the first handshake of each peer does not pay for
// it. A handshake that came first, or was zeroed since, costs nothing.
func precompute(hs []*noise.Handshake, done <-chan struct{}) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range max(1, runtime.GOMAXPROCS(0)/2) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(hs) {
					return
				}
				if i%256 == 0 {
					select {
					case <-done:
						return
					default:
					}
				}
				hs[i].Precompute()
			}
		}()
	}
	wg.Wait()
}
