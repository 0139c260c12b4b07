//go:build linux

package compatgw

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/gaissmai/bart"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/device"

	"github.com/wgpio/wgpio/arp"
	"github.com/wgpio/wgpio/bind"
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/afxdp"
	"github.com/wgpio/wgpio/gateway/tunnelmtu"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/acceptloop"
	"github.com/wgpio/wgpio/internal/allowedips"
	"github.com/wgpio/wgpio/internal/icmprate"
	"github.com/wgpio/wgpio/internal/kernelsock"
	"github.com/wgpio/wgpio/internal/srcaddr"
	"github.com/wgpio/wgpio/internal/threadns"
	"github.com/wgpio/wgpio/internal/wglog"
	"github.com/wgpio/wgpio/tundev"
)

// Defaults of Config.
const (
	DefaultMTU          = 1420
	DefaultSyncInterval = time.Second
)

// Config configures a compat-mode gateway.
type Config struct {
	// Name names the UAPI socket (/var/run/wireguard/<Name>.sock) and the
	// PortDevice. Required.
	Name string
	// UAPI is wireguard-go's configuration: the body of a UAPI "set=1"
	// operation (private key, listen port, peers), as config.File.UAPI
	// writes it. Its listen_port must be ListenPort.
	UAPI string
	// ListenPort is the WireGuard UDP port on the WAN addresses, which the
	// WAN's XDP program redirects. Required.
	ListenPort uint16
	// WAN and LAN are the interface names (encrypted and plaintext side).
	// Required.
	WAN, LAN string
	// Queues is the number of NIC queues opened on each side (default: all
	// of the interface's).
	Queues int
	// Attach selects native or generic XDP (default: native, else generic).
	Attach afxdp.AttachMode
	// MTU is the tunnel MTU (default DefaultMTU). Start refuses one whose
	// full-size packets with their outer headers the WAN MTU or an AF_XDP
	// frame cannot carry (checkMTU).
	MTU int
	// SyncInterval is how often at most the LAN's XDP filter is brought in
	// step with wireguard-go's allowed IPs for changes made from Go
	// (Device().IpcSet; default DefaultSyncInterval); a sync reads the
	// whole configuration (about 8 µs a peer), so with many peers it runs
	// less often (followPrefixes). A change through the UAPI socket (wg(8))
	// or Gateway.IpcSet is in the filter before its reply, by the
	// difference it made (setOperation); one made from Go meanwhile is
	// not, until the sync. A sync also marks the peers without an
	// endpoint, whose LAN packets are answered host unreachable
	// (noendpoint.go): an allowed IP moved from such a peer to another
	// from Go is answered so until the sync; use Gateway.IpcSet.
	SyncInterval time.Duration
	// Logger receives wireguard-go's log (debug and warnings) and the
	// filter's errors (default: discard).
	Logger *slog.Logger
	// TunnelAddrs are the gateway's tunnel addresses (the configuration's
	// Address): the first of each family is the source of the time
	// exceeded errors the LAN's PortDevice sends into the tunnel
	// (tundev.PortConfig.TunnelSource4/6); without one, the LAN address.
	TunnelAddrs []netip.Addr
	// TunnelPrefixes are the tunnel addresses with their prefix lengths
	// (the configuration's Address as written: 10.8.0.1/24). The LAN's
	// packets to their networks that no peer's allowed IPs hold are
	// dropped (no_route) and answered host unreachable, as Linux's wg0,
	// which holds the network's route, answers them; without them the
	// host routed such packets by its other routes (a default route out
	// of the WAN, in cleartext). A tunnel address the host holds at Start
	// (on lo) is left to it (tunnelnets.go).
	TunnelPrefixes []netip.Prefix
	// MSSClamp clamps the MSS of TCP SYNs crossing the gateway either way:
	// MSSClampAuto (the tunnel MTU − 40 over IPv4, − 60 over IPv6), a size
	// in bytes, or 0 (off).
	MSSClamp int
	// ICMPRate, ICMPBurst and ICMPDestInterval limit the ICMP errors the
	// PortDevice sends (time exceeded, host unreachable, parameter
	// problem, ICMPv6 beyond scope and no route; fragmentation needed /
	// packet too big are never limited, as Linux's icmp_ratemask exempts
	// them), as Linux's icmp_msgs_per_sec, icmp_msgs_burst and
	// icmp_ratelimit (tundev.ICMPRate: zero takes Linux's default,
	// negative turns the limit off).
	ICMPRate, ICMPBurst int
	ICMPDestInterval    time.Duration
	// Journal keeps the ports' changes of the interfaces' RX VLAN
	// offload while they last (afxdp.Config.Journal; nil: none kept).
	Journal afxdp.OffloadJournal
}

