package bind_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/curve25519"
	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/ipc"
	"golang.zx2c4.com/wireguard/tun"

	"github.com/wgpio/wgpio/arp"
	"github.com/wgpio/wgpio/bind"
	"github.com/wgpio/wgpio/dataplane/afxdp"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/tundev"
)

// Addresses of the gateway-pair topology:
//
//	hostA ── lanA ── gwA ══ WAN (direct, or through a router) ══ gwB ── lanB ── hostB
//	198.18.1.2   198.18.1.1   198.18.2.1 … 198.18.2.2 / 198.18.4.2   198.18.3.1   198.18.3.2
//
// IPv6 uses 2001:2::/48 (RFC 5180, benchmarking) with the same third
// group. gwA runs stock wireguard-go on wgpio (bind over AF_XDP on its WAN
// veth; tundev.PortDevice over AF_XDP on its LAN veth, or a multi-queue
// kernel TUN); gwB runs stock wireguard-go on its own kernel TUN and
// standard bind.
var (
	lanA4, lanA6   = netip.MustParseAddr("198.18.1.1"), netip.MustParseAddr("2001:2:0:1::1")
	wanA4, wanA6   = netip.MustParseAddr("198.18.2.1"), netip.MustParseAddr("2001:2:0:2::1")
	hostB4, hostB6 = netip.MustParseAddr("198.18.3.2"), netip.MustParseAddr("2001:2:0:3::2")
)

const (
	wgPort   = 51820
	echoPort = 7007
	tcpPort  = 7008
	tunMTU   = 1420
)

type variant struct {
	name     string
	outer6   bool // gwB's endpoint is IPv6
	router   bool // a router namespace between the gateways
	mqtun    bool // gwA's plaintext side is a multi-queue kernel TUN, not a PortDevice
	owned    bool // gwA's kernel has no address on its veths: wgpio answers ARP/NDP
	stockA   bool // gwA is like gwB: kernel TUN and sockets (the benchmark's reference)
	mqStdA   bool // gwA on a multi-queue TUN and kernel sockets (benchmark)
	modeB    int  // gwB's mode (benchmark); modeStock in the tests
	badInput bool
}

// TestGatewayPair runs stock wireguard-go gateways against each other, one
// on wgpio's bind and tundev, the other on kernel TUN and sockets, and
// moves UDP echoes and SHA-256-checked TCP transfers (IPv4 and IPv6 inner)
// between hosts behind them. The TCP transfer is 16 MB (IPv4) and 4 MB
// (IPv6) per variant; WGPIO_LONG=1 makes the IPv4 one 200 MB.
func TestGatewayPair(t *testing.T) {
	for _, v := range []variant{
		{name: "xdp/v4-outer/on-link", badInput: true},
		{name: "xdp/v6-outer/router", outer6: true, router: true},
		{name: "xdp/owned/v4-outer/on-link", owned: true},
		{name: "mqtun/v4-outer/router", mqtun: true, router: true},
	} {
		t.Run(v.name, func(t *testing.T) { runVariant(t, v) })
	}
}

