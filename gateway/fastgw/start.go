//go:build linux

package fastgw

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/wgpio/wgpio/arp"
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/afxdp"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/gateway/tunnelmtu"
	"github.com/wgpio/wgpio/internal/kernelsock"
	"github.com/wgpio/wgpio/internal/plural"
	"github.com/wgpio/wgpio/internal/srcaddr"
	"github.com/wgpio/wgpio/internal/threadns"
	"github.com/wgpio/wgpio/tundev"
)

// framesPerQueue is the UMEM's frames per queue unless Config.Frames says
// otherwise: each of the two ports' fill, RX, TX and completion rings can
// hold a ring's worth (4 × 2 × 2048), plus the four halves' caches
// (4 × 4 × CacheBatch: 1,024). With less, a burst that parks frames in one
// port's rings starves the other's fill ring (counted by the kernel as
// xsk_rx_fill_ring_empty_descs and dropped). 17,408 frames of 4 KiB, 68
// MiB: README.md, dist/wgpio.service and examples/gateway say so
// (TestFramesPerQueue).
const framesPerQueue = 4*2*afxdp.DefaultRingSize + 4*4*dataplane.CacheBatch

// memlockSmaller is how a user of this package makes the UMEM smaller,
// in its terms: the frames follow Config.Queues unless Config.Frames
// sets them (framesPerQueue a queue, 68 MiB).
const memlockSmaller = "use fewer frames (Config.Frames, by default 17,408 of 4 KiB a queue, 68 MiB) or fewer queues (Config.Queues)"

