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

// TestRefusalsAfterCloseCounted: what SendTunnel, ReceiveWAN and
// SendFrame refuse because the engine is closing is counted closed, on
// the worker of the queue they name, as every packet the engine drops is
// counted; Send's refusal is its caller's to count (gateway), not here
// too. Before, all four were uncounted.
func TestRefusalsAfterCloseCounted(t *testing.T) {
	r := newRig(t, rigConfig{queues: 2})
	r.a.Close()
	before := r.a.Stats()
	src := netip.MustParseAddrPort("198.18.0.2:51820")
	r.a.Send(1, ControlPacket{Dst: src, Payload: []byte{4, 0, 0, 0}})
	r.a.SendTunnel(1, ip4{src: pA, dst: pB}.bytes())
	r.a.ReceiveWAN(1, src, src, []byte{4, 0, 0, 0})
	r.a.ReceiveWAN(1+r.a.NumWorkers(), src, src, []byte{4, 0, 0, 0}) // worker 1 too
	r.a.SendFrame(true, 1, make([]byte, 64))
	after := r.a.Stats()
	if got := after[1].Drops[DropClosed] - before[1].Drops[DropClosed]; got != 4 {
		t.Errorf("worker 1 counted %d closed for the refusals after Close, want 4 (SendTunnel, ReceiveWAN twice, SendFrame)", got)
	}
	if d := TotalDrops(after); d.Total() != TotalDrops(before).Total()+4 {
		t.Errorf("drops %v after the refusals, want only the 4 closed more than %v", d.List(), TotalDrops(before).List())
	}
}
