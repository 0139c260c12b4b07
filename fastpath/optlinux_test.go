//go:build linux

package fastpath

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// TestOptionsAgainstLinux: the gateway forwards a transit packet with
// IPv4 options or an IPv6 hop-by-hop header exactly when Linux's
// forwarding path does (transitAddrs, headerOptions). A router namespace
// (forwarding on, rp_filter off) between two others is sent 3,000 UDP
// packets, half IPv4 with random options, half IPv6 with a random
// hop-by-hop header (each option type the gateway reads, unknown ones of
// each action, padding, lengths right and wrong), each to a port of its
// own, and the packets that reach the far side are compared with the
// gateway's verdict on each. A differential check of the rules of
// options.go against the running kernel: it found the CALIPSO option,
// which Linux (NetLabel, no DOI configured) drops.
func TestOptionsAgainstLinux(t *testing.T) {
	testenv.Short(t, "builds namespaces and sends 3,000 packets through a Linux router")
	lr := newLinuxRouter(t, "ol")
	rnd := rand.New(rand.NewPCG(15, 3))
	sent := make([][]byte, 3000)
	for i := range sent {
		port := uint16(linuxPort0 + i)
		if i%2 == 0 {
			sent[i] = linuxV4(port, "198.18.10.1", "198.18.11.1", randV4Options(rnd))
		} else {
			sent[i] = linuxV6(port, "2001:db8:a::1", "2001:db8:b::1", randHopByHop(rnd), true)
		}
	}
	lr.compare(t, sent)
}

// linuxRouter is a router namespace r (forwarding on, rp_filter off)
// between namespaces a (198.18.10.1/24, 2001:db8:a::1/64) and b
// (198.18.11.1/24, 2001:db8:b::1/64), r's default routes toward b (any
// destination but a's subnets and r's own addresses leaves toward b),
// and AF_PACKET sockets on a's and b's ends.
type linuxRouter struct {
	send, recv int
	rMAC       [6]byte // r's end toward a
	// srcs are the sources of r's errors toward a: its addresses there
	// (linuxRouterA4, linuxRouterA6, linuxRouterLL6).
	srcs *icmpSources
}

const linuxPort0 = 10000 // the UDP destination port of the first packet sent

func newLinuxRouter(t *testing.T, prefix string) *linuxRouter {
	tp := testenv.Topology(t, prefix)
	a, r, b := testenv.NS(t, tp, "a"), testenv.NS(t, tp, "r"), testenv.NS(t, tp, "b")
	va, err := tp.NewVeth(a, r, topo.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	vb, err := tp.NewVeth(b, r, topo.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ns       *topo.NS
		dev, pfx string
	}{
		{a, va.A, "198.18.10.1/24"}, {r, va.B, "198.18.10.2/24"}, {r, vb.B, "198.18.11.2/24"}, {b, vb.A, "198.18.11.1/24"},
	} {
		if err := c.ns.AddAddr(c.dev, c.pfx); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		ns       *topo.NS
		dev, pfx string
	}{
		{a, va.A, "2001:db8:a::1/64"}, {r, va.B, "2001:db8:a::2/64"}, {r, vb.B, "2001:db8:b::2/64"}, {b, vb.A, "2001:db8:b::1/64"},
		// A link-local address of r's toward a ready at once: the
		// source Linux picks for its errors to a link-local address
		// on a's link (the kernel's own one is tentative for a second
		// or two, and is no nearer to fe80::1).
		{r, va.B, linuxRouterLL6.String() + "/64"},
	} {
		if _, err := c.ns.Run("ip", "-6", "addr", "add", c.pfx, "dev", c.dev, "nodad"); err != nil {
			t.Fatal(err)
		}
	}
	// The router's ICMP errors unlimited (ratemask 0: no type is
	// limited; IPv6's interval 0 and a global budget out of reach): the
	// comparison is of each error, the limits are tested apart.
	if _, err := r.Run("sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1",
		"net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0",
		"net.ipv4.icmp_ratemask=0", "net.ipv6.icmp.ratelimit=0",
		"net.ipv4.icmp_msgs_per_sec=1000000", "net.ipv4.icmp_msgs_burst=1000000"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ns *topo.NS
		gw string
	}{{b, "198.18.11.2"}, {b, "2001:db8:b::2"}, {r, "198.18.11.1"}, {r, "2001:db8:b::1"}} {
		if err := c.ns.AddRoute("default", c.gw, ""); err != nil {
			t.Fatal(err)
		}
	}
	// The router knows a's and b's MACs before the first packet.
	for _, dst := range []string{"198.18.11.1", "2001:db8:b::1", "198.18.10.1", "2001:db8:a::1"} {
		if err := r.Ping(netip.MustParseAddr(dst), 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	// The link-local source fe80::1 is a's: the router's errors to it
	// go there, as a gateway's go to a LAN frame's sender.
	aMAC, err := a.LinkMAC(va.A)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run("ip", "-6", "neigh", "replace", "fe80::1", "lladdr", aMAC.String(), "nud", "permanent", "dev", va.B); err != nil {
		t.Fatal(err)
	}
	l, err := r.Handle().LinkByName(va.B)
	if err != nil {
		t.Fatal(err)
	}
	return &linuxRouter{send: packetSocket(t, a, va.A), recv: packetSocket(t, b, vb.A), rMAC: [6]byte(l.Attrs().HardwareAddr),
		srcs: &icmpSources{lan4: linuxRouterA4, lan6: linuxRouterA6, lanLL6: linuxRouterLL6}}
}

// compare sends the IP packets sent from a through the router, packet i
// a UDP datagram to port linuxPort0+i, and fails the test for each that
// Linux forwarded to b and the gateway would not, or the other way
// round, and for each ICMP error Linux answered a with that the gateway
// would not send alike (compareICMP).
func (lr *linuxRouter) compare(t *testing.T, sent [][]byte) {
	t.Helper()
	n := len(sent)
	// Received while sent: what reaches b, by port, and the ICMP errors
	// that come back to a, by the port of the packet they quote.
	got := make([]bool, n)
	errs := make([][]byte, n)
	done, doneA := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(doneA)
		buf := make([]byte, 4096)
		for {
			m, from, err := unix.Recvfrom(lr.send, buf, 0)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return
			}
			if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
				continue
			}
			if ip, i := quotedPort(buf[:m]); i >= 0 && i < n {
				errs[i] = bytes.Clone(ip)
			}
		}
	}()
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			m, from, err := unix.Recvfrom(lr.recv, buf, 0)
			if err == unix.EINTR { // the runtime's preemption signal
				continue
			}
			if err != nil {
				return // the receive timeout: nothing more comes
			}
			if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
				continue
			}
			var p header.Packet
			if header.Parse(buf[:m], &p) != header.OK || p.Proto != header.ProtoUDP {
				continue
			}
			if i := int(p.DstPort) - linuxPort0; i >= 0 && i < n {
				got[i] = true
			}
		}
	}()
	var frame []byte
	for i, ip := range sent {
		et := uint16(header.EtherTypeIPv4)
		if ip[0]>>4 == header.IPv6Version {
			et = header.EtherTypeIPv6
		}
		frame = append(frame[:0], lr.rMAC[:]...)
		frame = append(frame, 2, 0, 0, 0, 0, 1, byte(et>>8), byte(et))
		frame = append(frame, ip...)
		if _, err := unix.Write(lr.send, frame); err != nil {
			t.Fatal(err)
		}
		if i%50 == 49 {
			time.Sleep(5 * time.Millisecond) // within the receiver's buffer
		}
	}
	<-done
	<-doneA
	answered, badICMP, echoed := 0, 0, 0
	for i, ip := range sent {
		if e := errs[i]; e != nil {
			answered++
			if e[0] != 0x45 && e[0]>>4 == header.IPv4Version {
				echoed++
			}
		}
		if !routedToA(ip) {
			continue // Linux's error, if any, leaves toward b
		}
		if msg := compareICMP(lr.srcs, ip, errs[i]); msg != "" {
			if badICMP++; badICMP <= 10 {
				t.Errorf("packet %d: %s: %x", i, msg, ip)
			}
		}
	}
	t.Logf("%d ICMP errors from Linux (%d with options echoed in their header), %d answered otherwise by the gateway", answered, echoed, badICMP)
	forwarded, bad := 0, 0
	for i, ip := range sent {
		want := got[i]
		if want {
			forwarded++
		}
		if fwd := gatewayForwards(ip); fwd != want {
			if bad++; bad <= 10 {
				t.Errorf("packet %d: gateway forwards %v, Linux %v: %x", i, fwd, want, ip)
			}
		}
	}
	t.Logf("%d packets, %d forwarded by Linux, %d judged otherwise by the gateway", n, forwarded, bad)
	if forwarded < n/10 || forwarded > n*9/10 {
		t.Errorf("Linux forwarded %d of %d: the mix tests little", forwarded, n)
	}
}

