//go:build linux

package fastgw

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/arp"
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/afxdp"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/internal/kernelsock"
	"github.com/wgpio/wgpio/internal/linkfollow"
	"github.com/wgpio/wgpio/internal/logcap"
	"github.com/wgpio/wgpio/internal/srcaddr"
	"github.com/wgpio/wgpio/internal/toobig"
	"github.com/wgpio/wgpio/noise"
	"github.com/wgpio/wgpio/replay"
	"github.com/wgpio/wgpio/tundev"
)

// defaultLANPrefixCapacity is Config.LANPrefixCapacity's default.
const defaultLANPrefixCapacity = afxdp.DefaultPrefixCapacity

// Config configures a fast-path gateway.
type Config struct {
	// Name names the UAPI socket (/var/run/wireguard/<Name>.sock) and the
	// exception TUN interface. Required.
	Name string
	// PrivateKey is the static private key.
	PrivateKey noise.PrivateKey
	// ListenPort is the WireGuard UDP port on the WAN addresses (default
	// DefaultListenPort, 51820).
	ListenPort uint16
	// Peers to configure at start (more can come over the UAPI).
	Peers []gateway.PeerConfig
	// WAN and LAN are the interface names (encrypted and plaintext side).
	// A kernel VLAN device (eth0.100) stands for its parent and its VLAN,
	// as with WANVLAN or LANVLAN.
	WAN, LAN string
	// WANVLAN and LANVLAN put the WAN or LAN on one IEEE 802.1Q VLAN
	// (1-4094) of a trunk: the XDP program takes only frames tagged with
	// it (and with the default 0 only untagged and priority-tagged ones;
	// see afxdp.Filter.VLAN), and the gateway tags what it sends there.
	// In shared address mode the kernel's VLAN device for it must exist
	// (its addresses, routes and neighbours are the side's).
	WANVLAN, LANVLAN uint16
	// Queues is the number of NIC queues on each side, one worker per
	// queue (default 0: all the RX queues of the interface that has fewer;
	// more than an interface has is an error).
	Queues int
	// CPUs pins worker i to CPUs[i % len(CPUs)].
	// Empty leaves the workers to the Go scheduler. Pin them where the
	// device's transmit runs on the sending CPU (veth, and AF_XDP copy
	// mode generally): a worker that migrates between CPUs under load can
	// then deliver a flow's packets out of order.
	CPUs []int
	// HandshakeWorkers is the number of handshake goroutines of the
	// control plane (gateway.Options.HandshakeWorkers); 0: one per CPU.
	HandshakeWorkers int
	// SourcePorts is how many outer source ports, from ListenPort up, the
	// inner flows hash to (default 1: plain WireGuard). The XDP program
	// accepts the whole range.
	SourcePorts uint16
	// Attach selects native or generic XDP (default: native, else generic).
	Attach afxdp.AttachMode
	// MTU is the tunnel MTU (default 1420).
	MTU int
	// Addresses are the gateway's own tunnel addresses (wg-quick's
	// Address): they go on the exception TUN, so the gateway answers over
	// its own tunnel.
	Addresses []netip.Prefix
	// Owned selects the owned address mode (ARCHITECTURE.md "Addresses and
	// neighbours"): the kernel has no address on WAN and LAN; wgpio owns
	// WANAddress and LANAddress, answers ARP and NDP for them, announces
	// them at start (gratuitous ARP), resolves neighbours itself,
	// reaches off-link endpoints through Gateway, and reassembles the
	// WireGuard datagrams that arrive as IP fragments (ARCHITECTURE.md
	// "Fragments in owned mode"). Otherwise (shared mode)
	// the kernel owns the addresses, and neighbours and routes are read
	// from it.
	Owned bool
	// WANAddress and LANAddress are the owned addresses with their on-link
	// prefixes (owned mode).
	WANAddress, LANAddress netip.Prefix
	// Gateway is the WAN next-hop router for destinations that are not
	// on-link (owned mode; optional).
	Gateway netip.Addr
	// Frames is the number of 4 KiB frames of the UMEM the two ports share
	// (default 17,408 per queue, 68 MiB: every ring of both ports full
	// plus the caches). The UMEM counts against RLIMIT_MEMLOCK unless the
	// process has CAP_IPC_LOCK; fewer frames fit a small limit, at the
	// risk of fill-ring starvation under bursts (counted by the kernel as
	// xsk_rx_fill_ring_empty_descs).
	Frames int
	// IPv4UDPChecksum computes outer IPv4 UDP checksums (default: 0, see
	// fastpath.Config.IPv4UDPChecksum).
	IPv4UDPChecksum bool
	// LANPrefixCapacity is the most allowed-IPs prefixes of each family the
	// LAN side's XDP program redirects (default 1,048,576: a million
	// peers' /32 and /128; the map's memory follows the prefixes in it).
	// Prefixes past it still reach the tunnel, through the kernel and the
	// exception TUN (without Addresses there is none: the kernel forwards
	// the LAN's packets to them by the host's other routes, out of the
	// WAN in cleartext by a default route), and every configuration
	// change while some wait returns an error (the UAPI answers ENOSPC).
	// A prefix in the map keeps its slot while it is configured; a slot
	// that frees goes to one that waits.
	LANPrefixCapacity int
	// ICMPRate, ICMPBurst and ICMPDestInterval limit the ICMP errors the
	// gateway sends, all but fragmentation needed / packet too big, which
	// are never limited (fastpath.Config: Linux's defaults when 0, off
	// when negative).
	ICMPRate, ICMPBurst int
	ICMPDestInterval    time.Duration
	// MSSClamp clamps the MSS of TCP SYNs crossing the gateway
	// (fastpath.Config.MSSClamp: fastpath.MSSClampAuto or bytes; 0 off).
	MSSClamp int
	// ReplayWindow is the width policy of each session's replay window
	// (fastpath.Config.ReplayWindow; the zero value, replay.Auto, starts
	// at 8,128 counters and widens to 131,008 when needed).
	ReplayWindow replay.Policy
	// Logger (default: discard).
	Logger *slog.Logger
	// Journal keeps the ports' changes of the interfaces' RX VLAN
	// offload while they last (afxdp.Config.Journal; nil: none kept).
	Journal afxdp.OffloadJournal
}

