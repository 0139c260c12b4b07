package gateway

import (
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/noise"
)

func (d *Device) clearAllowedLocked(p *peer) {
	for pfx := range p.allowed.All {
		if d.allowed[pfx] == p {
			delete(d.allowed, pfx)
			d.dirtyPrefixes[pfx] = struct{}{}
		}
	}
	p.allowed.Reset()
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
	d.dirtyPrefixes[pfx] = struct{}{}
}

func (d *Device) removeAllowedLocked(p *peer, pfx netip.Prefix) {
	pfx = pfx.Masked()
	if d.allowed[pfx] != p {
		return
	}
	delete(d.allowed, pfx)
	p.allowed.Remove(pfx)
	d.dirtyPrefixes[pfx] = struct{}{}
}

// publishLocked hands the dataplane what changed since the last publish
// (peers created or forgotten, prefixes whose owner changed) as one
// fastpath.PeerChange, and returns (and logs) its error: what it could not
// take. Its cost follows the size of the change, not the configuration's.
func (d *Device) publishLocked() error {
	c := fastpath.PeerChange{Routes: make([]fastpath.Route, 0, len(d.dirtyPrefixes))}
	for p := range d.dirtyPeers {
		live := d.byFP[p.fp] == p
		switch {
		case live && !p.published:
			c.Add = append(c.Add, p.fp)
			p.published = true
		case !live && p.published:
			c.Remove = append(c.Remove, p.fp)
			p.published = false
		}
	}
	for pfx := range d.dirtyPrefixes {
		var fp *fastpath.Peer
		if o := d.allowed[pfx]; o != nil {
			fp = o.fp
		}
		c.Routes = append(c.Routes, fastpath.Route{Prefix: pfx, Peer: fp})
	}
	// clear costs the maps' capacity: after a large change, new ones.
	if len(d.dirtyPeers)+len(d.dirtyPrefixes) > 1024 {
		d.dirtyPeers, d.dirtyPrefixes = make(map[*peer]struct{}), make(map[netip.Prefix]struct{})
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
		return nil
	}
	if err := d.dp.UpdatePeers(c); err != nil {
		d.log.Error("the dataplane did not take the whole configuration", "err", err)
		return err
	}
	return nil
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
