package gateway

import (
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/noise"
)

// TestCloseRacesCalls: Close while other goroutines set peers (with
// preshared keys) and private keys through IpcSet and SetPrivateKey, hand
// the device initiations, send keepalives, tick and read its state (run
// under -race). When Close and the calls have returned, the device holds
// no peer and no key, whichever came first.
func TestCloseRacesCalls(t *testing.T) {
	for round := range 10 {
		r := newRig(t, rigOptions{psk: true})
		src := netip.MustParseAddrPort("198.18.0.2:51820")
		inits := make([][]byte, 50)
		for i := range inits {
			inits[i] = r.wgInitiation(t)
		}
		other, _ := noise.NewPrivateKey()
		body := "public_key=" + other.PublicKey().Hex() + "\npreshared_key=" + strings.Repeat("ab", 32) +
			"\nallowed_ip=198.19.9.0/24\n"
		var wg sync.WaitGroup
		stop := make(chan struct{})
		loop := func(f func(i int)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					f(i)
				}
			}()
		}
		loop(func(int) { r.dev.IpcSet(strings.NewReader(body)) })
		loop(func(int) {
			k, _ := noise.NewPrivateKey()
			r.dev.SetPrivateKey(k)
			k.Zero()
		})
		loop(func(i int) {
			r.dev.HandleMessage(fastpath.HandshakeMessage{Src: src, Data: inits[i%len(inits)]})
		})
		loop(func(int) { r.dev.SendKeepalive(r.wgPub) })
		loop(func(int) { r.dev.Tick(r.now()) })
		loop(func(int) {
			var b strings.Builder
			r.dev.IpcGet(&b)
			r.dev.Peers()
		})
		time.Sleep(time.Duration(round%5) * time.Millisecond)
		r.dev.Close()
		close(stop)
		wg.Wait()
		if n := len(r.dev.Peers()); n != 0 {
			t.Fatalf("round %d: %d peers after Close, want 0", round, n)
		}
		if pk := r.dev.PublicKey(); pk != (noise.PublicKey{}) {
			t.Fatalf("round %d: public key %x after Close, want none", round, pk)
		}
	}
}