// Gateway is a running fast-path gateway.
type Gateway struct {
	cfg    Config
	log    *slog.Logger
	umem   *afxdp.UMEM
	wan    *afxdp.Port
	lan    *afxdp.Port
	engine *fastpath.Engine
	dev    *gateway.Device
	dp     *dataplane_

	routes    *arp.KernelRoutes
	routeSrc  *srcaddr.Routes // the kernel's source toward each endpoint (shared mode; wanaddrs.go)
	nsHandle  netns.NsHandle
	static    *arp.StaticRoutes
	wanResp   *arp.Responder
	lanResp   *arp.Responder
	groups    []*arp.Membership // owned mode's solicited-node groups, left at Close
	mld       []*arp.MLDHost    // owned mode's MLD reports on a VLAN (closeMLD)
	wanNeigh  *arp.KernelNeighbours
	lanNeigh  *arp.KernelNeighbours
	wanTable  *arp.Table
	lanTable  *arp.Table
	nlHandle  *netlink.Handle
	tableDone chan struct{}
	exc       *tundev.OffloadTUN
	excWG     sync.WaitGroup
	// excWarned is when a packet the exception TUN refused was last
	// logged (Unix ns; the TUN counts them: ExceptionDrops).
	excWarned atomic.Int64
	// wanSide and lanSide are the ports' trunks, VLANs and address
	// devices (resolveSide).
	wanSide, lanSide side
	// wanName and lanName are the names of the WAN's and LAN's address
	// devices (side.addrDev) as last read, for the messages: the
	// followers read them by their indexes (wanIfindex, lanIfindex;
	// readLinkIndex), which a rename keeps. Set by Start, then written
	// and read on followAddresses' goroutine alone.
	wanName, lanName string
	// wanMu guards the listen port (cfg.ListenPort), the WAN addresses
	// and kernel's sockets, which change while running (listen.go).
	wanMu        sync.Mutex
	wanV4, wanV6 netip.Addr
	// wanOthers are the WAN's further addresses, WireGuard's too
	// (wanaddrs.go; shared mode). Guarded by wanMu.
	wanOthers []netip.Addr
	// lanAddrs are the LAN interface's addresses (followed in shared
	// mode: lanAddressesChanged): with the WAN interface's, the engine's
	// HostAddrs.
	lanAddrs []netip.Addr
	// lanNets are the LAN addresses with their prefix lengths given to
	// the engine (SetLANSubnets); written where lanAddrs is.
	lanNets []netip.Prefix
	// lanLeft are the LAN addresses the LAN XDP filter could not hold
	// (warnHostAddrsLeft); written where lanAddrs is.
	lanLeft []netip.Addr
	// wanAll are the WAN interface's addresses (followed in shared mode:
	// wanAddressesChanged), which the LAN XDP filter gives to the host
	// too (lanHostAddrs); written where lanAddrs is.
	wanAll []netip.Addr
	// kernel holds our WAN ports in the kernel (listenKernel; shared
	// mode, nil in owned mode). Guarded by wanMu.
	kernel *kernelsock.Set
	// addrDone stops followAddresses (shared mode), addrWG waits for it.
	addrDone chan struct{}
	addrWG   sync.WaitGroup
	// pmtu follows the path MTU toward IPv6 endpoints (pathmtu.go; nil
	// without).
	pmtu *toobig.Follower
	// linkWG waits for followLinks' goroutines, which tableDone stops.
	linkWG     sync.WaitGroup
	closeOnce  sync.Once
	wanIfindex int
	lanIfindex int
	// failure is the gateway's failure while it runs: an interface it
	// runs on deleted (linkgone.go, Failed).
	failure linkfollow.Failure
	// offWAN logs a destination routed off the WAN (offwan.go; nil
	// before addressMode).
	offWAN *offWANLog
}

