package fastpath

import "math"

// A worker's send stamps and byte counts of a peer (peerLocal.sentAt,
// dataSentAt, txBytes) are 32-bit, so that all that outbound keeps of a
// peer fits in one cache line with the outer headers' destination
// (worker.go): a stamp is the time in ns since w.stampBase plus one (0:
// none), w.stampBase being the time of the worker's last publish, which
// folds them into the Peer's 64-bit Stamps and clears them; the byte
// count is signed and moved to Peer.TxBytes before it reaches txFlush.

// txFlush bounds a peerLocal's unpublished byte count: reaching it, the
// count goes to the Peer at once (some 1 GiB in one publish interval: 170
// Gbit/s to one peer from one queue). Below it, the bytes taken back
// after it (notSent: one burst's at most) keep it above -2^31.
const txFlush = 1 << 30

// stamp returns now as a stamp for the peers' sentAt and dataSentAt:
// computed once per burst and before any of them is written, since when
// now is out of the stamps' range (2^32-2 ns from w.stampBase: a worker
// that publishes every 50 ms reaches it only after 4.3 s parked) it moves
// the base first (restamp). now is the engine's clock.
func (w *worker) stamp(now int64) uint32 {
	if d := uint64(now - w.stampBase); d < math.MaxUint32 {
		return uint32(d) + 1
	}
	return w.restamp(now)
}

// restamp moves w.stampBase to now: the send stamps of the dirty peers
// go to their Peers first (the rest of what publish does waits for it).
//
//go:noinline
func (w *worker) restamp(now int64) uint32 {
	for _, id := range w.dirtyPeers {
		if id < len(w.local)*localChunk {
			w.foldSendStamps(w.localAt(id))
		}
	}
	w.stampBase = now
	return 1
}

// foldSendStamps moves pl's send stamps to its Peer's Stamps.
func (w *worker) foldSendStamps(pl *peerLocal) {
	if p := pl.peer; p != nil {
		storeMax(&p.Stamps.LastSent, w.stampTime(pl.sentAt))
		storeMax(&p.Stamps.LastDataSent, w.stampTime(pl.dataSentAt))
	}
	pl.sentAt, pl.dataSentAt = 0, 0
}

// stampTime returns the engine clock time of stamp s, 0 for none.
func (w *worker) stampTime(s uint32) int64 {
	if s == 0 {
		return 0
	}
	return w.stampBase + int64(s-1)
}

// addTx counts n bytes sent to pl's peer (n < 2^30).
func addTx(pl *peerLocal, n int) {
	pl.txBytes += int32(n)
	if pl.txBytes >= txFlush {
		flushTx(pl)
	}
}

// flushTx moves pl's unpublished byte count to its peer's TxBytes.
//
//go:noinline
func flushTx(pl *peerLocal) {
	pl.peer.TxBytes.Add(uint64(int64(pl.txBytes)))
	pl.txBytes = 0
}