type pair struct {
	hA, gA, gB, hB, rt *topo.NS
	lanA, lanB         *topo.Veth
	wanA               string     // gwA's WAN interface
	wanB               string     // gwB's WAN interface
	wanBAddr           netip.Addr // the endpoint gwA uses
	wanBAddr4          netip.Addr
	wanBAddr6          netip.Addr
	nameA, nameB       string
	bindA              *bind.Bind
	wanPort            *afxdp.Port
	lanDev             *tundev.PortDevice
	pubA, pubB         [32]byte
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// buildPair makes the topology and starts both gateways.
func buildPair(t testing.TB, v variant) *pair {
	tp := testenv.Topology(t, "wgb")
	p := &pair{}
	p.hA, p.gA, p.gB, p.hB = testenv.NS(t, tp, "h"), testenv.NS(t, tp, "g"), testenv.NS(t, tp, "g"), testenv.NS(t, tp, "h")
	noDAD(t, p.hA, p.gA, p.gB, p.hB)
	var err error
	p.lanA, err = tp.NewVeth(p.hA, p.gA, topo.VethConfig{MTU: tunMTU})
	must(t, err)
	p.lanB, err = tp.NewVeth(p.gB, p.hB, topo.VethConfig{MTU: tunMTU})
	must(t, err)
	must(t, p.hA.AddAddr(p.lanA.A, "198.18.1.2/24"))
	must(t, p.hA.AddAddr(p.lanA.A, "2001:2:0:1::2/64"))
	gaAddr := func(dev, cidr string) {
		if !v.owned {
			must(t, p.gA.AddAddr(dev, cidr))
		}
	}
	gaAddr(p.lanA.B, "198.18.1.1/24")
	gaAddr(p.lanA.B, "2001:2:0:1::1/64")
	must(t, p.hA.AddRoute("default", "198.18.1.1", p.lanA.A))
	must(t, p.hA.AddRoute("default", "2001:2:0:1::1", p.lanA.A))
	must(t, p.gB.AddAddr(p.lanB.A, "198.18.3.1/24"))
	must(t, p.gB.AddAddr(p.lanB.A, "2001:2:0:3::1/64"))
	must(t, p.hB.AddAddr(p.lanB.B, "198.18.3.2/24"))
	must(t, p.hB.AddAddr(p.lanB.B, "2001:2:0:3::2/64"))
	must(t, p.hB.AddRoute("default", "198.18.3.1", p.lanB.B))
	must(t, p.hB.AddRoute("default", "2001:2:0:3::1", p.lanB.B))
	must(t, p.gB.Forwarding())
	if v.router {
		p.rt = testenv.NS(t, tp, "r")
		noDAD(t, p.rt)
		wa, err := tp.NewVeth(p.gA, p.rt, topo.VethConfig{Queues: 2})
		must(t, err)
		wb, err := tp.NewVeth(p.rt, p.gB, topo.VethConfig{})
		must(t, err)
		p.wanA, p.wanB = wa.A, wb.B
		must(t, p.rt.Forwarding())
		gaAddr(wa.A, "198.18.2.1/24")
		gaAddr(wa.A, "2001:2:0:2::1/64")
		must(t, p.rt.AddAddr(wa.B, "198.18.2.254/24"))
		must(t, p.rt.AddAddr(wa.B, "2001:2:0:2::fe/64"))
		must(t, p.rt.AddAddr(wb.A, "198.18.4.254/24"))
		must(t, p.rt.AddAddr(wb.A, "2001:2:0:4::fe/64"))
		must(t, p.gB.AddAddr(wb.B, "198.18.4.2/24"))
		must(t, p.gB.AddAddr(wb.B, "2001:2:0:4::2/64"))
		must(t, p.gA.AddRoute("198.18.4.0/24", "198.18.2.254", wa.A))
		must(t, p.gA.AddRoute("2001:2:0:4::/64", "2001:2:0:2::fe", wa.A))
		must(t, p.gB.AddRoute("198.18.2.0/24", "198.18.4.254", wb.B))
		must(t, p.gB.AddRoute("2001:2:0:2::/64", "2001:2:0:4::fe", wb.B))
		p.wanBAddr4, p.wanBAddr6 = netip.MustParseAddr("198.18.4.2"), netip.MustParseAddr("2001:2:0:4::2")
	} else {
		w, err := tp.NewVeth(p.gA, p.gB, topo.VethConfig{Queues: 2})
		must(t, err)
		p.wanA, p.wanB = w.A, w.B
		gaAddr(w.A, "198.18.2.1/24")
		gaAddr(w.A, "2001:2:0:2::1/64")
		must(t, p.gB.AddAddr(w.B, "198.18.2.2/24"))
		must(t, p.gB.AddAddr(w.B, "2001:2:0:2::2/64"))
		p.wanBAddr4, p.wanBAddr6 = netip.MustParseAddr("198.18.2.2"), netip.MustParseAddr("2001:2:0:2::2")
	}
	p.wanBAddr = p.wanBAddr4
	if v.outer6 {
		p.wanBAddr = p.wanBAddr6
	}
	p.nameA, p.nameB = topo.UniqueName("wgpA"), topo.UniqueName("wgpB")
	privA, pubA := keypair(t)
	privB, pubB := keypair(t)
	p.pubA, p.pubB = pubA, pubB
	startGateway(t, gwSpec{
		ns: p.gB, name: p.nameB, lanIf: p.lanB.A, wanIf: p.wanB, mode: v.modeB,
		lan4: netip.MustParseAddr("198.18.3.1"), lan6: netip.MustParseAddr("2001:2:0:3::1"),
		wan4: p.wanBAddr4, wan6: p.wanBAddr6,
		local: []string{"198.18.3.0/24", "2001:2:0:3::/64"}, remote: []string{"198.18.1.0/24", "2001:2:0:1::/64"},
		priv: privB, peer: pubA,
	})
	a := startGateway(t, gwSpec{
		ns: p.gA, name: p.nameA, lanIf: p.lanA.B, wanIf: p.wanA, mode: v.modeA(), owned: v.owned,
		lan4: lanA4, lan6: lanA6, wan4: wanA4, wan6: wanA6,
		local: []string{"198.18.1.0/24", "2001:2:0:1::/64"}, remote: []string{"198.18.3.0/24", "2001:2:0:3::/64"},
		wanNets: []string{"198.18.2.0/24", "2001:2:0:2::/64"},
		priv:    privA, peer: pubB, endpoint: netip.AddrPortFrom(p.wanBAddr, wgPort),
	})
	p.bindA, p.wanPort, p.lanDev = a.bind, a.wanPort, a.lanDev
	return p
}

// Gateway modes: what carries stock wireguard-go's two sides.
const (
	modeStock = iota // kernel TUN and the standard bind (kernel UDP sockets)
	modeMQStd        // a multi-queue kernel TUN and the standard bind
	modeMQTUN        // a multi-queue kernel TUN and wgpio's bind over AF_XDP
	modeWgpio        // wgpio's bind and PortDevice, both over AF_XDP
)

func (v variant) modeA() int {
	switch {
	case v.stockA:
		return modeStock
	case v.mqStdA:
		return modeMQStd
	case v.mqtun:
		return modeMQTUN
	}
	return modeWgpio
}

// gwSpec describes one gateway.
type gwSpec struct {
	ns                     *topo.NS
	name                   string // wireguard-go device name (TUN, UAPI socket)
	lanIf, wanIf           string
	mode                   int
	owned                  bool // owned address mode (the kernel has no address on the veths)
	lan4, lan6, wan4, wan6 netip.Addr
	local, remote          []string // the LAN behind this gateway, and behind the peer
	wanNets                []string // on-link WAN prefixes (owned mode)
	priv, peer             [32]byte
	endpoint               netip.AddrPort // the peer's, or invalid to learn it
}

type gateway struct {
	dev     *device.Device
	bind    *bind.Bind
	wanPort *afxdp.Port
	lanDev  *tundev.PortDevice
}

// startGateway starts stock wireguard-go in s.ns on the sides s.mode says,
// configured through IpcSet, with its UAPI socket served.
func startGateway(t testing.TB, s gwSpec) *gateway {
	t.Helper()
	g := &gateway{}
	var done atomic.Bool
	t.Cleanup(func() { done.Store(true) })
	logger := &device.Logger{Verbosef: device.DiscardLogf, Errorf: func(f string, a ...any) {
		// wireguard-go asks for a kernel TUN's MTU through a socket of
		// the caller's namespace, where the TUN does not exist: it falls
		// back to its default, 1420, the MTU we set anyway.
		if strings.Contains(f, "MTU") || done.Load() {
			return
		}
		t.Logf(s.name+": "+f, a...)
	}}
	kernelTUN := func(mq bool) tun.Device {
		must(t, s.ns.Forwarding())
		var d tun.Device
		must(t, s.ns.Do(func() error {
			var err error
			if mq {
				d, err = tundev.OpenMultiQueueTUN(s.name, 2, tunMTU)
			} else {
				d, err = tun.CreateTUN(s.name, tunMTU)
			}
			return err
		}))
		return d
	}
	var tunDev tun.Device
	var b conn.Bind
	switch s.mode {
	case modeStock, modeMQStd:
		tunDev = kernelTUN(s.mode == modeMQStd)
		b = &nsBind{Bind: conn.NewDefaultBind(), ns: s.ns}
	default:
		g.wanPort = openPort(t, s.ns, s.wanIf, bind.XDPFilter([]netip.Addr{s.wan4, s.wan6}, wgPort, s.owned))
		bcfg := bind.Config{Port: g.wanPort, Addr4: s.wan4, Addr6: s.wan6, ListenPort: wgPort}
		if s.owned {
			bcfg.Routes, bcfg.Neighbours, bcfg.Responder = ownedNeighbours(t, s.ns, s.wanIf, g.wanPort.MAC(), s.wan4, s.wan6,
				s.wanNets, func(f []byte) { g.bind.SendFrame(f) })
		} else {
			bcfg.Routes, bcfg.Neighbours = sharedNeighbours(t, s.ns, s.wanIf)
		}
		var err error
		g.bind, err = bind.New(bcfg)
		must(t, err)
		b = g.bind
		if s.mode == modeMQTUN {
			tunDev = kernelTUN(true)
			break
		}
		f := afxdp.Filter{Prefixes: true, HostAddrs: []netip.Addr{s.lan4, s.lan6}}
		if s.owned {
			f = afxdp.Filter{Prefixes: true, Neighbours: []netip.Addr{s.lan4, s.lan6}}
		}
		lanPort := openPort(t, s.ns, s.lanIf, f)
		for _, r := range s.remote {
			must(t, lanPort.AddPrefix(netip.MustParsePrefix(r)))
		}
		pcfg := tundev.PortConfig{Port: lanPort, Name: s.name, MTU: tunMTU}
		if s.owned {
			pcfg.Routes, pcfg.Neighbours, pcfg.Responder = ownedNeighbours(t, s.ns, s.lanIf, lanPort.MAC(), s.lan4, s.lan6,
				s.local, func(f []byte) { g.lanDev.SendFrame(f) })
		} else {
			pcfg.Routes, pcfg.Neighbours = sharedNeighbours(t, s.ns, s.lanIf)
		}
		g.lanDev, err = tundev.NewPortDevice(pcfg)
		must(t, err)
		tunDev = g.lanDev
	}
	g.dev = device.NewDevice(tunDev, b, logger)
	t.Cleanup(g.dev.Close)
	cfg := fmt.Sprintf("private_key=%s\nlisten_port=%d\npublic_key=%s\n", hex.EncodeToString(s.priv[:]), wgPort, hex.EncodeToString(s.peer[:]))
	if s.endpoint.IsValid() {
		cfg += fmt.Sprintf("endpoint=%s\n", s.endpoint)
	}
	for _, r := range s.remote {
		cfg += "allowed_ip=" + r + "\n"
	}
	must(t, g.dev.IpcSet(cfg))
	must(t, g.dev.Up())
	if s.mode != modeWgpio {
		_, err := s.ns.Run("ip", "link", "set", s.name, "up")
		must(t, err)
		for _, r := range s.remote {
			must(t, s.ns.AddRoute(r, "", s.name))
		}
	}
	uapi(t, g.dev, s.name)
	return g
}

func runVariant(t *testing.T, v variant) {
	testenv.Tool(t, "wg", "wireguard-tools")
	p := buildPair(t, v)

	// Hosts: echo and TCP servers on hostB.
	startServers(t, p.hB)

	start := time.Now()
	echo(t, p.hA, hostB4, 15*time.Second)
	t.Logf("first IPv4 echo after %v", time.Since(start).Round(time.Millisecond))
	echo(t, p.hA, hostB6, 5*time.Second)
	size := 16 << 20
	if os.Getenv("WGPIO_LONG") == "1" {
		size = 200 << 20
	}
	transfer(t, p.hA, hostB4, size)
	transfer(t, p.hA, hostB6, 4<<20)

	if v.owned {
		// gwB learnt gwA's MAC from gwA's own requests; make it ask, so
		// that the Responder has to answer for the tunnel to go on.
		_, err := p.gB.Run("ip", "neigh", "flush", "dev", p.wanB)
		must(t, err)
		echo(t, p.hA, hostB4, 5*time.Second)
	}
	if v.badInput {
		badInput(t, p)
		echo(t, p.hA, hostB4, 5*time.Second)
		transfer(t, p.hA, hostB4, 1<<20)
	}

	pubAB64, pubBB64 := base64.StdEncoding.EncodeToString(p.pubA[:]), base64.StdEncoding.EncodeToString(p.pubB[:])
	checkWGShow(t, p.nameA, pubBB64)
	checkWGShow(t, p.nameB, pubAB64)

	s := p.bindA.Stats()
	t.Logf("bind: rx %d tx %d drops %v", s.RXPackets, s.TXPackets, s.Drops)
	if s.RXPackets == 0 || s.TXPackets == 0 {
		t.Errorf("bind Stats RX %d, TX %d; want both > 0", s.RXPackets, s.TXPackets)
	}
	if v.owned && s.NeighbourReplies == 0 {
		t.Error("owned mode: the bind answered no ARP/NDP request")
	}
	if p.lanDev != nil {
		ls := p.lanDev.Stats()
		if v.owned && ls.NeighbourReplies == 0 {
			t.Error("owned mode: the PortDevice answered no ARP/NDP request")
		}
		t.Logf("tundev: rx %d tx %d drops %v", ls.RXPackets, ls.TXPackets, ls.Drops)
		if ls.RXPackets == 0 || ls.TXPackets == 0 {
			t.Errorf("PortDevice Stats RX %d, TX %d; want both > 0", ls.RXPackets, ls.TXPackets)
		}
	}
}

// noDAD turns IPv6 duplicate address detection off for the interfaces
// made later in each namespace, so that link-local addresses (the source
// of neighbour solicitations) are usable at once.
func noDAD(t testing.TB, nss ...*topo.NS) {
	t.Helper()
	for _, ns := range nss {
		must(t, ns.Sysctl("net.ipv6.conf.all.accept_dad", "0"))
		must(t, ns.Sysctl("net.ipv6.conf.default.accept_dad", "0"))
	}
}

// ownedNeighbours sets up owned address mode for dev in ns: static on-link
// routes, a table whose requests are frames sent through send, a Responder
// for our addresses, and membership of their solicited-node groups.
func ownedNeighbours(t testing.TB, ns *topo.NS, dev string, mac net.HardwareAddr, a4, a6 netip.Addr, onLink []string, send func([]byte)) (*arp.StaticRoutes, *arp.Table, *arp.Responder) {
	t.Helper()
	var rs []arp.Route
	for _, p := range onLink {
		rs = append(rs, arp.Route{Prefix: netip.MustParsePrefix(p)})
	}
	routes, err := arp.NewStaticRoutes(rs)
	must(t, err)
	prober := &arp.FrameProber{MAC: arp.MAC(mac), Src4: a4, Src6: a6, Send: send}
	tbl := arp.NewTable(arp.Config{Prober: prober, RetransTimer: 100 * time.Millisecond})
	stop := make(chan struct{})
	go tbl.Run(stop, 20*time.Millisecond)
	t.Cleanup(func() { close(stop) })
	rsp, err := arp.NewResponder(arp.ResponderConfig{MAC: arp.MAC(mac), Addrs: []netip.Addr{a4, a6}, SkipDAD: true, Table: tbl})
	must(t, err)
	for _, g := range rsp.SolicitedNodeGroups() {
		must(t, ns.Do(func() error { return arp.JoinGroup(dev, g) }))
	}
	return routes, tbl, rsp
}

func keypair(t testing.TB) (priv, pub [32]byte) {
	if _, err := rand.Read(priv[:]); err != nil {
		t.Fatal(err)
	}
	priv[0] &= 248
	priv[31] = priv[31]&127 | 64
	p, err := curve25519.X25519(priv[:], curve25519.Basepoint)
	if err != nil {
		t.Fatal(err)
	}
	return priv, [32]byte(p)
}

// nsBind opens a standard bind's sockets inside a namespace, whatever
// goroutine wireguard-go calls Open from.
type nsBind struct {
	conn.Bind
	ns *topo.NS
}

func (b *nsBind) Open(port uint16) (fns []conn.ReceiveFunc, actual uint16, err error) {
	err = b.ns.Do(func() error {
		var err error
		fns, actual, err = b.Bind.Open(port)
		return err
	})
	return fns, actual, err
}

func openPort(t testing.TB, ns *topo.NS, dev string, f afxdp.Filter) *afxdp.Port {
	t.Helper()
	var p *afxdp.Port
	must(t, ns.Do(func() error {
		var err error
		p, err = afxdp.Open(dev, afxdp.Config{Filter: f})
		return err
	}))
	t.Cleanup(func() { p.Close() })
	return p
}

// sharedNeighbours follows the kernel's routes and neighbours of dev in ns
// (shared address mode).
func sharedNeighbours(t testing.TB, ns *topo.NS, dev string) (*arp.KernelRoutes, *arp.Table) {
	t.Helper()
	l, err := ns.Handle().LinkByName(dev)
	must(t, err)
	opts := arp.KernelOptions{Namespace: ns.NsHandle(), LinkIndex: l.Attrs().Index}
	routes, err := arp.NewKernelRoutes(opts)
	must(t, err)
	t.Cleanup(func() { routes.Close() })
	tbl := arp.NewTable(arp.Config{Prober: &arp.KernelProber{Handle: ns.Handle(), LinkIndex: l.Attrs().Index}, RetransTimer: 100 * time.Millisecond})
	kn, err := arp.NewKernelNeighbours(tbl, opts)
	must(t, err)
	t.Cleanup(func() { kn.Close() })
	return routes, tbl
}

// uapi serves the UAPI socket for name, as wireguard-go's main does.
func uapi(t testing.TB, d *device.Device, name string) {
	t.Helper()
	f, err := ipc.UAPIOpen(name)
	must(t, err)
	l, err := ipc.UAPIListen(name, f)
	must(t, err)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go d.IpcHandle(c)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		os.Remove("/var/run/wireguard/" + name + ".sock")
	})
}

