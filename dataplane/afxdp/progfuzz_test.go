//go:build linux

package afxdp

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"
	"github.com/wgpio/wgpio/internal/testenv"
)

// udpRedirect is what Filter.UDP and Filter.Fragments select, as their
// doc comments say, written plainly over the frame's bytes for a filter
// of vlan whose UDP match is udp, in a frame to ourMAC or a group address:
// an IPv4 datagram with a 20-byte header
// or an IPv6 one with UDP as the first next header, to a UDP address and
// a port in its range; an IPv4 fragment (MF or an offset) of UDP, or an
// IPv6 one (a Fragment header first, UDP behind it), to a UDP address, by
// its port too where it is a first fragment that holds the UDP header.
func udpRedirect(frame []byte, vlan uint16, udp map[netip.Addr][2]uint16) bool {
	be := binary.BigEndian
	if len(frame) < 14 {
		return false
	}
	if frame[0]&1 == 0 && !bytes.Equal(frame[:6], ourMAC) {
		return false // to another host's unicast MAC: the kernel's to drop
	}
	et, l3 := be.Uint16(frame[12:]), 14
	if et == 0x8100 {
		if len(frame) < 18 || be.Uint16(frame[14:])&0xfff != vlan {
			return false
		}
		et, l3 = be.Uint16(frame[16:]), 18
	} else if vlan != 0 {
		return false
	}
	ip := frame[l3:]
	inRange := func(a netip.Addr, port []byte) bool {
		r, ok := udp[a]
		if !ok {
			return false
		}
		if port == nil { // a later fragment: the address alone
			return true
		}
		p := be.Uint16(port)
		return p >= r[0] && p <= r[1]
	}
	switch et {
	case 0x0800:
		if len(ip) < 20 || ip[0] != 0x45 || ip[9] != 17 {
			return false
		}
		dst := netip.AddrFrom4([4]byte(ip[16:20]))
		fo := be.Uint16(ip[6:])
		switch {
		case fo&0x3fff == 0: // no fragment
			return len(ip) >= 28 && inRange(dst, ip[22:24])
		case fo&0x1fff != 0 || len(ip) < 28: // a later or a short first fragment
			return inRange(dst, nil)
		}
		return inRange(dst, ip[22:24])
	case 0x86dd:
		if len(ip) < 40 {
			return false
		}
		dst := netip.AddrFrom16([16]byte(ip[24:40]))
		switch ip[6] {
		case 17:
			return len(ip) >= 48 && inRange(dst, ip[42:44])
		case 44:
			if len(ip) < 48 || ip[40] != 17 {
				return false
			}
			if be.Uint16(ip[42:])&0xfff8 != 0 || len(ip) < 56 {
				return inRange(dst, nil)
			}
			return inRange(dst, ip[50:52])
		}
	}
	return false
}

// FuzzFilterFragments runs frames through the program of a filter with
// Fragments (the owned address mode's WAN), untagged and on VLAN 100, and
// compares what it redirects with udpRedirect: no fragment to another
// address, VLAN or protocol reaches the sockets, and every one for us
// does.
func FuzzFilterFragments(f *testing.F) {
	testenv.Root(f)
	if err := rlimit.RemoveMemlock(); err != nil {
		f.Fatal(err)
	}
	ours := map[netip.Addr][2]uint16{
		netip.MustParseAddr("198.18.0.1"):  {51820, 51821},
		netip.MustParseAddr("2001:db8::1"): {51820, 51820},
	}
	var progs [2]*program
	for i, vlan := range []uint16{0, 100} {
		fl := Filter{Fragments: true, VLAN: vlan}
		for a, r := range ours {
			fl.UDP = append(fl.UDP, UDPMatch{Addr: a, PortLo: r[0], PortHi: r[1]})
		}
		p, err := newProgram(fl, ourMAC, 4, 0)
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { p.Close() })
		progs[i] = p
	}
	for _, l2 := range [][]byte{eth(ourMAC, 0x0800, false), ethTag(ourMAC, 0x8100, 100, 0x0800)} {
		f.Add(append(l2, cat(ip4hdr(17, "198.18.0.1", 0x2000, 40), udp(51821))...))
		f.Add(append(l2, cat(ip4hdr(17, "198.18.0.1", 185, 40), udp(1))...))
		f.Add(append(l2, cat(ip4hdr(17, "198.18.0.1", 0, 40), udp(51820))...))
	}
	for _, l2 := range [][]byte{eth(ourMAC, 0x86dd, false), ethTag(ourMAC, 0x8100, 100, 0x86dd)} {
		f.Add(append(l2, cat(ip6hdr(44, "2001:db8::1", 48), frag6(17, 0, true), udp(51820))...))
		f.Add(append(l2, cat(ip6hdr(44, "2001:db8::1", 48), frag6(17, 0, false), udp(51820))...))
		f.Add(append(l2, cat(ip6hdr(44, "2001:db8::1", 48), frag6(17, 1480, false), udp(1))...))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) < 14 || len(frame) > 4000 { // BPF_PROG_TEST_RUN's bounds
			return
		}
		for i, vlan := range []uint16{0, 100} {
			p := progs[i]
			before := map[string]uint64{}
			if err := p.counterValues(before); err != nil {
				t.Fatal(err)
			}
			if _, err := p.prog.Run(&ebpf.RunOptions{Data: frame}); err != nil {
				t.Fatalf("run: %v", err)
			}
			after := map[string]uint64{}
			if err := p.counterValues(after); err != nil {
				t.Fatal(err)
			}
			got := after[redirect] != before[redirect]
			if want := udpRedirect(frame, vlan, ours); got != want {
				t.Errorf("VLAN %d: frame %x: redirected %v, want %v", vlan, frame, got, want)
			}
		}
	})
}
