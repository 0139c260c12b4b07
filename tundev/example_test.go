package tundev_test

import (
	"fmt"
	"log"
	"net/netip"

	"github.com/wgpio/wgpio/arp"
	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/tundev"
)

// ExampleICMPRate limits the time exceeded errors a PortDevice sends to
// a burst of 2 over all destinations, then one a second: of five
// decrypted packets that arrive with TTL 1, two are answered.
func ExampleICMPRate() {
	lan, host, err := memport.NewPair(memport.Config{Name: "lan"})
	if err != nil {
		log.Fatal(err)
	}
	defer lan.Close()
	defer host.Close()
	routes, err := arp.NewStaticRoutes([]arp.Route{{Prefix: netip.MustParsePrefix("198.18.1.0/24")}})
	if err != nil {
		log.Fatal(err)
	}
	dev, err := tundev.NewPortDevice(tundev.PortConfig{
		Port: lan, Routes: routes, Neighbours: arp.NewTable(arp.Config{}),
		ICMPSource4: netip.MustParseAddr("198.18.1.1"),
		ICMPRate:    tundev.ICMPRate{Rate: 1, Burst: 2},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	dev.SetAllowedIPs([]netip.Prefix{netip.MustParsePrefix("198.18.9.0/24")})

	// From a peer's host, 198.18.9.2, to a LAN host, TTL 1.
	bufs := make([][]byte, 5)
	for i := range bufs {
		bufs[i] = make([]byte, header.IPv4MinLen+header.UDPLen)
		n := header.PutIPv4(bufs[i], &header.IPv4Fields{TTL: 1, Protocol: header.ProtoUDP,
			Src: [4]byte{198, 18, 9, 2}, Dst: [4]byte{198, 18, 1, 2}}, header.UDPLen)
		header.PutUDP(bufs[i][n:], 1234, 7, 0)
	}
	dev.Write(bufs, 0)
	s := dev.Stats()
	fmt.Printf("answered %d, held back %d\n", s.ICMPErrors, s.ICMPSuppressed)
	// Output:
	// answered 2, held back 3
}
