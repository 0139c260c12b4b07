package fastgw_test

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestRemovedPeerNoCleartext: once a peer is removed over the UAPI, LAN
// traffic to its former allowed IPs, which the XDP program now leaves to
// the kernel, goes into the exception TUN and is dropped there, counted
// (no_route); the gateway's default route toward the WAN router never
// carries it out in cleartext, as it did while the removal deleted the
// routes into the exception TUN. So also after the exception TUN went
// down and up (the kernel removed its routes meanwhile).
func TestRemovedPeerNoCleartext(t *testing.T) {
	tcpdump := testenv.Tool(t, "tcpdump", "tcpdump")
	s := newSite(t, twosite.Config{Routed: true})
	if err := s.GwA.AddRoute("default", "198.18.1.254", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.GwA.Forwarding(); err != nil {
		t.Fatal(err)
	}
	ping(t, s.HostA, twosite.HostB4.String(), 0)
	wan := startCapture(t, tcpdump, s.Router, ifaceWith(t, s.Router, "198.18.1.254"), t.TempDir()+"/wan.pcap", "ip or ip6")
	wgCmd(t, "set", s.GwName, "peer", s.FastConfig.Peers[0].PublicKey.String(), "remove")
	before := s.Gateway.Engine().Stats()
	const n = 50
	var noRoute uint64
	counted := func(want uint64) {
		pollUntil(5*time.Second, func() bool {
			noRoute = fastpath.TotalDrops(s.Gateway.Engine().Stats())[fastpath.DropNoRoute] - fastpath.TotalDrops(before)[fastpath.DropNoRoute]
			return noRoute >= want
		})
	}
	sendUDP(t, s.HostA, netip.AddrPortFrom(twosite.HostB4, 9305), n)
	counted(n)
	runOK(t, s.GwA, "ip", "link", "set", s.GwName, "down")
	runOK(t, s.GwA, "ip", "link", "set", s.GwName, "up")
	if !pollUntil(5*time.Second, func() bool {
		routes, _ := s.GwA.Run("ip", "route", "show", "dev", s.GwName)
		return strings.Contains(routes, "198.19.2.0/24")
	}) {
		routes, _ := s.GwA.Run("ip", "route", "show", "dev", s.GwName)
		t.Errorf("after a down and up, %s lacks the removed peer's route:\n%s", s.GwName, routes)
	}
	sendUDP(t, s.HostA, netip.AddrPortFrom(twosite.HostB4, 9305), n)
	counted(2 * n)
	wan.stop()
	if _, leaks := wanLeaks(t, wan.file); len(leaks) > 0 {
		t.Errorf("after the peer's removal, %d packets on the WAN are not WireGuard; the first: %s", len(leaks), leaks[0])
	}
	if noRoute < 2*n {
		lost, detail := lanPathLosses(t, s)
		t.Errorf("%d datagrams to the removed peer's allowed IPs, %d counted as no_route (LAN path losses %d: %s)", 2*n, noRoute, lost, detail)
	}
}

// wanLeaks reads a pcap file of Ethernet frames and returns a line for
// each IP packet that is not WireGuard: an inner address (the sites'
// 198.19.0.0/16 or 2001:db8:1::/48, 2001:db8:2::/48) as source or
// destination, or a UDP datagram whose payload is not a well-formed
// WireGuard message (whitepaper §5.4: types 1–3 of their fixed sizes,
// type 4 of 32 bytes or more, a multiple of 16 plus 16 header bytes,
// reserved bytes zero), and how many frames it read.
func wanLeaks(t *testing.T, file string) (frames int, leaks []string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 24 || binary.LittleEndian.Uint32(b) != 0xa1b2c3d4 || binary.LittleEndian.Uint32(b[20:]) != 1 {
		t.Fatalf("%s: not a little-endian Ethernet pcap file", file)
	}
	inner := func(a netip.Addr) bool {
		return twosite.SitesNet.Contains(a) || netip.MustParsePrefix("2001:db8:1::/48").Contains(a) || netip.MustParsePrefix("2001:db8:2::/48").Contains(a)
	}
	for off := 24; off+16 <= len(b); {
		caplen := int(binary.LittleEndian.Uint32(b[off+8:]))
		if off+16+caplen > len(b) {
			break
		}
		f := b[off+16 : off+16+caplen]
		off += 16 + caplen
		frames++
		if len(f) < 14 {
			continue
		}
		var src, dst netip.Addr
		var proto int
		var l4 []byte
		switch binary.BigEndian.Uint16(f[12:]) {
		case 0x0800:
			ip := f[14:]
			if len(ip) < 20 {
				continue
			}
			ihl := int(ip[0]&15) * 4
			src, dst = netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
			proto, l4 = int(ip[9]), ip[min(ihl, len(ip)):]
		case 0x86dd:
			ip := f[14:]
			if len(ip) < 40 {
				continue
			}
			src, dst = netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40]))
			proto, l4 = int(ip[6]), ip[40:]
		default:
			continue
		}
		where := fmt.Sprintf("frame %d %v → %v proto %d", frames, src, dst, proto)
		if inner(src) || inner(dst) {
			leaks = append(leaks, where+": inner address on the WAN")
			continue
		}
		if proto != 17 || len(l4) < 8 {
			continue
		}
		if msg := l4[8:]; !isWireGuard(msg) {
			leaks = append(leaks, fmt.Sprintf("%s: UDP %d → %d payload of %d bytes is not a WireGuard message", where,
				binary.BigEndian.Uint16(l4), binary.BigEndian.Uint16(l4[2:]), len(msg)))
		}
	}
	return frames, leaks
}

