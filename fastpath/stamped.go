package fastpath

import "sync/atomic"

// stampList is the set of peers whose stamps or flags changed since the
// control plane last asked (Engine.StampedPeers): a lock-free stack linked
// through the peers themselves (Peer.stampNext), each peer in it at most
// once (Peer.stampQueued). Workers push at most once per peer per publish
// (every PublishInterval) or when a packet is held; the control plane takes
// the whole stack once per tick. It never allocates.
type stampList struct {
	head atomic.Pointer[Peer]
}

// push adds p unless it is already in the list.
func (l *stampList) push(p *Peer) {
	if p.stampQueued.Load() || p.stampQueued.Swap(true) {
		return
	}
	for {
		old := l.head.Load()
		p.stampNext.Store(old)
		if l.head.CompareAndSwap(old, p) {
			return
		}
	}
}

// take empties the list and appends its peers to dst. A peer leaves the
// list before its stamps are read, so a publish after that point pushes
// it again: nothing is missed.
func (l *stampList) take(dst []*Peer) []*Peer {
	p := l.head.Swap(nil)
	for p != nil {
		next := p.stampNext.Load()
		p.stampNext.Store(nil)
		p.stampQueued.Store(false)
		dst = append(dst, p)
		p = next
	}
	return dst
}

// StampedPeers appends to dst the peers whose stamps the workers published,
// or that had a packet held (HandshakeNeeded, NeedNeighbour), since the last
// call, each once, and returns it. The control plane's tick
// (gateway.Device.Tick) evaluates only these peers and the ones whose timers
// fall due (ARCHITECTURE.md "Timers from stamps"), so that its work does not
// grow with the number of idle peers. A promotion of Next happens on a
// received packet, whose stamp is published with it. Safe for concurrent
// use; meant for one consumer.
func (e *Engine) StampedPeers(dst []*Peer) []*Peer { return e.stamped.take(dst) }
