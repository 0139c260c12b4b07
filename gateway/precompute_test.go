package gateway

import (
	"strings"
	"testing"

	"github.com/wgpio/wgpio/noise"
)

// TestPrecomputeBoundedByPeers: a set request that changes the private
// key again and again holds one handshake to precompute per peer, not
// one per peer per key. The list is published once, at the request's
// end, and a request may be of any length: alternating two keys, 266 KB
// of lines at 1,000 peers held 3,450,000 handshakes (1.6 GB) before it
// ended.
func TestPrecomputeBoundedByPeers(t *testing.T) {
	d, err := New(Options{Dataplane: newFakeDP(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	const peers = 100
	var b strings.Builder
	for i := range peers {
		var k noise.PublicKey
		k[0], k[1], k[31] = byte(i), byte(i>>8), 0x41
		b.WriteString("public_key=" + k.Hex() + "\n")
	}
	if err := d.IpcSet(strings.NewReader(b.String())); err != nil {
		t.Fatal(err)
	}
	var keys [2]noise.PrivateKey
	for i := range keys {
		if keys[i], err = noise.NewPrivateKey(); err != nil {
			t.Fatal(err)
		}
	}
	// As a request's lines are applied, under the lock and unpublished.
	d.mu.Lock()
	for i := range 50 {
		d.setPrivateKeyLocked(keys[i%2])
	}
	n := len(d.precompute)
	d.publishLocked()
	d.mu.Unlock()
	d.zeroRetired()
	if n != peers {
		t.Errorf("%d handshakes waiting to be precomputed after 50 key changes at %d peers, want %d", n, peers, peers)
	}
}
