package fastpath

import (
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
)

// TestNoKeypairAfterBurst: once inbound handled a burst, no keypair stays
// reachable from the worker's per-frame state (key hygiene: one the
// control plane zeroes must not stay reachable from an idle worker),
// whatever became of each frame: delivered, a replay, not authentic.
func TestNoKeypairAfterBurst(t *testing.T) {
	r := newRig(t, rigConfig{})
	msgs := capture(t, r, 4)
	if len(msgs) != 4 {
		t.Fatalf("captured %d messages, want 4", len(msgs))
	}
	bad := append([]byte(nil), msgs[3]...)
	bad[len(bad)-1] ^= 1
	var frames []dataplane.Frame
	for _, m := range [][]byte{msgs[0], msgs[1], msgs[1], bad, msgs[2], msgs[0]} {
		frames = append(frames, wanFrame(t, r, m))
	}
	sendAll(t, r.wanA, 0, frames)
	wb := r.b.workers[0]
	wb.inbound(r.clock.Now())
	if got := recvAll(t, r.hostB, 3, 20*time.Millisecond, nil); got != 3 {
		t.Fatalf("delivered %d packets, want 3; drops %v", got, TotalDrops(r.b.Stats()).List())
	}
	for i := range wb.meta {
		if wb.meta[i].kp != nil {
			t.Errorf("frame %d's keypair still held after the burst", i)
		}
	}
}

// TestDeliverCounts: a burst's accepted packets count in Decrypted and
// DecryptedBytes (the IP packets' bytes) and in the peer's RxBytes (the
// transport messages' bytes), each once, across runs that a replay
// breaks; the replay counts in none of them.
func TestDeliverCounts(t *testing.T) {
	r := newRig(t, rigConfig{})
	msgs := capture(t, r, 6)
	if len(msgs) != 6 {
		t.Fatalf("captured %d messages, want 6", len(msgs))
	}
	var frames []dataplane.Frame
	for _, k := range []int{0, 1, 2, 1, 3, 4, 0, 5} {
		frames = append(frames, wanFrame(t, r, msgs[k]))
	}
	sendAll(t, r.wanA, 0, frames)
	wb := r.b.workers[0]
	before := r.b.Stats()[0]
	wb.inbound(r.clock.Now())
	if got := recvAll(t, r.hostB, 6, 20*time.Millisecond, nil); got != 6 {
		t.Fatalf("delivered %d packets, want 6; drops %v", got, TotalDrops(r.b.Stats()).List())
	}
	after := r.b.Stats()[0]
	const ipLen = 20 + 8 + 100 // capture's inner packet
	if d := after.Decrypted - before.Decrypted; d != 6 {
		t.Errorf("Decrypted +%d, want +6", d)
	}
	if d := after.DecryptedBytes - before.DecryptedBytes; d != 6*ipLen {
		t.Errorf("DecryptedBytes +%d, want +%d", d, 6*ipLen)
	}
	if d := after.Drops[DropReplay] - before.Drops[DropReplay]; d != 2 {
		t.Errorf("replay drops +%d, want +2", d)
	}
	rx := r.peerBA.RxBytes.Load()
	wb.publish(r.clock.Now())
	want := uint64(0)
	for _, k := range []int{0, 1, 2, 3, 4, 5} {
		want += uint64(len(msgs[k]))
	}
	if d := r.peerBA.RxBytes.Load() - rx; d != want {
		t.Errorf("RxBytes +%d, want +%d", d, want)
	}
}

// TestDecryptedBytesOfDropped: a packet accepted from the tunnel and then
// dropped (here its source is outside the peer's allowed IPs) counts its
// bytes in DecryptedBytes as it counts in Decrypted: the bytes counter
// skipped it, and bytes over packets gave no average.
func TestDecryptedBytesOfDropped(t *testing.T) {
	r := newRig(t, rigConfig{})
	f := udpFrame(t, r.hostA.Queue(0).TX(), r.lanA.MAC(), r.hostA.MAC(), netip.MustParseAddr("198.19.9.9"), hostAddrB, 1, 2, []byte("spoof"))
	sendAll(t, r.hostA, 0, []dataplane.Frame{f})
	r.a.workers[0].outbound(r.clock.Now())
	before := r.b.Stats()[0]
	r.b.workers[0].inbound(r.clock.Now())
	after := r.b.Stats()[0]
	if d := after.Drops[DropAllowedIPs] - before.Drops[DropAllowedIPs]; d != 1 {
		t.Fatalf("drops[allowed_ips] +%d, want +1", d)
	}
	if d := after.Decrypted - before.Decrypted; d != 1 {
		t.Errorf("Decrypted +%d, want +1", d)
	}
	// 20 + 8 + 5 bytes, padded to 48 by the sender (as received: the
	// refused source's packet is not read further).
	if d := after.DecryptedBytes - before.DecryptedBytes; d != 48 {
		t.Errorf("DecryptedBytes +%d, want +48", d)
	}
}
