package gateway

import (
	"io"
	"net/netip"
	"testing"

	"github.com/wgpio/wgpio/noise"
)

// BenchmarkIpcGet100k measures a get=1 (what wg show NAME dump reads) of
// 100,000 peers, each with a /32 and a /128, into io.Discard.
func BenchmarkIpcGet100k(b *testing.B) {
	f := newFakeDP(b)
	d := newPlainDevice(b, f)
	cs := make([]PeerConfig, 100000)
	for i := range cs {
		var k noise.PublicKey
		k[0], k[1], k[2], k[3] = byte(i), byte(i>>8), byte(i>>16), 1
		cs[i] = PeerConfig{PublicKey: k, AllowedIPs: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32),
			netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, byte(i >> 16), byte(i >> 8), byte(i)}), 128)}}
	}
	if err := d.AddPeers(cs); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		d.IpcGet(io.Discard)
	}
}