// MSSClampAuto is Config.MSSClamp's value for the tunnel MTU's MSS.
const MSSClampAuto = -1

// routerConfig sets the forwarding fields of pc (tundev's router.go) from
// cfg, whose MTU is set.
func routerConfig(pc *tundev.PortConfig, cfg *Config) {
	for _, a := range cfg.TunnelAddrs {
		switch a = a.Unmap(); {
		case a.Is4() && !pc.TunnelSource4.IsValid():
			pc.TunnelSource4 = a
		case a.Is6() && !pc.TunnelSource6.IsValid():
			pc.TunnelSource6 = a
		}
	}
	switch {
	case cfg.MSSClamp == MSSClampAuto:
		pc.MSSClamp4, pc.MSSClamp6 = header.MSSForMTU(cfg.MTU, false), header.MSSForMTU(cfg.MTU, true)
	case cfg.MSSClamp > 0:
		pc.MSSClamp4, pc.MSSClamp6 = uint16(min(cfg.MSSClamp, 0xffff)), uint16(min(cfg.MSSClamp, 0xffff))
	}
	pc.ICMPRate = icmprate.Config{Rate: cfg.ICMPRate, Burst: cfg.ICMPBurst, DestInterval: cfg.ICMPDestInterval}
}

// Stats are the counters of compat mode: wgpio's two sides of stock
// wireguard-go.
type Stats struct {
	Bind bind.Stats       `json:"bind"`
	LAN  tundev.PortStats `json:"lan"`
	// WANQueues and LANQueues are the AF_XDP ports' own counters, queue
	// by queue: among them (Backend, dataplane.LossCounters) the frames
	// the kernel dropped at a queue's socket before the bind or tundev
	// read them, e.g. for a full RX ring while wireguard-go lagged.
	WANQueues []dataplane.Stats `json:"wan_queues"`
	LANQueues []dataplane.Stats `json:"lan_queues"`
	// UAPIRefused counts the connections to the UAPI socket refused,
	// closed unserved (answered EAGAIN first, uapiserve.Refuse, unless
	// uapiserve.MaxConns refusals were being answered already): over
	// uapiserve.MaxConns served at once, they waited uapiserve.SlotWait
	// for a place, or found as many waiting already (serveUAPI).
	UAPIRefused uint64 `json:"uapi_connections_refused"`
}

