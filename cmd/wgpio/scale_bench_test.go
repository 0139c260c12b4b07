//go:build linux

package main

import (
	"encoding/json"
	"io"
	"net"
	"net/netip"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/noise"
)

// device100k is a gateway.Device over a fast path on memport ports with
// 100,000 peers, each with a /32 and a /128 and an endpoint.
func device100k(b *testing.B) *gateway.Device { return deviceWithPeers(b, 100000) }

// deviceWithPeers is device100k with n peers (at most 65,536 distinct
// endpoints and 16,777,216 prefixes).
func deviceWithPeers(b testing.TB, n int) *gateway.Device {
	b.Helper()
	mac := func(x byte) net.HardwareAddr { return net.HardwareAddr{2, 0, 0, 0, 9, x} }
	lan, host, err := memport.NewPair(memport.Config{Name: "sb1", MACA: mac(1), MACB: mac(2)})
	if err != nil {
		b.Fatal(err)
	}
	wan, far, err := memport.NewPair(memport.Config{Name: "sb2", MACA: mac(3), MACB: mac(4)})
	if err != nil {
		b.Fatal(err)
	}
	eng, err := fastpath.New(fastpath.Config{LAN: lan, WAN: wan, ListenPort: 51820, WANAddr4: netip.MustParseAddr("198.18.0.1"),
		WANResolver: fixedMAC{}, LANResolver: fixedMAC{}})
	if err != nil {
		b.Fatal(err)
	}
	priv, _ := noise.NewPrivateKey()
	dev, err := gateway.New(gateway.Options{PrivateKey: priv, Dataplane: eng})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		dev.Close()
		eng.Close()
		lan.Close()
		host.Close()
		wan.Close()
		far.Close()
	})
	if err := dev.AddPeers(testPeerConfigs(0, n)); err != nil {
		b.Fatal(err)
	}
	dev.Settle() // the static-static DH of the new peers, done in the background
	return dev
}

// testPeerConfigs is the configuration of deviceWithPeers' peers first to
// first+n-1.
func testPeerConfigs(first, n int) []gateway.PeerConfig {
	cs := make([]gateway.PeerConfig, n)
	for j := range cs {
		i := first + j
		var k noise.PublicKey
		k[0], k[1], k[2], k[3] = byte(i), byte(i>>8), byte(i>>16), 1
		cs[j] = gateway.PeerConfig{PublicKey: k, Endpoint: netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 19, byte(i >> 8), byte(i)}), 51820),
			AllowedIPs: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32),
				netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, byte(i >> 16), byte(i >> 8), byte(i)}), 128)}}
	}
	return cs
}

type fixedMAC struct{}

func (fixedMAC) Resolve(netip.Addr) ([6]byte, bool) { return [6]byte{2, 0, 0, 0, 9, 9}, true }

// BenchmarkStats100k is what serving one `wgpio stats` costs at 100,000
// peers beside the queues' counters: every peer's PeerStat, encoded as
// the JSON document the socket sends.
func BenchmarkStats100k(b *testing.B) {
	dev := device100k(b)
	b.ReportAllocs()
	for b.Loop() {
		json.NewEncoder(io.Discard).Encode(GatewayStats{Peers: peerStats(dev)})
	}
}

// BenchmarkScrape100k is one /metrics scrape at 100,000 peers: the
// collector's metrics gathered and written in Prometheus' text format, as
// promhttp does; with the per-peer metrics (MetricsPeers above the count)
// and without (the default, 1,000).
func BenchmarkScrape100k(b *testing.B) {
	dev := device100k(b)
	for _, bc := range []struct {
		name     string
		maxPeers int
	}{{"per-peer", config.MaxMetricsPeers}, {"default", config.DefaultMetricsPeers}} {
		b.Run(bc.name, func(b *testing.B) {
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(newCollector("wg0", bc.maxPeers, func() GatewayStats { st := dev.Stats(); return GatewayStats{Device: &st} },
				boundedPeerStats(dev)))
			b.ReportAllocs()
			for b.Loop() {
				mfs, err := reg.Gather()
				if err != nil {
					b.Fatal(err)
				}
				w := &countWriter{}
				enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
				for _, mf := range mfs {
					if err := enc.Encode(mf); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(w.n), "body-bytes")
			}
		})
	}
}

type countWriter struct{ n int }

func (w *countWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }
