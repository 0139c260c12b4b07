//go:build linux

package compatgw

import (
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/internal/testing/downdev"
)

// benchKey is benchmark peer i's public key, in hex.
func benchKey(i int) string {
	var k [32]byte
	k[0], k[1], k[2], k[31] = byte(i), byte(i>>8), byte(i>>16), 0x40
	return hex.EncodeToString(k[:])
}

// benchPrefix is benchmark peer i's allowed IP: a /32 in 10.0.0.0/8.
func benchPrefix(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)
}

// BenchmarkUAPISet measures the CPU of one `wg set` that adds one
// allowed IP to one peer (Gateway.IpcSet: wireguard-go's set and the LAN
// filter's update), on a device with 10,000 and 50,000 peers of one
// allowed IP each. Run it with -benchtime=20x: before sets were followed
// one operation read the whole configuration.
func BenchmarkUAPISet(b *testing.B) {
	for _, n := range []int{10000, 50000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			g := benchGateway(b, n)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				add := netip.PrefixFrom(netip.AddrFrom4([4]byte{11, byte(i >> 16), byte(i >> 8), byte(i)}), 32)
				if err := g.IpcSet("public_key=" + benchKey(0) + "\nallowed_ip=" + add.String() + "\n"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkUAPIRemovePeer measures the CPU of one `wg set` that removes
// a peer or adds it back, in turns, at 10,000 and 50,000 peers: its
// prefix leaves the allowed IPs and is kept, then comes back, and each
// time the PortDevice is handed the kept prefixes whole (publishKept).
func BenchmarkUAPIRemovePeer(b *testing.B) {
	for _, n := range []int{10000, 50000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			g := benchGateway(b, n)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				body := "public_key=" + benchKey(0) + "\nremove=true\n"
				if i%2 == 0 {
					body = "public_key=" + benchKey(0) + "\nallowed_ip=" + benchPrefix(0).String() + "\n"
				}
				if err := g.IpcSet(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// mapNoRoute records what the gateway hands the PortDevice: the kept
// prefixes and the allowed IPs inside them (SetNoRoute, UpdateNoRoute),
// and every allowed IP (SetAllowedIPs, UpdateAllowedIPs), in maps. Not
// safe for concurrent use: the gateway calls it with its mutex held.
type mapNoRoute struct {
	drop, pass, allowed map[netip.Prefix]bool
}

func (m *mapNoRoute) SetNoRoute(drop, pass []netip.Prefix) {
	m.drop, m.pass = map[netip.Prefix]bool{}, map[netip.Prefix]bool{}
	m.UpdateNoRoute(drop, nil, pass, nil)
}

func (m *mapNoRoute) UpdateNoRoute(drop, undrop, pass, unpass []netip.Prefix) {
	if m.drop == nil {
		m.drop, m.pass = map[netip.Prefix]bool{}, map[netip.Prefix]bool{}
	}
	for _, p := range undrop {
		delete(m.drop, p)
	}
	for _, p := range unpass {
		delete(m.pass, p)
	}
	for _, p := range drop {
		m.drop[p] = true
	}
	for _, p := range pass {
		m.pass[p] = true
	}
}

func (m *mapNoRoute) SetAllowedIPs(allowed []netip.Prefix) {
	m.allowed = make(map[netip.Prefix]bool, len(allowed))
	for _, p := range allowed {
		m.allowed[p] = true
	}
}

func (m *mapNoRoute) UpdateAllowedIPs(add, del []netip.Prefix) {
	if m.allowed == nil {
		m.allowed = make(map[netip.Prefix]bool)
	}
	for _, p := range del {
		delete(m.allowed, p)
	}
	for _, p := range add {
		m.allowed[p] = true
	}
}

// benchGateway is a Gateway with a LAN filter and PortDevice in maps, on
// a wireguard-go device (down) with n peers, peer i allowing
// benchPrefix(i).
func benchGateway(b *testing.B, n int) *Gateway {
	g := newGateway(slog.New(slog.DiscardHandler))
	g.filter, g.noRoute = &fakeFilter{set: map[netip.Prefix]bool{}}, &mapNoRoute{}
	g.dev = downdev.New()
	b.Cleanup(g.dev.Close)
	var conf strings.Builder
	for i := range n {
		fmt.Fprintf(&conf, "public_key=%s\nallowed_ip=%s\n", benchKey(i), benchPrefix(i))
	}
	if err := g.IpcSet(conf.String()); err != nil {
		b.Fatal(err)
	}
	return g
}