// startServers runs a UDP echo server (IPv4 and IPv6) and a TCP server
// that answers the SHA-256 of everything it reads, inside ns.
func startServers(t testing.TB, ns *topo.NS) {
	t.Helper()
	var uc net.PacketConn
	var tl net.Listener
	must(t, ns.Do(func() error {
		var err error
		if uc, err = net.ListenPacket("udp", fmt.Sprintf(":%d", echoPort)); err != nil {
			return err
		}
		tl, err = net.Listen("tcp", fmt.Sprintf(":%d", tcpPort))
		return err
	}))
	t.Cleanup(func() { uc.Close(); tl.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := uc.ReadFrom(buf)
			if err != nil {
				return
			}
			uc.WriteTo(buf[:n], from)
		}
	}()
	go func() {
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(2 * time.Minute))
				h := sha256.New()
				if _, err := io.Copy(h, c); err != nil {
					return
				}
				c.Write(h.Sum(nil))
			}()
		}
	}()
}

// echo sends UDP probes from ns to dst until one comes back.
func echo(t testing.TB, ns *topo.NS, dst netip.Addr, within time.Duration) {
	t.Helper()
	var c net.PacketConn
	must(t, ns.Do(func() error {
		var err error
		c, err = net.ListenPacket("udp", ":0")
		return err
	}))
	defer c.Close()
	to := net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, echoPort))
	buf := make([]byte, 64)
	for deadline := time.Now().Add(within); time.Now().Before(deadline); {
		msg := fmt.Sprintf("ping %d", time.Now().UnixNano())
		if _, err := c.WriteTo([]byte(msg), to); err != nil {
			t.Fatalf("send echo to %v: %v", dst, err)
		}
		c.SetReadDeadline(time.Now().Add(250 * time.Millisecond))
		for {
			n, _, err := c.ReadFrom(buf)
			if err != nil {
				break
			}
			if string(buf[:n]) == msg {
				return
			}
		}
	}
	t.Fatalf("no UDP echo from %v within %v", dst, within)
}

