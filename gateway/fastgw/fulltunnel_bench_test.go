//go:build linux

package fastgw_test

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/testing/wgpeer"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/noise"
)

// BenchmarkFullTunnel measures a road warrior's throughput (iperf3, TCP
// and UDP, both ways) through a gateway, IPv4:
//
//	p1 (stock wireguard-go) ── inet (router; the Internet host 198.18.200.1) ── gw ── hl (its LAN, 198.19.1.10)
//
// to the Internet host (the full tunnel: the gateway's kernel forwards
// it out of the WAN, masqueraded) and to the LAN host, with the gateway
// either wgpio's fast path (fast: the Internet's traffic through the
// exception TUN) or stock wireguard-go on its own TUN (stock: the kernel
// forwards both, as a Linux router with wg0 does). Each sub-benchmark
// runs iperf3 once for -seconds (reported as Mbit/s, the receiver's);
// run it with -benchtime 1x. The road warrior, the gateway and the
// stock gateway run in this process, iperf3 beside it: on a machine of
// few cores they share them, so compare figures of one run.
func BenchmarkFullTunnel(b *testing.B) {
	testenv.Tool(b, "iperf3", "iperf3")
	for _, kind := range []string{"fast", "stock"} {
		b.Run(kind, func(b *testing.B) {
			r := newPerfRig(b, kind == "fast")
			for _, dst := range []struct{ name, ns, addr string }{{"inet", "inet", "198.18.200.1"}, {"lan", "hl", "198.19.1.10"}} {
				for _, proto := range []string{"tcp", "udp"} {
					for _, dir := range []string{"up", "down"} {
						b.Run(dst.name+"/"+proto+"/"+dir, func(b *testing.B) {
							srv := r.inet
							if dst.ns == "hl" {
								srv = r.hl
							}
							mbps := r.iperf(b, srv, dst.addr, proto == "udp", dir == "down")
							b.ReportMetric(mbps, "Mbit/s")
							b.ReportMetric(0, "ns/op")
						})
					}
				}
			}
			if r.g != nil {
				st, _ := r.g.ExceptionTUN()
				b.Logf("exception TUN: %+v; gateway drops: %s", st, dropsString(r.g))
			}
		})
	}
}

// perfRig is BenchmarkFullTunnel's topology and gateway.
type perfRig struct {
	gw, inet, p1, hl *topo.NS
	g                *fastgw.Gateway // nil: stock wireguard-go
}

func newPerfRig(b *testing.B, fast bool) *perfRig {
	gw, inet, p1, hl, lan, wan, _ := fullTunnelNet(b, "fp", false)
	must := func(err error) {
		b.Helper()
		if err != nil {
			b.Fatal(err)
		}
	}
	key := func() noise.PrivateKey {
		k, err := noise.NewPrivateKey()
		if err != nil {
			b.Fatal(err)
		}
		return k
	}
	gwKey, k1 := key(), key()
	internet, site := netip.MustParsePrefix("198.18.200.0/24"), netip.MustParsePrefix("198.19.1.0/24")
	d, err := wgpeer.Start(p1, wgpeer.Config{
		Name: topo.UniqueName("wgfp"), PrivateKey: k1, ListenPort: 51820,
		Address: netip.MustParsePrefix("198.19.101.2/24"), Routes: []netip.Prefix{internet, site},
		Peers: []wgpeer.Peer{{PublicKey: gwKey.PublicKey(), Endpoint: netip.MustParseAddrPort("198.18.1.1:51820"),
			AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.101.0/24"), internet, site}, Keepalive: 1}},
	})
	must(err)
	b.Cleanup(d.Close)
	r := &perfRig{gw: gw, inet: inet, p1: p1, hl: hl}
	name := topo.UniqueName("wgfpg")
	if fast {
		must(gw.Do(func() (err error) {
			r.g, err = fastgw.Start(fastgw.Config{
				Name: name, PrivateKey: gwKey, ListenPort: 51820,
				WAN: wan.A, LAN: lan.A, Queues: 1,
				Addresses: []netip.Prefix{netip.MustParsePrefix("198.19.101.1/24")},
				Peers: []gateway.PeerConfig{{PublicKey: k1.PublicKey(), Endpoint: netip.MustParseAddrPort("198.18.2.2:51820"),
					AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.101.2/32")}}},
			})
			return err
		}))
		b.Cleanup(func() { r.g.Close() })
	} else {
		sd, err := wgpeer.Start(gw, wgpeer.Config{
			Name: name, PrivateKey: gwKey, ListenPort: 51820,
			Address: netip.MustParsePrefix("198.19.101.1/24"),
			Peers: []wgpeer.Peer{{PublicKey: k1.PublicKey(), Endpoint: netip.MustParseAddrPort("198.18.2.2:51820"),
				AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.101.2/32")}}},
		})
		must(err)
		b.Cleanup(sd.Close)
		must(sd.PinBind())
	}
	must(d.PinBind())
	for _, a := range []string{"198.18.200.1", "198.19.1.10"} {
		must(p1.Ping(netip.MustParseAddr(a), 5*time.Second))
	}
	return r
}

// iperf runs an iperf3 server at addr in srv and a client in p1 for
// perfSeconds, and returns the receiver's rate in Mbit/s (UDP: the
// sender's rate less the receiver's losses).
func (r *perfRig) iperf(b *testing.B, srv *topo.NS, addr string, udp, reverse bool) float64 {
	b.Helper()
	s := srv.Command("iperf3", "-s", "-1", "-B", addr)
	if err := s.Start(); err != nil {
		b.Fatalf("iperf3 server: %v", err)
	}
	defer func() { s.Process.Kill(); s.Wait() }()
	args := []string{"-c", addr, "-t", fmt.Sprint(perfSeconds), "-J", "--connect-timeout", "2000"}
	if udp {
		args = append(args, "-u", "-b", "0", "-l", "1350")
	}
	if reverse {
		args = append(args, "-R")
	}
	var out []byte
	var err error
	for try := 0; try < 20; try++ {
		time.Sleep(100 * time.Millisecond)
		out, err = r.p1.Command("iperf3", args...).Output()
		if !strings.Contains(string(out), "Connection refused") {
			break
		}
	}
	if err != nil {
		b.Fatalf("iperf3 %v: %v\n%s", args, err, out)
	}
	var res struct {
		Error string `json:"error"`
		End   struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
			Sum struct {
				BitsPerSecond float64 `json:"bits_per_second"`
				LostPercent   float64 `json:"lost_percent"`
			} `json:"sum"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		b.Fatalf("iperf3 output: %v\n%s", err, out)
	}
	if res.Error != "" {
		b.Logf("iperf3 %v: %s", args, res.Error)
	}
	if udp {
		return res.End.Sum.BitsPerSecond * (1 - res.End.Sum.LostPercent/100) / 1e6
	}
	return res.End.SumReceived.BitsPerSecond / 1e6
}

// perfSeconds is how long each iperf3 of BenchmarkFullTunnel runs.
const perfSeconds = 4