// route installs the route of p into the exception TUN, replacing one of
// its key (destination, TOS 0, metric 0, or IPv6's 1024) when replace
// says ours may be there (a prefix that left the configuration and came
// back), else adding it beside the others, as wg-quick adds its routes
// into wg0. It reports whether the main table held a route of p's key
// (EEXIST): ours, or one of the host's, which stays (noteTaken tells
// which): the connected route of an interface whose subnet a peer's
// allowed IPs give, a static route, a routing daemon's. Replaced, the
// host lost its route to that subnet, and it did not come back when the
// gateway stopped. None is ever deleted (dataplane_.forget says why).
// While the interface is down the kernel takes no route into it
// (ENETDOWN): not worth a warning, since watchException installs the
// routes of the prefixes configured and left by then when it comes up
// (restoreRoutes), so it is logged at debug level only.
func (d *dataplane_) route(w *logcap.Log, p netip.Prefix, replace bool) (exists bool) {
	if d.excLink == nil || p.Bits() == 0 {
		return false
	}
	install := d.nl.RouteAdd
	if replace {
		install = d.nl.RouteReplace
	}
	return errors.Is(d.installRoute(w, p, install), unix.EEXIST)
}

// installRoute installs the route of p into the exception TUN with
// install (RouteReplace or RouteAdd), logs a failure other than EEXIST
// to w, and returns the error.
func (d *dataplane_) installRoute(w *logcap.Log, p netip.Prefix, install func(*netlink.Route) error) error {
	err := install(d.excRoute(p))
	logRouteErr(w, p, err)
	return err
}

// logRouteErr logs to w err, the result of installing p's route into the
// exception TUN, unless nil or EEXIST (installRoute).
func logRouteErr(w *logcap.Log, p netip.Prefix, err error) {
	switch {
	case err == nil, errors.Is(err, unix.EEXIST):
	case errors.Is(err, unix.ENETDOWN):
		w.Debug("route into the exception TUN: the interface is down; installed when it comes up", "prefix", p)
	default:
		w.Warn("route into the exception TUN", "prefix", p, "err", err)
	}
}

// routeReq is the route of a prefix into the exception TUN to install:
// replace as route's.
type routeReq struct {
	p       netip.Prefix
	replace bool
}

