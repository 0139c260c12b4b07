package fastpath_test

import (
	"crypto/rand"
	"fmt"
	"log"
	"net/netip"
	"time"

	"github.com/wgpio/wgpio/arp"
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/header"
)

// responder adapts an arp.Responder to fastpath.NeighbourHandler: the
// Responder counts the frames it answers nothing for by reason itself.
type responder struct{ r *arp.Responder }

func (h responder) Handle(frame, out []byte) int {
	n, _ := h.r.Handle(frame, out)
	return n
}

// ExampleNeighbourHandler answers ARP for the gateway's own LAN address in
// the owned address mode (fastpath.Config.LANNeighbours) with an
// arp.Responder.
func ExampleNeighbourHandler() {
	lanMAC := arp.MAC{0x02, 0, 0, 0, 0, 1}
	r, err := arp.NewResponder(arp.ResponderConfig{
		MAC: lanMAC, Addrs: []netip.Addr{netip.MustParseAddr("198.18.1.1")},
	})
	if err != nil {
		log.Fatal(err)
	}
	var h fastpath.NeighbourHandler = responder{r}
	// (fastpath.Config{LANNeighbours: h, ...})

	// What a worker hands it: a LAN host asking for 198.18.1.1.
	host := arp.MAC{0x02, 0, 0, 0, 0, 2}
	req := arp.ARP{EthDst: arp.Broadcast, EthSrc: host, Op: arp.ARPRequest,
		SenderMAC: host, SenderIP: netip.MustParseAddr("198.18.1.2"),
		TargetIP: netip.MustParseAddr("198.18.1.1")}
	frame := make([]byte, arp.MinFrameLen)
	if _, err := req.Marshal(frame); err != nil {
		log.Fatal(err)
	}
	out := make([]byte, 128)
	n := h.Handle(frame, out)
	reply, _ := arp.ParseARP(out[:n])
	fmt.Printf("%v is at %v\n", reply.SenderIP, reply.SenderMAC)
	// Output:
	// 198.18.1.1 is at 02:00:00:00:00:01
}

// staticMAC is a fastpath.Resolver whose every next hop is one MAC.
type staticMAC [6]byte

func (m staticMAC) Resolve(netip.Addr) ([6]byte, bool) { return m, true }