// isWireGuard reports whether msg has the shape of a WireGuard message.
func isWireGuard(msg []byte) bool {
	if len(msg) < 4 || msg[1] != 0 || msg[2] != 0 || msg[3] != 0 {
		return false
	}
	switch msg[0] {
	case 1:
		return len(msg) == 148
	case 2:
		return len(msg) == 92
	case 3:
		return len(msg) == 64
	case 4:
		return len(msg) >= 32 && (len(msg)-32)%16 == 0
	}
	return false
}

// TestRemovedPeerNoCleartextNoTUN: TestRemovedPeerNoCleartext for a
// gateway without an exception TUN (no Address), which has no route to
// keep: the removed peer's prefixes stay in the LAN XDP map, so the LAN's
// traffic to them reaches the engine, which drops it (no_route), and the
// gateway's default route toward the WAN router never carries it out in
// cleartext, as it did while the removal deleted them from the map.
func TestRemovedPeerNoCleartextNoTUN(t *testing.T) {
	tcpdump := testenv.Tool(t, "tcpdump", "tcpdump")
	s := newSite(t, twosite.Config{Routed: true, NoFastPath: true})
	fc := s.FastConfig
	fc.Addresses = nil
	if err := s.GwA.Do(func() (err error) {
		s.Gateway, err = fastgw.Start(fc)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.GwA.AddRoute("default", "198.18.1.254", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.GwA.Forwarding(); err != nil {
		t.Fatal(err)
	}
	ping(t, s.HostA, twosite.HostB4.String(), 0)
	wan := startCapture(t, tcpdump, s.Router, ifaceWith(t, s.Router, "198.18.1.254"), t.TempDir()+"/wan.pcap", "ip or ip6")
	wgCmd(t, "set", s.GwName, "peer", fc.Peers[0].PublicKey.String(), "remove")
	before := s.Gateway.Engine().Stats()
	const n = 50
	sendUDP(t, s.HostA, netip.AddrPortFrom(twosite.HostB4, 9305), n)
	var noRoute uint64
	pollUntil(5*time.Second, func() bool {
		noRoute = fastpath.TotalDrops(s.Gateway.Engine().Stats())[fastpath.DropNoRoute] - fastpath.TotalDrops(before)[fastpath.DropNoRoute]
		return noRoute >= n
	})
	wan.stop()
	frames, leaks := wanLeaks(t, wan.file)
	if len(leaks) > 0 {
		t.Errorf("after the peer's removal, %d of the %d frames on the WAN are not WireGuard; the first: %s", len(leaks), frames, leaks[0])
	}
	if noRoute < n {
		lost, detail := lanPathLosses(t, s)
		t.Errorf("%d datagrams to the removed peer's allowed IPs, %d counted as no_route (LAN path losses %d: %s)", n, noRoute, lost, detail)
	}
}