// routeAll installs the route of each of reqs into the exception TUN as
// route does, each result logged to w as installRoute logs it, and
// returns the prefixes whose key the main table held (EEXIST), in no
// particular order. Many routes go to the kernel through d.rs, in batches
// (routeSocket): a write and a read per route took about twice as long
// (a set adding 200,000 prefixes: 7-23 s where batches take 5-13 s, on a
// shared core). A request whose answer was lost (errNoAck) is sent again
// alone. d.routeMu held.
func (d *dataplane_) routeAll(w *logcap.Log, reqs []routeReq) (exists []netip.Prefix) {
	if d.excLink == nil {
		return nil
	}
	if d.rs == nil || len(reqs) < 2 {
		for _, r := range reqs {
			if d.route(w, r.p, r.replace) {
				exists = append(exists, r.p)
			}
		}
		return exists
	}
	var add, replace []netip.Prefix
	for _, r := range reqs {
		switch {
		case r.p.Bits() == 0:
		case r.replace:
			replace = append(replace, r.p)
		default:
			add = append(add, r.p)
		}
	}
	errs := make([]error, max(len(add), len(replace)))
	for _, b := range []struct {
		op routeOp
		ps []netip.Prefix
	}{{routeAdd, add}, {routeReplace, replace}} {
		d.rs.do(b.op, b.ps, d.excLink.Attrs().Index, errs)
		for i, p := range b.ps {
			err := errs[i]
			if err == errNoAck {
				if d.route(w, p, b.op == routeReplace) {
					exists = append(exists, p)
				}
				continue
			}
			logRouteErr(w, p, err)
			if errors.Is(err, unix.EEXIST) {
				exists = append(exists, p)
			}
		}
	}
	return exists
}

// excRoute is the main table's route of p into the exception TUN.
func (d *dataplane_) excRoute(p netip.Prefix) *netlink.Route {
	return &netlink.Route{
		LinkIndex: d.excLink.Attrs().Index,
		Dst:       &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())},
	}
}

// responderHandler adapts an arp.Responder to fastpath.NeighbourHandler.
type responderHandler struct{ r *arp.Responder }

func (h responderHandler) Handle(frame, out []byte) int {
	n, _ := h.r.Handle(frame, out)
	return n
}

// kernelAddrs are the addresses of l that owned mode warns the kernel
// still has, answering ARP or NDP for them beside ours and routing with
// them: l's own, without the directed broadcasts (link.all has them, as
// the host's; they listed x.x.x.255 as an address of the host) and the
// IPv6 link-local ones (made whenever IPv6 is on).
func kernelAddrs(l link) []netip.Addr {
	return slices.DeleteFunc(slices.Clone(l.own), netip.Addr.IsLinkLocalUnicast)
}