// TestAddressesAgainstLinux: the gateway forwards a transit packet by its
// addresses (transitAddrs: martian, multicast and broadcast sources and
// destinations) exactly when Linux's forwarding path does: every pair of
// unusual and ordinary sources and destinations of each family (IPv6
// with IPv4-mapped, IPv4-compatible, link-local, unique local, NAT64 and
// multicast of each scope), sent through the router of linuxRouter. A
// hub sends such a packet from one peer back into the tunnel toward
// another (hairpin.go) when a peer's allowed IPs hold its destination.
// Each IPv6 pair is also sent with an unknown hop-by-hop option that asks
// for parameter problem, whose answers (compare) show in which order
// Linux judges the addresses and the options.
func TestAddressesAgainstLinux(t *testing.T) {
	testenv.Short(t, "builds namespaces and sends a few hundred packets through a Linux router")
	lr := newLinuxRouter(t, "al")
	src4 := []string{"198.18.10.1", "0.0.0.0", "0.1.2.3", "127.0.0.1", "224.0.0.1", "239.1.2.3", "255.255.255.255", "240.0.0.1", "169.254.1.1", "192.0.2.1", "100.64.0.1"}
	dst4 := []string{"198.18.11.1", "192.0.2.1", "0.0.0.0", "0.1.2.3", "127.0.0.1", "224.0.0.1", "224.0.1.1", "239.1.2.3", "255.255.255.255", "240.0.0.1", "169.254.1.1", "100.64.0.1", "203.0.113.255"}
	src6 := []string{"2001:db8:a::1", "::", "::1", "::ffff:198.18.10.1", "::198.18.10.1", "fe80::1", "ff02::1", "ff0e::1", "fc00::1", "2001:db8:c::1", "64:ff9b::1"}
	dst6 := []string{"2001:db8:b::1", "2001:db8:c::1", "::", "::1", "::ffff:198.18.11.1", "::198.18.11.1", "fe80::1", "fec0::1", "ff00::1", "ff01::1", "ff02::1", "ff05::1", "ff0e::1", "ff0f::1", "fc00::1", "64:ff9b::1", "2002::1"}
	var sent [][]byte
	for _, s := range src4 {
		for _, d := range dst4 {
			sent = append(sent, linuxV4(uint16(linuxPort0+len(sent)), s, d, nil))
		}
	}
	for _, s := range src6 {
		for _, d := range dst6 {
			sent = append(sent, linuxV6(uint16(linuxPort0+len(sent)), s, d, nil, false))
			// An unknown hop-by-hop option of action 10 (answered
			// even to multicast) and 11 (not to multicast), judged
			// between ip6_rcv_core's address checks and
			// ip6_forward's (rcvDrop6).
			sent = append(sent, linuxV6(uint16(linuxPort0+len(sent)), s, d, []byte{0x9e, 0}, true))
			sent = append(sent, linuxV6(uint16(linuxPort0+len(sent)), s, d, []byte{0xde, 0}, true))
		}
	}
	lr.compare(t, sent)
}

// gatewayForwards is the gateway's verdict on the transit packet ip as
// its addresses and options go (inbound's and outbound's checks).
func gatewayForwards(ip []byte) bool {
	var p header.Packet
	if header.ParseL3(ip, &p) != header.OK {
		return false
	}
	_, ok := transitChecks(&routeTable{}, ip[:p.L3End])
	return ok
}

// Linux router r's addresses toward a: the source of its errors to a;
// and b's addresses.
var (
	linuxRouterA4  = netip.MustParseAddr("198.18.10.2")
	linuxRouterA6  = netip.MustParseAddr("2001:db8:a::2")
	linuxRouterLL6 = netip.MustParseAddr("fe80::2")
	linuxHostB4    = netip.MustParseAddr("198.18.11.1")
	linuxHostB6    = netip.MustParseAddr("2001:db8:b::1")
)

