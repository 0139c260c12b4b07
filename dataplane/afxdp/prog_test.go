//go:build linux

package afxdp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"
	"github.com/wgpio/wgpio/internal/testenv"
)

var (
	ourMAC   = net.HardwareAddr{0x02, 0, 0, 0, 0, 1}
	otherMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 2}
	bcastMAC = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
)

// eth returns an Ethernet header to dst with the EtherType, optionally with
// an 802.1Q tag (VLAN 7) in front of it.
func eth(dst net.HardwareAddr, etherType uint16, vlan bool) []byte {
	b := append(append([]byte{}, dst...), otherMAC...)
	if vlan {
		b = binary.BigEndian.AppendUint16(b, 0x8100)
		b = binary.BigEndian.AppendUint16(b, 7)
	}
	return binary.BigEndian.AppendUint16(b, etherType)
}

// ethTag returns an Ethernet header to dst with one tag (TPID and TCI) in
// front of the EtherType.
func ethTag(dst net.HardwareAddr, tpid, tci, etherType uint16) []byte {
	b := append(append([]byte{}, dst...), otherMAC...)
	b = binary.BigEndian.AppendUint16(b, tpid)
	b = binary.BigEndian.AppendUint16(b, tci)
	return binary.BigEndian.AppendUint16(b, etherType)
}

// ipv4 returns an IPv4 header (checksum not filled: XDP does not check it).
func ip4hdr(proto byte, dst string, fragOff uint16, payloadLen int) []byte {
	b := make([]byte, 20)
	b[0], b[8], b[9] = 0x45, 64, proto
	binary.BigEndian.PutUint16(b[2:], uint16(20+payloadLen))
	binary.BigEndian.PutUint16(b[6:], fragOff)
	copy(b[12:], []byte{198, 18, 9, 9})
	a := netip.MustParseAddr(dst).As4()
	copy(b[16:], a[:])
	return b
}

// ip4opts appends n bytes of options (NOPs, n a multiple of 4) to the
// 20-byte header h and sets its IHL and total length to match.
func ip4opts(h []byte, n int) []byte {
	b := append(append([]byte{}, h...), bytes.Repeat([]byte{1}, n)...)
	b[0] = 0x40 | byte(len(b)/4)
	binary.BigEndian.PutUint16(b[2:], binary.BigEndian.Uint16(b[2:])+uint16(n))
	return b
}

func ip6hdr(next byte, dst string, payloadLen int) []byte {
	b := make([]byte, 40)
	b[0], b[6], b[7] = 0x60, next, 64
	binary.BigEndian.PutUint16(b[4:], uint16(payloadLen))
	b[8], b[9] = 0x20, 0x01
	a := netip.MustParseAddr(dst).As16()
	copy(b[24:], a[:])
	return b
}

func udp(dport uint16) []byte {
	b := make([]byte, 8+32)
	binary.BigEndian.PutUint16(b[0:], 40000)
	binary.BigEndian.PutUint16(b[2:], dport)
	binary.BigEndian.PutUint16(b[4:], uint16(len(b)))
	return b
}

// arp returns an Ethernet/IPv4 ARP request for target (RFC 826).
func arp(target string) []byte {
	b := make([]byte, 28)
	binary.BigEndian.PutUint16(b[0:], 1)      // hardware type Ethernet
	binary.BigEndian.PutUint16(b[2:], 0x0800) // protocol IPv4
	b[4], b[5] = 6, 4
	binary.BigEndian.PutUint16(b[6:], 1) // request
	copy(b[8:], otherMAC)
	a := netip.MustParseAddr(target).As4()
	copy(b[24:], a[:])
	return b
}

// ndp returns an ICMPv6 neighbour solicitation (135) or advertisement
// (136) for target (RFC 4861 section 4.3).
func ndp(typ byte, target string) []byte {
	b := make([]byte, 24)
	b[0] = typ
	a := netip.MustParseAddr(target).As16()
	copy(b[8:], a[:])
	return b
}

