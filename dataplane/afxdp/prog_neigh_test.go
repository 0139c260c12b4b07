//go:build linux

package afxdp

import (
	"net/netip"
	"testing"

	"github.com/cilium/ebpf/rlimit"

	"github.com/wgpio/wgpio/internal/testenv"
)

// garp returns a gratuitous ARP request of ip: sender and target ip.
func garp(ip string) []byte {
	b := arp(ip)
	copy(b[14:18], b[24:28])
	return b
}

// TestFilterNeighbourUpdates: with Filter.NeighbourUpdates, a gratuitous
// ARP frame and an NDP advertisement to a multicast destination (an
// unsolicited one) are redirected besides those for our addresses (other
// hosts' ARP stays the kernel's), so that the owned mode's table hears
// a neighbour that moved (a gratuitous ARP, an unsolicited NA); other
// NDP is judged as without it. Without it (TestFilter) they are passed.
func TestFilterNeighbourUpdates(t *testing.T) {
	testenv.Root(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	f := Filter{
		Neighbours:       []netip.Addr{netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("2001:db8::1")},
		NeighbourUpdates: true,
	}
	prog, err := newProgram(f, ourMAC, 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	runFilter(t, prog, []filterCase{
		{"arp for us", cat(eth(bcastMAC, 0x0806, false), arp("198.18.0.1")), redirect},
		{"arp for another", cat(eth(bcastMAC, 0x0806, false), arp("198.18.0.2")), pass},
		{"arp gratuitous", cat(eth(bcastMAC, 0x0806, false), garp("198.18.0.2")), redirect},
		{"arp truncated", cat(eth(bcastMAC, 0x0806, false), garp("198.18.0.2")[:27]), pass},
		{"arp vlan", cat(ethTag(bcastMAC, 0x8100, 7, 0x0806), arp("198.18.0.2")), passVLAN},
		{"ndp na to all nodes", cat(eth(bcastMAC, 0x86dd, false), ip6hdr(58, "ff02::1", 24), ndp(136, "2001:db8::5")), redirect},
		{"ndp ns for another", cat(eth(bcastMAC, 0x86dd, false), ip6hdr(58, "ff02::1:ff00:5", 24), ndp(135, "2001:db8::5")), pass},
		{"ndp na unicast to another", cat(eth(ourMAC, 0x86dd, false), ip6hdr(58, "2001:db8::7", 24), ndp(136, "2001:db8::5")), pass},
		{"ndp na to us", cat(eth(ourMAC, 0x86dd, false), ip6hdr(58, "2001:db8::1", 24), ndp(136, "2001:db8::5")), redirect},
		{"icmp6 echo to all nodes", cat(eth(bcastMAC, 0x86dd, false), ip6hdr(58, "ff02::1", 24), ndp(128, "2001:db8::5")), pass},
	})
}
