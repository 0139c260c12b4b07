//go:build linux

package compatgw

import (
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/testing/wgpeer"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/noise"
	"github.com/wgpio/wgpio/tundev"
)

// TestRouterStock: a compat hub forwards as the Linux router with wg0 it
// replaces, between two stock wireguard-go road warriors (p1, p2, behind a
// router rt on the WAN) and a LAN host hl:
//   - peer to peer: ping between the warriors, IPv4 and IPv6, answered
//     with ttl 63 (one hop at the hub), counted as peer_to_peer;
//   - traceroute's first probe (TTL 1) either way is answered with time
//     exceeded from the hub: from its tunnel address to a warrior, from
//     its LAN address to the LAN host; its second (TTL 2) reaches the far
//     end; a reply from the LAN host to a warrior comes with ttl 63;
//   - MSSClamp: a warrior's SYN to the LAN host arrives with the clamped
//     MSS;
//   - a packet with a bad record route option either way is answered with
//     parameter problem pointing at the bad octet, from the hub's LAN
//     address to the LAN host, from its tunnel address to a warrior;
//   - a LAN frame with a martian source (127.0.0.2) toward a warrior is
//     dropped and counted;
//   - the LAN host's ping from its link-local address to a warrior is
//     answered "beyond scope of source address" from the hub's link-local
//     address on the LAN (scope_test.go).
func TestRouterStock(t *testing.T) {
	testenv.Short(t, "builds namespaces and runs a compat hub and two stock peers")
	testenv.Tool(t, "ping", "iputils-ping")
	tp := testenv.Topology(t, "crt")
	hub, rt, p1, p2, hl := testenv.NS(t, tp, "hub"), testenv.NS(t, tp, "rt"), testenv.NS(t, tp, "p1"), testenv.NS(t, tp, "p2"), testenv.NS(t, tp, "hl")
	veth := func(a, b *topo.NS) *topo.Veth {
		v, err := tp.NewVeth(a, b, topo.VethConfig{})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	lan, wan, w1, w2 := veth(hub, hl), veth(hub, rt), veth(p1, rt), veth(p2, rt)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(hub.AddAddr(lan.A, "198.19.1.1/24"))
	must(hl.AddAddr(lan.B, "198.19.1.10/24"))
	must(hub.AddAddr(wan.A, "198.18.1.1/24"))
	must(rt.AddAddr(wan.B, "198.18.1.254/24"))
	must(p1.AddAddr(w1.A, "198.18.2.2/24"))
	must(rt.AddAddr(w1.B, "198.18.2.254/24"))
	must(p2.AddAddr(w2.A, "198.18.3.2/24"))
	must(rt.AddAddr(w2.B, "198.18.3.254/24"))
	must(rt.Forwarding())
	must(hub.AddRoute("198.18.2.0/24", "198.18.1.254", ""))
	must(hub.AddRoute("198.18.3.0/24", "198.18.1.254", ""))
	must(p1.AddRoute("default", "198.18.2.254", ""))
	must(p2.AddRoute("default", "198.18.3.254", ""))
	must(hl.AddRoute("198.19.101.0/24", "198.19.1.1", ""))
	// The LAN host's TCP checksums must be whole: they cross the tunnel
	// as they are (compatgw's veth warning).
	must(hl.SetTXChecksum(lan.B, false))

	key := func() noise.PrivateKey {
		k, err := noise.NewPrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	hubKey, k1, k2 := key(), key(), key()
	hubEnd := netip.MustParseAddrPort("198.18.1.1:51820")
	tunnel := []netip.Prefix{netip.MustParsePrefix("198.19.101.0/24"), netip.MustParsePrefix("2001:db8:65::/64"), netip.MustParsePrefix("198.19.1.0/24")}
	warrior := func(n *topo.NS, k noise.PrivateKey, a4, a6 string) {
		name := topo.UniqueName("wgcr")
		d, err := wgpeer.Start(n, wgpeer.Config{
			Name: name, PrivateKey: k, ListenPort: 51820,
			Address: netip.MustParsePrefix(a4 + "/24"), Routes: []netip.Prefix{netip.MustParsePrefix("198.19.1.0/24")},
			Peers: []wgpeer.Peer{{PublicKey: hubKey.PublicKey(), Endpoint: hubEnd, AllowedIPs: tunnel, Keepalive: 1}},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d.Close)
		must(n.AddAddr(name, a6+"/64"))
	}
	f := &config.File{Interface: config.Interface{PrivateKey: hubKey, ListenPort: 51820}, Peers: []config.Peer{
		{PublicKey: k1.PublicKey(), Endpoint: netip.MustParseAddrPort("198.18.2.2:51820"),
			AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.101.2/32"), netip.MustParsePrefix("2001:db8:65::2/128")}},
		{PublicKey: k2.PublicKey(), Endpoint: netip.MustParseAddrPort("198.18.3.2:51820"),
			AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.101.3/32"), netip.MustParsePrefix("2001:db8:65::3/128")}},
	}}
	const clamp = 1300
	var g *Gateway
	must(hub.Do(func() (err error) {
		g, err = Start(Config{Name: topo.UniqueName("wgch"), UAPI: f.UAPI(), ListenPort: 51820, WAN: wan.A, LAN: lan.A, Queues: 1,
			SyncInterval: 50 * time.Millisecond, MSSClamp: clamp,
			TunnelAddrs: []netip.Addr{netip.MustParseAddr("198.19.101.1"), netip.MustParseAddr("2001:db8:65::1")}})
		return err
	}))
	t.Cleanup(func() { g.Close() })
	// The peers start after the hub, so that their first initiations
	// reach it: started before, they would wait 5 s (REKEY_TIMEOUT) to
	// retry, and one retry lost would leave the pings too little time.
	warrior(p1, k1, "198.19.101.2", "2001:db8:65::2")
	warrior(p2, k2, "198.19.101.3", "2001:db8:65::3")

	t.Run("peer to peer", func(t *testing.T) {
		for _, c := range []struct {
			from *topo.NS
			dst  string
		}{
			{p1, "198.19.101.3"}, {p2, "198.19.101.2"}, {p1, "2001:db8:65::3"}, {p2, "2001:db8:65::2"},
		} {
			if out := pingOut(t, c.from, c.dst); !strings.Contains(out, "ttl=63") {
				t.Errorf("ping %s from %s: reply without ttl=63 (one hop at the hub):\n%s", c.dst, c.from.Name, out)
			}
		}
		if s := g.Stats().LAN; s.PeerToPeer < 8 {
			t.Errorf("the hub's peer_to_peer = %d, want at least 8 (the pings and their replies); drops %v", s.PeerToPeer, s.Drops.List())
		}
	})

	t.Run("ttl", func(t *testing.T) {
		if out := pingOut(t, p1, "198.19.1.10"); !strings.Contains(out, "ttl=63") {
			t.Errorf("ping the LAN host from p1: reply without ttl=63:\n%s", out)
		}
		if out := pingOut(t, hl, "198.19.101.2"); !strings.Contains(out, "ttl=63") {
			t.Errorf("ping p1 from the LAN host: reply without ttl=63:\n%s", out)
		}
		for _, c := range []struct {
			from *topo.NS
			dst  string
			hop  string // the time exceeded's source
		}{
			{p1, "198.19.1.10", "198.19.101.1"}, {p1, "2001:db8:65::3", "2001:db8:65::1"}, {hl, "198.19.101.2", "198.19.1.1"},
		} {
			out, _ := c.from.Run("ping", "-c", "1", "-W", "2", "-t", "1", c.dst)
			if !strings.Contains(out, "From "+c.hop) || !strings.Contains(out, " exceeded") {
				t.Errorf("ping -t 1 %s from %s:\n%s\nwant time exceeded (TTL / hop limit) from %s", c.dst, c.from.Name, out, c.hop)
			}
		}
		// traceroute's second probe: past the hub, to the far end.
		for _, c := range []struct {
			from *topo.NS
			dst  string
		}{{p1, "198.19.1.10"}, {hl, "198.19.101.2"}, {p1, "2001:db8:65::3"}} {
			if out, err := c.from.Run("ping", "-c", "1", "-W", "2", "-t", "2", c.dst); err != nil {
				t.Errorf("ping -t 2 %s from %s: %v (want an answer: one hop at the hub)\n%s", c.dst, c.from.Name, err, out)
			}
		}
		if s := g.Stats().LAN; s.Drops[tundev.PortDropTTLExceeded] < 3 || s.ICMPErrors < 3 {
			t.Errorf("the hub's ttl_exceeded = %d, icmp_errors %d, want at least 3", s.Drops[tundev.PortDropTTLExceeded], s.ICMPErrors)
		}
	})

	t.Run("mss clamp", func(t *testing.T) {
		var ln net.Listener
		must(hl.Do(func() (err error) {
			ln, err = net.Listen("tcp4", "198.19.1.10:0")
			return err
		}))
		defer ln.Close()
		got := make(chan int, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				got <- -1
				return
			}
			defer c.Close()
			mss := -1
			if rc, err := c.(*net.TCPConn).SyscallConn(); err == nil {
				rc.Control(func(fd uintptr) { mss, _ = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_MAXSEG) })
			}
			got <- mss
		}()
		var c net.Conn
		must(p1.Do(func() (err error) {
			c, err = net.DialTimeout("tcp4", ln.Addr().String(), 10*time.Second)
			return err
		}))
		defer c.Close()
		select {
		case mss := <-got:
			// The SYN left p1 with 1380 (its MTU 1420 − 40); the LAN
			// host's MSS toward p1 is the clamped one less TCP options.
			t.Logf("the LAN host's MSS toward p1: %d", mss)
			if mss <= 0 || mss > clamp {
				t.Errorf("the LAN host's MSS toward p1 = %d, want at most %d (MSSClamp)", mss, clamp)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no connection from p1 at the LAN host")
		}
	})

	t.Run("parameter problem", func(t *testing.T) {
		before := g.Stats().LAN
		hubMAC, err := hub.LinkMAC(lan.A)
		must(err)
		hlMAC, err := hl.LinkMAC(lan.B)
		must(err)
		lanHost, w1Addr := netip.MustParseAddr("198.19.1.10"), netip.MustParseAddr("198.19.101.2")
		// From the LAN: answered from the hub's LAN address.
		frame := badOptionsFrame(hubMAC, hlMAC, lanHost, w1Addr)
		src, m, sentLAN := catchParamProblem(t, hl, func() { testenv.SendFrames(t, hl, lan.B, frame) })
		if src != netip.MustParseAddr("198.19.1.1") || len(m) < 8 || m[4] != 21 {
			t.Errorf("a LAN host's packet with a bad record route: parameter problem from %v, pointer %v; want from 198.19.1.1, pointer 21", src, m)
		}
		// From the tunnel: answered into it from the hub's tunnel address.
		pkt := frame[header.EthernetLen:]
		copy(pkt[12:16], w1Addr.AsSlice())
		copy(pkt[16:20], lanHost.AsSlice())
		src, m, sentTun := catchParamProblem(t, p1, func() { sendRaw(t, p1, pkt, lanHost) })
		if src != netip.MustParseAddr("198.19.101.1") || len(m) < 8 || m[4] != 21 {
			t.Errorf("a warrior's packet with a bad record route: parameter problem from %v, pointer %v; want from 198.19.101.1, pointer 21", src, m)
		}
		// Every packet sent is dropped and answered or held back by the
		// rate limit: a resend (no answer within a second on a busy
		// machine) is one more of each, and an answer is counted after it
		// is sent, so a caught one may not be counted yet.
		sent := uint64(sentLAN + sentTun)
		delta := func() (opts, answered, errs uint64) {
			s := g.Stats().LAN
			errs = s.ICMPErrors - before.ICMPErrors
			return s.Drops[tundev.PortDropIPOptions] - before.Drops[tundev.PortDropIPOptions], errs + s.ICMPSuppressed - before.ICMPSuppressed, errs
		}
		testenv.PollUntil(5*time.Second, func() bool { opts, answered, _ := delta(); return opts >= sent && answered >= sent })
		if opts, answered, errs := delta(); opts != sent || answered != sent || errs < 2 {
			t.Errorf("the hub's ip_options %d, icmp_errors + icmp_suppressed %d, icmp_errors %d more; want %d (the packets sent), %d and at least 2 (those caught)", opts, answered, errs, sent, sent)
		}
	})

	t.Run("martian", func(t *testing.T) {
		before := g.Stats().LAN.Drops[tundev.PortDropMartian]
		hubMAC, err := hub.LinkMAC(lan.A)
		must(err)
		hlMAC, err := hl.LinkMAC(lan.B)
		must(err)
		frame := udpFrame(hubMAC, hlMAC, netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("198.19.101.2"))
		testenv.SendFrames(t, hl, lan.B, frame)
		if !testenv.PollUntil(5*time.Second, func() bool { return g.Stats().LAN.Drops[tundev.PortDropMartian] > before }) {
			t.Errorf("a LAN frame from 127.0.0.2 to a warrior: martian drops %d, want one more; drops %v", g.Stats().LAN.Drops[tundev.PortDropMartian], g.Stats().LAN.Drops.List())
		}
	})

	t.Run("link-local source", func(t *testing.T) { linkLocalSource(t, g, hub, hl, lan) })
}

// pingOut runs ping in ns until one reply (the first waits for the
// handshakes) or 10 s, and returns the output of the one answered.
func pingOut(t *testing.T, ns *topo.NS, dst string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := ns.Run("ping", "-c", "1", "-W", "1", dst)
		if err == nil {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("ping %s from %s: %v\n%s", dst, ns.Name, err, out)
		}
	}
}

// udpFrame is an Ethernet frame carrying an IPv4 UDP datagram of 8 bytes
// of payload from src to dst (header checksum set, UDP checksum 0).
func udpFrame(dstMAC, srcMAC net.HardwareAddr, src, dst netip.Addr) []byte {
	b := make([]byte, header.EthernetLen+header.IPv4MinLen+header.UDPLen+8)
	copy(b[0:6], dstMAC)
	copy(b[6:12], srcMAC)
	binary.BigEndian.PutUint16(b[12:14], header.EtherTypeIPv4)
	ip := b[header.EthernetLen:]
	ip[0], ip[8], ip[9] = 0x45, 64, header.ProtoUDP
	binary.BigEndian.PutUint16(ip[2:4], uint16(len(ip)))
	copy(ip[12:16], src.AsSlice())
	copy(ip[16:20], dst.AsSlice())
	header.IPv4(ip).SetChecksum()
	u := ip[header.IPv4MinLen:]
	binary.BigEndian.PutUint16(u[0:2], 9300)
	binary.BigEndian.PutUint16(u[2:4], 9300)
	binary.BigEndian.PutUint16(u[4:6], uint16(len(u)))
	return b
}

// badOptionsFrame is udpFrame with a record route option too short for
// its kind (length 2), which Linux answers with parameter problem
// pointing at its length octet (offset 21).
func badOptionsFrame(dstMAC, srcMAC net.HardwareAddr, src, dst netip.Addr) []byte {
	f := udpFrame(dstMAC, srcMAC, src, dst)
	ip := f[header.EthernetLen:]
	q := append(append(append(append([]byte{}, f[:header.EthernetLen]...), 0x46), ip[1:20]...), 0x07, 2, 0, 0)
	q = append(q, ip[20:]...)
	nip := q[header.EthernetLen:]
	binary.BigEndian.PutUint16(nip[2:4], uint16(len(nip)))
	header.IPv4(nip).SetChecksum()
	return q
}

// sendRaw sends the IPv4 packet pkt (header included) from ns to dst,
// through ns's routes (IPPROTO_RAW: the kernel keeps its options).
func sendRaw(t *testing.T, ns *topo.NS, pkt []byte, dst netip.Addr) {
	t.Helper()
	err := ns.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
		if err != nil {
			return os.NewSyscallError("socket", err)
		}
		defer unix.Close(fd)
		return os.NewSyscallError("sendto", unix.Sendto(fd, pkt, 0, &unix.SockaddrInet4{Addr: dst.As4()}))
	})
	if err != nil {
		t.Fatalf("send from %s: %v", ns.Name, err)
	}
}

// catchParamProblem runs send and returns the source and the ICMP message
// of the first parameter problem (type 12) ns receives within 5 s, and how
// many times it ran send: it resends every second, as the first may wait
// for a handshake.
func catchParamProblem(t *testing.T, ns *topo.NS, send func()) (src netip.Addr, msg []byte, sent int) {
	t.Helper()
	var fd int
	if err := ns.Do(func() (err error) {
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	tv := unix.Timeval{Sec: 1}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 2048)
	for range 5 {
		send()
		sent++
		for {
			n, from, err := unix.Recvfrom(fd, b, 0)
			if err != nil {
				break
			}
			m := b[int(b[0]&0xf)*4 : n]
			if a, ok := from.(*unix.SockaddrInet4); ok && m[0] == 12 {
				return netip.AddrFrom4(a.Addr), m, sent
			}
		}
	}
	t.Errorf("%s received no parameter problem", ns.Name)
	return netip.Addr{}, nil, sent
}
