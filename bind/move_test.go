package bind

import (
	"errors"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/wgpio/wgpio/header"
)

// TestOpenMoves: Open with another port than the Bind's (wireguard-go's
// rebind for wg set listen-port) moves it through Config.Move: datagrams
// to the new port are received and those to the old one dropped as
// not_ours, Send writes the new source port, Open(0) keeps it; a port Move
// refuses is refused with Move's error, and the Bind keeps its port.
func TestOpenMoves(t *testing.T) {
	var moved []uint16
	busy := uint16(ourPort + 2)
	r := newRig(t, 1, func(c *Config) {
		c.Move = func(port uint16) error {
			moved = append(moved, port)
			if port == busy {
				return syscall.EADDRINUSE
			}
			return nil
		}
	})
	if err := r.bind.Close(); err != nil {
		t.Fatal(err)
	}
	newPort := uint16(ourPort + 1)
	fns, got, err := r.bind.Open(newPort)
	if err != nil || got != newPort || len(moved) != 1 || moved[0] != newPort {
		t.Fatalf("Open(%d) = %d, %v after Move(%v), want %d, nil after Move([%d])", newPort, got, err, moved, newPort, newPort)
	}
	r.fns = fns
	from := netip.AddrPortFrom(peerIP4, 1)
	r.inject(t, 0, udpFrame(from, netip.AddrPortFrom(ourIP4, ourPort), []byte("old"), false))
	r.inject(t, 0, udpFrame(from, netip.AddrPortFrom(ourIP4, newPort), []byte("new"), false))
	bufs, sizes, eps := recvBufs()
	n, err := fns[0](bufs, sizes, eps)
	if err != nil || n != 1 || string(bufs[0][:sizes[0]]) != "new" {
		t.Errorf("ReceiveFunc = %d, %v (first %q), want the one datagram to port %d", n, err, bufs[0][:sizes[0]], newPort)
	}
	if d := r.bind.Stats().Drops[DropNotOurs]; d != 1 {
		t.Errorf("Drops[not_ours] = %d, want 1 (the datagram to the old port)", d)
	}

	ep, err := r.bind.ParseEndpoint(from.String())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.bind.Send([][]byte{[]byte("x")}, ep); err != nil {
		t.Fatal(err)
	}
	if out := r.collect(t, 1, time.Second); len(out) != 1 {
		t.Errorf("peer received %d frames, want 1", len(out))
	} else if src := header.UDP(out[0][header.EthernetLen+header.IPv4MinLen:]).SrcPort(); src != newPort {
		t.Errorf("sent from port %d, want %d", src, newPort)
	}
	// A configured endpoint has no source until the peer is heard from
	// (Send asks the route), as wireguard-go's StdNetBind's; the
	// received datagram's endpoint has ours, at the new port.
	if got := ep.SrcToString(); got != "" {
		t.Errorf("configured endpoint's SrcToString = %s, want none", got)
	}
	if n == 1 {
		if got := eps[0].SrcToString(); got != netip.AddrPortFrom(ourIP4, newPort).String() {
			t.Errorf("received endpoint's SrcToString = %s, want %v", got, netip.AddrPortFrom(ourIP4, newPort))
		}
	}

	r.bind.Close()
	if _, _, err := r.bind.Open(busy); !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("Open(%d), which Move refuses = %v, want EADDRINUSE", busy, err)
	}
	if fns, got, err := r.bind.Open(0); err != nil || got != newPort {
		t.Errorf("Open(0) after the refused move = %d, %v, want %d (the port kept)", got, err, newPort)
	} else {
		r.fns = fns
	}
}

// TestSetAddrs: after SetAddrs (a WAN renumbered), datagrams to the new
// address are received and those to the old one dropped as not_ours, and
// Send writes the new source address.
func TestSetAddrs(t *testing.T) {
	r := newRig(t, 1, nil)
	newIP4 := netip.MustParseAddr("198.18.9.5")
	r.bind.SetAddrs(newIP4, ourIP6)
	from := netip.AddrPortFrom(peerIP4, 1)
	r.inject(t, 0, udpFrame(from, netip.AddrPortFrom(ourIP4, ourPort), []byte("old"), false))
	r.inject(t, 0, udpFrame(from, netip.AddrPortFrom(newIP4, ourPort), []byte("new"), false))
	bufs, sizes, eps := recvBufs()
	n, err := r.fns[0](bufs, sizes, eps)
	if err != nil || n != 1 || string(bufs[0][:sizes[0]]) != "new" {
		t.Errorf("ReceiveFunc = %d, %v (first %q), want the one datagram to %v", n, err, bufs[0][:sizes[0]], newIP4)
	}
	if d := r.bind.Stats().Drops[DropNotOurs]; d != 1 {
		t.Errorf("Drops[not_ours] = %d, want 1 (the datagram to the old address)", d)
	}
	ep, err := r.bind.ParseEndpoint(from.String())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.bind.Send([][]byte{[]byte("x")}, ep); err != nil {
		t.Fatal(err)
	}
	if out := r.collect(t, 1, time.Second); len(out) != 1 {
		t.Errorf("peer received %d frames, want 1", len(out))
	} else if src := netip.AddrFrom4([4]byte(out[0][header.EthernetLen+12 : header.EthernetLen+16])); src != newIP4 {
		t.Errorf("sent from %v, want %v", src, newIP4)
	}
}
