package gateway

import (
	"fmt"
	"testing"
	"time"

	"github.com/wgpio/wgpio/noise"
)

// BenchmarkTick measures one evaluation of every peer's timers (what
// Start does every 50 ms), idle peers without sessions.
func BenchmarkTick(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("peers=%d", n), func(b *testing.B) {
			f := newFakeDP(nil)
			priv, _ := noise.NewPrivateKey()
			d, err := New(Options{PrivateKey: priv, Dataplane: f})
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			for i := 0; i < n; i++ {
				k, _ := noise.NewPrivateKey()
				if err := d.AddPeer(PeerConfig{PublicKey: k.PublicKey()}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			now := f.Now()
			for i := 0; i < b.N; i++ {
				now += int64(50 * time.Millisecond)
				d.Tick(now)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/peer")
		})
	}
}
