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
	// wake holds one value when a worker asked the control plane for
	// something that should not wait for its next tick
	// (Engine.ControlWake); capacity 1, made by New.
	wake chan struct{}
}

// signal makes the next receive from l.wake return at once; it never
// blocks (a value already waiting covers this one too). Callers push the
// peer first, so that the tick the wake brings sees it.
func (l *stampList) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
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

// ControlWake returns a channel that receives when a worker raised a flag
// the control plane should act on at once rather than at its next tick
// (up to PublishInterval, 50 ms, later): HandshakeNeeded on a peer whose
// flag was clear for the first packet a worker holds for it (a peer
// without a usable session; not the packets held after it while the
// handshake is in flight, worker.ask), or for one whose sending counter
// ran out, or NeedNeighbour (the first packet for an endpoint whose next
// hop has no MAC). Linux's WireGuard and
// wireguard-go send a handshake initiation as soon as such a packet is
// queued (wg_packet_send_staged_packets, SendStagedPackets); the gateway's
// tick loop (gateway.Device.Start) runs a tick when this receives, at
// most once a millisecond, so that the first packet of a session no
// longer waits up to 50 ms for its initiation. The channel has room for
// one value: wakes while one waits are merged. One channel per engine,
// for one consumer.
func (e *Engine) ControlWake() <-chan struct{} { return e.stamped.wake }