// Start opens the ports and runs the gateway, in steps:
//
//  1. withDefaults: check the configuration, fill in defaults;
//  2. readLinks: the WAN and LAN interfaces (index, MAC, addresses), and
//     the tunnel MTU against them (tunnelmtu.CheckWAN: a warning when
//     full-size tunnel packets leave as fragments; CheckFrames: a tunnel
//     MTU whose frames an AF_XDP port cannot take is a
//     *tunnelmtu.MTUError);
//  3. addressMode: next hops and neighbours, owned or shared with the kernel;
//     shared, a listen port another socket holds refused (kernelsock.Probe);
//  4. openPorts: the UMEM and the two AF_XDP ports with their XDP filters;
//  5. openException: the exception TUN for the gateway's own addresses;
//  6. startEngine: the fast path's workers;
//  7. startControlPlane: the WireGuard device, its peers and UAPI socket,
//     the kernel sockets for reassembled datagrams (shared mode; in owned
//     mode the engine reassembles them), and (owned mode) the
//     announcement of our addresses.
//
// On an error everything opened so far is closed.
func Start(cfg Config) (_ *Gateway, err error) {
	if cfg, err = cfg.withDefaults(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Gateway{cfg: cfg, log: log, tableDone: make(chan struct{}), nsHandle: netns.None()}
	defer func() {
		if err != nil {
			g.Close()
		}
	}()
	wl, ll, err := g.readLinks()
	if err != nil {
		return nil, err
	}
	wanRes, lanRes, err := g.addressMode(&wl, &ll)
	if err != nil {
		return nil, err
	}
	if !cfg.Owned {
		// Before the XDP program takes the port's datagrams from
		// whoever holds it (listenKernel refuses it again, later).
		if err := kernelsock.Probe(g.nsHandle, cfg.ListenPort, cfg.SourcePorts, append([]netip.Addr{wl.v4, wl.v6}, wl.others...)...); err != nil {
			return nil, fmt.Errorf("fastgw: %w", &SettingError{Key: "ListenPort", Err: err})
		}
	}
	if err := g.openPorts(wl, ll); err != nil {
		return nil, err
	}
	tunnelAddrs, err := g.openException()
	if err != nil {
		return nil, err
	}
	if err := g.startEngine(wl, ll, wanRes, lanRes, tunnelAddrs); err != nil {
		return nil, err
	}
	// Read before the UAPI serves: a set may move it from then on
	// (moveListenPort, under wanMu).
	port := g.cfg.ListenPort
	if err := g.startControlPlane(wl, wanRes); err != nil {
		return nil, err
	}
	g.watchMTU(wl)
	log.Info("gateway up", "name", g.cfg.Name, "listen_port", port, "wan_addr4", wl.v4, "wan_addr6", wl.v6, "peers", len(g.cfg.Peers))
	return g, nil
}

// leastMTU is the least tunnel MTU the gateway takes (what the MTU
// warnings may offer): the fast path's (fastpath.MinMTU, with IPv4 or
// IPv6 on the WAN alike, as Linux's wg0) or, with an IPv6 tunnel Address,
// IPv6's minimum (RFC 8200 §5, as the configuration requires).
func (c *Config) leastMTU() int {
	for _, a := range c.Addresses {
		if a.Addr().Is6() && !a.Addr().Is4In6() {
			return fastpath.MinMTU6
		}
	}
	return fastpath.MinMTU
}

// wanFamilies says which outer families the WAN has: those of the
// addresses of wl (the WAN's address device as read) and, in owned mode,
// the WANAddress's.
func (c *Config) wanFamilies(wl link) (v4, v6 bool) {
	return wl.v4.IsValid() || (c.Owned && c.WANAddress.Addr().Is4()), wl.v6.IsValid() || (c.Owned && c.WANAddress.Addr().Is6())
}

// wanLimits are the fast path's limits for the WAN MTU's warning
// (tunnelmtu.CheckWAN): leastMTU, and the fragments of an outer
// packet (fastpath.MaxFragments; more leave whole and are dropped at the
// WAN port).
func (c *Config) wanLimits() tunnelmtu.Limits {
	return tunnelmtu.Limits{Least: c.leastMTU(), MaxFragments: fastpath.MaxFragments, Dropped: "too_long at the WAN port"}
}

// DefaultListenPort is Config.ListenPort's default, WireGuard's usual port
// (wg-quick's examples, wireguard-go's and the kernel's documentation).
const DefaultListenPort = 51820

// withDefaults checks c and returns it with the defaults filled in
// (ListenPort DefaultListenPort, SourcePorts 1, MTU fastpath.DefaultMTU). It touches
// nothing outside.
func (c Config) withDefaults() (Config, error) {
	if c.Name == "" {
		return c, errors.New("fastgw: a name is required")
	}
	if c.WAN == "" || c.LAN == "" {
		return c, errors.New("fastgw: WAN and LAN interfaces are required")
	}
	if c.ListenPort == 0 {
		c.ListenPort = DefaultListenPort
	}
	if c.Queues < 0 || c.Queues > 256 {
		return c, fmt.Errorf("fastgw: %d queues, want 0 (all the device's) to 256", c.Queues)
	}
	if c.SourcePorts == 0 {
		c.SourcePorts = 1
	}
	if c.MTU == 0 {
		c.MTU = fastpath.DefaultMTU
	}
	if int(c.ListenPort)+int(c.SourcePorts)-1 > 65535 {
		return c, fmt.Errorf("fastgw: source ports %d-%d pass 65535", c.ListenPort, int(c.ListenPort)+int(c.SourcePorts)-1)
	}
	if c.Owned && (!c.WANAddress.IsValid() || !c.LANAddress.IsValid()) {
		return c, errors.New("fastgw: owned address mode needs WANAddress and LANAddress")
	}
	return c, nil
}

// readLinks opens the netlink handle and reads the WAN and LAN sides: the
// trunk each port opens and its VLAN (resolveSide; g.cfg.WAN and LAN become
// the trunks), the interfaces holding their addresses, and checks the
// tunnel MTU against the WAN's.
func (g *Gateway) readLinks() (wl, ll link, err error) {
	cfg := &g.cfg
	if g.nlHandle, err = netlink.NewHandle(); err != nil {
		return wl, ll, fmt.Errorf("fastgw: netlink: %w", err)
	}
	if g.wanSide, err = resolveSide(g.nlHandle, "WAN", cfg.WAN, cfg.WANVLAN, cfg.Owned); err != nil {
		return wl, ll, fmt.Errorf("fastgw: %w", err)
	}
	if g.lanSide, err = resolveSide(g.nlHandle, "LAN", cfg.LAN, cfg.LANVLAN, cfg.Owned); err != nil {
		return wl, ll, fmt.Errorf("fastgw: %w", err)
	}
	wanSide, lanSide := g.wanSide, g.lanSide
	if wanSide.trunk == lanSide.trunk {
		return wl, ll, fmt.Errorf("fastgw: %w", &SettingError{Key: "LAN",
			Err: fmt.Errorf("WAN and LAN are both on %s; they must be two interfaces (one XDP program per interface)", wanSide.trunk)})
	}
	cfg.WAN, cfg.LAN = wanSide.trunk, lanSide.trunk
	if wl, err = readLink(g.nlHandle, wanSide.addrDev); err != nil {
		return wl, ll, fmt.Errorf("fastgw: WAN: %w", err)
	}
	if ll, err = readLink(g.nlHandle, lanSide.addrDev); err != nil {
		return wl, ll, fmt.Errorf("fastgw: LAN: %w", err)
	}
	g.wanIfindex, g.lanIfindex = wl.index, ll.index
	g.wanName, g.lanName = wl.name, ll.name
	if mtuWarn := cfg.wanMTUWarning(g.nlHandle, wanSide, wl); mtuWarn != "" {
		g.log.Warn("WAN MTU", "problem", mtuWarn)
	}
	frameWarn, err := cfg.frameCheck(wanSide, lanSide, wl, ll)
	if err != nil {
		return wl, ll, fmt.Errorf("fastgw: %w", err)
	}
	if frameWarn != "" {
		g.log.Warn("LAN MTU", "problem", frameWarn)
	}
	return wl, ll, nil
}

// wanMTUWarning is the warning of the tunnel MTU against the WAN's
// (tunnelmtu.CheckWAN; "" when it fits): the least MTU of the WAN's
// address device (wl, as read) and its trunk (s), for the WAN's outer
// families. Start logs it as "WAN MTU" (readLinks); CheckWANMTU returns
// it.
func (c *Config) wanMTUWarning(h *netlink.Handle, s side, wl link) string {
	wanMTU, wanMTUDev := wl.mtu, s.addrDev
	if s.addrDev != s.trunk {
		if t, err := h.LinkByName(s.trunk); err == nil && t.Attrs().MTU < wanMTU {
			wanMTU, wanMTUDev = t.Attrs().MTU, s.trunk
		}
	}
	v4, v6 := c.wanFamilies(wl)
	return tunnelmtu.CheckWAN(c.MTU, wanMTU, wanMTUDev, s.vid, v4, v6, c.wanLimits())
}

// frameCheck is the check of the tunnel MTU's frames against an AF_XDP
// frame (tunnelmtu.CheckFrames): an error for WAN frames no frame holds,
// and the warning Start logs as "LAN MTU" for a LAN (ll, of side ls)
// whose full frames are longer ("" when they fit), for the WAN's (wl, of
// side ws) outer families.
func (c *Config) frameCheck(ws, ls side, wl, ll link) (string, error) {
	v4, v6 := c.wanFamilies(wl)
	return tunnelmtu.CheckFrames(c.MTU, ll.mtu, ls.addrDev, ws.vid, ls.vid,
		v4, v6, afxdp.MaxFrameLen(dataplane.DefaultFrameSize), true)
}

// CheckMTU reads c's WAN and LAN (WAN, WANVLAN, LAN, LANVLAN, and in owned
// mode WANAddress; the tunnel MTU is c.MTU, default fastpath.DefaultMTU;
// Addresses set the least) in the caller's network namespace as Start
// does, and returns the warnings Start would log as "WAN MTU" (full-size
// tunnel packets leave as IP fragments) and "LAN MTU" (the LAN's full
// frames are longer than an AF_XDP frame), "" for none: `wgpio check
// -system` gives them before a start. An error says which interface could
// not be read, or why the tunnel MTU's frames cannot be sent (Start fails
// on it too).
func CheckMTU(c Config) (wan, lan string, err error) {
	if c.MTU == 0 {
		c.MTU = fastpath.DefaultMTU
	}
	h, err := netlink.NewHandle()
	if err != nil {
		return "", "", fmt.Errorf("fastgw: netlink: %w", err)
	}
	defer h.Close()
	var sides [2]side
	var links [2]link
	for i, x := range []struct {
		name, dev string
		vid       uint16
	}{{"WAN", c.WAN, c.WANVLAN}, {"LAN", c.LAN, c.LANVLAN}} {
		if sides[i], err = resolveSide(h, x.name, x.dev, x.vid, c.Owned); err != nil {
			return "", "", fmt.Errorf("fastgw: %w", err)
		}
		if links[i], err = readLink(h, sides[i].addrDev); err != nil {
			return "", "", fmt.Errorf("fastgw: %s: %w", x.name, err)
		}
	}
	lan, err = c.frameCheck(sides[0], sides[1], links[0], links[1])
	if err != nil {
		return "", "", fmt.Errorf("fastgw: %w", err)
	}
	return c.wanMTUWarning(h, sides[0], links[0]), lan, nil
}

// addressMode sets up where next hops and neighbours come from: our own
// tables in owned mode (ownedMode), the kernel's routes and neighbours in
// shared mode (sharedMode). wl and ll get the addresses the gateway uses.
func (g *Gateway) addressMode(wl, ll *link) (wanRes, lanRes *resolver, err error) {
	var wanMAC, lanMAC [6]byte
	copy(wanMAC[:], wl.mac)
	copy(lanMAC[:], ll.mac)
	if g.cfg.Owned {
		if err := g.ownedMode(wl, ll, wanMAC, lanMAC); err != nil {
			return nil, nil, err
		}
		wanRes = &resolver{routes: g.static, table: g.wanTable, ifindex: wl.index}
		lanRes = &resolver{routes: g.static, table: g.lanTable, ifindex: ll.index, inner: true}
	} else {
		if err := g.sharedMode(*wl, *ll); err != nil {
			return nil, nil, err
		}
		wanRes = &resolver{routes: g.routes, table: g.wanTable, ifindex: wl.index}
		lanRes = &resolver{routes: g.routes, table: g.lanTable, ifindex: ll.index, inner: true}
	}
	g.offWAN = &offWANLog{log: g.log, wan: wl.name, name: g.linkName}
	wanRes.offWAN = g.offWAN
	go g.wanTable.Run(g.tableDone, 0)
	go g.lanTable.Run(g.tableDone, 0)
	if g.cfg.Owned {
		go g.watchConflicts()
	}
	return wanRes, lanRes, nil
}

// NoLANAddress is the warning Start logs of a shared-mode LAN without an
// IPv4 or a global IPv6 address (srcaddr.Choose's), with the interface
// and the fix (`wgpio check -system` gives it before a start): the LAN's
// hosts have no router address to send to (the kernel answers ARP and
// NDP for its own addresses only), the kernel has no route toward them, so decrypted
// packets for them take its other routes (to the host through the
// exception TUN, or off_lan), and ICMP errors toward them have no source.
const NoLANAddress = "LAN has no IPv4 or global IPv6 address: its hosts find no router address here (the kernel answers ARP and NDP for its own addresses only), " +
	"and the kernel no route toward them, so what the tunnel sends them is handed to the host (\"to host\" in wgpio stats) or dropped (off_lan), " +
	"and no ICMP error reaches them; add the address the LAN's hosts route through (followed at once)"

// sharedMode follows the kernel's routes and neighbours through netlink.
func (g *Gateway) sharedMode(wl, ll link) (err error) {
	if !wl.v4.IsValid() && !wl.v6.IsValid() {
		return fmt.Errorf("fastgw: %w", &SettingError{Key: "WAN",
			Err: fmt.Errorf("WAN %s has no IP address (shared address mode reads it from the kernel: ip addr add ... dev %s)", g.wanSide.addrDev, g.wanSide.addrDev)})
	}
	if !ll.v4.IsValid() && !ll.v6.IsValid() {
		// Not refused: an address added later is followed
		// (lanAddressesChanged). Without one nothing crossed, unlogged.
		g.log.Warn(NoLANAddress, "interface", g.lanSide.addrDev, "fix", "ip addr add ADDRESS/PREFIX dev "+g.lanSide.addrDev)
	}
	// When Start runs on a thread moved into another namespace than the
	// process's (an embedder's setns, as the demo and the tests do), name
	// the namespace explicitly: the readers re-subscribe from their own
	// goroutines after an overflow (an ARP storm), and those may run on
	// threads of the process's namespace. (Naming it takes setns, so
	// CAP_SYS_ADMIN: not done when all threads share one namespace, as
	// under `ip netns exec` or systemd.)
	if g.nsHandle, err = threadns.Moved(); err != nil {
		return fmt.Errorf("fastgw: get network namespace: %w", err)
	}
	onErr := func(err error) { g.log.Warn("following the kernel's routes and neighbours", "err", err) }
	if g.routes, err = arp.NewKernelRoutes(arp.KernelOptions{Namespace: g.nsHandle, ErrorCallback: onErr}); err != nil {
		return fmt.Errorf("fastgw: %w", err)
	}
	if g.routeSrc, err = srcaddr.NewRoutes(g.nsHandle, srcaddr.DefaultRoutes, onErr); err != nil {
		return fmt.Errorf("fastgw: %w", err)
	}
	g.wanTable = arp.NewTable(arp.Config{Prober: &arp.KernelProber{Handle: g.nlHandle, LinkIndex: wl.index}})
	g.lanTable = arp.NewTable(arp.Config{Prober: &arp.KernelProber{Handle: g.nlHandle, LinkIndex: ll.index}})
	if g.wanNeigh, err = arp.NewKernelNeighbours(g.wanTable, arp.KernelOptions{Namespace: g.nsHandle, LinkIndex: wl.index, ErrorCallback: onErr}); err != nil {
		return fmt.Errorf("fastgw: %w", err)
	}
	if g.lanNeigh, err = arp.NewKernelNeighbours(g.lanTable, arp.KernelOptions{Namespace: g.nsHandle, LinkIndex: ll.index, ErrorCallback: onErr}); err != nil {
		return fmt.Errorf("fastgw: %w", err)
	}
	return nil
}

// queueCount decides the number of workers from the asked count (0: all)
// and the RX queue counts (0: unknown) of the devices wan and lan. warn, if
// not empty, is worth logging.
func queueCount(asked, wq, lq int, wan, lan string) (n int, warn string, err error) {
	switch {
	case asked == 0:
		n = max(1, min(wq, lq))
		if wq != lq && wq > 0 && lq > 0 {
			warn = "WAN and LAN have different numbers of RX queues; frames on the queues above the smaller count go to the kernel (equalise with ethtool -L)"
		}
		return n, warn, nil
	case (wq > 0 && asked > wq) || (lq > 0 && asked > lq):
		return 0, "", fmt.Errorf("fastgw: %d queues asked, but %s has %s and %s has %d (ask for fewer, or add queues with ethtool -L DEV combined N; on veth: ethtool -L DEV rx N tx N)",
			asked, wan, plural.Count(wq, "RX queue", "RX queues"), lan, lq)
	case asked < wq || asked < lq:
		warn = "fewer workers than RX queues: frames arriving on the other queues go to the kernel, not the tunnel (set Queues to the device's count, or reduce it with ethtool -L DEV combined N; on veth: rx N tx N)"
	}
	return asked, warn, nil
}

// haveSharedUMEM is afxdp's probe; tests force its failure.
var haveSharedUMEM = afxdp.HaveSharedUMEM

// openPorts sizes the queues and the UMEM and opens the WAN and LAN ports
// on it (LAN RX frames go out on WAN TX without a copy).
func (g *Gateway) openPorts(wl, ll link) (err error) {
	defer func() { err = afxdp.MemlockInTermsOf(err, memlockSmaller) }()
	cfg := &g.cfg
	wq, lq := afxdp.DeviceQueues(cfg.WAN), afxdp.DeviceQueues(cfg.LAN)
	n, warn, err := queueCount(cfg.Queues, wq, lq, cfg.WAN, cfg.LAN)
	if err != nil {
		return err
	}
	if warn != "" {
		g.log.Warn(warn, "wan", cfg.WAN, "wan_queues", wq, "lan", cfg.LAN, "lan_queues", lq, "workers", n)
	}
	cfg.Queues = n
	frames := cfg.Frames
	if frames == 0 {
		frames = framesPerQueue * cfg.Queues
	}
	// One UMEM for both ports, so that a frame goes from one to the
	// other without a copy, where the kernel can share it (Linux 5.10);
	// else a private one each, half the frames apiece.
	private := 0
	if err := haveSharedUMEM(); errors.Is(err, dataplane.ErrNotSupported) {
		g.log.Warn("WAN and LAN get a UMEM each: every frame between them is copied", "err", err)
		private = frames / 2
	} else if g.umem, err = afxdp.NewUMEM(afxdp.UMEMConfig{NumFrames: frames, Mapped: true}); err != nil {
		return fmt.Errorf("fastgw: %w", err)
	}
	if g.wan, err = afxdp.Open(cfg.WAN, afxdp.Config{Queues: cfg.Queues, UMEM: g.umem, NumFrames: private, Attach: cfg.Attach, Journal: cfg.Journal, Filter: wanFilter(*cfg, wl.v4, wl.v6, g.wanSide.vid, wl.others...)}); err != nil {
		return fmt.Errorf("fastgw: WAN: %w", err)
	}
	g.wanAll = wl.all
	host, left := lanHostAddrs(*cfg, ll.all, wl.all)
	g.warnHostAddrsLeft(left)
	if g.lan, err = afxdp.Open(cfg.LAN, afxdp.Config{Queues: cfg.Queues, UMEM: g.umem, NumFrames: private, Attach: cfg.Attach, Journal: cfg.Journal, Filter: lanFilter(*cfg, host, g.lanSide.vid)}); err != nil {
		return fmt.Errorf("fastgw: LAN: %w", err)
	}
	g.log.Info("ports open", "wan", cfg.WAN, "lan", cfg.LAN, "queues", cfg.Queues,
		"wan_native_xdp", g.wan.NativeXDP(), "lan_native_xdp", g.lan.NativeXDP(), "shared_umem", g.umem != nil && g.lan.SharedUMEM() && g.wan.SharedUMEM(),
		"wan_vlan", g.wanSide.vid, "lan_vlan", g.lanSide.vid)
	g.wan.LogFallbacks(g.log, "WAN")
	g.lan.LogFallbacks(g.log, "LAN")
	g.wan.LogStrippedTags(g.log, "WAN")
	g.lan.LogStrippedTags(g.log, "LAN")
	// The LAN's hosts' TCP and UDP cross the tunnel as they are; the
	// WAN's carry WireGuard, whose outer UDP checksum nothing checks.
	g.lan.LogPartialChecksums(g.log, "LAN")
	return nil
}

// openException opens the exception TUN with the gateway's own tunnel
// addresses, if it has any, and returns them.
func (g *Gateway) openException() (addrs []netip.Addr, err error) {
	cfg := g.cfg
	if len(cfg.Addresses) == 0 {
		return nil, nil
	}
	// One writer per worker (the LAN's queues): a worker's burst for the
	// host goes out in one call, its flows coalesced (tundev.OffloadTUN).
	if g.exc, err = tundev.OpenOffloadTUN(cfg.Name, g.lan.NumQueues(), cfg.MTU); err != nil {
		return nil, fmt.Errorf("fastgw: exception TUN: %w", err)
	}
	tl, err := g.nlHandle.LinkByName(cfg.Name)
	if err != nil {
		return nil, fmt.Errorf("fastgw: exception TUN: %w", err)
	}
	if err := g.addExceptionAddrs(tl); err != nil {
		return nil, err
	}
	// And the tunnel subnets' directed broadcasts, the host's as the LAN's
	// (srcaddr.AppendBroadcasts): a peer's packet to one is delivered to
	// the host, as by Linux's broadcast route on wg0, and the host's own
	// that no peer takes is not answered host unreachable (sendInner).
	nl := make([]netlink.Addr, 0, len(cfg.Addresses))
	for _, p := range cfg.Addresses {
		addrs = append(addrs, p.Addr())
		nl = append(nl, netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}})
	}
	return srcaddr.AppendBroadcasts(addrs, nl), nil
}