// ownedMode sets up the owned address mode: static routes, neighbour tables
// fed by our own requests, and responders for our addresses.
func (g *Gateway) ownedMode(wl, ll *link, wanMAC, lanMAC [6]byte) error {
	cfg := g.cfg
	if !cfg.WANAddress.IsValid() || !cfg.LANAddress.IsValid() {
		return errors.New("fastgw: owned address mode needs WANAddress and LANAddress")
	}
	if w, l := kernelAddrs(*wl), kernelAddrs(*ll); len(w) > 0 || len(l) > 0 {
		g.log.Warn("owned address mode, but the kernel has addresses of its own on the interfaces: it routes and answers for those as before; the XDP programs take ARP and NDP for ours, which the kernel does not see", "wan", w, "lan", l)
	}
	routes := []arp.Route{
		{Prefix: cfg.WANAddress.Masked(), IfIndex: wl.index},
		{Prefix: cfg.LANAddress.Masked(), IfIndex: ll.index},
	}
	if cfg.Gateway.IsValid() {
		def := netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		if cfg.Gateway.Is6() {
			def = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		}
		routes = append(routes, arp.Route{Prefix: def, Gateway: cfg.Gateway, IfIndex: wl.index})
		if cfg.Gateway.Is6() && cfg.Gateway.IsLinkLocalUnicast() {
			// A router's link-local address, the usual IPv6 next
			// hop (what its advertisements name): on-link on the
			// WAN, as Linux's fe80::/64 route of every interface.
			routes = append(routes, arp.Route{Prefix: netip.MustParsePrefix("fe80::/64"), IfIndex: wl.index})
		}
	}
	var err error
	if g.static, err = arp.NewStaticRoutes(routes); err != nil {
		return fmt.Errorf("fastgw: owned routes: %w", err)
	}
	prober := func(addr netip.Addr, mac [6]byte, lan bool) *arp.FrameProber {
		p := &arp.FrameProber{MAC: mac, Send: func(frame []byte) {
			if e := g.engine; e != nil {
				e.SendFrame(lan, 0, frame)
			}
		}}
		if addr.Is4() {
			p.Src4 = addr
		} else {
			p.Src6 = addr
		}
		return p
	}
	wa, la := cfg.WANAddress.Addr(), cfg.LANAddress.Addr()
	g.wanTable = arp.NewTable(arp.Config{Prober: prober(wa, wanMAC, false)})
	g.lanTable = arp.NewTable(arp.Config{Prober: prober(la, lanMAC, true)})
	if g.wanResp, err = arp.NewResponder(arp.ResponderConfig{MAC: wanMAC, Addrs: []netip.Addr{wa}, SkipDAD: true, Table: g.wanTable, Router: true}); err != nil {
		return fmt.Errorf("fastgw: WAN responder: %w", err)
	}
	if g.lanResp, err = arp.NewResponder(arp.ResponderConfig{MAC: lanMAC, Addrs: []netip.Addr{la}, SkipDAD: true, Table: g.lanTable, Router: true}); err != nil {
		return fmt.Errorf("fastgw: LAN responder: %w", err)
	}
	for _, x := range []struct {
		r    *arp.Responder
		if_  string
		vlan uint16
		lan  bool
		mac  [6]byte
		addr netip.Addr
	}{{g.wanResp, cfg.WAN, cfg.WANVLAN, false, wanMAC, wa}, {g.lanResp, cfg.LAN, cfg.LANVLAN, true, lanMAC, la}} {
		groups := x.r.SolicitedNodeGroups()
		if len(groups) == 0 {
			continue
		}
		if x.vlan != 0 {
			// On a VLAN of the trunk the kernel's MLD reports would
			// leave untagged, on the trunk's native VLAN: joined at
			// the link layer (all-nodes too, for the queries, should
			// IPv6 be off on the trunk), announced by our own reports,
			// tagged.
			m, err := arp.JoinGroupsLinkLayer(x.if_, append(slices.Clone(groups), netip.MustParseAddr("ff02::1")))
			if err != nil {
				return fmt.Errorf("fastgw: %w", err)
			}
			g.groups = append(g.groups, m)
			h, err := g.newMLDHost(x.lan, x.mac, x.addr, groups)
			if err != nil {
				return fmt.Errorf("fastgw: %w", err)
			}
			x.r.SetMLD(h)
			g.mld = append(g.mld, h)
			continue
		}
		// With a socket, which MLD announces: a snooping switch or
		// bridge forwards the hosts' solicitations to us (joined at
		// the link layer only, none arrived behind one).
		m, err := arp.JoinGroups(x.if_, groups)
		if err != nil {
			return fmt.Errorf("fastgw: %w", err)
		}
		g.groups = append(g.groups, m)
		if lo := m.LinkOnly(); len(lo) > 0 {
			g.log.Warn("owned address mode: IPv6 is disabled on the interface, so its solicited-node groups are joined without MLD reports: a switch that snoops MLD will not forward neighbour solicitations for our address (enable IPv6 on it: sysctl net.ipv6.conf.IFACE.disable_ipv6=0)",
				"interface", x.if_, "groups", lo)
		}
	}
	wl.v4, wl.v6, ll.v4, ll.v6, ll.ll6 = netip.Addr{}, netip.Addr{}, netip.Addr{}, netip.Addr{}, netip.Addr{}
	wl.others, wl.left = nil, nil // owned: WANAddress alone
	if wa.Is4() {
		wl.v4 = wa
	} else {
		wl.v6 = wa
	}
	if la.Is4() {
		ll.v4 = la
	} else {
		ll.v6 = la
	}
	ll.all = append(ll.all, la)
	ll.nets = nil // LANAddress, the one source
	return nil
}