// frag6 returns an IPv6 Fragment header (RFC 8200 §4.5): next header,
// offset in bytes (a multiple of 8), M.
func frag6(next byte, off uint16, more bool) []byte {
	b := make([]byte, 8)
	b[0] = next
	if more {
		off |= 1
	}
	binary.BigEndian.PutUint16(b[2:], off)
	binary.BigEndian.PutUint32(b[4:], 0x01020304)
	return b
}

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// TestFilter runs frames through the program with BPF_PROG_TEST_RUN. No
// socket is in the XSKMAP, so a frame the filter selects comes back as
// XDP_PASS counted as xdp_pass_no_socket, and one it rejects as xdp_pass
// (or xdp_pass_host_addr).
func TestFilter(t *testing.T) {
	testenv.Root(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	f := Filter{
		UDP: []UDPMatch{
			{Addr: netip.MustParseAddr("198.18.0.1"), PortLo: 51820, PortHi: 51830},
			{Addr: netip.MustParseAddr("2001:db8::1"), PortLo: 51820, PortHi: 51820},
		},
		Neighbours: []netip.Addr{netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("2001:db8::1")},
		Prefixes:   true,
		HostAddrs:  []netip.Addr{netip.MustParseAddr("198.19.1.1"), netip.MustParseAddr("2001:db8:1::1")},
	}
	prog, err := newProgram(f, ourMAC, 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	for _, pfx := range []string{"198.19.1.0/24", "2001:db8:1::/48"} {
		m, k, err := prog.prefixKey(netip.MustParsePrefix(pfx))
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Put(k, uint32(1)); err != nil {
			t.Fatal(err)
		}
	}
	runFilter(t, prog, []filterCase{
		{"udp4 port lo", cat(eth(ourMAC, 0x0800, false), ip4hdr(17, "198.18.0.1", 0, 40), udp(51820)), redirect},
		{"udp4 port hi", cat(eth(bcastMAC, 0x0800, false), ip4hdr(17, "198.18.0.1", 0, 40), udp(51830)), redirect},
		// A frame to another host's MAC is not ours (PACKET_OTHERHOST):
		// the kernel drops it; a group address's is.
		{"udp4 other host's mac", cat(eth(otherMAC, 0x0800, false), ip4hdr(17, "198.18.0.1", 0, 40), udp(51820)), pass},
		{"udp4 other host's mac, vlan", cat(eth(otherMAC, 0x0800, true), ip4hdr(17, "198.18.0.1", 0, 40), udp(51820)), pass},
		{"udp6 other host's mac", cat(eth(otherMAC, 0x86dd, false), ip6hdr(17, "2001:db8::1", 40), udp(51820)), pass},
		{"udp6 multicast mac", cat(eth(net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}, 0x86dd, false), ip6hdr(17, "2001:db8::1", 40), udp(51820)), redirect},
		{"arp for us, other host's mac", cat(eth(otherMAC, 0x0806, false), arp("198.18.0.1")), pass},
		{"udp4 port above", cat(eth(ourMAC, 0x0800, false), ip4hdr(17, "198.18.0.1", 0, 40), udp(51831)), pass},
		{"udp4 port below", cat(eth(ourMAC, 0x0800, false), ip4hdr(17, "198.18.0.1", 0, 40), udp(51819)), pass},
		{"udp4 other address", cat(eth(ourMAC, 0x0800, false), ip4hdr(17, "198.18.0.2", 0, 40), udp(51820)), pass},
		// VLAN isolation: only untagged and priority-tagged frames.
		{"udp4 vlan", cat(eth(ourMAC, 0x0800, true), ip4hdr(17, "198.18.0.1", 0, 40), udp(51820)), passVLAN},
		{"udp4 priority tag", cat(ethTag(ourMAC, 0x8100, 0xa000, 0x0800), ip4hdr(17, "198.18.0.1", 0, 40), udp(51820)), redirect},
		{"udp4 802.1ad", cat(ethTag(ourMAC, 0x88a8, 7, 0x0800), ip4hdr(17, "198.18.0.1", 0, 40), udp(51820)), passVLAN},
		{"udp4 802.1ad vid 0", cat(ethTag(ourMAC, 0x88a8, 0, 0x0800), ip4hdr(17, "198.18.0.1", 0, 40), udp(51820)), redirect}, // a priority tag (prog_vid0_test.go)
		{"udp4 stacked tags", cat(ethTag(ourMAC, 0x8100, 0, 0x8100), []byte{0, 7, 0x08, 0}, ip4hdr(17, "198.18.0.1", 0, 40), udp(51820)), passVLAN},
		{"udp4 vlan truncated", cat(ethTag(ourMAC, 0x8100, 0, 0x0800))[:16], pass},
		{"arp vlan", cat(ethTag(bcastMAC, 0x8100, 7, 0x0806), arp("198.18.0.1")), passVLAN},
		{"lan4 vlan 100", cat(ethTag(ourMAC, 0x8100, 100, 0x0800), ip4hdr(6, "198.19.1.5", 0, 40), udp(80)), passVLAN},
		{"lan4 priority tag", cat(ethTag(ourMAC, 0x8100, 0x2000, 0x0800), ip4hdr(6, "198.19.1.5", 0, 40), udp(80)), redirect},
		{"udp4 fragment", cat(eth(ourMAC, 0x0800, false), ip4hdr(17, "198.18.0.1", 0x2000, 40), udp(51820)), pass},
		{"udp4 fragment offset", cat(eth(ourMAC, 0x0800, false), ip4hdr(17, "198.18.0.1", 185, 40), udp(51820)), pass},
		{"udp6 fragment", cat(eth(ourMAC, 0x86dd, false), ip6hdr(44, "2001:db8::1", 48), frag6(17, 0, true), udp(51820)), pass},
		{"tcp4", cat(eth(ourMAC, 0x0800, false), ip4hdr(6, "198.18.0.1", 0, 40), udp(51820)), pass},
		{"udp4 truncated", cat(eth(ourMAC, 0x0800, false), ip4hdr(17, "198.18.0.1", 0, 40), udp(51820)[:3]), pass},
		{"ipv4 truncated", cat(eth(ourMAC, 0x0800, false), ip4hdr(17, "198.18.0.1", 0, 40)[:19]), pass},
		{"udp6", cat(eth(ourMAC, 0x86dd, false), ip6hdr(17, "2001:db8::1", 40), udp(51820)), redirect},
		{"udp6 other port", cat(eth(ourMAC, 0x86dd, false), ip6hdr(17, "2001:db8::1", 40), udp(51821)), pass},
		{"udp6 vlan", cat(eth(ourMAC, 0x86dd, true), ip6hdr(17, "2001:db8::1", 40), udp(51820)), passVLAN},
		{"lan6 vlan", cat(ethTag(ourMAC, 0x8100, 4094, 0x86dd), ip6hdr(6, "2001:db8:1::5", 40), udp(80)), passVLAN},
		{"arp for us", cat(eth(bcastMAC, 0x0806, false), arp("198.18.0.1")), redirect},
		{"arp for another", cat(eth(bcastMAC, 0x0806, false), arp("198.18.0.2")), pass},
		{"arp truncated", cat(eth(bcastMAC, 0x0806, false), arp("198.18.0.1")[:27]), pass},
		{"ndp ns target us", cat(eth(bcastMAC, 0x86dd, false), ip6hdr(58, "ff02::1:ff00:1", 24), ndp(135, "2001:db8::1")), redirect},
		{"ndp na to us", cat(eth(ourMAC, 0x86dd, false), ip6hdr(58, "2001:db8::1", 24), ndp(136, "2001:db8::5")), redirect},
		{"ndp ns for another", cat(eth(bcastMAC, 0x86dd, false), ip6hdr(58, "ff02::1:ff00:5", 24), ndp(135, "2001:db8::5")), pass},
		{"icmp6 echo to us", cat(eth(ourMAC, 0x86dd, false), ip6hdr(58, "2001:db8::1", 24), ndp(128, "2001:db8::1")), pass},
		{"ndp ns unicast in prefix", cat(eth(ourMAC, 0x86dd, false), ip6hdr(58, "2001:db8:1::5", 24), ndp(135, "2001:db8:1::5")), redirect},
		{"ndp na unicast in prefix", cat(eth(ourMAC, 0x86dd, false), ip6hdr(58, "2001:db8:1::5", 24), ndp(136, "2001:db8:1::6")), redirect},
		{"ndp ns to host address", cat(eth(ourMAC, 0x86dd, false), ip6hdr(58, "2001:db8:1::1", 24), ndp(135, "2001:db8:1::1")), host},
		{"ndp ns unicast outside prefix", cat(eth(ourMAC, 0x86dd, false), ip6hdr(58, "2001:db8:2::5", 24), ndp(135, "2001:db8:2::5")), pass},
		{"ndp ns unicast in prefix, other mac", cat(eth(otherMAC, 0x86dd, false), ip6hdr(58, "2001:db8:1::5", 24), ndp(135, "2001:db8:1::5")), pass},
		{"lan4 in prefix", cat(eth(ourMAC, 0x0800, false), ip4hdr(6, "198.19.1.5", 0, 40), udp(80)), redirect},
		{"lan4 host address", cat(eth(ourMAC, 0x0800, false), ip4hdr(6, "198.19.1.1", 0, 40), udp(80)), host},
		// IPv4 options: transit traffic for the LAN match, never
		// WireGuard for the UDP match (the kernel's socket takes it).
		{"lan4 options", cat(eth(ourMAC, 0x0800, false), ip4opts(ip4hdr(1, "198.19.1.5", 0, 40), 4), udp(80)), redirect},
		{"lan4 options, 60-byte header", cat(eth(ourMAC, 0x0800, false), ip4opts(ip4hdr(1, "198.19.1.5", 0, 40), 40), udp(80)), redirect},
		{"lan4 options host address", cat(eth(ourMAC, 0x0800, false), ip4opts(ip4hdr(6, "198.19.1.1", 0, 40), 4), udp(80)), host},
		{"lan4 options outside prefix", cat(eth(ourMAC, 0x0800, false), ip4opts(ip4hdr(6, "198.19.2.5", 0, 40), 4), udp(80)), pass},
		{"lan4 IHL 4", cat(eth(ourMAC, 0x0800, false), ip4hdr(6, "198.19.1.5", 0, 40)[:0], []byte{0x44}, ip4hdr(6, "198.19.1.5", 0, 40)[1:], udp(80)), pass},
		{"udp4 options", cat(eth(ourMAC, 0x0800, false), ip4opts(ip4hdr(17, "198.18.0.1", 0, 40), 4), udp(51820)), pass},
		{"lan4 outside prefix", cat(eth(ourMAC, 0x0800, false), ip4hdr(6, "198.19.2.5", 0, 40), udp(80)), pass},
		{"lan4 other mac", cat(eth(otherMAC, 0x0800, false), ip4hdr(6, "198.19.1.5", 0, 40), udp(80)), pass},
		{"lan4 broadcast", cat(eth(bcastMAC, 0x0800, false), ip4hdr(6, "198.19.1.5", 0, 40), udp(80)), pass},
		{"lan6 in prefix", cat(eth(ourMAC, 0x86dd, false), ip6hdr(6, "2001:db8:1::5", 40), udp(80)), redirect},
		{"lan6 host address", cat(eth(ourMAC, 0x86dd, false), ip6hdr(6, "2001:db8:1::1", 40), udp(80)), host},
		{"lan6 outside prefix", cat(eth(ourMAC, 0x86dd, false), ip6hdr(6, "2001:db8:2::5", 40), udp(80)), pass},
		{"other ethertype", cat(eth(ourMAC, 0x88b5, false), make([]byte, 50)), pass},
	})
}

// TestFilterDefaultRoute: with the prefixes 0.0.0.0/0 and ::/0 (a peer
// with AllowedIPs = 0.0.0.0/0, ::/0), a frame to our MAC with a multicast
// or limited-broadcast destination still goes to the kernel, which
// delivers it to the host's listeners as Linux does and forwards none of
// it; class E and IPv4 with options are transit, the host's addresses
// the host's.
func TestFilterDefaultRoute(t *testing.T) {
	testenv.Root(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	f := Filter{Prefixes: true, HostAddrs: []netip.Addr{netip.MustParseAddr("198.19.1.1"), netip.MustParseAddr("198.19.1.255")}}
	prog, err := newProgram(f, ourMAC, 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	for _, pfx := range []string{"0.0.0.0/0", "::/0"} {
		m, k, err := prog.prefixKey(netip.MustParsePrefix(pfx))
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Put(k, uint32(1)); err != nil {
			t.Fatal(err)
		}
	}
	runFilter(t, prog, []filterCase{
		{"lan4 unicast", cat(eth(ourMAC, 0x0800, false), ip4hdr(17, "203.0.113.5", 0, 40), udp(80)), redirect},
		{"lan4 multicast", cat(eth(ourMAC, 0x0800, false), ip4hdr(17, "224.0.0.1", 0, 40), udp(80)), pass},
		{"lan4 multicast 239", cat(eth(ourMAC, 0x0800, false), ip4hdr(17, "239.255.255.250", 0, 40), udp(80)), pass},
		{"lan4 limited broadcast", cat(eth(ourMAC, 0x0800, false), ip4hdr(17, "255.255.255.255", 0, 40), udp(80)), pass},
		{"lan4 directed broadcast", cat(eth(ourMAC, 0x0800, false), ip4hdr(17, "198.19.1.255", 0, 40), udp(80)), host},
		{"lan4 class E", cat(eth(ourMAC, 0x0800, false), ip4hdr(17, "240.0.0.1", 0, 40), udp(80)), redirect},
		{"lan4 options multicast", cat(eth(ourMAC, 0x0800, false), ip4opts(ip4hdr(2, "224.0.0.22", 0, 40), 4), udp(80)), pass},
		{"lan6 unicast", cat(eth(ourMAC, 0x86dd, false), ip6hdr(17, "2001:db8:9::1", 40), udp(80)), redirect},
		{"lan6 multicast", cat(eth(ourMAC, 0x86dd, false), ip6hdr(17, "ff02::1", 40), udp(80)), pass},
		{"lan6 multicast global", cat(eth(ourMAC, 0x86dd, false), ip6hdr(17, "ff0e::1", 40), udp(80)), pass},
		// An NS or NA to a remote unicast address is transit: Linux
		// forwards it (seen on 6.18), out of the WAN in cleartext
		// when it had it.
		{"lan6 ndp ns unicast", cat(eth(ourMAC, 0x86dd, false), ip6hdr(58, "2001:db8:9::1", 24), ndp(135, "2001:db8:9::1")), redirect},
		{"lan6 ndp na unicast", cat(eth(ourMAC, 0x86dd, false), ip6hdr(58, "2001:db8:9::1", 24), ndp(136, "2001:db8:9::2")), redirect},
		{"lan6 ndp ns multicast", cat(eth(ourMAC, 0x86dd, false), ip6hdr(58, "ff02::1:ff00:5", 24), ndp(135, "2001:db8:9::5")), pass},
	})
}

// Counters that tell where the program sent a frame in TestFilter: with no
// socket in the XSKMAP, a redirected frame counts as xdp_pass_no_socket.
const (
	redirect = "xdp_pass_no_socket"
	pass     = "xdp_pass"
	passVLAN = "xdp_pass_vlan"
	dropVLAN = "xdp_drop_vlan" // the one verdict that is XDP_DROP
	host     = "xdp_pass_host_addr"
)

type filterCase struct {
	name  string
	frame []byte
	want  string // the one counter that must move
}

// runFilter runs each frame through prog (BPF_PROG_TEST_RUN) and checks
// that it gets XDP_PASS (XDP_DROP for dropVLAN) and moves exactly its
// counter.
func runFilter(t *testing.T, prog *program, cases []filterCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			before := map[string]uint64{}
			if err := prog.counterValues(before); err != nil {
				t.Fatal(err)
			}
			ret, err := prog.prog.Run(&ebpf.RunOptions{Data: tt.frame})
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			want := uint32(xdpPass)
			if tt.want == dropVLAN {
				want = xdpDrop
			}
			if ret != want {
				t.Errorf("action = %d, want %d (XDP_PASS 2, XDP_DROP 1)", ret, want)
			}
			after := map[string]uint64{}
			if err := prog.counterValues(after); err != nil {
				t.Fatal(err)
			}
			var got []string
			for k, v := range after {
				if v != before[k] {
					got = append(got, k)
				}
			}
			if len(got) != 1 || got[0] != tt.want {
				t.Errorf("counters changed = %v, want [%s]", got, tt.want)
			}
		})
	}
}

