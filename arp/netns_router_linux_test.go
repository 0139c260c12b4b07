package arp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
	"golang.org/x/sys/unix"
)

// udp4Frame builds an Ethernet/IPv4/UDP frame (UDP checksum 0, RFC 768).
func udp4Frame(dstMAC, srcMAC MAC, src, dst netip.Addr, port uint16, payload []byte) []byte {
	f := make([]byte, 14+20+8+len(payload))
	copy(f[0:6], dstMAC[:])
	copy(f[6:12], srcMAC[:])
	binary.BigEndian.PutUint16(f[12:14], EtherTypeIPv4)
	ip := f[14:34]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:4], uint16(20+8+len(payload)))
	s, d := src.As4(), dst.As4()
	copy(ip[12:16], s[:])
	copy(ip[16:20], d[:])
	binary.BigEndian.PutUint16(ip[10:12], ^header.FoldChecksum(header.Checksum(ip, 0)))
	u := f[34:42]
	binary.BigEndian.PutUint16(u[0:2], 40000)
	binary.BigEndian.PutUint16(u[2:4], port)
	binary.BigEndian.PutUint16(u[4:6], uint16(8+len(payload)))
	copy(f[42:], payload)
	return f
}

// routerTopo: us —v1— router —v2— far. The router has .254 on both
// sides; far routes back through it.
func routerTopo(t *testing.T, prefix string) (us, r, far *topo.NS, v1, v2 *topo.Veth) {
	tp := testenv.Topology(t, prefix)
	us, r, far = testenv.NS(t, tp, "u"), testenv.NS(t, tp, "r"), testenv.NS(t, tp, "f")
	var err error
	v1, err = tp.NewVeth(us, r, topo.VethConfig{})
	must(t, err)
	v2, err = tp.NewVeth(r, far, topo.VethConfig{})
	must(t, err)
	must(t, r.Forwarding())
	must(t, r.AddAddr(v1.B, "198.18.1.254/24"))
	must(t, r.AddAddr(v2.A, "198.18.2.254/24"))
	must(t, far.AddAddr(v2.B, "198.18.2.2/24"))
	must(t, far.AddRoute("default", "198.18.2.254", v2.B))
	waitUp(t, v1)
	waitUp(t, v2)
	return
}

// listenFar opens a UDP socket in far and returns a function that waits
// for a datagram with marker.
func listenFar(t *testing.T, far *topo.NS, port int) func(marker []byte) bool {
	var c *net.UDPConn
	must(t, far.Do(func() error {
		var err error
		c, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(198, 18, 2, 2), Port: port})
		return err
	}))
	t.Cleanup(func() { c.Close() })
	return func(marker []byte) bool {
		buf := make([]byte, 2048)
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		for {
			n, _, err := c.ReadFromUDP(buf)
			if err != nil {
				return false
			}
			if bytes.Contains(buf[:n], marker) {
				return true
			}
		}
	}
}

func TestOwnedThroughRouter(t *testing.T) {
	us, r, far, v1, _ := routerTopo(t, "arpr")
	must(t, us.Sysctl("net.ipv6.conf."+v1.A+".disable_ipv6", "1"))
	w := openWire(t, us, v1.A)
	our := netip.MustParseAddr("198.18.1.1")
	h := startHost(t, w, []netip.Addr{our}, Config{}, true)
	routes, err := NewStaticRoutes([]Route{
		{Prefix: netip.MustParsePrefix("198.18.1.0/24"), IfIndex: w.idx},
		{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Gateway: netip.MustParseAddr("198.18.1.254"), IfIndex: w.idx},
	})
	must(t, err)
	farIP := netip.MustParseAddr("198.18.2.2")
	nh, idx, ok := routes.NextHop(farIP)
	if !ok || nh != netip.MustParseAddr("198.18.1.254") || idx != w.idx {
		t.Fatalf("NextHop(%v) = %v, %d, %v, want 198.18.1.254, %d", farIP, nh, idx, ok, w.idx)
	}
	wait := listenFar(t, far, 9100)
	h.tb.Resolve(nh)
	if !waitFor(3*time.Second, func() bool { _, ok := h.tb.Lookup(nh); return ok }) {
		t.Fatalf("router %v never resolved", nh)
	}
	mac, _ := h.tb.Lookup(nh)
	if want := macOf(t, r, v1.B); mac != want {
		t.Fatalf("Lookup(router) = %v, want the router's %v", mac, want)
	}
	marker := []byte("through-the-router")
	must(t, w.send(udp4Frame(mac, w.mac, our, farIP, 9100, marker)))
	if !wait(marker) {
		t.Errorf("datagram to %v through the router's MAC did not arrive", farIP)
	}
}

