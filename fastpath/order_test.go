package fastpath

import (
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
)

// orderRig sends UDP packets numbered from first up from host A toward host
// B through gateway A's outbound path, and reads the numbers host B
// receives, in their order of arrival.
type orderRig struct {
	*rig
	t testing.TB
}

func (o orderRig) send(first, n int) {
	o.t.Helper()
	tx := o.hostA.Queue(0).TX()
	var frames []dataplane.Frame
	for i := range n {
		frames = append(frames, udpFrame(o.t, tx, o.lanA.MAC(), o.hostA.MAC(), hostAddrA, hostAddrB, 1, 2, seqPayload(uint32(first+i), 40)))
	}
	sendAll(o.t, o.hostA, 0, frames)
	o.a.workers[0].outbound(o.clock.Now())
}

func (o orderRig) received(want int) []int {
	o.t.Helper()
	var seqs []int
	off := header.EthernetLen + header.IPv4MinLen + header.UDPLen
	recvAll(o.t, o.hostB, want, time.Second, func(_ int, d []byte) {
		seqs = append(seqs, int(binary.BigEndian.Uint32(d[off:])))
	})
	return seqs
}

// TestHeldSentBeforeNewer: packets held while the peer had no session
// leave before the packets that arrive after the session is in place,
// also when those come in the same turn of the worker as the keypair
// (outbound runs before the turn's flushHeld), as Linux's WireGuard and
// wireguard-go send their staged packets first: a flow is never
// reordered by the handshake it waited for.
func TestHeldSentBeforeNewer(t *testing.T) {
	o := orderRig{newRig(t, rigConfig{noKeys: true}), t}
	o.send(0, 3)
	if s := o.a.Stats()[0]; s.Held != 3 {
		t.Fatalf("held = %d before the session, want 3", s.Held)
	}
	o.installKeys()
	o.send(3, 3) // the turn's outbound: the keypair is usable now
	o.a.workers[0].flushHeld(o.clock.Now())
	o.b.workers[0].inbound(o.clock.Now())
	got := o.received(6)
	if want := []int{0, 1, 2, 3, 4, 5}; !slices.Equal(got, want) {
		t.Errorf("host B received %v, want %v; drops A %v, B %v", got, want, TotalDrops(o.a.Stats()), TotalDrops(o.b.Stats()))
	}
	if s := o.a.Stats()[0]; s.Held != 0 || o.peerAB.Holding() {
		t.Errorf("after the session: held = %d, Holding() = %v; want 0, false", s.Held, o.peerAB.Holding())
	}
}

// TestNeighbourWaitKeepsOrder: packets from the tunnel that wait for their
// LAN next hop's MAC leave before packets to the same host that arrive
// after the MAC is known, as Linux sends a neighbour's queued packets
// first (its arp_queue): the first packets to a LAN host are never
// overtaken by the next ones.
func TestNeighbourWaitKeepsOrder(t *testing.T) {
	o := orderRig{newRig(t, rigConfig{}), t}
	res := o.b.cfg.LANResolver.(*staticResolver)
	res.mu.Lock()
	mac := res.def
	res.def = [6]byte{}
	res.mu.Unlock()
	wb := o.b.workers[0]
	o.send(0, 3)
	wb.inbound(o.clock.Now())
	if s := o.b.Stats()[0]; s.Held != 3 {
		t.Fatalf("held at B = %d while the LAN host's MAC is unknown, want 3; drops %v", s.Held, TotalDrops(o.b.Stats()))
	}
	res.mu.Lock()
	res.def = mac
	res.mu.Unlock()
	o.send(3, 2)
	wb.inbound(o.clock.Now()) // resolves now: must not overtake the three
	o.send(5, 1)
	wb.inbound(o.clock.Now())
	wb.nbrTried = time.Time{} // the retry is due
	wb.flushNeighbourWait(o.clock.Now())
	o.send(6, 2)
	wb.inbound(o.clock.Now())
	got := o.received(8)
	if want := []int{0, 1, 2, 3, 4, 5, 6, 7}; !slices.Equal(got, want) {
		t.Errorf("host B received %v, want %v; drops B %v", got, want, TotalDrops(o.b.Stats()))
	}
	if s := o.b.Stats()[0]; s.Held != 0 {
		t.Errorf("held at B = %d after the flush, want 0", s.Held)
	}
	for i, e := range wb.nbr {
		if e.waiting != 0 {
			t.Errorf("neighbour cache slot %d (%v) still counts %d waiting frames", i, e.addr, e.waiting)
		}
	}
}
