package gateway_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/noise"
)

// TestEndpointSetAgainKeepsMAC: two gateways over memport whose devices
// have no Options.Resolve (as Example_memport's), a session up, then A's
// peer's endpoint set again unchanged, over the UAPI (wg set ... endpoint,
// a wg syncconf of the same file) and through AddPeer. A's next packet
// must still reach B's LAN at once, as Linux's wg0 sends at once after
// such a set. Without the MAC kept, the endpoint had none, nothing but the
// next handshake gave it back, and the packets were dropped as
// no_neighbour for 15 s (KeepaliveTimeout + RekeyTimeout).
func TestEndpointSetAgainKeepsMAC(t *testing.T) {
	wanA, wanB, err := memport.NewPair(memport.Config{Name: "wan"})
	if err != nil {
		t.Fatal(err)
	}
	defer wanA.Close()
	defer wanB.Close()
	keyA, _ := noise.NewPrivateKey()
	keyB, _ := noise.NewPrivateKey()
	addrA, addrB := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
	a, err := newSite("lanA", wanA, addrA, keyA)
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	b, err := newSite("lanB", wanB, addrB, keyB)
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	epB := netip.AddrPortFrom(addrB, 51820)
	cfgB := gateway.PeerConfig{PublicKey: keyB.PublicKey(), Endpoint: epB,
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.2.0/24")}}
	if err := a.dev.AddPeer(cfgB); err != nil {
		t.Fatal(err)
	}
	if err := b.dev.AddPeer(gateway.PeerConfig{PublicKey: keyA.PublicKey(), Endpoint: netip.AddrPortFrom(addrA, 51820),
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.1.0/24")}}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*site{a, b} {
		s.eng.Start()
		if err := s.dev.Start(); err != nil {
			t.Fatal(err)
		}
	}
	frames := make([]dataplane.Frame, 64)
	// send sends one UDP packet from A's LAN host to B's and reports
	// whether B's LAN host received it within wait.
	send := func(payload string, wait time.Duration) bool {
		frame := make([]byte, header.EthernetLen+header.IPv4MinLen+header.UDPLen+len(payload))
		n := header.PutEthernet(frame, header.MAC(a.lan.MAC()), header.MAC(a.host.MAC()), header.EtherTypeIPv4)
		n += header.PutIPv4(frame[n:], &header.IPv4Fields{Protocol: header.ProtoUDP,
			Src: [4]byte{198, 19, 1, 10}, Dst: [4]byte{198, 19, 2, 10}}, header.UDPLen+len(payload))
		n += header.PutUDP(frame[n:], 1234, 5678, len(payload))
		copy(frame[n:], payload)
		if err := dataplane.SendCopy(a.host.Queue(0).TX(), frames, frame); err != nil {
			t.Fatal(err)
		}
		rx := b.host.Queue(0).RX()
		for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			got := rx.Receive(frames)
			rx.Free(frames[:got])
			if got > 0 {
				return true
			}
		}
		return false
	}
	if !send("session", 10*time.Second) {
		t.Fatal("no packet through the tunnel before the endpoint was set again")
	}
	for _, set := range []struct {
		name string
		do   func() error
	}{
		{"IpcSet", func() error {
			pub := keyB.PublicKey()
			return a.dev.IpcSet(strings.NewReader(fmt.Sprintf("public_key=%s\nendpoint=%s\n", pub.Hex(), epB)))
		}},
		{"AddPeer", func() error { return a.dev.AddPeer(cfgB) }},
	} {
		if err := set.do(); err != nil {
			t.Fatalf("%s: %v", set.name, err)
		}
		if ep := a.dev.FastPeer(keyB.PublicKey()).Endpoint.Load(); ep.DstMAC != [6]byte(wanB.MAC()) {
			t.Errorf("after %s of the same endpoint, its next hop's MAC is %x, want B's %x", set.name, ep.DstMAC, [6]byte(wanB.MAC()))
		}
		if !send(set.name, 2*time.Second) {
			t.Errorf("after %s of the same endpoint, a packet did not reach B's LAN in 2 s (A's drops: %v)",
				set.name, fastpath.TotalDrops(a.eng.Stats()).List())
		}
	}
}
