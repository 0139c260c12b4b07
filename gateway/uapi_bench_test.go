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

// BenchmarkPeers100k measures Peers (every peer's configuration and
// state, its allowed IPs copied) of 100,000 peers, each with a /32 and a
// /128: what wgpio stats and every /metrics scrape called.
func BenchmarkPeers100k(b *testing.B) {
	d := newDevice100k(b)
	b.ReportAllocs()
	for b.Loop() {
		d.Peers()
	}
}

// newDevice100k is a device of 100,000 peers, each with a /32 and a /128.
func newDevice100k(b *testing.B) *Device {
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
	d.Settle()
	return d
}

// BenchmarkPeerStates100k measures PeerStates of the same 100,000 peers
// into a slice kept between calls, as a scrape that keeps it does.
func BenchmarkPeerStates100k(b *testing.B) {
	d := newDevice100k(b)
	var buf []PeerState
	b.ReportAllocs()
	for b.Loop() {
		buf = d.PeerStates(buf[:0])
	}
}
