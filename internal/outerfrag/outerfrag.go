// Package outerfrag writes an outer packet's IP fragments into dataplane
// frames: what the fast path (fastpath/wanfrag.go) and compat mode's bind
// (bind/fragment.go) both do with an outer packet over the WAN MTU, as the
// Linux kernel fragments what its WireGuard sends. The cutting itself is
// package header's (IPv4Fragmenter, RFC 791 §3.2; IPv6Fragmenter, RFC 8200
// §4.5); the callers choose the frames, the identification and what a
// failure costs.
package outerfrag

import (
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
)

// Into writes the fragments of the IP packet at f.Data()[l2:], which f4
// (or, with v6, f6) was Reset on and cut into len(more)+1 fragments: 1 and
// later into more (frames of the caller's, allocated, each given f's first
// l2 bytes, its Ethernet header), then 0 into f itself (IPv6: its headers
// moved IPv6FragmentLen bytes into f's headroom, the data left where they
// are). It reports false, f's packet then unusable and more partly
// written, when a frame of more is too short for its fragment or f has
// not the headroom; the caller frees them. No allocation.
func Into(f *dataplane.Frame, more []dataplane.Frame, l2 int, v6 bool, f4 *header.IPv4Fragmenter, f6 *header.IPv6Fragmenter) bool {
	eth := f.Data()[:l2]
	for i := range more {
		m := &more[i]
		n := f4.Len(i + 1)
		if v6 {
			n = f6.Len(i + 1)
		}
		if !m.SetLen(l2 + n) {
			return false
		}
		b := m.Data()
		copy(b[:l2], eth)
		if v6 {
			f6.Put(b[l2:], i+1)
		} else {
			f4.Put(b[l2:], i+1)
		}
	}
	if !v6 {
		f.SetLen(l2 + f4.PutFirst())
		return true
	}
	b := f.Prepend(header.IPv6FragmentLen)
	if b == nil {
		return false
	}
	copy(b[:l2], b[header.IPv6FragmentLen:header.IPv6FragmentLen+l2])
	f.SetLen(l2 + f6.PutFirst(b[l2:]))
	return true
}