// Gateway is stock wireguard-go running on wgpio ports. Its methods are
// safe for concurrent use.
type Gateway struct {
	dev      *device.Device
	bind     *bind.Bind
	lanDev   *tundev.PortDevice
	wan, lan *afxdp.Port
	log      *slog.Logger
	// wanMu guards wanAddrs, listenPort and kernel: the WAN's addresses
	// the bind listens on, the port (addrs.go, listen.go) and the kernel
	// sockets on them (kernelsock.go).
	wanMu      sync.Mutex
	wanAddrs   []netip.Addr
	listenPort uint16
	kernel     *kernelsock.Set

	// lanAddrs are the LAN's addresses in its XDP filter's host
	// addresses, and lanAddressed whether one of them is an IPv4 or a
	// global IPv6 address (noteLANAddress); the address follower's alone
	// once Start returns.
	lanAddrs     []netip.Addr
	lanAddressed bool
	// tunnelAddrs (Config.TunnelAddrs), lanAddrs and wanAll (the WAN's
	// iface.all) are the host's own addresses the LAN device drops
	// decrypted packets to (publishHostAddrs); wanAll is the address
	// follower's alone once Start returns.
	tunnelAddrs []netip.Addr
	wanAll      []netip.Addr
	// tunnelNets are the networks of Config.TunnelPrefixes, kept in the
	// LAN filter (keepTunnelNets); tunnelHeld the tunnel addresses the
	// host held at Start, the LAN filter's host addresses with the LAN's
	// and the WAN's (lanFilterHosts). Set before Start returns.
	tunnelNets []netip.Prefix
	tunnelHeld []netip.Addr

	nsHandle netns.NsHandle  // the namespace Start ran in, if not the process's (threadns.Moved)
	routeSrc *srcaddr.Routes // the kernel's source toward each configured endpoint (bind.Config.Source)
	closers  []func() error
	stop     chan struct{}
	wg       sync.WaitGroup
	// uapiConns serves the UAPI socket's connections (serveUAPI); set
	// before Start returns.
	uapiConns *acceptloop.Server
	// linkWG waits for the LAN and WAN MTU followers (lanmtu.go,
	// wanmtu.go), which stop ends; their netlink handles' closers wait
	// for it.
	linkWG    sync.WaitGroup
	closeOnce sync.Once
	// gone is the gateway's failure: the WAN or LAN interface deleted
	// (linkgone.go).
	gone goneState

	// filter is the LAN port's prefix match (lan, or a test's).
	filter prefixFilter

	// noRoute is told the kept prefixes (lanDev, or a test's; nil: none
	// told).
	noRoute noRouteSetter
	// capacity is how many prefixes of each family the LAN filter holds
	// (afxdp.DefaultPrefixCapacity).
	capacity int

	mu       sync.Mutex
	prefixes map[netip.Prefix]bool // in the LAN filter; guarded by mu
	// kept are the prefixes of prefixes that left wireguard-go's allowed
	// IPs and stay in the LAN filter (syncPrefixes), so that the LAN's
	// traffic to them reaches the PortDevice, which drops it as no_route,
	// rather than the host's other routes; keptN and inFilter count them
	// and prefixes per family, keptTable holds them too, for the kept
	// prefixes inside a prefix (followSet) and those holding one
	// (publishKept). Guarded by mu.
	kept      map[netip.Prefix]struct{}
	keptN     [2]int
	inFilter  [2]int
	keptTable *bart.Table[struct{}]
	// keptChanges are the prefixes marked or unmarked kept since the
	// sync or set began, for followSet's update of the PortDevice.
	// allowedTable holds the allowed IPs (g.model's), for the allowed IPs
	// inside a prefix whose kept state changed; pass are those inside a
	// kept prefix, as the PortDevice was last told (publishKept). Guarded
	// by mu.
	keptChanges  []netip.Prefix
	allowedTable *bart.Table[struct{}]
	pass         map[netip.Prefix]struct{}
	// model is wireguard-go's peers and allowed IPs as the last
	// successful sync read them, changed since by the sets followed
	// (followSet), the LAN filter in step with it; nil after a failed
	// sync or set, when the next set syncs whole. Guarded by mu.
	model *allowedips.Peers
	// syncs counts the whole reads of the configuration (syncLocked) so
	// far. Guarded by mu.
	syncs int
	// noEndpoint are the peers without an endpoint as the LAN device was
	// last told (publishNoEndpoint), and noEndpointOwners the digest of
	// the allowed IPs it was told with them (ownersSum; 0 while none);
	// nil: the device told nothing since start or since a set changed
	// the allowed IPs. Guarded by mu.
	noEndpoint       map[device.NoisePublicKey]struct{}
	noEndpointOwners uint64
}

