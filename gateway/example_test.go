package gateway_test

import (
	"fmt"
	"log"
	"net/netip"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/noise"
)

// fixedMAC is a fastpath.Resolver whose every next hop is one MAC: the
// other end of a memport wire.
type fixedMAC [6]byte

func (m fixedMAC) Resolve(netip.Addr) ([6]byte, bool) { return m, true }

// site is one in-process WireGuard gateway: a fast-path engine between a
// LAN port and a WAN port, and its control plane.
type site struct {
	lan, host *memport.Port // the engine's LAN port and the LAN host's end
	eng       *fastpath.Engine
	dev       *gateway.Device
}

func newSite(name string, wan *memport.Port, addr netip.Addr, key noise.PrivateKey) (*site, error) {
	lan, host, err := memport.NewPair(memport.Config{Name: name})
	if err != nil {
		return nil, err
	}
	s := &site{lan: lan, host: host}
	s.eng, err = fastpath.New(fastpath.Config{
		LAN: lan, WAN: wan, ListenPort: 51820, WANAddr4: addr,
		WANResolver: fixedMAC(wan.Peer().MAC()),
		LANResolver: fixedMAC(host.MAC()),
	})
	if err != nil {
		return nil, err
	}
	s.dev, err = gateway.New(gateway.Options{
		PrivateKey: key, ListenPort: 51820, Dataplane: s.eng,
		WANMAC: [6]byte(wan.MAC()), WANAddr4: addr,
	})
	if err != nil {
		s.eng.Close()
		return nil, err
	}
	return s, nil
}

func (s *site) close() {
	s.dev.Close() // the control plane first, then the engine, then the ports
	s.eng.Close()
	s.lan.Close()
	s.host.Close()
}

// Example_memport runs two wgpio gateways in one process, without a kernel:
// each is a fast-path engine with its control plane, their WAN ports the two
// ends of one memport wire. A UDP packet from a host on A's LAN to one on
// B's LAN makes A hold it and handshake with B (whitepaper §5.4), then
// travel encrypted and come out of B's LAN port.
func Example_memport() {
	wanA, wanB, err := memport.NewPair(memport.Config{Name: "wan"})
	if err != nil {
		log.Fatal(err)
	}
	defer wanA.Close()
	defer wanB.Close()
	keyA, _ := noise.NewPrivateKey()
	keyB, _ := noise.NewPrivateKey()
	addrA, addrB := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
	a, err := newSite("lanA", wanA, addrA, keyA)
	if err != nil {
		log.Fatal(err)
	}
	defer a.close()
	b, err := newSite("lanB", wanB, addrB, keyB)
	if err != nil {
		log.Fatal(err)
	}
	defer b.close()
	err = a.dev.AddPeer(gateway.PeerConfig{
		PublicKey: keyB.PublicKey(), Endpoint: netip.AddrPortFrom(addrB, 51820),
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.2.0/24")},
	})
	if err != nil {
		log.Fatal(err)
	}
	err = b.dev.AddPeer(gateway.PeerConfig{
		PublicKey: keyA.PublicKey(), Endpoint: netip.AddrPortFrom(addrA, 51820),
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.1.0/24")},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range []*site{a, b} {
		s.eng.Start()
		if err := s.dev.Start(); err != nil {
			log.Fatal(err)
		}
	}

	// 198.19.1.10:1234 → 198.19.2.10:5678, from A's LAN host to A.
	payload := []byte("hello")
	frame := make([]byte, header.EthernetLen+header.IPv4MinLen+header.UDPLen+len(payload))
	n := header.PutEthernet(frame, header.MAC(a.lan.MAC()), header.MAC(a.host.MAC()), header.EtherTypeIPv4)
	n += header.PutIPv4(frame[n:], &header.IPv4Fields{Protocol: header.ProtoUDP,
		Src: [4]byte{198, 19, 1, 10}, Dst: [4]byte{198, 19, 2, 10}}, header.UDPLen+len(payload))
	n += header.PutUDP(frame[n:], 1234, 5678, len(payload))
	copy(frame[n:], payload)
	frames := make([]dataplane.Frame, 64)
	// The LAN host's queue halves belong to this goroutine.
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
	st := a.eng.Stats()[0]
	fmt.Printf("A encrypted %d, dropped %v\n", st.Encrypted, fastpath.TotalDrops(a.eng.Stats()).List())
	// Output:
	// B's LAN host got "hello"
	// A encrypted 1, dropped []
}