// transfer sends size pseudo-random bytes over TCP from ns to dst and
// compares the SHA-256 the server computed with ours.
func transfer(t testing.TB, ns *topo.NS, dst netip.Addr, size int) {
	t.Helper()
	var c net.Conn
	must(t, ns.Do(func() error {
		var err error
		c, err = net.DialTimeout("tcp", netip.AddrPortFrom(dst, tcpPort).String(), 10*time.Second)
		return err
	}))
	defer c.Close()
	// At least 2 MB/s even on a loaded machine (200 MB: 100 s).
	c.SetDeadline(time.Now().Add(max(60*time.Second, time.Duration(size>>20)*time.Second/2)))
	src := mrand.NewChaCha8([32]byte{byte(size), 1, 2, 3})
	h := sha256.New()
	buf := make([]byte, 64<<10)
	start := time.Now()
	for left := size; left > 0; {
		n := min(left, len(buf))
		src.Read(buf[:n])
		h.Write(buf[:n])
		if _, err := c.Write(buf[:n]); err != nil {
			t.Fatalf("TCP to %v: write after %d bytes: %v", dst, size-left, err)
		}
		left -= n
	}
	c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("TCP to %v: read digest: %v", dst, err)
	}
	if want := h.Sum(nil); !bytes.Equal(got, want) {
		t.Fatalf("TCP to %v: server SHA-256 = %x, want %x", dst, got, want)
	}
	d := time.Since(start)
	t.Logf("TCP %d MB to %v: SHA-256 matches, %.0f Mbit/s", size>>20, dst, float64(size)*8/d.Seconds()/1e6)
}

var transferRE = regexp.MustCompile(`transfer: ([0-9.]+) \S+ received, ([0-9.]+) \S+ sent`)

// checkWGShow runs the real wg tool against the device's UAPI socket.
func checkWGShow(t testing.TB, name, peer string) {
	t.Helper()
	out, err := exec.Command("wg", "show", name).CombinedOutput()
	if err != nil {
		t.Fatalf("wg show %s: %v: %s", name, err, out)
	}
	s := string(out)
	if !bytes.Contains(out, []byte("peer: "+peer)) || !bytes.Contains(out, []byte("latest handshake:")) {
		t.Errorf("wg show %s = %q, want peer %s with a latest handshake", name, s, peer)
	}
	m := transferRE.FindStringSubmatch(s)
	if m == nil {
		t.Errorf("wg show %s = %q, want a transfer line", name, s)
		return
	}
	rx, _ := strconv.ParseFloat(m[1], 64)
	tx, _ := strconv.ParseFloat(m[2], 64)
	if rx == 0 || tx == 0 {
		t.Errorf("wg show %s: transfer %s received, %s sent; want both non-zero", name, m[1], m[2])
	}
}
