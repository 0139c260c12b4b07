package arp

import (
	"net/netip"
	"time"
)

// Holder keeps frames that wait for a neighbour to resolve, for one queue.
// The frames stay the caller's: F is whatever names a frame (a dataplane
// frame descriptor, an index); the Holder stores at most perQueue of them
// in all and perNeighbour for any one address, in memory allocated once by
// NewHolder, so waiting frames can never take more than perQueue of a
// queue's buffers. A Holder has one owner goroutine (the queue's) and is not
// safe for concurrent use.
type Holder[F any] struct {
	t            *Table
	perNeighbour int
	wait         time.Duration
	held         []heldFrame[F] // len ≤ cap = perQueue, never grows

	// Counters (read them from the owner goroutine).
	Held     uint64 // frames accepted by Hold
	Released uint64 // frames handed to send by Release
	Overflow uint64 // frames refused by Hold: perQueue or perNeighbour reached
	Failed   uint64 // frames refused or dropped because the neighbour failed or the table is full
	Expired  uint64 // frames dropped by Release after waiting longer than the wait time
}

type heldFrame[F any] struct {
	ip    netip.Addr
	f     F
	since time.Time
}

// NewHolder returns a Holder over t that keeps at most perQueue frames,
// perNeighbour of them for one address, for at most wait (0: the table's
// MaxMulticast × RetransTimer, the time resolution may take).
func NewHolder[F any](t *Table, perNeighbour, perQueue int, wait time.Duration) *Holder[F] {
	if perQueue < 1 {
		perQueue = 1
	}
	if perNeighbour < 1 || perNeighbour > perQueue {
		perNeighbour = perQueue
	}
	if wait <= 0 {
		wait = time.Duration(t.cfg.MaxMulticast) * t.cfg.RetransTimer
	}
	return &Holder[F]{t: t, perNeighbour: perNeighbour, wait: wait, held: make([]heldFrame[F], 0, perQueue)}
}

// Hold is called when Table.Lookup(ip) missed. It asks the table to
// resolve ip and keeps f until Release sends or drops it. It returns false
// when the caller must drop f at once (counted): the holder or ip's share
// of it is full, or ip has failed to resolve. It allocates nothing; it takes
// the table's lock (a miss is off the hot path).
func (h *Holder[F]) Hold(ip netip.Addr, f F) bool {
	if len(h.held) == cap(h.held) {
		h.Overflow++
		return false
	}
	n := 0
	for i := range h.held {
		if h.held[i].ip == ip {
			n++
		}
	}
	if n >= h.perNeighbour {
		h.Overflow++
		return false
	}
	switch h.t.Resolve(ip) {
	case StateFailed, StateNone:
		h.Failed++
		return false
	}
	h.held = append(h.held, heldFrame[F]{ip: ip, f: f, since: h.t.cfg.Now()})
	h.Held++
	return true
}

// Len returns the number of frames held.
func (h *Holder[F]) Len() int { return len(h.held) }

// Release goes over the held frames in order: a frame whose neighbour now
// resolves is passed to send with the MAC (the caller writes it and
// transmits), a frame whose neighbour failed or that waited too long is
// passed to drop; the others stay. The callbacks own the frame after the
// call and must not call back into h. Call it from the queue's loop when
// frames are held (every burst or every millisecond); it allocates nothing.
func (h *Holder[F]) Release(send func(ip netip.Addr, mac MAC, f F), drop func(f F)) {
	if len(h.held) == 0 {
		return
	}
	now := h.t.cfg.Now()
	var zero F
	j := 0
	for i := range h.held {
		hf := h.held[i]
		h.held[i].f = zero
		if mac, ok := h.t.Lookup(hf.ip); ok {
			h.Released++
			send(hf.ip, mac, hf.f)
			continue
		}
		if now.Sub(hf.since) >= h.wait {
			h.Expired++
			drop(hf.f)
			continue
		}
		h.held[j] = hf
		j++
	}
	clear(h.held[j:])
	h.held = h.held[:j]
}
