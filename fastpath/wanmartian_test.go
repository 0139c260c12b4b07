package fastpath

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/protocol"
)

// TestWANMartianSource: a WireGuard datagram to the gateway from a source
// Linux's IP input drops (header.MartianSource) is counted wan_martian and
// goes no further: not to the control plane (whose cookie reply would go
// to it), not to the session (whose endpoint would roam to it). It went
// on as from any source. The same messages from a plain source are
// counted as what they are.
func TestWANMartianSource(t *testing.T) {
	r := newRig(t, rigConfig{wan6: true})
	initiation := make([]byte, protocol.InitiationSize)
	initiation[0] = protocol.TypeInitiation
	transport := make([]byte, protocol.TransportMinSize)
	transport[0] = protocol.TypeTransport
	binary.LittleEndian.PutUint32(transport[4:8], 0xdeadbeef) // no session's
	send := func(src netip.Addr, msg []byte) QueueStats {
		dst := wanAddrB
		if src.Is6() {
			dst = wan6B
		}
		s0 := r.b.Stats()[0]
		f := udpFrame(t, r.wanA.Queue(0).TX(), r.wanB.MAC(), r.wanA.MAC(), src, dst, 51820, portB, msg)
		sendAll(t, r.wanA, 0, []dataplane.Frame{f})
		r.b.workers[0].inbound(r.clock.Now())
		s1 := r.b.Stats()[0]
		for k := range s1.Drops {
			s1.Drops[k] -= s0.Drops[k]
		}
		s1.HandshakesReceived -= s0.HandshakesReceived
		return s1
	}
	for _, src := range []string{"0.0.0.0", "127.0.0.1", "224.0.0.1", "255.255.255.255", "::", "::1", "ff02::1", "::ffff:198.18.1.1"} {
		for _, msg := range [][]byte{initiation, transport} {
			s := send(netip.MustParseAddr(src), msg)
			if s.Drops[DropWANMartian] != 1 || s.Drops.Total() != 1 || s.HandshakesReceived != 0 {
				t.Errorf("type %d from %s: drops %v, handshakes %d; want wan_martian=1 alone", msg[0], src, s.Drops.List(), s.HandshakesReceived)
			}
		}
	}
	for _, src := range []netip.Addr{wanAddrA, wan6A} {
		if s := send(src, transport); s.Drops[DropUnknownIndex] != 1 || s.Drops.Total() != 1 {
			t.Errorf("transport from %s: drops %v, want unknown_index=1", src, s.Drops.List())
		}
		if s := send(src, initiation); s.HandshakesReceived != 1 || s.Drops.Total() != 0 {
			t.Errorf("initiation from %s: drops %v, handshakes %d; want it handed on", src, s.Drops.List(), s.HandshakesReceived)
		}
	}
}
