//go:build linux

package afxdp

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/internal/topo"
)

// TestTransmitLinkDown: in copy mode, frames transmitted on an interface
// without carrier (its veth peer set down) are dropped by the kernel, each
// kick's first with EBUSY, completed as if sent: they are counted as
// link_down, not as transmitted, and all of them at once (none waits on
// the ring to go out, stale, when the carrier returns). Once the peer is
// up again frames are transmitted and counted as such.
func TestTransmitLinkDown(t *testing.T) {
	p := newVethPair(t, 1)
	a := openIn(t, p.a, p.v.A, Config{Filter: Filter{All: true}})
	if a.ZeroCopy() {
		t.Fatal("veth in zero-copy mode: the test is of copy mode")
	}
	setB := func(state string) {
		t.Helper()
		if out, err := p.b.Run("ip", "link", "set", p.v.B, state); err != nil {
			t.Fatalf("ip link set %s %s: %v\n%s", p.v.B, state, err, out)
		}
	}
	if !a.linkUp() {
		t.Fatal("linkUp() = false with both ends up")
	}
	setB("down")
	if a.linkUp() {
		t.Fatal("linkUp() = true with the far end down")
	}
	tx := a.Queue(0).TX()
	const n = 100
	sendTest(t, tx, p.macA, p.macB, 1, n)
	s := a.Queue(0).Stats()
	if s.Drops[dataplane.DropLinkDown] != n || s.TXPackets != 0 || s.TXBytes != 0 {
		t.Errorf("%d frames to a link without carrier: link_down %d, tx packets %d, bytes %d; want %d 0 0 (drops %v)",
			n, s.Drops[dataplane.DropLinkDown], s.TXPackets, s.TXBytes, n, s.Drops.List())
	}
	if pend := tx.(*txHalf).s.tx.pending(); pend != 0 {
		t.Errorf("%d frames still on the TX ring, want 0", pend)
	}
	setB("up")
	sendTest(t, tx, p.macA, p.macB, 1, 10)
	s = a.Queue(0).Stats()
	if s.Drops[dataplane.DropLinkDown] != n || s.Drops[dataplane.DropDriver] != 0 || s.TXPackets != 10 || s.TXBytes != 640 {
		t.Errorf("10 frames once the carrier is back: link_down %d, tx packets %d, bytes %d; want %d 10 640",
			s.Drops[dataplane.DropLinkDown], s.TXPackets, s.TXBytes, n)
	}
}

// TestTransmitDriverDrop: in copy mode, frames the driver refuses with the
// link up (longer than the veth peer's MTU) are dropped by the kernel,
// each kick's first with EBUSY: they are all counted as driver_drop, not
// as transmitted, at once, and the frames behind them go out. Before,
// one a kick was dropped and the rest waited on the ring, neither sent
// nor counted, and the traffic after them behind (compat mode's LAN after
// 50 decrypted packets over its MTU delivered nothing more).
func TestTransmitDriverDrop(t *testing.T) {
	p := newVethPair(t, 1)
	a := openIn(t, p.a, p.v.A, Config{Filter: Filter{All: true}})
	if a.ZeroCopy() {
		t.Fatal("veth in zero-copy mode: the test is of copy mode")
	}
	if out, err := p.b.Run("ip", "link", "set", p.v.B, "mtu", "1000"); err != nil {
		t.Fatalf("ip link set %s mtu 1000: %v\n%s", p.v.B, err, out)
	}
	tx := a.Queue(0).TX()
	const n = 20
	frames := make([]dataplane.Frame, n)
	if k := tx.Alloc(frames); k != n {
		t.Fatalf("Alloc = %d, want %d", k, n)
	}
	for i := range frames {
		frames[i].SetLen(1200)
		b := frames[i].Data()
		copy(b[0:], p.macB)
		copy(b[6:], p.macA)
		binary.BigEndian.PutUint16(b[12:], testEtherType)
	}
	if m := tx.Transmit(frames); m != n {
		t.Fatalf("Transmit = %d, want %d", m, n)
	}
	sendTest(t, tx, p.macA, p.macB, 1, 10)
	s := a.Queue(0).Stats()
	if s.Drops[dataplane.DropDriver] != n || s.TXPackets != 10 {
		t.Errorf("%d frames over the far end's MTU, then 10 that fit: driver_drop %d, tx packets %d; want %d 10 (drops %v)",
			n, s.Drops[dataplane.DropDriver], s.TXPackets, n, s.Drops.List())
	}
	if pend := tx.(*txHalf).s.tx.pending(); pend != 0 {
		t.Errorf("%d frames still on the TX ring, want 0", pend)
	}
}

