//go:build linux

package fastgw_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestMappedDestinationNS: an IPv6 packet from the tunnel to an
// IPv4-mapped address (::ffff:198.19.1.10) is routed as Linux routes it,
// by the IPv6 table, which has no route for it: the host's kernel answers
// "no route to destination" (ICMPv6 type 1 code 0) from the LAN address,
// as a Linux router's does (measured against wg0 on stock wireguard-go),
// and nothing reaches the LAN. Before, the fast path looked the IPv4
// address inside up and sent the IPv6 packet to the MAC of the IPv4 host
// 198.19.1.10.
func TestMappedDestinationNS(t *testing.T) {
	s := newSite(t, twosite.Config{})
	if err := s.GwA.Forwarding(); err != nil { // a router
		t.Fatal(err)
	}
	ping(t, s.HostB, twosite.HostA6.String(), 0)
	ping(t, s.HostB, twosite.HostA4.String(), 0) // gwA knows hostA's MAC by ARP
	// gwB's wireguard-go sends any IPv6 destination to gwA.
	pubA := s.FastConfig.PrivateKey.PublicKey()
	if err := s.Stock.Dev.IpcSet(fmt.Sprintf("public_key=%s\nallowed_ip=::/0\n", hex.EncodeToString(pubA[:]))); err != nil {
		t.Fatal(err)
	}
	hostADev := ""
	links, err := s.HostA.Handle().LinkList()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if l.Type() == "veth" {
			hostADev = l.Attrs().Name
		}
	}
	lan := packetTap(t, s.HostA, hostADev, false)
	tun := packetTap(t, s.GwB, s.StockName, true)
	dst := netip.MustParseAddr("::ffff:198.19.1.10")
	pkt := udp6(twosite.HostB6, dst, []byte("mapped destination"))
	err = s.GwB.Do(func() error {
		ifi, err := net.InterfaceByName(s.StockName)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return os.NewSyscallError("socket", err)
		}
		defer unix.Close(fd)
		// Out of gwB's TUN: into its wireguard-go, sealed to gwA.
		return unix.Sendto(fd, pkt, 0, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IPV6), Ifindex: ifi.Index})
	})
	if err != nil {
		t.Fatal(err)
	}
	var answer []byte
	for deadline := time.Now().Add(3 * time.Second); answer == nil && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for _, p := range tapRead(tun) {
			// ICMPv6 (58) with the offending packet quoted.
			if len(p) >= 48 && p[0]>>4 == 6 && p[6] == 58 && bytes.Contains(p[48:], []byte("mapped destination")) {
				answer = p
			}
		}
	}
	for _, f := range tapRead(lan) {
		if len(f) >= 14+40 && binary.BigEndian.Uint16(f[12:]) == 0x86dd && netip.AddrFrom16([16]byte(f[14+24:14+40])) == dst {
			t.Errorf("an IPv6 packet to %v reached the LAN (at %v's MAC): %x", dst, dst.Unmap(), f[:14+40])
		}
	}
	if answer == nil {
		t.Fatalf("no ICMPv6 error back into the tunnel; drops %s", dropsString(s.Gateway))
	}
	if from, typ, code := netip.AddrFrom16([16]byte(answer[8:24])), answer[40], answer[41]; from != netip.MustParseAddr("2001:db8:1::1") || typ != 1 || code != 0 {
		t.Errorf("answered type %d code %d from %v, want 1 0 (no route to destination) from 2001:db8:1::1, as Linux", typ, code, from)
	}
}

// packetTap opens a non-blocking AF_PACKET socket on dev in ns, of frames
// (dgram false) or of the IP packets alone (dgram true, a TUN's), closed
// at the test's end.
func packetTap(t *testing.T, ns *topo.NS, dev string, dgram bool) int {
	t.Helper()
	fd := -1
	err := ns.Do(func() error {
		typ := unix.SOCK_RAW
		if dgram {
			typ = unix.SOCK_DGRAM
		}
		var err error
		if fd, err = unix.Socket(unix.AF_PACKET, typ|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, int(htons(unix.ETH_P_ALL))); err != nil {
			return os.NewSyscallError("socket", err)
		}
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index})
	})
	if fd >= 0 {
		t.Cleanup(func() { unix.Close(fd) })
	}
	if err != nil {
		t.Fatalf("tap %s in %s: %v", dev, ns.Name, err)
	}
	return fd
}

// tapRead returns what fd (packetTap) holds, the interface's own output
// left out.
func tapRead(fd int) [][]byte {
	var r [][]byte
	buf := make([]byte, 1<<16)
	for {
		n, from, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return r
		}
		if sl, ok := from.(*unix.SockaddrLinklayer); ok && sl.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		r = append(r, bytes.Clone(buf[:n]))
	}
}

// udp6 is an IPv6 UDP packet from src to dst (port 9, hop limit 64) with
// payload, its checksum right.
func udp6(src, dst netip.Addr, payload []byte) []byte {
	p := make([]byte, 48+len(payload))
	p[0] = 6 << 4
	binary.BigEndian.PutUint16(p[4:], uint16(8+len(payload)))
	p[6], p[7] = 17, 64
	s, d := src.As16(), dst.As16()
	copy(p[8:], s[:])
	copy(p[24:], d[:])
	binary.BigEndian.PutUint16(p[40:], 40000)
	binary.BigEndian.PutUint16(p[42:], 9)
	binary.BigEndian.PutUint16(p[44:], uint16(8+len(payload)))
	copy(p[48:], payload)
	var sum uint32
	for i := 8; i < 40; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(p[i:]))
	}
	sum += uint32(8+len(payload)) + 17
	u := p[40:]
	for i := 0; i+1 < len(u); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(u[i:]))
	}
	if len(u)%2 == 1 {
		sum += uint32(u[len(u)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	c := ^uint16(sum)
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(p[46:], c)
	return p
}