// gatewayICMP is the error the gateway answers the transit packet ip from
// the LAN with, as its addresses and options go (transitChecks, then
// optionsError, or for a link-local source refused's time exceeded or
// beyond scope), from the address of srcs it picks for the sender
// (lanFrom), as an IP packet; nil for none.
func gatewayICMP(srcs *icmpSources, ip []byte) []byte {
	var p header.Packet
	if header.ParseL3(ip, &p) != header.OK {
		return nil
	}
	ip = ip[:p.L3End]
	why, ok := transitChecks(&routeTable{}, ip)
	var e icmpError
	switch {
	case ok:
		return nil
	case why == DropIPOptions:
		if e, ok = optionsError(ip); !ok {
			return nil
		}
	case why == DropMartian && beyondScope(ip):
		e = icmpError{kind: icmpBeyondScope}
		if ip[7] <= 1 {
			e = icmpError{kind: icmpTimeExceeded}
		}
	default:
		return nil
	}
	src := srcs.lanFrom(ip)
	b := make([]byte, header.ICMPv6ErrorMaxLen)
	n, r := putICMPError(b, src, ip, e)
	if r != header.OK {
		return nil
	}
	return b[:n]
}

// compareICMP compares the ICMP error Linux sent about the packet ip (got,
// its IP packet; nil: none) with the gateway's (gatewayICMP): their
// sources, ICMP types, codes, bytes 4-7 (the pointer) and quotes, and
// returns what differs, or "". In an IPv4 quote the options before the
// pointer may differ: Linux's ip_options_compile writes its address and
// timestamps into a record route or timestamp option, and moves its
// pointer, before it meets the bad option (the gateway forwards options as
// they came, README), and the quote shows it. The errors' own IP headers
// are not compared: Linux echoes the record route, timestamp, source
// route and CIPSO options it compiled before the bad one into its error's
// header (__ip_options_echo), the gateway sends a plain header (README;
// compare counts them).
func compareICMP(srcs *icmpSources, ip, got []byte) string {
	want := gatewayICMP(srcs, ip)
	if want == nil && got != nil {
		if _, m := icmpOf(got); got[0]>>4 == header.IPv4Version && m[0] == 3 && m[1] == 1 || got[0]>>4 == header.IPv6Version && m[0] == 1 && m[1] == 3 {
			// Linux's neighbour resolution failed (a link-local
			// destination it tried on a's link, seconds later):
			// a difference the README lists (no_neighbour), not a
			// judgement of the packet.
			return ""
		}
	}
	switch {
	case want == nil && got == nil:
		return ""
	case want == nil:
		return fmt.Sprintf("Linux answered %x, the gateway would not", got)
	case got == nil:
		return fmt.Sprintf("the gateway answers %x, Linux did not", want)
	}
	wsrc, wm := icmpOf(want)
	gsrc, gm := icmpOf(got)

	if wsrc != gsrc {
		return fmt.Sprintf("error from %v, Linux's from %v", wsrc, gsrc)
	}
	if len(wm) != len(gm) || !bytes.Equal(wm[:2], gm[:2]) || !bytes.Equal(wm[4:8], gm[4:8]) {
		return fmt.Sprintf("gateway's ICMP %x, Linux's %x", wm, gm)
	}
	wq, gq := wm[8:], gm[8:]
	for i := range wq {
		if wq[i] == gq[i] || ip[0]>>4 == header.IPv4Version && i >= header.IPv4MinLen && i < int(wm[4]) {
			continue
		}
		return fmt.Sprintf("quote differs at byte %d: gateway's %x, Linux's %x", i, wq, gq)
	}
	return ""
}

// routedToA reports whether the router's route back to the source of ip
// leads to a (a's subnets): Linux sends its error along that route, the
// gateway back to the LAN frame's sender; for other sources the two
// differ by the test's routes, not by the error. The link-local source
// fe80::1 is a's (newLinuxRouter gives r its MAC).
func routedToA(ip []byte) bool {
	var src netip.Addr
	if ip[0]>>4 == header.IPv4Version {
		src = netip.AddrFrom4(header.IPv4(ip).SrcBytes())
	} else {
		src = netip.AddrFrom16(header.IPv6(ip).SrcBytes())
	}
	return netip.MustParsePrefix("198.18.10.0/24").Contains(src) || netip.MustParsePrefix("2001:db8:a::/64").Contains(src) ||
		src == netip.MustParseAddr("fe80::1")
}