// TestFilterVLAN runs frames through a filter for VLAN 100 of a trunk:
// only frames with one 802.1Q tag of VID 100 reach the sockets.
func TestFilterVLAN(t *testing.T) {
	testenv.Root(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	f := Filter{
		UDP:        []UDPMatch{{Addr: netip.MustParseAddr("198.18.0.1"), PortLo: 51820, PortHi: 51820}},
		Neighbours: []netip.Addr{netip.MustParseAddr("198.18.0.1")},
		Prefixes:   true,
		VLAN:       100,
	}
	prog, err := newProgram(f, ourMAC, 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	m, k, err := prog.prefixKey(netip.MustParsePrefix("198.19.1.0/24"))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Put(k, uint32(1)); err != nil {
		t.Fatal(err)
	}
	runFilter(t, prog, []filterCase{
		{"udp4 vlan 100", cat(ethTag(ourMAC, 0x8100, 100, 0x0800), ip4hdr(17, "198.18.0.1", 0, 40), udp(51820)), redirect},
		{"udp4 vlan 100 pcp 7", cat(ethTag(ourMAC, 0x8100, 0xe000|100, 0x0800), ip4hdr(17, "198.18.0.1", 0, 40), udp(51820)), redirect},
		{"udp4 vlan 100 other port", cat(ethTag(ourMAC, 0x8100, 100, 0x0800), ip4hdr(17, "198.18.0.1", 0, 40), udp(51821)), pass},
		{"udp4 untagged", cat(eth(ourMAC, 0x0800, false), ip4hdr(17, "198.18.0.1", 0, 40), udp(51820)), passVLAN},
		{"udp4 priority tag", cat(ethTag(ourMAC, 0x8100, 0, 0x0800), ip4hdr(17, "198.18.0.1", 0, 40), udp(51820)), passVLAN},
		{"udp4 vlan 101", cat(ethTag(ourMAC, 0x8100, 101, 0x0800), ip4hdr(17, "198.18.0.1", 0, 40), udp(51820)), passVLAN},
		{"udp4 vlan 100+4096", cat(ethTag(ourMAC, 0x8100, 0x1000|100, 0x0800), ip4hdr(17, "198.18.0.1", 0, 40), udp(51820)), redirect},
		{"udp4 802.1ad 100", cat(ethTag(ourMAC, 0x88a8, 100, 0x0800), ip4hdr(17, "198.18.0.1", 0, 40), udp(51820)), passVLAN},
		{"udp4 stacked", cat(ethTag(ourMAC, 0x8100, 100, 0x8100), []byte{0, 5, 0x08, 0}, ip4hdr(17, "198.18.0.1", 0, 40), udp(51820)), passVLAN},
		{"arp vlan 100", cat(ethTag(bcastMAC, 0x8100, 100, 0x0806), arp("198.18.0.1")), redirect},
		{"arp untagged", cat(eth(bcastMAC, 0x0806, false), arp("198.18.0.1")), passVLAN},
		{"lan4 vlan 100", cat(ethTag(ourMAC, 0x8100, 100, 0x0800), ip4hdr(6, "198.19.1.5", 0, 40), udp(80)), redirect},
		{"lan4 untagged", cat(eth(ourMAC, 0x0800, false), ip4hdr(6, "198.19.1.5", 0, 40), udp(80)), passVLAN},
	})
	if _, err := newProgram(Filter{VLAN: 4095}, ourMAC, 1, 0); err == nil {
		t.Error("newProgram with VLAN 4095 = nil error, want an error")
	}
}

// TestFilterFragments: with Filter.Fragments (the owned address mode), UDP
// fragments to a UDP address are redirected, IPv4 and IPv6, first ones by
// their port too, the later ones by their address alone; in shared mode
// (TestFilter) they go to the kernel.
func TestFilterFragments(t *testing.T) {
	testenv.Root(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	for _, vlan := range []uint16{0, 100} {
		t.Run(fmt.Sprintf("vlan %d", vlan), func(t *testing.T) {
			f := Filter{
				UDP: []UDPMatch{
					{Addr: netip.MustParseAddr("198.18.0.1"), PortLo: 51820, PortHi: 51821},
					{Addr: netip.MustParseAddr("2001:db8::1"), PortLo: 51820, PortHi: 51820},
				},
				Neighbours: []netip.Addr{netip.MustParseAddr("198.18.0.1")},
				Fragments:  true,
				VLAN:       vlan,
			}
			prog, err := newProgram(f, ourMAC, 4, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer prog.Close()
			l2 := func(et uint16) []byte {
				if vlan == 0 {
					return eth(ourMAC, et, false)
				}
				return ethTag(ourMAC, 0x8100, vlan, et)
			}
			other := func(et uint16) []byte { // the wrong VLAN
				if vlan == 0 {
					return ethTag(ourMAC, 0x8100, 7, et)
				}
				return eth(ourMAC, et, false)
			}
			runFilter(t, prog, []filterCase{
				{"udp4", cat(l2(0x0800), ip4hdr(17, "198.18.0.1", 0, 40), udp(51820)), redirect},
				{"udp4 first fragment", cat(l2(0x0800), ip4hdr(17, "198.18.0.1", 0x2000, 40), udp(51821)), redirect},
				{"udp4 first fragment other port", cat(l2(0x0800), ip4hdr(17, "198.18.0.1", 0x2000, 40), udp(51822)), pass},
				{"udp4 first fragment short", cat(l2(0x0800), ip4hdr(17, "198.18.0.1", 0x2000, 4), udp(51822)[:4]), redirect},
				{"udp4 later fragment", cat(l2(0x0800), ip4hdr(17, "198.18.0.1", 185, 40), udp(1)), redirect},
				{"udp4 middle fragment", cat(l2(0x0800), ip4hdr(17, "198.18.0.1", 0x2000|185, 40), udp(1)), redirect},
				{"udp4 later fragment other address", cat(l2(0x0800), ip4hdr(17, "198.18.0.2", 185, 40), udp(1)), pass},
				{"tcp4 later fragment", cat(l2(0x0800), ip4hdr(6, "198.18.0.1", 185, 40), udp(1)), pass},
				{"udp4 fragment options", cat(l2(0x0800), ip4opts(ip4hdr(17, "198.18.0.1", 185, 40), 4), udp(1)), pass},
				{"udp4 fragment other vlan", cat(other(0x0800), ip4hdr(17, "198.18.0.1", 185, 40), udp(1)), passVLAN},
				{"udp6", cat(l2(0x86dd), ip6hdr(17, "2001:db8::1", 40), udp(51820)), redirect},
				{"udp6 first fragment", cat(l2(0x86dd), ip6hdr(44, "2001:db8::1", 48), frag6(17, 0, true), udp(51820)), redirect},
				{"udp6 first fragment other port", cat(l2(0x86dd), ip6hdr(44, "2001:db8::1", 48), frag6(17, 0, true), udp(51821)), pass},
				{"udp6 first fragment short", cat(l2(0x86dd), ip6hdr(44, "2001:db8::1", 12), frag6(17, 0, true), udp(51821)[:4]), redirect},
				{"udp6 later fragment", cat(l2(0x86dd), ip6hdr(44, "2001:db8::1", 48), frag6(17, 1480, false), udp(1)), redirect},
				{"udp6 later fragment other address", cat(l2(0x86dd), ip6hdr(44, "2001:db8::2", 48), frag6(17, 1480, false), udp(1)), pass},
				{"tcp6 later fragment", cat(l2(0x86dd), ip6hdr(44, "2001:db8::1", 48), frag6(6, 1480, false), udp(1)), pass},
				{"udp6 fragment truncated", cat(l2(0x86dd), ip6hdr(44, "2001:db8::1", 8), frag6(17, 1480, false)[:6]), pass},
				{"udp6 fragment other vlan", cat(other(0x86dd), ip6hdr(44, "2001:db8::1", 48), frag6(17, 1480, false), udp(1)), passVLAN},
				{"arp", cat(l2(0x0806), arp("198.18.0.1")), redirect},
			})
		})
	}
}

// TestProgramLoads checks that the verifier accepts every shape of filter.
func TestProgramLoads(t *testing.T) {
	testenv.Root(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		f    Filter
	}{
		{"empty", Filter{}},
		{"all", Filter{All: true}},
		{"udp", Filter{UDP: []UDPMatch{{Addr: netip.MustParseAddr("198.18.0.1"), PortLo: 1, PortHi: 2}}}},
		{"prefixes", Filter{Prefixes: true}},
		{"vlan", Filter{Prefixes: true, VLAN: 4094}},
		{"fragments", Filter{Fragments: true, Neighbours: []netip.Addr{netip.MustParseAddr("198.18.0.1")}, VLAN: 7}},
		{"mld queries", Filter{Fragments: true, MLDQueries: true, Neighbours: []netip.Addr{netip.MustParseAddr("2001:db8::1")}, VLAN: 7}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := newProgram(tt.f, ourMAC, 1, 0)
			if err != nil {
				t.Fatalf("newProgram(%+v) = %v", tt.f, err)
			}
			p.Close()
		})
	}
	if _, err := newProgram(Filter{UDP: []UDPMatch{{Addr: netip.MustParseAddr("198.18.0.1"), PortLo: 2, PortHi: 1}}}, ourMAC, 1, 0); err == nil {
		t.Error("newProgram with port range 2-1 = nil error, want an error")
	}
}

// TestPrefixMapHolds100kPeers: the LAN prefix maps of the default
// capacity take 100,000 IPv4 /32 and 100,000 IPv6 /128 (a 100,000-peer
// configuration), and a frame to the last one added is redirected.
func TestPrefixMapHolds100kPeers(t *testing.T) {
	testenv.Root(t)
	testenv.Short(t, "fills the prefix maps with 200,000 entries")
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	prog, err := newProgram(Filter{Prefixes: true}, ourMAC, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	const n = 100_000
	for i := range n {
		a4 := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		var b [16]byte
		b[0], b[1], b[13], b[14], b[15] = 0xfd, 1, byte(i>>16), byte(i>>8), byte(i)
		for _, pfx := range []netip.Prefix{netip.PrefixFrom(a4, 32), netip.PrefixFrom(netip.AddrFrom16(b), 128)} {
			m, k, err := prog.prefixKey(pfx)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Put(k, uint32(1)); err != nil {
				t.Fatalf("prefix %d of each family (%v): %v", i, pfx, err)
			}
		}
	}
	i := n - 1
	last := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
	runFilter(t, prog, []filterCase{
		{"last /32", cat(eth(ourMAC, 0x0800, false), ip4hdr(17, last.String(), 0, 40), udp(9)), redirect},
		{"not added", cat(eth(ourMAC, 0x0800, false), ip4hdr(17, "10.200.0.1", 0, 40), udp(9)), pass},
	})
}

// TestSetHostAddrs: Port.SetHostAddrs replaces the LAN filter's host
// addresses while the program runs: frames to a new address go to the
// kernel, frames to one removed are redirected again.
func TestSetHostAddrs(t *testing.T) {
	testenv.Root(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	prog, err := newProgram(Filter{Prefixes: true, HostAddrs: []netip.Addr{netip.MustParseAddr("198.19.1.1")}}, ourMAC, 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	for _, pfx := range []string{"0.0.0.0/0", "::/0"} {
		m, k, err := prog.prefixKey(netip.MustParsePrefix(pfx))
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Put(k, uint32(1)); err != nil {
			t.Fatal(err)
		}
	}
	to := func(dst string) []byte {
		if netip.MustParseAddr(dst).Is4() {
			return cat(eth(ourMAC, 0x0800, false), ip4hdr(6, dst, 0, 40), udp(22))
		}
		return cat(eth(ourMAC, 0x86dd, false), ip6hdr(6, dst, 40), udp(22))
	}
	p := &Port{prog: prog}
	if err := p.SetHostAddrs([]netip.Addr{netip.MustParseAddr("198.19.1.2"), netip.MustParseAddr("2001:db8:1::2")}); err != nil {
		t.Fatal(err)
	}
	runFilter(t, prog, []filterCase{
		{"new v4 address", to("198.19.1.2"), host},
		{"new v6 address", to("2001:db8:1::2"), host},
		{"removed address", to("198.19.1.1"), redirect},
	})
	if err := p.SetHostAddrs(nil); err != nil {
		t.Fatal(err)
	}
	runFilter(t, prog, []filterCase{
		{"all removed v4", to("198.19.1.2"), redirect},
		{"all removed v6", to("2001:db8:1::2"), redirect},
	})
}

// TestSetUDP: Port.SetUDP replaces the WAN filter's UDP matches while the
// program runs (a new listen port or WAN address): datagrams to the new
// address and port are redirected, those to the old ones passed.
func TestSetUDP(t *testing.T) {
	testenv.Root(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	prog, err := newProgram(Filter{UDP: []UDPMatch{
		{Addr: netip.MustParseAddr("198.18.0.1"), PortLo: 51820, PortHi: 51820},
		{Addr: netip.MustParseAddr("2001:db8::1"), PortLo: 51820, PortHi: 51820},
	}}, ourMAC, 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	p := &Port{prog: prog}
	if err := p.SetUDP([]UDPMatch{{Addr: netip.MustParseAddr("198.18.0.2"), PortLo: 51821, PortHi: 51822}}); err != nil {
		t.Fatal(err)
	}
	runFilter(t, prog, []filterCase{
		{"new address and port", cat(eth(ourMAC, 0x0800, false), ip4hdr(17, "198.18.0.2", 0, 40), udp(51822)), redirect},
		{"new address, old port", cat(eth(ourMAC, 0x0800, false), ip4hdr(17, "198.18.0.2", 0, 40), udp(51820)), pass},
		{"old v4 address", cat(eth(ourMAC, 0x0800, false), ip4hdr(17, "198.18.0.1", 0, 40), udp(51820)), pass},
		{"old v6 address", cat(eth(ourMAC, 0x86dd, false), ip6hdr(17, "2001:db8::1", 40), udp(51820)), pass},
	})
	if err := p.SetUDP([]UDPMatch{{Addr: netip.MustParseAddr("198.18.0.2"), PortLo: 2, PortHi: 1}}); err == nil {
		t.Error("SetUDP took an empty port range")
	}
}

// TestSetHostAddrsRenumberFull: Port.SetHostAddrs replaces a set of host
// addresses by another as large, disjoint from it, when both together do
// not fit the map (256 of each family): a LAN renumbered from 200
// addresses to 200 others. The stale ones go first; adding the new ones
// first ran out of room at the 57th (E2BIG) and left the filter half
// updated, the old addresses still the host's.
func TestSetHostAddrsRenumberFull(t *testing.T) {
	testenv.Root(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	set := func(base string, n int) []netip.Addr {
		a := netip.MustParseAddr(base)
		out := make([]netip.Addr, n)
		for i := range out {
			out[i] = a
			a = a.Next()
		}
		return out
	}
	old := append(set("198.18.1.0", 200), set("2001:db8:1::", 200)...)
	prog, err := newProgram(Filter{Prefixes: true, HostAddrs: old}, ourMAC, 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	p := &Port{prog: prog}
	renumbered := append(set("198.19.1.0", 200), set("2001:db8:2::", 200)...)
	if err := p.SetHostAddrs(renumbered); err != nil {
		t.Fatalf("SetHostAddrs(200 new of each family) = %v, want nil", err)
	}
	for _, a := range renumbered {
		if !hostAddr(t, prog, a) {
			t.Errorf("%v not a host address after SetHostAddrs", a)
		}
	}
	for _, a := range old {
		if hostAddr(t, prog, a) {
			t.Errorf("%v still a host address after SetHostAddrs", a)
		}
	}
	// More than fit: the error names the first address left out, and
	// those before it are the host's.
	tooMany := set("198.18.2.0", 257)
	err = p.SetHostAddrs(tooMany)
	if err == nil || !strings.Contains(err.Error(), tooMany[256].String()) {
		t.Errorf("SetHostAddrs(257 IPv4) = %v, want an error naming %v", err, tooMany[256])
	}
	for _, a := range tooMany[:256] {
		if !hostAddr(t, prog, a) {
			t.Errorf("%v not a host address after SetHostAddrs(257)", a)
		}
	}
}

// hostAddr reports whether a is in prog's host address map.
func hostAddr(t *testing.T, prog *program, a netip.Addr) bool {
	t.Helper()
	var v uint32
	var err error
	if a.Is4() {
		err = prog.host4.Lookup(a.As4(), &v)
	} else {
		err = prog.host6.Lookup(a.As16(), &v)
	}
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}
