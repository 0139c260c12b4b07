package fastpath

import (
	"testing"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
)

// TestTxBytesNotRefused: the bytes of messages the WAN port refused (its
// ring full, the far side not draining: ring_full) are not counted in
// the peer's tx_bytes, which counts what left as wireguard-go and the
// kernel count it (when the socket took it); they were counted as sealed,
// and `wg show` said "sent" of 2,972 messages that never left while a WAN
// link was down.
func TestTxBytesNotRefused(t *testing.T) {
	r := newRig(t, rigConfig{})
	tx := r.hostA.Queue(0).TX()
	w := r.a.workers[0]
	for range 40 { // 2,560 messages: more than the WAN ring holds
		frames := make([]dataplane.Frame, 64)
		for i := range frames {
			frames[i] = udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1000, 2000, seqPayload(uint32(i), udpPayloadFor(64)))
		}
		sendAll(t, r.hostA, 0, frames)
		w.outbound(r.clock.Now())
	}
	w.publish(r.clock.Now())
	wire := drainPort(r.wanB)
	var left uint64
	for _, d := range wire {
		left += uint64(len(d) - header.EthernetLen - header.IPv4MinLen - header.UDPLen)
	}
	refused := TotalDrops(r.a.Stats())[DropRingFull]
	if refused == 0 || len(wire) == 0 {
		t.Fatalf("%d messages left, %d refused: the test wants both", len(wire), refused)
	}
	if got := r.peerAB.TxBytes.Load(); got != left {
		t.Errorf("tx_bytes %d, want %d, the bytes of the %d messages that left (%d refused)", got, left, len(wire), refused)
	}
}
