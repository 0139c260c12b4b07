package fastpath

import (
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/protocol"
)

// TestCloseCountsMail: what the mailbox took and no worker handled
// before Close (the host's packet into the tunnel, a datagram the kernel
// reassembled, a raw ARP/NDP frame, a control packet) is counted closed,
// as the frames a worker holds are: each post said true, so nobody else
// counts it. Before, the mail stayed in the channel, uncounted.
// SendWait after Close says false at once, as Send does; it said true,
// into a mailbox no worker reads.
func TestCloseCountsMail(t *testing.T) {
	r := newRig(t, rigConfig{}) // not started: the mail waits
	src := netip.MustParseAddrPort("198.18.0.2:51820")
	dst := netip.AddrPortFrom(wanAddrA, portA)
	ctl := ControlPacket{Dst: src, Payload: []byte{4, 0, 0, 0}}
	for what, ok := range map[string]bool{
		"Send":       r.a.Send(0, ctl),
		"SendWait":   r.a.SendWait(0, ctl, time.Second),
		"SendTunnel": r.a.SendTunnel(0, ip4{src: pA, dst: pB}.bytes()),
		"ReceiveWAN": r.a.ReceiveWAN(0, src, dst, []byte{4, 0, 0, 0}),
		"SendFrame":  r.a.SendFrame(true, 0, make([]byte, 64)),
	} {
		if !ok {
			t.Fatalf("%s before Close = false, want true (the mailbox has room)", what)
		}
	}
	r.a.Close()
	if d := TotalDrops(r.a.Stats()); d[DropClosed] != 5 {
		t.Errorf("closed = %d, want 5 (the mail no worker took); drops %v", d[DropClosed], d.List())
	}
	start := time.Now()
	if r.a.SendWait(0, ctl, time.Second) {
		t.Error("SendWait after Close = true, want false")
	}
	if el := time.Since(start); el > 100*time.Millisecond {
		t.Errorf("SendWait after Close took %v, want at once", el)
	}
	if d := TotalDrops(r.a.Stats()); d[DropClosed] != 5 {
		t.Errorf("closed = %d after a SendWait past Close, want 5", d[DropClosed])
	}
}

// TestCloseCountsHandshakes: handshake messages a worker received and
// handed to the control plane's queue (Handshakes), which no control plane
// took before Close, are counted closed, on the worker that received
// them. Before, they stayed in the channel, counted received and nowhere
// else.
func TestCloseCountsHandshakes(t *testing.T) {
	r := newRig(t, rigConfig{})
	var msg [protocol.InitiationSize]byte
	msg[0] = protocol.TypeInitiation
	const n = 3
	tx := r.wanA.Queue(0).TX()
	for range n {
		if tx.Transmit([]dataplane.Frame{wanFrame(t, r, msg[:])}) != 1 {
			t.Fatal("the WAN port took no frame")
		}
	}
	r.b.workers[0].inbound(r.clock.Now())
	if got := len(r.b.Handshakes()); got != n {
		t.Fatalf("%d handshake messages queued for the control plane, want %d", got, n)
	}
	r.b.Close()
	if d := TotalDrops(r.b.Stats()); d[DropClosed] != n || d.Total() != n {
		t.Errorf("after Close: drops %v, want closed=%d alone (the messages no control plane took)", d.List(), n)
	}
	if got := len(r.b.Handshakes()); got != 0 {
		t.Errorf("%d handshake messages left in the queue after Close, want 0", got)
	}
}
