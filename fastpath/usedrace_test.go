package fastpath

import (
	"sync"
	"testing"
)

// TestUsedWhileRotated: data arriving on a responder's keypair while the
// control plane's Rotate moves it from Next to Previous (our own exchange
// completed at that moment) marks it used whichever comes first: a
// receipt that found it in Next and lost the promotion to Rotate must not
// leave it counted as unconfirmed (Keypair.Used) when it is retired.
func TestUsedWhileRotated(t *testing.T) {
	var k1, k2 [32]byte
	for i := range 20000 {
		p := &Peer{}
		resp, err := NewKeypair(&k1, &k2, 1, 2, false, 0, p)
		if err != nil {
			t.Fatal(err)
		}
		init, err := NewKeypair(&k1, &k2, 3, 4, true, 0, p)
		if err != nil {
			t.Fatal(err)
		}
		p.Rotate(resp) // in Next
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); p.receivedOn(resp) }()
		go func() { defer wg.Done(); p.Rotate(init) }()
		wg.Wait()
		if !resp.Used() {
			t.Fatalf("round %d: data arrived on the responder's keypair (now in %s), Used() = false", i, slotOf(p, resp))
		}
	}
}

func slotOf(p *Peer, kp *Keypair) string {
	switch kp {
	case p.Current.Load():
		return "Current"
	case p.Previous.Load():
		return "Previous"
	case p.Next.Load():
		return "Next"
	}
	return "no slot"
}
