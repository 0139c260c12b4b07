package fastpath

import (
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/protocol"
)

// TestControlToMappedEndpoint: a control packet to an IPv4-mapped IPv6
// endpoint ([::ffff:198.18.1.2]:port, which `wg set ... endpoint` passes
// on as written) leaves as IPv4 from the WAN's IPv4 address, as the data
// path's template sends transport data to it: such an address never
// appears in an IPv6 header (RFC 4291 section 2.5.5.2).
func TestControlToMappedEndpoint(t *testing.T) {
	r := newRig(t, rigConfig{noKeys: true})
	res := r.a.cfg.WANResolver.(*staticResolver)
	var mB [6]byte
	copy(mB[:], r.wanB.MAC())
	res.m = map[netip.Addr][6]byte{wanAddrB: mB}
	wa := r.a.workers[0]
	payload := make([]byte, protocol.InitiationSize)
	payload[0] = protocol.TypeInitiation
	dst := netip.AddrPortFrom(netip.AddrFrom16(wanAddrB.As16()), portB)
	if !r.a.Send(0, ControlPacket{Dst: dst, Payload: payload, Peer: r.peerAB}) {
		t.Fatal("Send refused")
	}
	wa.drainMailbox(r.clock.Now())
	s := r.a.Stats()[0]
	if s.ControlSent != 1 {
		t.Fatalf("control sent = %d, want 1 (drops %v, held %d)", s.ControlSent, s.Drops.List(), s.Held)
	}
	rx := r.wanB.Queue(0).RX()
	var got [4]dataplane.Frame
	n := 0
	for deadline := time.Now().Add(time.Second); n == 0 && time.Now().Before(deadline); {
		n = rx.Receive(got[:])
	}
	if n != 1 {
		t.Fatalf("frames at B's WAN = %d, want the initiation", n)
	}
	defer rx.Free(got[:n])
	var p header.Packet
	if res := header.Parse(got[0].Data(), &p); res != header.OK {
		t.Fatalf("ParseFrame = %v, want OK", res)
	}
	if p.Src != wanAddrA || p.Dst != wanAddrB {
		t.Errorf("initiation from %v to %v, want IPv4 %v to %v", p.Src, p.Dst, wanAddrA, wanAddrB)
	}
}