// TestTransmitGone: once the port's interface is deleted (the kernel
// unbinds the socket, sendto fails with ENXIO), frames transmitted on it
// are taken, dropped and counted as link_down, not as transmitted. Before,
// Transmit took and counted them as sent until the TX ring was full (2,048
// frames), where they waited until Close, and then refused the rest as
// for a busy ring.
func TestTransmitGone(t *testing.T) {
	p := newVethPair(t, 1)
	a := openIn(t, p.a, p.v.A, Config{Filter: Filter{All: true}})
	tx := a.Queue(0).TX()
	sendTest(t, tx, p.macA, p.macB, 1, 10)
	if out, err := p.b.Run("ip", "link", "del", p.v.B); err != nil {
		t.Fatalf("ip link del %s: %v\n%s", p.v.B, err, out)
	}
	const n = 100
	sendTest(t, tx, p.macA, p.macB, 1, n)
	s := a.Queue(0).Stats()
	if s.Drops[dataplane.DropLinkDown] != n || s.TXPackets != 10 || s.TXBytes != 640 {
		t.Errorf("%d frames after the interface was deleted: link_down %d, tx packets %d, bytes %d; want %d 10 640 (drops %v)",
			n, s.Drops[dataplane.DropLinkDown], s.TXPackets, s.TXBytes, n, s.Drops.List())
	}
	// More than the TX ring holds: each is taken and counted.
	const more = 3000
	if m := transmitAll(tx, more); m != more {
		t.Errorf("Transmit took %d of %d frames more", m, more)
	}
	if s := a.Queue(0).Stats(); s.Drops[dataplane.DropLinkDown] != n+more || s.TXPackets != 10 {
		t.Errorf("%d frames more: link_down %d, tx packets %d; want %d 10", more, s.Drops[dataplane.DropLinkDown], s.TXPackets, n+more)
	}
}

// transmitAll transmits up to n frames of 64 bytes on tx, 32 a call, until
// a call takes fewer than it was given, and returns how many were taken.
func transmitAll(tx dataplane.TX, n int) int {
	frames := make([]dataplane.Frame, 32)
	sent := 0
	for sent < n {
		k := tx.Alloc(frames[:min(len(frames), n-sent)])
		for i := range k {
			frames[i].SetLen(64)
		}
		m := tx.Transmit(frames[:k])
		tx.Free(frames[m:k])
		sent += m
		if k == 0 || m < k {
			break
		}
	}
	return sent
}

// TestTransmitGoneRingFull: an interface set down (its frames waiting on
// the TX ring, the ring full) and then deleted is found gone by the
// Transmit that finds the ring full, whose frames are then dropped and
// counted as link_down, not refused for a busy ring; the frames that
// waited on the ring are counted as link_down too, and only so (not also
// as sent, as they were when Transmit counted what it put on the ring).
func TestTransmitGoneRingFull(t *testing.T) {
	p := newVethPair(t, 1)
	const ring = 256
	a := openIn(t, p.a, p.v.A, Config{Filter: Filter{All: true}, TXRingSize: ring})
	if out, err := p.a.Run("ip", "link", "set", p.v.A, "down"); err != nil {
		t.Fatalf("ip link set %s down: %v\n%s", p.v.A, err, out)
	}
	tx := a.Queue(0).TX()
	if m := transmitAll(tx, 2*ring); m != ring {
		t.Fatalf("Transmit took %d frames on an interface set down, want %d (the ring full)", m, ring)
	}
	if s := a.Queue(0).Stats(); s.TXPackets != 0 {
		t.Errorf("%d frames waiting on the TX ring: tx packets %d, want 0", ring, s.TXPackets)
	}
	frames := make([]dataplane.Frame, 32)
	if out, err := p.a.Run("ip", "link", "del", p.v.A); err != nil {
		t.Fatalf("ip link del %s: %v\n%s", p.v.A, err, out)
	}
	k := tx.Alloc(frames)
	for i := range k {
		frames[i].SetLen(64)
	}
	if m := tx.Transmit(frames[:k]); m != k {
		tx.Free(frames[m:k])
		t.Fatalf("Transmit on a full ring of a deleted interface = %d, want %d", m, k)
	}
	s := a.Queue(0).Stats()
	if want := uint64(ring + k); s.Drops[dataplane.DropLinkDown] != want || s.TXPackets != 0 {
		t.Errorf("link_down %d, tx packets %d; want %d 0 (%d frames on the ring, %d refused by none; drops %v)",
			s.Drops[dataplane.DropLinkDown], s.TXPackets, want, ring, k, s.Drops.List())
	}
}

