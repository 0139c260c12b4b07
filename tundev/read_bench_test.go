package tundev

import (
	"net/netip"
	"testing"

	"github.com/wgpio/wgpio/dataplane"
)

// BenchmarkPortDeviceRead: Read of bursts of 32 frames from a memport
// (one packet's cost per op), without drop prefixes (SetNoRoute) and,
// as "kept", with one the packets are looked up in and pass; as
// "noendpoint", with a peer without endpoint (SetNoEndpoint) whose
// prefix holds the packets' more specific one of a peer with one.
func BenchmarkPortDeviceRead(b *testing.B) {
	for _, name := range []string{"none", "kept", "noendpoint"} {
		b.Run(name, func(b *testing.B) {
			r := newPortRig(b, 1, nil)
			switch name {
			case "kept":
				r.dev.SetNoRoute([]netip.Prefix{netip.MustParsePrefix("198.18.0.0/16")}, []netip.Prefix{netip.MustParsePrefix("198.18.12.0/24")})
			case "noendpoint":
				r.dev.SetNoEndpoint([]EndpointRoute{{Prefix: netip.MustParsePrefix("198.18.0.0/16"), Peer: endpointAnswer{false}},
					{Prefix: netip.MustParsePrefix("198.18.12.0/24")}})
			}
			in := ethFrame(macGW, macHost, 0x0800, ipPacket(hostIP, farIP, make([]byte, 64)))
			const burst = 32
			bufs, sizes := make([][]byte, burst), make([]int, burst)
			for i := range bufs {
				bufs[i] = make([]byte, 2000)
			}
			fs := make([]dataplane.Frame, burst)
			tx := r.b.Queue(0).TX()
			b.ResetTimer()
			for i := 0; i < b.N; i += burst {
				n := tx.Alloc(fs)
				for j := range n {
					fs[j].SetLen(len(in))
					copy(fs[j].Data(), in)
				}
				tx.Transmit(fs[:n])
				for got := 0; got < n; {
					m, err := r.dev.Read(bufs, sizes, 0)
					if err != nil {
						b.Fatal(err)
					}
					got += m
				}
			}
		})
	}
}