// quotedPort returns the IP packet of the Ethernet frame f when it is an
// ICMP or ICMPv6 error quoting one of the test's UDP packets, and that
// packet's index (its destination port − linuxPort0), else -1.
func quotedPort(f []byte) ([]byte, int) {
	var p header.Packet
	if header.Parse(f, &p) != header.OK {
		return nil, -1
	}
	ip := f[p.L3Off:p.L3End]
	src, m := icmpOf(ip)
	if src == linuxHostB4 || src == linuxHostB6 {
		// b's own answers (port unreachable; parameter problem about
		// a record route the router filled to its end, as Linux
		// does, which b then rejects) cross the router too.
		return nil, -1
	}
	v4 := ip[0]>>4 == header.IPv4Version
	if len(m) < 8 || v4 && (p.Proto != header.ProtoICMPv4 || m[0] != 3 && m[0] != 11 && m[0] != 12) ||
		!v4 && (p.Proto != header.ProtoICMPv6 || m[0] >= 128) {
		return nil, -1
	}
	q := m[8:]
	var l4 int
	switch {
	case v4 && len(q) >= header.IPv4MinLen:
		l4 = int(q[0]&0xf) * 4
	case !v4 && len(q) >= header.IPv6Len+2:
		l4 = header.IPv6Len
		if q[6] == header.ProtoHopByHop {
			l4 += (int(q[header.IPv6Len+1]) + 1) * 8
		}
	default:
		return nil, -1
	}
	if len(q) < l4+4 {
		return nil, -1
	}
	return ip, int(binary.BigEndian.Uint16(q[l4+2:l4+4])) - linuxPort0
}

// packetSocket opens an AF_PACKET socket on dev in ns, all protocols,
// with a 1 s receive timeout; closed at the test's end.
func packetSocket(t *testing.T, ns *topo.NS, dev string) int {
	t.Helper()
	all := int(htons(unix.ETH_P_ALL))
	var fd int
	if err := ns.Do(func() error {
		l, err := ns.Handle().LinkByName(dev)
		if err != nil {
			return err
		}
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, all); err != nil {
			return err
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20); err != nil {
			return err
		}
		tv := unix.Timeval{Sec: 1}
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: l.Attrs().Index})
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// linuxUDP is the UDP datagram of the test's packets to port, its
// checksum left to the caller.
func linuxUDP(port uint16) []byte {
	u := make([]byte, header.UDPLen+16)
	header.PutUDP(u, 1000, port, 16)
	return u
}

// linuxV4 is an IPv4 UDP packet from src to dst with the options opts (a
// multiple of 4 bytes, at most 40) and a valid header checksum.
func linuxV4(port uint16, src, dst string, opts []byte) []byte {
	u := linuxUDP(port)
	hl := header.IPv4MinLen + len(opts)
	p := make([]byte, hl+len(u))
	f := header.IPv4Fields{Protocol: header.ProtoUDP, TTL: 64, Src: netip.MustParseAddr(src).As4(), Dst: netip.MustParseAddr(dst).As4()}
	header.PutIPv4(p, &f, len(u))
	copy(p[header.IPv4MinLen:], opts)
	copy(p[hl:], u)
	p[0] = 0x40 | byte(hl/4)
	binary.BigEndian.PutUint16(p[2:4], uint16(len(p)))
	binary.BigEndian.PutUint16(p[10:12], 0)
	binary.BigEndian.PutUint16(p[10:12], ^header.FoldChecksum(header.Checksum(p[:hl], 0)))
	return p
}