// TestTransmitWaitingCountedOnce: frames that wait on the TX ring of an
// interface set down (the kernel takes none) are counted once, when their
// fate is known: sent once the interface is up again and takes them,
// link_down if it is then deleted or comes up without carrier, closed if
// the port closes first; not as sent while they wait. Before, Transmit
// counted them as sent when it put them on the ring, and the kick that
// found the interface deleted (unbind) or without carrier (dropped)
// counted them as link_down too.
func TestTransmitWaitingCountedOnce(t *testing.T) {
	const waiting, more = 20, 10
	for _, c := range []struct {
		name string
		// then runs while the frames wait; it reports whether more
		// frames are transmitted after it.
		then    func(t *testing.T, p *vethPair, a *Port) bool
		sent    uint64
		reason  dataplane.DropReason
		dropped uint64
		// drained: the ring is empty at the end (the interface took
		// every frame, sending or dropping it).
		drained bool
	}{
		{"deleted", func(t *testing.T, p *vethPair, a *Port) bool {
			run(t, p.a, "ip", "link", "del", p.v.A)
			return true
		}, 0, dataplane.DropLinkDown, waiting + more, false},
		{"up without carrier", func(t *testing.T, p *vethPair, a *Port) bool {
			run(t, p.b, "ip", "link", "set", p.v.B, "down")
			run(t, p.a, "ip", "link", "set", p.v.A, "up")
			return true
		}, 0, dataplane.DropLinkDown, waiting + more, true},
		{"up", func(t *testing.T, p *vethPair, a *Port) bool {
			run(t, p.a, "ip", "link", "set", p.v.A, "up")
			return true
		}, waiting + more, dataplane.DropLinkDown, 0, true},
		{"closed", func(t *testing.T, p *vethPair, a *Port) bool {
			if err := a.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return false
		}, 0, dataplane.DropClosed, waiting, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newVethPair(t, 1)
			a := openIn(t, p.a, p.v.A, Config{Filter: Filter{All: true}})
			if a.ZeroCopy() {
				t.Fatal("veth in zero-copy mode: the test is of copy mode")
			}
			run(t, p.a, "ip", "link", "set", p.v.A, "down")
			tx := a.Queue(0).TX()
			sendTest(t, tx, p.macA, p.macB, 1, waiting)
			h := tx.(*txHalf)
			if pend := h.s.tx.pending(); pend != waiting {
				t.Fatalf("%d frames on the TX ring of an interface set down, want %d", pend, waiting)
			}
			if s := a.Queue(0).Stats(); s.TXPackets != 0 || s.Drops.Total() != 0 {
				t.Errorf("%d frames waiting on the TX ring: tx packets %d, drops %v; want 0, none", waiting, s.TXPackets, s.Drops.List())
			}
			total := uint64(waiting)
			if c.then(t, p, a) {
				sendTest(t, tx, p.macA, p.macB, 1, more)
				total += more
			}
			s := a.Queue(0).Stats()
			if s.TXPackets != c.sent || s.TXBytes != 64*c.sent || s.Drops[c.reason] != c.dropped {
				t.Errorf("tx packets %d, bytes %d, %v %d; want %d %d %d (drops %v)",
					s.TXPackets, s.TXBytes, c.reason, s.Drops[c.reason], c.sent, 64*c.sent, c.dropped, s.Drops.List())
			}
			if got := s.TXPackets + s.Drops.Total(); got != total {
				t.Errorf("tx packets %d + drops %v = %d, want %d: each frame transmitted counted once", s.TXPackets, s.Drops.List(), got, total)
			}
			if !c.drained {
				return // (closed: the rings unmapped)
			}
			if pend := h.s.tx.pending(); pend != 0 {
				t.Errorf("%d frames still on the TX ring, want 0", pend)
			}
		})
	}
}

// run runs a command in ns, failing the test if it fails.
func run(t *testing.T, ns *topo.NS, args ...string) {
	t.Helper()
	if out, err := ns.Run(args[0], args[1:]...); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