// ExampleEngine_SetPeers gives an engine two peers: one of the engine's
// default outer source ports (Config.SourcePorts, taken by a peer whose
// SrcPorts is 0 when it joins) and one sent to from a single port.
func ExampleEngine_SetPeers() {
	lan, host, err := memport.NewPair(memport.Config{Name: "lan"})
	if err != nil {
		log.Fatal(err)
	}
	defer lan.Close()
	defer host.Close()
	wan, far, err := memport.NewPair(memport.Config{Name: "wan"})
	if err != nil {
		log.Fatal(err)
	}
	defer wan.Close()
	defer far.Close()
	e, err := fastpath.New(fastpath.Config{
		LAN: lan, WAN: wan, ListenPort: 51820, SourcePorts: 4,
		WANAddr4:    netip.MustParseAddr("198.18.0.1"),
		WANResolver: staticMAC(far.MAC()), LANResolver: staticMAC(host.MAC()),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	spread := &fastpath.Peer{PublicKey: [32]byte{1}}
	single := &fastpath.Peer{PublicKey: [32]byte{2}, SrcPorts: 1}
	err = e.SetPeers([]*fastpath.Peer{spread, single}, [][]netip.Prefix{
		{netip.MustParsePrefix("198.19.1.0/24")},
		{netip.MustParsePrefix("198.19.2.0/24")},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(spread.ID, spread.SrcPorts, single.ID, single.SrcPorts)
	// Output:
	// 0 4 1 1
}

// ExampleNewKeypair is a control plane of one's own: two engines back to
// back on memport whose session keys come from elsewhere (here: random,
// agreed in advance) instead of a handshake (package gateway does that).
// Each side registers its peer, publishes a keypair under a receiver index
// of its own, makes it the peer's current one and gives the peer an
// endpoint; a packet from A's LAN then comes out of B's LAN.
func ExampleNewKeypair() {
	wanA, wanB, err := memport.NewPair(memport.Config{Name: "wan"})
	if err != nil {
		log.Fatal(err)
	}
	defer wanA.Close()
	defer wanB.Close()
	type side struct {
		lan, host *memport.Port
		wan       *memport.Port
		addr      netip.Addr
		e         *fastpath.Engine
		peer      *fastpath.Peer
	}
	mk := func(name string, wan *memport.Port, addr string) *side {
		lan, host, err := memport.NewPair(memport.Config{Name: name})
		if err != nil {
			log.Fatal(err)
		}
		s := &side{lan: lan, host: host, wan: wan, addr: netip.MustParseAddr(addr)}
		s.e, err = fastpath.New(fastpath.Config{LAN: lan, WAN: wan, ListenPort: 51820, WANAddr4: s.addr,
			WANResolver: staticMAC(wan.Peer().MAC()), LANResolver: staticMAC(host.MAC())})
		if err != nil {
			log.Fatal(err)
		}
		return s
	}
	a, b := mk("lanA", wanA, "198.18.0.1"), mk("lanB", wanB, "198.18.0.2")
	for _, s := range []*side{a, b} {
		defer s.host.Close()
		defer s.lan.Close()
		defer s.e.Close() // first: the engine, then its ports
	}
	var keyAB, keyBA [32]byte // A→B and B→A transport keys
	rand.Read(keyAB[:])
	rand.Read(keyBA[:])
	a.peer, b.peer = &fastpath.Peer{PublicKey: [32]byte{'B'}}, &fastpath.Peer{PublicKey: [32]byte{'A'}}
	if err := a.e.SetPeers([]*fastpath.Peer{a.peer}, [][]netip.Prefix{{netip.MustParsePrefix("198.19.2.0/24")}}); err != nil {
		log.Fatal(err)
	}
	if err := b.e.SetPeers([]*fastpath.Peer{b.peer}, [][]netip.Prefix{{netip.MustParsePrefix("198.19.1.0/24")}}); err != nil {
		log.Fatal(err)
	}
	idxA, _ := a.e.Indexes().Allocate() // what B writes into what it sends A
	idxB, _ := b.e.Indexes().Allocate()
	kpA, _ := fastpath.NewKeypair(&keyAB, &keyBA, idxA, idxB, true, a.e.Now(), a.peer)
	kpB, _ := fastpath.NewKeypair(&keyBA, &keyAB, idxB, idxA, true, b.e.Now(), b.peer)
	clear(keyAB[:]) // the keypairs hold their own copies
	clear(keyBA[:])
	a.e.Indexes().Publish(idxA, kpA)
	b.e.Indexes().Publish(idxB, kpB)
	a.peer.Current.Store(kpA)
	b.peer.Current.Store(kpB)
	for _, s := range [][2]*side{{a, b}, {b, a}} {
		me, them := s[0], s[1]
		me.peer.Endpoint.Store(&fastpath.Endpoint{Dst: netip.AddrPortFrom(them.addr, 51820), Src: me.addr,
			DstMAC: [6]byte(them.wan.MAC()), SrcMAC: [6]byte(me.wan.MAC())})
		me.e.Start()
	}

	payload := []byte("no handshake")
	frame := make([]byte, header.EthernetLen+header.IPv4MinLen+header.UDPLen+len(payload))
	n := header.PutEthernet(frame, header.MAC(a.lan.MAC()), header.MAC(a.host.MAC()), header.EtherTypeIPv4)
	n += header.PutIPv4(frame[n:], &header.IPv4Fields{Protocol: header.ProtoUDP,
		Src: [4]byte{198, 19, 1, 10}, Dst: [4]byte{198, 19, 2, 10}}, header.UDPLen+len(payload))
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
	// B's LAN host got "no handshake"
}
