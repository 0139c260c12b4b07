package gateway

import "net/netip"

// prefixList is a peer's allowed IPs in insertion order, as wg show lists
// them: adding a prefix the list holds moves it to the back (wireguard-go's
// allowedips does the same). Adding and removing cost O(1) amortized, so
// that a UAPI request re-adding or removing each of a peer's n prefixes
// (wg addconf of a 100,000-prefix country list applied again) takes O(n),
// not the O(n²) of a slice searched and shifted per line, which held
// Device.mu for seconds. Removed entries leave holes (the zero Prefix,
// never a valid one) that compaction drops once they are half the list;
// the index map is made only for lists longer than prefixListScan, so
// that a million one-prefix peers pay nothing for it.
//
// The zero value is an empty list. Guarded by Device.mu, as peer.allowed.
type prefixList struct {
	items []netip.Prefix       // insertion order, with holes
	pos   map[netip.Prefix]int // live prefix → its index in items; nil while short
	holes int
}

// prefixListScan is the longest list searched without an index.
const prefixListScan = 16

// Len returns the number of prefixes in the list.
func (l *prefixList) Len() int { return len(l.items) - l.holes }

// index returns the position of pfx in items, or -1.
func (l *prefixList) index(pfx netip.Prefix) int {
	if l.pos != nil {
		if i, ok := l.pos[pfx]; ok {
			return i
		}
		return -1
	}
	for i, q := range l.items {
		if q == pfx {
			return i
		}
	}
	return -1
}

// Add appends pfx (a valid prefix), moving it to the back if the list
// holds it already.
func (l *prefixList) Add(pfx netip.Prefix) {
	if i := l.index(pfx); i >= 0 {
		l.items[i] = netip.Prefix{}
		l.holes++
	}
	if l.pos != nil {
		l.pos[pfx] = len(l.items)
	}
	l.items = append(l.items, pfx)
	l.tidy()
}

// Remove takes pfx out of the list and reports whether it was there.
func (l *prefixList) Remove(pfx netip.Prefix) bool {
	i := l.index(pfx)
	if i < 0 {
		return false
	}
	l.items[i] = netip.Prefix{}
	l.holes++
	if l.pos != nil {
		delete(l.pos, pfx)
	}
	l.tidy()
	return true
}

// Reset empties the list, keeping its memory.
func (l *prefixList) Reset() {
	clear(l.items)
	l.items, l.pos, l.holes = l.items[:0], nil, 0
}

// Append appends the list's prefixes, in order, to dst.
func (l *prefixList) Append(dst []netip.Prefix) []netip.Prefix {
	for _, q := range l.items {
		if q.IsValid() {
			dst = append(dst, q)
		}
	}
	return dst
}

// All calls yield for each prefix in order (a range-over-func iterator).
func (l *prefixList) All(yield func(netip.Prefix) bool) {
	for _, q := range l.items {
		if q.IsValid() && !yield(q) {
			return
		}
	}
}

// tidy drops the holes once they are half the list, and makes or drops
// the index as the list crosses prefixListScan.
func (l *prefixList) tidy() {
	if l.holes > 0 && 2*l.holes >= len(l.items) {
		n := 0
		for _, q := range l.items {
			if q.IsValid() {
				l.items[n] = q
				n++
			}
		}
		clear(l.items[n:])
		l.items, l.holes = l.items[:n], 0
		l.pos = nil // rebuilt below with the new positions
	}
	switch {
	case l.pos == nil && len(l.items) > prefixListScan:
		l.pos = make(map[netip.Prefix]int, len(l.items))
		for i, q := range l.items {
			if q.IsValid() {
				l.pos[q] = i
			}
		}
	case l.pos != nil && len(l.items) <= prefixListScan:
		l.pos = nil
	}
}
