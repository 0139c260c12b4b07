package gateway

import "time"

// nextHopSweepGap is the least time between two sweeps of every peer's
// next hop (sweepNextHops): a route change is followed for the idle peers
// at the next tick, and under a routing daemon's churn (a change every
// tick) the sweeps cost 100,000 peers' lookups (17 ms with a
// neighbour-table lookup each, BenchmarkSweepNextHops; the route lookup
// adds some tens of ns a peer) once a second, not at every tick.
const nextHopSweepGap = int64(time.Second)

// sweepNextHops follows the next hop of every peer whose endpoint has a
// MAC (followNeighbourLocked) once the resolver's answers may have changed
// (changes, Options.ResolveChanges' count read at the tick's start, grew:
// a route or a WAN neighbour entry), at most once a nextHopSweepGap: Tick
// otherwise evaluates only the peers that sent, received, were touched or
// have a deadline, so that an idle peer whose route moved sent its next
// packets to the old next hop, one tick's worth (up to 50 ms) after the
// peer woke, however long after the change (a helper: the first one to
// three datagrams of each such peer to the old router, and through a
// next hop that no longer answers, the old router answered them), where
// Linux's wg0 finds its cached route invalidated by the change (the
// routes' generation, dst_check) and sends its first packet by the new
// one. The peers the tick evaluated (gen: they read the resolver after
// changes was) and those without a MAC are left; a peer waiting for a MAC
// (NeedNeighbour) is evaluated at the next tick, which ends its backoff
// for the change, as is a peer whose lock a handshake worker holds.
// Tick's locks held.
func (d *Device) sweepNextHops(now int64, gen, changes uint64) {
	if d.opts.Resolve == nil || changes == d.sweptChanges || now < d.sweepAt {
		return
	}
	d.sweptChanges, d.sweepAt = changes, now+nextHopSweepGap
	d.mu.RLock()
	peers := d.peers.Append(d.sweep[:0])
	d.mu.RUnlock()
	for _, p := range peers {
		fp := p.fp
		if p.evalGen == gen {
			continue
		}
		ep := fp.Endpoint.Load()
		if ep == nil {
			continue
		}
		if needNeighbour(fp) {
			d.timers.set(p, now)
			continue
		}
		if ep.DstMAC == ([6]byte{}) {
			continue
		}
		if !p.mu.TryLock() {
			d.timers.set(p, now)
			continue
		}
		if !p.removed {
			d.followNeighbourLocked(p, now, true)
		}
		p.mu.Unlock()
	}
	clear(peers)
	d.sweep = peers[:0]
}

// resolveChanges is Options.ResolveChanges' count (0 without one).
func (d *Device) resolveChanges() uint64 {
	if d.opts.ResolveChanges == nil {
		return 0
	}
	return d.opts.ResolveChanges()
}
