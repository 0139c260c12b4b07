package gateway

// timerHeap is the control plane's timer queue: the peers ordered by the
// next moment their timers need a look (peer.due, ns of Options.Now), a
// binary min-heap with each peer's position kept in the peer (heapIdx, -1
// when absent) so that a peer is in it at most once and moves in O(log n).
// Tick pops what is due, evaluates those peers with the peers the workers
// stamped, and pushes each back with its new deadline (nextDueLocked): the
// tick's work is O((due + stamped) · log n), not a walk of every peer
// (ARCHITECTURE.md "Timers from stamps"). Owned by Tick (Device.tickMu).
type timerHeap []*peer

func (h timerHeap) less(i, j int) bool { return h[i].due < h[j].due }

func (h timerHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx = i
	h[j].heapIdx = j
}

func (h timerHeap) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.less(i, parent) {
			return
		}
		h.swap(i, parent)
		i = parent
	}
}

func (h timerHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h.swap(i, m)
		i = m
	}
}

// set schedules p at due (0: unschedule).
func (h *timerHeap) set(p *peer, due int64) {
	if due == 0 {
		h.remove(p)
		return
	}
	if p.heapIdx >= 0 {
		old := p.due
		p.due = due
		if due < old {
			h.up(p.heapIdx)
		} else if due > old {
			h.down(p.heapIdx)
		}
		return
	}
	p.due = due
	p.heapIdx = len(*h)
	*h = append(*h, p)
	h.up(p.heapIdx)
}

// remove takes p out if it is in.
func (h *timerHeap) remove(p *peer) {
	i := p.heapIdx
	if i < 0 {
		return
	}
	last := len(*h) - 1
	if i != last {
		h.swap(i, last)
	}
	(*h)[last] = nil
	*h = (*h)[:last]
	if i != last {
		h.down(i)
		h.up(i)
	}
	p.heapIdx, p.due = -1, 0
}

// popDue removes and appends to dst every peer due at or before now.
func (h *timerHeap) popDue(now int64, dst []*peer) []*peer {
	for len(*h) > 0 && (*h)[0].due <= now {
		p := (*h)[0]
		h.remove(p)
		dst = append(dst, p)
	}
	return dst
}
