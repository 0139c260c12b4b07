package fastpath

import (
	"net/netip"
)

// publish writes the dirty peers' stamps and counters to the shared Peer
// at most once per PublishInterval (ARCHITECTURE.md "Timers from stamps"),
// and applies roaming.
func (w *worker) publish(now int64) {
	w.lastPublish = now
	w.ghost = nil
	for _, id := range w.dirtyPeers {
		if id >= len(w.local)*localChunk {
			continue
		}
		pl := w.localAt(id)
		w.foldSendStamps(pl)
		p := pl.peer
		if p == nil {
			continue
		}
		storeMax(&p.Stamps.LastReceived, pl.lastReceived)
		storeMax(&p.Stamps.LastDataReceived, pl.lastDataReceived)
		if pl.txBytes != 0 {
			p.TxBytes.Add(uint64(int64(pl.txBytes)))
			pl.txBytes = 0
		}
		if pl.rxBytes > 0 {
			p.RxBytes.Add(pl.rxBytes)
			pl.rxBytes = 0
		}
		// Roaming (whitepaper §2.1; ARCHITECTURE.md "Roaming"): move the
		// endpoint to the newest authenticated source only when nothing
		// authenticated came from the current endpoint during this
		// interval, here or (seenElsewhere) at another worker, so that
		// a peer spreading its source ports, or sending from two
		// sources that reach two workers, does not make it flip.
		if pl.sawCurrent {
			w.markSeen(p, now)
		} else if pl.lastSrc.IsValid() && !w.seenElsewhere(p, now) {
			w.roam(pl)
			w.markSeen(p, now)
		}
		pl.lastSrc = netip.AddrPort{}
		pl.sawCurrent = false
		pl.dirty = false
		w.e.stamped.push(p)
	}
	w.dirtyPeers = w.dirtyPeers[:0]
	w.stampBase = now // every stamp is 0 now (sendstamps.go)
}

// Peer.endpointSeen holds a publish time (engine clock, ns) with its low
// seenWorkerBits bits replaced by the ID + 1 of the worker that wrote it
// (a resolution of 65 µs, against intervals of 50 ms).
const seenWorkerBits = 16

// seenQuiet is how long the endpoint must go unseen by the other workers
// before a worker moves it to a source of its own: two publish intervals,
// one for the other worker's sightings to be published (at its next
// publish, up to PublishInterval later) and one of slack for a late
// publish. A worker's own sightings it knows at once (sawCurrent).
const seenQuiet = 2 * int64(PublishInterval)

// markSeen records in p that the worker found p's endpoint live at now.
func (w *worker) markSeen(p *Peer, now int64) {
	const mask = 1<<seenWorkerBits - 1
	storeMax(&p.endpointSeen, now&^mask|int64(w.id+1)&mask)
}

// endpointQuiet reports whether p's endpoint was found live by some
// worker (this one included) once, and not within seenQuiet before now:
// the peer was heard from there and has gone silent, so that a new
// source is a move (sawSource roams at once). Never seen: not quiet,
// publish decides (a peer sending from two sources from its first
// packet on keeps the endpoint it has, TestRoamNoFlipAcrossWorkers).
func endpointQuiet(p *Peer, now int64) bool {
	const mask = 1<<seenWorkerBits - 1
	s := p.endpointSeen.Load()
	return s != 0 && now-s&^mask >= seenQuiet
}

// seenElsewhere reports whether another worker found p's endpoint live
// within seenQuiet before now: then the worker that saw only another
// source leaves the endpoint where it is. The latest mark alone is kept:
// when it is the worker's own (written at its previous publish, so
// older marks of others came before the interval it decides on), the
// endpoint counts as unseen elsewhere.
func (w *worker) seenElsewhere(p *Peer, now int64) bool {
	const mask = 1<<seenWorkerBits - 1
	s := p.endpointSeen.Load()
	return s != 0 && s&mask != int64(w.id+1)&mask && now-s&^mask < seenQuiet
}
