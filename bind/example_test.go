package bind_test

import (
	"fmt"
	"log"
	"net/netip"
	"time"

	"golang.zx2c4.com/wireguard/device"

	"github.com/wgpio/wgpio/arp"
	"github.com/wgpio/wgpio/bind"
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/noise"
	"github.com/wgpio/wgpio/tundev"
)

// site is stock wireguard-go on a Bind over its WAN port and a
// tundev.PortDevice over its LAN port, both memport: no socket, no TUN.
type site struct {
	lan, host *memport.Port // the PortDevice's port and the LAN host's end
	dev       *device.Device
	pd        *tundev.PortDevice
	key       noise.PrivateKey
}

func newSite(name string, wan *memport.Port, wanAddr, peerWAN netip.Addr, lanNet netip.Prefix, lanHost netip.Addr) (*site, error) {
	lan, host, err := memport.NewPair(memport.Config{Name: name})
	if err != nil {
		return nil, err
	}
	// Owned mode's static routes and neighbours: the peer is on-link.
	wanRoutes, err := arp.NewStaticRoutes([]arp.Route{{Prefix: netip.PrefixFrom(wanAddr, 24).Masked()}})
	if err != nil {
		return nil, err
	}
	wanNbrs := arp.NewTable(arp.Config{})
	wanNbrs.Set(peerWAN, arp.MAC(wan.Peer().MAC()), arp.StateReachable)
	b, err := bind.New(bind.Config{Port: wan, Addr4: wanAddr, ListenPort: 51820, Routes: wanRoutes, Neighbours: wanNbrs})
	if err != nil {
		return nil, err
	}
	lanRoutes, err := arp.NewStaticRoutes([]arp.Route{{Prefix: lanNet}})
	if err != nil {
		return nil, err
	}
	lanNbrs := arp.NewTable(arp.Config{})
	lanNbrs.Set(lanHost, arp.MAC(host.MAC()), arp.StateReachable)
	pd, err := tundev.NewPortDevice(tundev.PortConfig{Port: lan, Routes: lanRoutes, Neighbours: lanNbrs, MTU: 1420})
	if err != nil {
		return nil, err
	}
	key, err := noise.NewPrivateKey()
	if err != nil {
		return nil, err
	}
	// wireguard-go owns the Bind and the PortDevice from here: its Close
	// closes both (not the ports).
	dev := device.NewDevice(pd, b, device.NewLogger(device.LogLevelSilent, ""))
	return &site{lan: lan, host: host, dev: dev, pd: pd, key: key}, nil
}

// configure gives s one peer, o, at endpoint ep with allowed IPs allowed,
// and brings it up. The PortDevice takes from the LAN what the allowed IPs
// route into the tunnel (the XDP filter's job on AF_XDP).
func (s *site) configure(o *site, ep netip.Addr, allowed netip.Prefix) error {
	pub := o.key.PublicKey()
	err := s.dev.IpcSet(fmt.Sprintf("private_key=%s\npublic_key=%s\nendpoint=%s:51820\nallowed_ip=%s\n",
		s.key.Hex(), pub.Hex(), ep, allowed))
	if err != nil {
		return err
	}
	s.pd.SetAllowedIPs([]netip.Prefix{allowed})
	return s.dev.Up()
}

// Example_memport runs stock wireguard-go, unmodified, twice in one
// process on wgpio's Bind and PortDevice over memport ports: a UDP packet
// from a host on A's LAN reaches the host on B's LAN through the tunnel.
func Example_memport() {
	wanA, wanB, err := memport.NewPair(memport.Config{Name: "wan"})
	if err != nil {
		log.Fatal(err)
	}
	defer wanA.Close()
	defer wanB.Close()
	addrA, addrB := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
	netA, netB := netip.MustParsePrefix("198.19.1.0/24"), netip.MustParsePrefix("198.19.2.0/24")
	hostA, hostB := netip.MustParseAddr("198.19.1.10"), netip.MustParseAddr("198.19.2.10")
	a, err := newSite("lanA", wanA, addrA, addrB, netA, hostA)
	if err != nil {
		log.Fatal(err)
	}
	b, err := newSite("lanB", wanB, addrB, addrA, netB, hostB)
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range []*site{a, b} {
		defer s.host.Close()
		defer s.lan.Close()
		defer s.dev.Close() // first: the Bind and PortDevice, then the ports
	}
	if err := a.configure(b, addrB, netB); err != nil {
		log.Fatal(err)
	}
	if err := b.configure(a, addrA, netA); err != nil {
		log.Fatal(err)
	}

	payload := []byte("hello")
	frame := make([]byte, header.EthernetLen+header.IPv4MinLen+header.UDPLen+len(payload))
	n := header.PutEthernet(frame, header.MAC(a.lan.MAC()), header.MAC(a.host.MAC()), header.EtherTypeIPv4)
	n += header.PutIPv4(frame[n:], &header.IPv4Fields{Protocol: header.ProtoUDP,
		Src: hostA.As4(), Dst: hostB.As4()}, header.UDPLen+len(payload))
	n += header.PutUDP(frame[n:], 1234, 5678, len(payload))
	copy(frame[n:], payload)
	frames := make([]dataplane.Frame, 64)
	if err := dataplane.SendCopy(a.host.Queue(0).TX(), frames, frame); err != nil {
		log.Fatal(err)
	}
	rx := b.host.Queue(0).RX()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		got := rx.Receive(frames)
		for _, f := range frames[:got] {
			fmt.Printf("B's LAN host got %q\n", f.Data()[n:])
		}
		rx.Free(frames[:got])
		if got > 0 {
			break
		}
	}
	// Output:
	// B's LAN host got "hello"
}
