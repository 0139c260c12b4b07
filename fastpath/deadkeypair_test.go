package fastpath

import (
	"net/netip"
	"testing"
)

// TestDeadKeypairSealsNothing: a keypair killed and erased (Zero) neither
// seals nor opens a single message: its erased keys would work as the
// all-zero key (a keepalive anyone reads, a forgery accepted). Before,
// Seal gave x/crypto's output under 32 zero bytes after Zero.
func TestDeadKeypairSealsNothing(t *testing.T) {
	var a, b [32]byte
	a[0], b[0] = 1, 2
	kp, err := NewKeypair(&a, &b, 1, 2, true, 0, &Peer{})
	if err != nil {
		t.Fatal(err)
	}
	live := kp.Seal(make([]byte, 0, 64), []byte("plaintext"), 7)
	if len(live) != len("plaintext")+16 {
		t.Fatalf("a live keypair sealed %d bytes, want %d", len(live), len("plaintext")+16)
	}
	kp.Zero()
	if out := kp.Seal(nil, []byte("plaintext"), 8); out != nil {
		t.Errorf("a dead keypair sealed %x, want nothing", out)
	}
	ct := make([]byte, 32)
	if p, ok := kp.Open(ct, 8); ok || p != nil {
		t.Errorf("a dead keypair opened: %x, %v; want nil, false", p, ok)
	}
}

// TestEngineRefusesAfterClose: after Close, Send, SendTunnel, ReceiveWAN
// and SendFrame say no (false): no worker will take what they post.
// They said true, into mailboxes nobody reads.
func TestEngineRefusesAfterClose(t *testing.T) {
	r := newRig(t, rigConfig{})
	r.a.Close()
	src := netip.MustParseAddrPort("198.18.0.2:51820")
	for what, ok := range map[string]bool{
		"Send":       r.a.Send(0, ControlPacket{Dst: src, Payload: []byte{4, 0, 0, 0}}),
		"SendTunnel": r.a.SendTunnel(0, ip4{src: pA, dst: pB}.bytes()),
		"ReceiveWAN": r.a.ReceiveWAN(0, src, src, []byte{4, 0, 0, 0}),
		"SendFrame":  r.a.SendFrame(true, 0, make([]byte, 64)),
	} {
		if ok {
			t.Errorf("%s after Close = true, want false", what)
		}
	}
}