// startEngine makes the fast path over the ports and the dataplane the
// control plane drives (the engine plus the LAN prefix map and the routes
// into the exception TUN). The workers start with the control plane.
func (g *Gateway) startEngine(wl, ll link, wanRes, lanRes *resolver, tunnelAddrs []netip.Addr) (err error) {
	cfg := g.cfg
	g.lanAddrs = ll.all
	ecfg := fastpath.Config{
		LAN: g.lan, WAN: g.wan, ListenPort: cfg.ListenPort,
		WANAddr4: wl.v4, WANAddr6: wl.v6, WANAddrs: wl.others, LANAddr4: ll.v4, LANAddr6: ll.v6, LANLinkLocal6: ll.ll6,
		MTU: cfg.MTU, WANResolver: wanRes, LANResolver: lanRes, WANVLAN: g.wanSide.vid, LANVLAN: g.lanSide.vid,
		TunnelAddrs: tunnelAddrs, HostAddrs: append(slices.Clone(ll.all), wl.all...), CPUs: cfg.CPUs, SourcePorts: cfg.SourcePorts, IPv4UDPChecksum: cfg.IPv4UDPChecksum,
		ICMPRate: cfg.ICMPRate, ICMPBurst: cfg.ICMPBurst, ICMPDestInterval: cfg.ICMPDestInterval, MSSClamp: cfg.MSSClamp,
		ReplayWindow: cfg.ReplayWindow, Reassemble: cfg.Owned,
	}
	if cfg.Owned {
		ecfg.WANNeighbours = responderHandler{g.wanResp}
		ecfg.LANNeighbours = responderHandler{g.lanResp}
	}
	if g.exc != nil {
		exc := g.exc
		ecfg.Exception = func(queue int, pkts [][]byte) {
			// One call per burst, through the worker's own writer
			// (queue), which never waits: a packet the kernel refuses
			// is dropped and counted by the TUN (ExceptionDrops).
			if exc.WriteBatch(queue, pkts) < len(pkts) {
				g.exceptionFailed()
			}
		}
	}
	if g.engine, err = fastpath.New(ecfg); err != nil {
		return fmt.Errorf("fastgw: %w", err)
	}
	// ICMP errors toward a LAN host come from our address of its subnet
	// (in owned mode LANAddress alone: ll holds no subnets then).
	g.lanNets = ll.nets
	g.engine.SetLANSubnets(ll.nets)
	g.dp = newDataplane(g.engine, g.lan, cmp.Or(cfg.LANPrefixCapacity, defaultLANPrefixCapacity), g.log, g.nlHandle)
	if g.exc != nil {
		if g.dp.excLink, err = g.nlHandle.LinkByName(cfg.Name); err != nil {
			return fmt.Errorf("fastgw: exception TUN: %w", err)
		}
		// In the namespace of g.nlHandle, as its own sockets.
		if err := g.inNamespace(func() (err error) { g.dp.rs, err = openRouteSocket(); return err }); err != nil {
			return fmt.Errorf("fastgw: exception TUN's routes: %w", err)
		}
		if g.routes != nil {
			// Its routes are ours, one per allowed-IPs prefix: following
			// them would list the kernel's whole table at every change.
			g.routes.Ignore(g.dp.excLink.Attrs().Index)
		}
		if g.routeSrc != nil {
			g.routeSrc.Ignore(g.dp.excLink.Attrs().Index)
		}
	}
	return nil
}