func TestOwnedARPFloodGrowsNothing(t *testing.T) {
	testenv.Short(t, "sends 100,000 frames")
	us, k, v := ownedPair(t)
	w := openWire(t, us, v.A)
	h := startHost(t, w, []netip.Addr{usV4}, Config{}, true)
	h.tb.Resolve(kV4)
	if !waitFor(3*time.Second, func() bool { _, ok := h.tb.Lookup(kV4); return ok }) {
		t.Fatal("kernel address never resolved")
	}
	kw := openWire(t, k, v.B)
	snap, n := h.tb.snap.Load(), h.tb.Len()
	var ms0, ms1 runtimeMem
	ms0.read()
	// A queue's lookups go on during the flood and never miss.
	var misses, lookups int
	stopLookups, lookupsDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(lookupsDone)
		for {
			select {
			case <-stopLookups:
				return
			default:
			}
			if _, ok := h.tb.Lookup(kV4); !ok {
				misses++
			}
			lookups++
		}
	}()
	const flood = 100000
	f := make([]byte, MinFrameLen)
	for i := 0; i < flood; i++ {
		src := MAC{0x02, 0xaa, 0, byte(i >> 16), byte(i >> 8), byte(i)}
		p := ARP{EthDst: Broadcast, EthSrc: src, Op: ARPRequest, SenderMAC: src,
			SenderIP: netip.AddrFrom4([4]byte{198, 18, 0, byte(3 + i%250)}), TargetIP: netip.AddrFrom4([4]byte{198, 19, byte(i >> 8), byte(i)})}
		if i%2 == 1 {
			p.EthDst = w.mac // unicast to us, still not our address
		}
		if _, err := p.Marshal(f); err != nil {
			t.Fatal(err)
		}
		if err := kw.send(f); err != nil && !errors.Is(err, unix.ENOBUFS) {
			t.Fatal(err)
		}
	}
	waitFor(2*time.Second, func() bool { return false }) // let the receiver drain
	close(stopLookups)
	<-lookupsDone
	if misses != 0 {
		t.Errorf("Lookup(%v) missed %d of %d times during the flood", kV4, misses, lookups)
	}
	ms1.read()
	seen := h.r.Drops(ReasonNotOurAddress)
	t.Logf("flood: %d frames sent, %d seen and dropped as not-our-address; heap %d → %d bytes", flood, seen, ms0.heap, ms1.heap)
	if seen < flood/10 {
		t.Errorf("only %d of %d flood frames reached the responder", seen, flood)
	}
	if h.tb.snap.Load() != snap || h.tb.Len() != n {
		t.Errorf("flood changed the table: %d entries (was %d), snapshot replaced %v", h.tb.Len(), n, h.tb.snap.Load() != snap)
	}
	if grow := int64(ms1.heap) - int64(ms0.heap); grow > 1<<20 {
		t.Errorf("heap grew by %d bytes during the flood, want < 1 MiB", grow)
	}
	if _, ok := h.tb.Lookup(kV4); !ok {
		t.Error("Lookup(kernel) missed after the flood")
	}
}

// TestJoinGroupsMLD: JoinGroups joins with a socket, so that the kernel
// lists the groups in MLD's table (igmp6: it reports them to snooping
// switches and answers their queries) as well as at the link layer
// (dev_mcast), and Close leaves them. Joined with SIOCADDMULTI alone, an
// owned-mode gateway's groups were in dev_mcast only, and behind a
// bridge that snoops MLD no neighbour solicitation for its address
// arrived.
func TestJoinGroupsMLD(t *testing.T) {
	tp := testenv.Topology(t, "arpm")
	us, k := testenv.NS(t, tp, "u"), testenv.NS(t, tp, "k")
	v, err := tp.NewVeth(us, k, topo.VethConfig{})
	must(t, err)
	waitUp(t, v)
	group := SolicitedNode(netip.MustParseAddr("2001:2::1"))
	const mcast, mld = "3333ff000001", "ff0200000000000000000001ff000001"
	read := func(file string) string {
		b, err := os.ReadFile("/proc/thread-self/net/" + file)
		must(t, err)
		return string(b)
	}
	must(t, us.Do(func() error {
		m, err := JoinGroups(v.A, []netip.Addr{group})
		if err != nil {
			return err
		}
		if lo := m.LinkOnly(); len(lo) != 0 {
			return fmt.Errorf("joined at the link layer only: %v", lo)
		}
		if !strings.Contains(read("igmp6"), mld) || !strings.Contains(read("dev_mcast"), mcast) {
			return fmt.Errorf("after JoinGroups: igmp6\n%s\ndev_mcast\n%s\nwant %s in both", read("igmp6"), read("dev_mcast"), group)
		}
		if err := m.Close(); err != nil {
			return err
		}
		if strings.Contains(read("igmp6"), mld) || strings.Contains(read("dev_mcast"), mcast) {
			return fmt.Errorf("after Close: igmp6\n%s\ndev_mcast\n%s\nstill with %s", read("igmp6"), read("dev_mcast"), group)
		}
		// At the link layer only (a VLAN of a trunk, whose reports the
		// kernel would send untagged): in dev_mcast, not in MLD's table.
		if m, err = JoinGroupsLinkLayer(v.A, []netip.Addr{group}); err != nil {
			return err
		}
		if strings.Contains(read("igmp6"), mld) || !strings.Contains(read("dev_mcast"), mcast) {
			return fmt.Errorf("after JoinGroupsLinkLayer: igmp6\n%s\ndev_mcast\n%s\nwant %s in dev_mcast only", read("igmp6"), read("dev_mcast"), group)
		}
		if err := m.Close(); err != nil {
			return err
		}
		if strings.Contains(read("dev_mcast"), mcast) {
			return fmt.Errorf("after Close: dev_mcast\n%s\nstill with %s", read("dev_mcast"), group)
		}
		return nil
	}))
}