// linuxV6 is an IPv6 UDP packet from src to dst, behind a hop-by-hop
// header of the options opts (padded with zeros to a multiple of 8
// bytes) when withHBH, its UDP checksum valid.
func linuxV6(port uint16, srcS, dstS string, opts []byte, withHBH bool) []byte {
	var hbh []byte
	if withHBH {
		hbh = append([]byte{header.ProtoUDP, 0}, opts...)
		hbh = append(hbh, make([]byte, (8-len(hbh)%8)%8)...)
		hbh[1] = byte(len(hbh)/8 - 1)
	}
	u := linuxUDP(port)
	src, dst := netip.MustParseAddr(srcS), netip.MustParseAddr(dstS)
	c := header.PseudoHeaderChecksum(header.ProtoUDP, src, dst, len(u))
	sum := ^header.FoldChecksum(header.Checksum(u, c))
	if sum == 0 {
		sum = 0xffff
	}
	binary.BigEndian.PutUint16(u[6:8], sum)
	p := make([]byte, header.IPv6Len+len(hbh)+len(u))
	nh := uint8(header.ProtoUDP)
	if withHBH {
		nh = header.ProtoHopByHop
	}
	f := header.IPv6Fields{NextHeader: nh, HopLimit: 64, Src: src.As16(), Dst: dst.As16()}
	header.PutIPv6(p, &f, len(hbh)+len(u))
	copy(p[header.IPv6Len:], hbh)
	copy(p[header.IPv6Len+len(hbh):], u)
	return p
}

// randV4Options is one to four IPv4 options, mostly of the types
// header.TransitOptions reads (IPv4), with lengths and pointers around their bounds,
// padded with end of list to a multiple of 4, at most 40 bytes.
func randV4Options(r *rand.Rand) []byte {
	var o []byte
	for range 1 + r.IntN(4) {
		t := pick(r, 0, 1, 7, 7, 0x44, 0x44, 0x83, 0x89, 0x86, 0x94, 0x94, 0x82, 0x88, byte(r.IntN(256)))
		if t <= 1 {
			o = append(o, t)
			continue
		}
		ln := pick(r, 2, 3, 4, 7, 8, 11, 12, byte(r.IntN(17)))
		switch {
		case t == 0x44 && ln >= 4:
			o = append(o, t, ln, pick(r, 5, 9, 13, ln+1, ln+4, byte(r.IntN(21))), pick(r, 0, 1, 3, 2, 0xf1, byte(r.IntN(256))))
			o = append(o, make([]byte, ln-4)...)
		case t == 7 && ln >= 3:
			o = append(o, t, ln, pick(r, 4, 8, ln+1, byte(r.IntN(21))))
			o = append(o, make([]byte, ln-3)...)
		default:
			o = append(o, t, ln)
			for range max(int(ln)-2, 0) {
				o = append(o, byte(r.IntN(4)))
			}
		}
	}
	o = o[:min(len(o), 40)]
	return append(o, make([]byte, (4-len(o)%4)%4)...)
}

// randHopByHop is up to five hop-by-hop options (RFC 8200 §4.2), mostly
// of the types header.TransitOptions reads or unknown ones of each action, with
// lengths around their bounds, then (mostly) PadN to a multiple of 8.
func randHopByHop(r *rand.Rand) []byte {
	var o []byte
	for range r.IntN(6) {
		t := pick(r, hbhPad1, hbhPadN, hbhPadN, hbhAlert, hbhCALIPSO, hbhIOAM, 0xc2, 0x1e, 0x3e, 0x5e, 0x9e, 0xde, 0x04, 0x26, 0x6d, byte(r.IntN(256)))
		if t == hbhPad1 {
			o = append(o, 0)
			continue
		}
		ln := pick(r, 0, 1, 2, 2, 4, 6, 8, 10, byte(r.IntN(21)))
		o = append(o, t, ln)
		for range ln {
			o = append(o, pick(r, 0, 0, 0, byte(r.IntN(256))))
		}
	}
	if pad := (8 - (2+len(o))%8) % 8; pad > 1 && r.IntN(7) > 0 {
		o = append(append(o, hbhPadN, byte(pad-2)), make([]byte, pad-2)...)
	}
	return o
}

// Hop-by-hop option types randHopByHop draws (RFC 8200 §4.2; RFC 2711,
// RFC 5570, RFC 9486): those header.TransitOptions reads.
const (
	hbhPad1    = 0
	hbhPadN    = 1
	hbhAlert   = 5
	hbhCALIPSO = 7
	hbhIOAM    = 0x31
)

// pick returns one of vs at random.
func pick(r *rand.Rand, vs ...byte) byte { return vs[r.IntN(len(vs))] }