// listenKernel opens a UDP socket on each WAN address and port of ours
// (package kernelsock), so that the WireGuard datagrams the XDP program
// leaves to the kernel reach the fast path through Engine.ReceiveWAN
// instead of a "port unreachable": IP fragments, which the kernel
// reassembles (a peer whose path MTU is below its packets' size sends its
// datagrams fragmented), and datagrams with IPv4 options or IPv6 extension
// headers. Every other datagram the XDP program redirects, and the
// sockets never see it. A port another socket of the host holds is
// refused (kernelsock.Set.Listen: EADDRINUSE, the start fails as Linux's
// wg0 fails to come up); an address whose socket fails otherwise (still
// tentative) is logged and skipped (its fragments are then lost, counted
// by the kernel's UDP counters only). The datagrams go to the worker of their session (transport data of a
// session a worker has received: fastpath's Engine.ReceiveWAN), the rest
// are spread over the workers by source port; those
// the kernel drops at the sockets (a receive buffer full) are the
// engine's DropKernelSocketFull (Engine.CountKernelSocketDrops).
// Shared address mode only: in owned mode the kernel has no address to
// reassemble for, and the XDP program redirects the fragments to the
// engine, which reassembles them (fastpath's Config.Reassemble). g.wanMu
// held.
func (g *Gateway) listenKernel(addrs ...netip.Addr) error {
	g.kernel = kernelsock.New(g.log, g.nsHandle, g.cfg.SourcePorts, func(src, dst netip.AddrPort, msg []byte) {
		g.engine.ReceiveWAN(int(src.Port()), src, dst, msg)
	})
	if err := g.kernel.Listen(g.cfg.ListenPort, addrs...); err != nil {
		return &SettingError{Key: "ListenPort", Err: err}
	}
	// What the kernel drops at the sockets (their receive buffers full)
	// is the engine's kernel_socket_full.
	g.engine.CountKernelSocketDrops(g.kernel.Drops)
	return nil
}

// tunnelQueue picks the worker for a packet of the host's own tunnel
// traffic by its inner flow (fastpath.FlowHash), so that one flow stays on
// one worker and in order, as LAN traffic does on its NIC queue.
func tunnelQueue(pkt []byte) int { return int(fastpath.FlowHash(pkt) & 0x7fffffff) }

// Device is the control plane (peers, UAPI, stats).
func (g *Gateway) Device() *gateway.Device { return g.dev }

// Engine is the fast path.
func (g *Gateway) Engine() *fastpath.Engine { return g.engine }

// Ports returns the WAN and LAN ports.
func (g *Gateway) Ports() (wan, lan dataplane.Port) { return g.wan, g.lan }

// Close stops the gateway, removes the UAPI socket, detaches the XDP
// programs and frees everything, the frame memory of its ports included
// (none of their frames may be used after). Safe to call more than once.
func (g *Gateway) Close() error {
	var errs []error
	g.closeOnce.Do(func() {
		// Closing the exception TUN deletes it: no failure.
		g.failure.Closing()
		if g.addrDone != nil {
			close(g.addrDone)
			g.addrWG.Wait()
		}
		g.pmtu.Close()
		g.wanMu.Lock()
		if g.kernel != nil {
			g.kernel.Close() // its readers take no lock
		}
		g.wanMu.Unlock()
		if g.dp != nil {
			// Before the device: its sets waiting for their routes
			// (WaitApplied) return, and the routes not installed yet
			// are not (the exception TUN goes with its routes).
			g.dp.stopRoutes()
		}
		if g.dev != nil {
			errs = append(errs, g.dev.Close())
		}
		g.closeMLD() // before the engine: its leave goes through a worker
		if g.engine != nil {
			errs = append(errs, g.engine.Close())
		}
		g.offWAN.wait() // its line's netlink request, before nsHandle closes
		if g.routeSrc != nil {
			errs = append(errs, g.routeSrc.Close())
		}
		if g.routes != nil {
			// Before the exception TUN goes with its routes: the
			// notifications of tens of thousands of deletions would
			// overrun the subscription, for nothing.
			errs = append(errs, g.routes.Close())
		}
		if g.exc != nil {
			errs = append(errs, g.exc.Close())
			g.excWG.Wait()
		}
		if g.lan != nil {
			errs = append(errs, g.lan.Close())
		}
		if g.wan != nil {
			errs = append(errs, g.wan.Close())
		}
		for _, m := range g.groups {
			errs = append(errs, m.Close())
		}
		if g.umem != nil {
			// Mapped outside the Go heap (afxdp.UMEMConfig.Mapped):
			// the ports and the engine are done with its frames.
			errs = append(errs, g.umem.Free())
		}
		close(g.tableDone)
		g.linkWG.Wait()
		if g.wanNeigh != nil {
			errs = append(errs, g.wanNeigh.Close())
		}
		if g.lanNeigh != nil {
			errs = append(errs, g.lanNeigh.Close())
		}
		if g.nlHandle != nil {
			g.nlHandle.Close()
		}
		if g.dp != nil {
			g.dp.closeRouteSocket()
		}
		if g.nsHandle.IsOpen() {
			g.nsHandle.Close()
		}
	})
	return errors.Join(errs...)
}