func (cfg *Config) check() error {
	switch {
	case cfg.Name == "":
		return errors.New("compatgw: Name is required")
	case cfg.WAN == "" || cfg.LAN == "":
		return errors.New("compatgw: WAN and LAN are required")
	case cfg.ListenPort == 0:
		return errors.New("compatgw: ListenPort is required (the XDP filter matches it)")
	}
	if cfg.MTU == 0 {
		cfg.MTU = DefaultMTU
	}
	if cfg.SyncInterval <= 0 {
		cfg.SyncInterval = DefaultSyncInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// ErrNoWANAddress: the WAN interface has no IP address (Config.WAN's
// setting; shared address mode sends from the kernel's). Start returns it
// inside a *SettingError of Key "WAN".
var ErrNoWANAddress = errors.New("no IP address")

// SettingError is a Start error that one setting of Config caused, as
// fastgw.SettingError is fast-path mode's: Key names it as the [WGPIO]
// section of wgpio's configuration file does ("WAN", "LAN"), or
// "ListenPort" ([Interface]: a port another socket of the host holds,
// EADDRINUSE), so that a caller can point at the line that set it. Err
// says what is wrong and how to fix it (it wraps afxdp.ErrNoSuchInterface,
// afxdp.ErrNotEthernet, ErrNoWANAddress or EADDRINUSE).
type SettingError struct {
	Key string
	Err error
}

func (e *SettingError) Error() string { return e.Err.Error() }
func (e *SettingError) Unwrap() error { return e.Err }

// Start opens the two ports, runs wireguard-go on them configured with
// cfg.UAPI, serves its UAPI socket and keeps the LAN filter in step with
// its allowed IPs. Close undoes all of it; on error nothing is left. Errors
// start with "compatgw: " and wrap the afxdp errors (ErrNoSuchInterface,
// ErrXDPUnsupported, ErrMemlock, ...), a *SettingError for a WAN or LAN
// that is missing, not Ethernet or (the WAN) without an address, or, for
// a tunnel MTU that does not fit, a *tunnelmtu.MTUError; a listen port
// another socket holds is a *SettingError of Key "ListenPort".
func Start(cfg Config) (_ *Gateway, err error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	g := newGateway(cfg.Logger)
	defer func() {
		if err != nil {
			g.Close()
			err = fmt.Errorf("compatgw: %w", err)
		}
	}()
	if g.nsHandle, err = threadns.Moved(); err != nil {
		return nil, fmt.Errorf("network namespace: %w", err)
	}
	g.closers = append(g.closers, func() error {
		if g.nsHandle.IsOpen() {
			g.nsHandle.Close()
		}
		return nil
	})
	h, err := netlink.NewHandle()
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	g.closers = append(g.closers, func() error { h.Close(); return nil })
	wan, err := readIface(h, cfg.WAN)
	if err != nil {
		return nil, &SettingError{Key: "WAN", Err: fmt.Errorf("WAN: %w", err)}
	}
	lan, err := readIface(h, cfg.LAN)
	if err != nil {
		return nil, &SettingError{Key: "LAN", Err: fmt.Errorf("LAN: %w", err)}
	}
	if len(wan.addrs()) == 0 {
		return nil, &SettingError{Key: "WAN", Err: fmt.Errorf("WAN %s: %w (shared address mode reads it from the kernel: ip addr add ... dev %s)", cfg.WAN, ErrNoWANAddress, cfg.WAN)}
	}
	if err := g.checkMTU(&cfg, wan, lan); err != nil {
		return nil, err
	}
	// Not refused: an address added later is followed
	// (lanAddressesChanged).
	g.lanAddressed = g.noteLANAddress(cfg.LAN, lan, true)

	// A port another socket holds is refused before the XDP program
	// takes its datagrams from it (listenKernel refuses it again, later).
	if err := kernelsock.Probe(g.nsHandle, cfg.ListenPort, 1, wan.addrs()...); err != nil {
		return nil, &SettingError{Key: "ListenPort", Err: err}
	}
	// The encrypted side: UDP to our addresses and port goes to AF_XDP.
	g.wan, err = afxdp.Open(cfg.WAN, afxdp.Config{Queues: cfg.Queues, Attach: cfg.Attach, Journal: cfg.Journal, Filter: bind.XDPFilter(wan.addrs(), cfg.ListenPort, false)})
	if err != nil {
		return nil, fmt.Errorf("WAN: %w", err)
	}
	g.wanAddrs, g.listenPort = wan.addrs(), cfg.ListenPort
	g.warnWANLeft(cfg.WAN, wan.left)
	bc := bind.Config{Port: g.wan, Addr4: wan.v4, Addr6: wan.v6, Addrs: wan.others, ListenPort: cfg.ListenPort, Move: g.moveListenPort, Screen: true}
	// The source toward a configured endpoint not heard from: the
	// kernel's route's (Linux's WireGuard's; srcaddr.Routes follows the
	// changes itself, and Send reads the answer kept on the endpoint,
	// its Generation telling it when to take another, bind/route.go,
	// so its Changed is not read).
	if g.routeSrc, err = srcaddr.NewRoutes(g.nsHandle, srcaddr.DefaultRoutes, func(err error) {
		g.log.Warn("following the kernel's routes for the sources toward endpoints", "err", err)
	}); err != nil {
		return nil, fmt.Errorf("WAN: %w", err)
	}
	g.closers = append(g.closers, g.routeSrc.Close)
	bc.Source = g.routeSrc
	// The whole main table, as fast-path mode reads it: a route toward
	// an endpoint out of another interface, or an unreachable, blackhole
	// or prohibit one, more specific than the WAN's default, is no route
	// out of the WAN (bind's no_wan_route), where the WAN's routes alone
	// hid it and the default sent there (wanRoutes).
	var routes *arp.KernelRoutes
	if routes, bc.Neighbours, err = g.kernelNeighbours(h, wan.index, 0); err != nil {
		return nil, fmt.Errorf("WAN: %w", err)
	}
	bc.Routes = wanRoutes{routes, wan.index}
	if g.bind, err = bind.New(bc); err != nil {
		return nil, err
	}
	// The datagrams the XDP program leaves to the kernel (reassembled
	// from fragments) reach the bind through sockets of ours.
	if err := g.listenKernel(cfg.ListenPort, wan.addrs()...); err != nil {
		return nil, err
	}

	// The plaintext side: frames to the peers' allowed IPs and the
	// tunnel's networks (not to the host's own addresses) go to AF_XDP.
	g.tunnelNets = tunnelNets(cfg.TunnelPrefixes)
	if len(g.tunnelNets) > 0 {
		routes, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return nil, fmt.Errorf("list the host's routes: %w", err)
		}
		g.tunnelNets = apart(g.log, g.tunnelNets, routes)
	}
	g.tunnelHeld = heldAddrs(netlink.RouteGet, tunnelAddrs(cfg))
	g.lan, err = afxdp.Open(cfg.LAN, afxdp.Config{Queues: cfg.Queues, Attach: cfg.Attach, Journal: cfg.Journal, Filter: afxdp.Filter{Prefixes: true, HostAddrs: lanFilterHosts(lan.all, wan.all, g.tunnelHeld)}})
	if err != nil {
		return nil, fmt.Errorf("LAN: %w", err)
	}
	g.filter = g.lan
	g.wan.LogFallbacks(g.log, "WAN")
	g.lan.LogFallbacks(g.log, "LAN")
	g.wan.LogStrippedTags(g.log, "WAN")
	g.lan.LogStrippedTags(g.log, "LAN")
	// The LAN's hosts' TCP and UDP cross the tunnel as they are; the
	// WAN's carry WireGuard, whose outer UDP checksum nothing checks.
	g.lan.LogPartialChecksums(g.log, "LAN")
	// Oversized packets are answered from the LAN address, as Linux
	// answers from the address of the interface the answer leaves by.
	pc := tundev.PortConfig{Port: g.lan, Name: cfg.Name, MTU: cfg.MTU, ICMPSource4: lan.v4, ICMPSource6: lan.v6, ICMPLinkLocal6: lan.ll6}
	routerConfig(&pc, &cfg)
	// The LAN device weighs a decrypted packet's route in the whole main
	// table, as fast-path mode does (fastgw's resolver.PrefixLen): one
	// whose route leads off the LAN is dropped as off_lan, never sent
	// to the LAN (tundev.PortConfig.LANIndex).
	if pc.Routes, pc.Neighbours, err = g.kernelNeighbours(h, lan.index, 0); err != nil {
		return nil, fmt.Errorf("LAN: %w", err)
	}
	pc.LANIndex = lan.index
	if g.lanDev, err = tundev.NewPortDevice(pc); err != nil {
		return nil, err
	}
	g.lanDev.SetICMPSubnets(lan.nets)
	g.noRoute = g.lanDev
	g.lanAddrs, g.wanAll, g.tunnelAddrs = lan.all, wan.all, cfg.TunnelAddrs
	g.publishHostAddrs()
	g.gone.names = map[int]string{wan.index: cfg.WAN, lan.index: cfg.LAN}
	if err := g.followLANMTU(lan.index); err != nil {
		g.log.Warn("live LAN MTU changes will not be followed", "err", err)
	}
	if err := g.followWANMTU(wan.index, cfg.MTU, wan.v4.IsValid(), wan.v6.IsValid()); err != nil {
		g.log.Warn("live WAN MTU changes will not be followed", "err", err)
	}
	g.followPathMTU()
	ah, err := netlink.NewHandle()
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	if beforeFollow != nil {
		beforeFollow()
	}
	if err := g.followAddresses(ah, cfg.WAN, cfg.LAN, wan.index, lan.index); err != nil {
		return nil, fmt.Errorf("follow addresses: %w", err)
	}

	// Stock wireguard-go on the two.
	// Its error lines limited (a failed send is logged per batch).
	g.dev = device.NewDevice(g.lanDev, g.bind, wglog.New(g.log))
	if err := g.dev.IpcSet(cfg.UAPI); err != nil {
		return nil, fmt.Errorf("configure wireguard-go: %w", err)
	}
	if err := g.syncPrefixes(); err != nil {
		return nil, err
	}
	if err := g.dev.Up(); err != nil {
		return nil, fmt.Errorf("bring %s up: %w", cfg.Name, err)
	}
	if err := g.serveUAPI(cfg.Name); err != nil {
		return nil, err
	}
	g.wg.Add(1)
	go g.followPrefixes(cfg.SyncInterval)
	return g, nil
}

// newGateway returns a Gateway with its maps made, nothing opened.
func newGateway(log *slog.Logger) *Gateway {
	return &Gateway{log: log, stop: make(chan struct{}), prefixes: make(map[netip.Prefix]bool), kept: make(map[netip.Prefix]struct{}), keptTable: new(bart.Table[struct{}]),
		allowedTable: new(bart.Table[struct{}]), pass: make(map[netip.Prefix]struct{}),
		capacity: afxdp.DefaultPrefixCapacity, nsHandle: netns.None()}
}

// checkMTU runs the start-up checks of the tunnel MTU (package tunnelmtu)
// before any port is opened: wgpio's bind sends the outer packets through
// an AF_XDP port, where the kernel does not fragment them; the bind sends
// one over the WAN MTU as IP fragments itself (bind.Bind.Send; CheckWAN's
// warning), but a full-size tunnel packet over an AF_XDP frame could never
// be sent (CheckFrames' error). Compat mode serves no VLAN of a trunk
// (bind and tundev drop tagged frames), so its frames carry no 802.1Q
// tag: VLAN 0 on both sides. The ports are opened with
// dataplane.DefaultFrameSize chunks. Warnings are logged.
func (g *Gateway) checkMTU(cfg *Config, wan, lan iface) error {
	if warn := wanMTUWarning(cfg.MTU, cfg.WAN, wan); warn != "" {
		g.log.Warn("WAN MTU", "problem", warn)
	}
	warn, err := frameCheck(cfg.MTU, cfg.LAN, wan, lan)
	if err != nil {
		return err
	}
	if warn != "" {
		g.log.Warn("LAN MTU", "problem", warn)
	}
	return nil
}

// wanMTUWarning is the warning of tunnelMTU against the MTU of the WAN,
// wanDev as read (tunnelmtu.CheckWAN; "" when it fits), for the families
// of its addresses. Start logs it as "WAN MTU" (checkMTU); CheckWANMTU
// returns it.
func wanMTUWarning(tunnelMTU int, wanDev string, wan iface) string {
	return tunnelmtu.CheckWAN(tunnelMTU, wan.mtu, wanDev, 0, wan.v4.IsValid(), wan.v6.IsValid(), wanLimits)
}

// frameCheck is the check of tunnelMTU's frames against an AF_XDP frame
// (tunnelmtu.CheckFrames, no VLAN): an error for WAN frames no frame
// holds, and the warning Start logs as "LAN MTU" for a LAN (lan,
// interface lanDev) whose full frames are longer ("" when they fit), for
// the WAN's (wan) outer families.
func frameCheck(tunnelMTU int, lanDev string, wan, lan iface) (string, error) {
	return tunnelmtu.CheckFrames(tunnelMTU, lan.mtu, lanDev, 0, 0, wan.v4.IsValid(), wan.v6.IsValid(), afxdp.MaxFrameLen(dataplane.DefaultFrameSize), true)
}

// CheckMTU reads interfaces wan and lan in the caller's network namespace
// as Start reads Config.WAN and Config.LAN, and returns the warnings Start
// would log as "WAN MTU" (full-size tunnel packets leave as IP fragments)
// and "LAN MTU" (the LAN's full frames are longer than an AF_XDP frame)
// for tunnel MTU mtu (0: DefaultMTU), "" for none: `wgpio check -system`
// gives them before a start. An error says what could not be read (a
// *SettingError for an interface Start refuses: missing, not Ethernet),
// or why the tunnel MTU's frames cannot be sent (Start fails on it too).
func CheckMTU(wanDev, lanDev string, mtu int) (wanWarn, lanWarn string, err error) {
	if mtu == 0 {
		mtu = DefaultMTU
	}
	h, err := netlink.NewHandle()
	if err != nil {
		return "", "", fmt.Errorf("compatgw: netlink: %w", err)
	}
	defer h.Close()
	// An interface Start refuses is refused as Start refuses it: a
	// *SettingError naming the key.
	wan, err := readIface(h, wanDev)
	if err != nil {
		return "", "", fmt.Errorf("compatgw: %w", &SettingError{Key: "WAN", Err: fmt.Errorf("WAN: %w", err)})
	}
	lan, err := readIface(h, lanDev)
	if err != nil {
		return "", "", fmt.Errorf("compatgw: %w", &SettingError{Key: "LAN", Err: fmt.Errorf("LAN: %w", err)})
	}
	if lanWarn, err = frameCheck(mtu, lanDev, wan, lan); err != nil {
		return "", "", fmt.Errorf("compatgw: %w", err)
	}
	return wanMTUWarning(mtu, wanDev, wan), lanWarn, nil
}

// kernelNeighbours follows the kernel's neighbours of interface index
// and the routes of the main table out of interface routeIndex (0: all of
// them, the route view fast-path mode follows) in shared address mode,
// until Close.
func (g *Gateway) kernelNeighbours(h *netlink.Handle, index, routeIndex int) (*arp.KernelRoutes, *arp.Table, error) {
	// Failures (a subscription overrun, a listing that failed and is
	// tried again) are logged, as fast-path mode does.
	onErr := func(err error) { g.log.Warn("following the kernel's routes and neighbours", "err", err) }
	routes, err := arp.NewKernelRoutes(arp.KernelOptions{LinkIndex: routeIndex, ErrorCallback: onErr})
	if err != nil {
		return nil, nil, err
	}
	g.closers = append(g.closers, routes.Close)
	tbl := arp.NewTable(arp.Config{Prober: &arp.KernelProber{Handle: h, LinkIndex: index}})
	kn, err := arp.NewKernelNeighbours(tbl, arp.KernelOptions{LinkIndex: index, ErrorCallback: onErr})
	if err != nil {
		return nil, nil, err
	}
	g.closers = append(g.closers, kn.Close)
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		tbl.Run(g.stop, 0)
	}()
	return routes, tbl, nil
}

