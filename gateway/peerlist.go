package gateway

// peerList is the device's peers in configuration order, the order wg show
// and Peers list them and the dataplane ranks them in. Adding appends;
// removing leaves a hole (nil) that compaction drops once the holes are
// half the list, so that both cost O(1) amortized: a UAPI request
// removing k of n peers (wg syncconf dropping half of a 100,000-peer
// configuration, or update_only lines naming peers that do not exist)
// takes O(k), where searching and shifting a slice per removal took O(k·n)
// under Device.mu. Each peer knows its position (peer.listIdx), so no
// index map is kept.
//
// The zero value is an empty list. Guarded by Device.mu, as the peers'
// listIdx.
type peerList struct {
	items []*peer // configuration order, with holes
	holes int
}

// Len returns the number of peers in the list.
func (l *peerList) Len() int { return len(l.items) - l.holes }

// Add appends p, which must not be in the list.
func (l *peerList) Add(p *peer) {
	p.listIdx = len(l.items)
	l.items = append(l.items, p)
}

// Remove takes p, which must be in the list, out of it.
func (l *peerList) Remove(p *peer) {
	l.items[p.listIdx] = nil
	p.listIdx = -1
	l.holes++
	if 2*l.holes < len(l.items) {
		return
	}
	n := 0
	for _, q := range l.items {
		if q != nil {
			q.listIdx = n
			l.items[n] = q
			n++
		}
	}
	clear(l.items[n:])
	l.items, l.holes = l.items[:n], 0
	if cap(l.items) > peerListKeep && 4*n < cap(l.items) {
		// Most peers are gone: give the memory of the old peak back.
		l.items = append(make([]*peer, 0, 2*n), l.items...)
	}
}

// peerListKeep is the capacity, in peers, below which compaction keeps
// the list's array whatever is left in it.
const peerListKeep = 1024

// Reset empties the list.
func (l *peerList) Reset() {
	for _, q := range l.items {
		if q != nil {
			q.listIdx = -1
		}
	}
	if cap(l.items) > peerListKeep {
		l.items = nil
	} else {
		clear(l.items)
		l.items = l.items[:0]
	}
	l.holes = 0
}

// Append appends the list's peers, in order, to dst.
func (l *peerList) Append(dst []*peer) []*peer {
	for _, q := range l.items {
		if q != nil {
			dst = append(dst, q)
		}
	}
	return dst
}

// All calls yield for each peer in order (a range-over-func iterator).
func (l *peerList) All(yield func(*peer) bool) {
	for _, q := range l.items {
		if q != nil && !yield(q) {
			return
		}
	}
}
