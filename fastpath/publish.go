package fastpath

import (
	"net/netip"
)

// publish writes the dirty peers' stamps and counters to the shared Peer
// at most once per PublishInterval (ARCHITECTURE.md "Timers from stamps"),
// and applies roaming.
func (w *worker) publish(now int64) {
	w.lastPublish = now
	for _, id := range w.dirtyPeers {
		if id >= len(w.local)*localChunk {
			continue
		}
		pl := w.localAt(id)
		p := pl.peer
		if p == nil {
			continue
		}
		storeMax(&p.Stamps.LastSent, pl.lastSent)
		storeMax(&p.Stamps.LastReceived, pl.lastReceived)
		storeMax(&p.Stamps.LastDataSent, pl.lastDataSent)
		storeMax(&p.Stamps.LastDataReceived, pl.lastDataReceived)
		if pl.txBytes > 0 {
			p.TxBytes.Add(pl.txBytes)
			pl.txBytes = 0
		}
		if pl.rxBytes > 0 {
			p.RxBytes.Add(pl.rxBytes)
			pl.rxBytes = 0
		}
		// Roaming (whitepaper §2.1; ARCHITECTURE.md "Roaming"): move the endpoint to the
		// newest authenticated source only when nothing authenticated came
		// from the current endpoint during this interval, so that a peer
		// spreading its source ports does not make it flip per packet.
		if pl.lastSrc.IsValid() && !pl.sawCurrent {
			w.roam(pl)
		}
		pl.lastSrc = netip.AddrPort{}
		pl.sawCurrent = false
		pl.dirty = false
		w.e.stamped.push(p)
	}
	w.dirtyPeers = w.dirtyPeers[:0]
}