// wanRoutes is the bind's Resolver: r's next hop toward a destination
// whose route leads out of the WAN (ifindex), none for one whose route
// leads out of another interface (r's NextHop already answers none for an
// unreachable, blackhole or prohibit route).
type wanRoutes struct {
	r       arp.Resolver
	ifindex int
}

// NextHop implements arp.Resolver.
func (w wanRoutes) NextHop(dst netip.Addr) (netip.Addr, int, bool) {
	nh, ifindex, ok := w.r.NextHop(dst)
	if !ok || ifindex != 0 && ifindex != w.ifindex {
		return netip.Addr{}, 0, false
	}
	return nh, ifindex, true
}

// Device is the wireguard-go device.
func (g *Gateway) Device() *device.Device { return g.dev }

// Bind is the WAN side (wireguard-go's conn.Bind).
func (g *Gateway) Bind() *bind.Bind { return g.bind }

// LAN is the LAN side (wireguard-go's tun.Device).
func (g *Gateway) LAN() *tundev.PortDevice { return g.lanDev }

// Ports returns the WAN and LAN AF_XDP ports, whose Stats carry their XDP
// programs' counters (the frames left to the kernel among them), as
// fastgw.Gateway.Ports.
func (g *Gateway) Ports() (wan, lan dataplane.Port) { return g.wan, g.lan }

