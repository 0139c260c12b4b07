package bind_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/bind"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// TestFragmentsKernel: datagrams longer than the WAN's MTU of 1,280
// (3,000 bytes of payload, IPv4 and IPv6 outer) leave the Bind's AF_XDP
// port as fragments that the Linux receiver reassembles: kernel UDP
// sockets in the peer's namespace receive every payload whole, counted
// as fragmented, three fragments each. Before, they were dropped as
// too_big.
func TestFragmentsKernel(t *testing.T) {
	tp := testenv.Topology(t, "wgf")
	a, b := testenv.NS(t, tp, "a"), testenv.NS(t, tp, "b")
	noDAD(t, a, b)
	w, err := tp.NewVeth(a, b, topo.VethConfig{MTU: 1280})
	must(t, err)
	must(t, a.AddAddr(w.A, "198.18.2.1/24"))
	must(t, a.AddAddr(w.A, "2001:2:0:2::1/64"))
	must(t, b.AddAddr(w.B, "198.18.2.2/24"))
	must(t, b.AddAddr(w.B, "2001:2:0:2::2/64"))
	port := openPort(t, a, w.A, bind.XDPFilter([]netip.Addr{wanA4, wanA6}, wgPort, false))
	if port.MTU() != 1280 {
		t.Fatalf("port MTU %d, want the veth's 1280", port.MTU())
	}
	routes, tbl := sharedNeighbours(t, a, w.A)
	bd, err := bind.New(bind.Config{Port: port, Addr4: wanA4, Addr6: wanA6, ListenPort: wgPort, Routes: routes, Neighbours: tbl})
	must(t, err)
	_, _, err = bd.Open(0)
	must(t, err)
	t.Cleanup(func() { bd.Close() })
	for _, dst := range []netip.Addr{netip.MustParseAddr("198.18.2.2"), netip.MustParseAddr("2001:2:0:2::2")} {
		var c *net.UDPConn
		must(t, b.Do(func() (err error) {
			c, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, echoPort)))
			return err
		}))
		t.Cleanup(func() { c.Close() })
		ep, err := bd.ParseEndpoint(netip.AddrPortFrom(dst, echoPort).String())
		must(t, err)
		payload := make([]byte, 3000)
		rand.Read(payload)
		// The neighbour resolves within a few tries (each waits up to
		// Config.ResolveWait).
		for try := 0; ; try++ {
			err := bd.Send([][]byte{payload}, ep)
			if err == nil {
				break
			}
			if !errors.Is(err, bind.ErrNoNeighbour) || try == 10 {
				t.Fatalf("Send to %v: %v", dst, err)
			}
		}
		// A deadline bounds only the datagram's never coming.
		c.SetReadDeadline(time.Now().Add(time.Minute))
		buf := make([]byte, 4096)
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("the peer's socket at %v received nothing: %v (bind %+v)", dst, err, bd.Stats())
		}
		if !bytes.Equal(buf[:n], payload) || from.Port() != wgPort {
			t.Errorf("the peer's socket at %v received %d bytes from %v, want the 3,000 sent from port %d", dst, n, from, wgPort)
		}
	}
	if s := bd.Stats(); s.Fragmented != 2 || s.Fragments != 6 || s.TXPackets != 2 || s.Drops[bind.DropTooBig] != 0 {
		t.Errorf("bind tx %d, fragmented %d, fragments %d, drops %v; want 2, 2, 6, no too_big", s.TXPackets, s.Fragmented, s.Fragments, s.Drops.List())
	}
}
