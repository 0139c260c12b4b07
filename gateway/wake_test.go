package gateway

import (
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/noise"
	"github.com/wgpio/wgpio/protocol"
)

// wakeDP is a fakeDP whose workers can wake the control plane
// (controlWaker, as fastpath.Engine.ControlWake).
type wakeDP struct {
	*fakeDP
	wake chan struct{}
}

func (w *wakeDP) ControlWake() <-chan struct{} { return w.wake }

// TestWakeTicksAtOnce: a dataplane's wake (a packet held for a peer
// without a session) makes the running device tick at once, and the
// initiation leaves without waiting for the next TickInterval, as Linux's
// WireGuard and wireguard-go send one when the packet is queued. Before,
// the first packet of every session waited up to 50 ms (a TickInterval)
// for its initiation; here the interval is an hour, so only the wake can
// bring the tick.
func TestWakeTicksAtOnce(t *testing.T) {
	f := &wakeDP{fakeDP: newFakeDP(t), wake: make(chan struct{}, 1)}
	priv, _ := noise.NewPrivateKey()
	d, err := New(Options{PrivateKey: priv, Dataplane: f, TickInterval: time.Hour,
		WANAddr4: netip.MustParseAddr("198.18.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	k, _ := noise.NewPrivateKey()
	pub := k.PublicKey()
	if err := d.AddPeer(PeerConfig{PublicKey: pub, Endpoint: netip.MustParseAddrPort("198.18.0.2:51820"),
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.0.2/32")}}); err != nil {
		t.Fatal(err)
	}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	initiations := func() int {
		n := 0
		for _, p := range f.sentSince(0) {
			if p.typ == protocol.TypeInitiation {
				n++
			}
		}
		return n
	}
	time.Sleep(20 * time.Millisecond) // Start's own work done: nothing due
	if n := initiations(); n != 0 {
		t.Fatalf("%d initiations before any packet asked, want 0", n)
	}
	f.fakeDP.mu.Lock()
	fp := f.fakeDP.peers[0]
	f.fakeDP.mu.Unlock()
	fp.HandshakeNeeded.Store(true) // as fastpath's hold does
	f.stamp(fp)
	f.wake <- struct{}{}
	deadline := time.Now().Add(10 * time.Second)
	for initiations() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := initiations(); n != 1 {
		t.Fatalf("initiations after the wake = %d, want 1; sent %v", n, types(f.sentSince(0)))
	}
}