// Stats returns the counters of the two sides.
func (g *Gateway) Stats() Stats {
	s := Stats{Bind: g.bind.Stats(), LAN: g.lanDev.Stats(), WANQueues: queueStats(g.wan), LANQueues: queueStats(g.lan)}
	if g.uapiConns != nil {
		s.UAPIRefused = g.uapiConns.Refused()
	}
	return s
}

// queueStats are the counters of each of p's queues.
func queueStats(p dataplane.Port) []dataplane.Stats {
	s := make([]dataplane.Stats, p.NumQueues())
	for i := range s {
		s[i] = p.Queue(i).Stats()
	}
	return s
}

// Close stops wireguard-go (which closes the bind and the PortDevice),
// removes the UAPI socket, detaches the XDP programs and stops the
// neighbour tables.
// A second call does nothing and returns nil.
func (g *Gateway) Close() error {
	var err error
	g.closeOnce.Do(func() { err = g.close() })
	return err
}

func (g *Gateway) close() error {
	g.gone.Closing()
	if g.dev != nil {
		g.dev.Close()
	}
	if g.lan != nil {
		g.lan.Close()
	}
	if g.wan != nil {
		g.wan.Close()
	}
	close(g.stop)
	var errs []error
	for i := len(g.closers) - 1; i >= 0; i-- {
		errs = append(errs, g.closers[i]())
	}
	g.wg.Wait()
	return errors.Join(errs...)
}
