//go:build linux

package afxdp

import (
	"slices"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/dataplane"
)

// TestFillRingEmptyCountedOnce: in copy mode (veth) a frame the kernel
// drops because the socket's fill ring is empty is counted both in
// xsk_rx_dropped and in xsk_rx_fill_ring_empty_descs; Stats.Losses (what
// wgpio stats lists as a port's drops) counts it once, as xsk_rx_dropped.
func TestFillRingEmptyCountedOnce(t *testing.T) {
	p := newVethPair(t, 1)
	a := openIn(t, p.a, p.v.A, Config{Filter: Filter{All: true}})
	// B never receives: after its fill ring's 64 frames the kernel finds
	// no free frame for the rest (its RX ring has room for all of them).
	b := openIn(t, p.b, p.v.B, Config{Filter: Filter{All: true}, FillRingSize: 64, RXRingSize: 4096,
		NumFrames: 64 + 2*dataplane.CacheBatch})
	if b.ZeroCopy() {
		t.Skip("zero-copy mode: the fill-ring counter counts the driver's refills there")
	}
	const n = 500
	sendTest(t, a.Queue(0).TX(), p.macA, p.macB, 1, n)
	s := b.Stats()
	dropped, empty := s.Backend["xsk_rx_dropped"], s.Backend["xsk_rx_fill_ring_empty_descs"]
	if dropped < n-64 || empty != dropped {
		t.Fatalf("xsk_rx_dropped %d, xsk_rx_fill_ring_empty_descs %d: want both equal, at least %d", dropped, empty, n-64)
	}
	l := s.Losses()
	if !slices.ContainsFunc(l, func(x string) bool { return strings.HasPrefix(x, "xsk_rx_dropped=") }) ||
		slices.ContainsFunc(l, func(x string) bool { return strings.HasPrefix(x, "xsk_rx_fill_ring_empty_descs=") }) {
		t.Errorf("Losses() = %v: want xsk_rx_dropped and not the fill-ring counter (the same frames)", l)
	}
}