// startControlPlane makes the WireGuard device over the engine, adds the
// configured peers, starts the workers and the device (handshakes, timers,
// UAPI socket), the exception reader, the kernel sockets for reassembled
// datagrams (shared mode) and announces our addresses (owned mode).
func (g *Gateway) startControlPlane(wl link, wanRes *resolver) (err error) {
	cfg := g.cfg
	var wanMAC [6]byte
	copy(wanMAC[:], wl.mac)
	opts := gateway.Options{
		Name: cfg.Name, PrivateKey: cfg.PrivateKey, ListenPort: cfg.ListenPort, FixedListenPort: true,
		Dataplane: g.dp, Logger: g.log, Resolve: wanRes.Resolve, Known: wanRes.Known, Routed: wanRes.HasRoute,
		ResolveChanges: wanRes.Changes,
		WANMAC:         wanMAC, WANAddr4: wl.v4, WANAddr6: wl.v6, WANInterface: cfg.WAN, WANIndex: wl.index,
		SetListenPort: g.moveListenPort, HandshakeWorkers: cfg.HandshakeWorkers,
	}
	if g.routeSrc != nil {
		opts.Source = g.routeSrc
	}
	g.dev, err = gateway.New(opts)
	if err != nil {
		return fmt.Errorf("fastgw: %w", err)
	}
	if err := g.dev.AddPeers(cfg.Peers); err != nil {
		return fmt.Errorf("fastgw: add peers: %w", err)
	}
	g.engine.Start()
	if err := g.dev.Start(); err != nil {
		return fmt.Errorf("fastgw: %w", err)
	}
	if g.exc != nil {
		g.excWG.Add(1)
		go g.readException()
		if err := g.watchException(); err != nil {
			return fmt.Errorf("fastgw: follow the exception TUN: %w", err)
		}
	}
	g.wanMu.Lock() // the UAPI serves: a listen port move reads them
	g.wanV4, g.wanV6, g.wanOthers = wl.v4, wl.v6, wl.others
	g.wanMu.Unlock()
	g.openPathMTU(wl.index)
	if !cfg.Owned {
		g.warnWANLeft(wl.left)
		g.wanMu.Lock()
		err := g.listenKernel(g.wanAddrs()...)
		g.wanMu.Unlock()
		if err != nil {
			return fmt.Errorf("fastgw: %w", err)
		}
		g.addrDone = make(chan struct{})
		g.followSources(g.addrDone)
		if err := g.followAddresses(g.addrDone); err != nil {
			return fmt.Errorf("fastgw: follow the interfaces' addresses: %w", err)
		}
		return nil
	}
	// Tell the links where our addresses are (RFC 5227 announcement).
	for _, x := range []struct {
		r   *arp.Responder
		lan bool
	}{{g.wanResp, false}, {g.lanResp, true}} {
		if err := x.r.Announce(func(frame []byte) error {
			g.engine.SendFrame(x.lan, 0, frame)
			return nil
		}); err != nil {
			g.log.Warn("announce owned address", "err", err)
		}
	}
	// On a VLAN: announce the solicited-node groups with MLD.
	for _, h := range g.mld {
		h.Start()
	}
	return nil
}

// watchMTU follows the WAN MTU (vlan.go), on the address device and the
// trunk under it, and the LAN port's MTU (lanmtu.go), through
// followLinks (linkwatch.go).
func (g *Gateway) watchMTU(wl link) {
	if err := g.watchLANMTU(); err != nil {
		g.log.Warn("live LAN MTU changes will not be followed", "err", err)
	}
	mtus := map[int]int{wl.index: wl.mtu}
	least, leastDev := wl.mtu, g.wanSide.addrDev
	if t, err := g.nlHandle.LinkByName(g.wanSide.trunk); err == nil && t.Attrs().Index != wl.index {
		mtus[t.Attrs().Index] = t.Attrs().MTU
		if t.Attrs().MTU < least {
			least, leastDev = t.Attrs().MTU, g.wanSide.trunk
		}
	}
	// From the start, the least of the two bounds the port and the outer
	// packets (a VLAN device below its trunk's MTU: the port opened at
	// the trunk's).
	g.setWANMTU(leastDev, least)
	if err := g.watchWANMTU(g.nsHandle, g.wanSide, mtus, g.tableDone); err != nil {
		g.log.Warn("live WAN MTU changes will not be checked", "err", err)
	}
}
