package fastpath_test

import (
	"fmt"
	"log"
	"net/netip"

	"github.com/wgpio/wgpio/arp"
	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/fastpath"
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
