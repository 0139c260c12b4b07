//go:build linux

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/internal/icmprate"
	"github.com/wgpio/wgpio/internal/uapiserve"
	"github.com/wgpio/wgpio/internal/wglog"
	"github.com/wgpio/wgpio/tundev"
)

// upCompatMQTUN runs stock wireguard-go, unmodified, on wgpio's multi-queue
// kernel TUN and the standard UDP bind: no XDP needed. It runs until
// SIGINT or SIGTERM, or until wireguard-go closed its device (its TUN
// deleted: mqtunFailed), which it returns after the shutdown.
func upCompatMQTUN(log *slog.Logger, name string, f *config.File, w config.WGPIO, sigs signals) error {
	queues := w.Queues
	if queues <= 0 {
		queues = 1
	}
	mtu := f.Interface.MTU
	if mtu == 0 {
		mtu = 1420
	}
	// cmdUp refused it already if forwarding is off (checkSystem:
	// checkForwarding).
	if mixedEndpoints(f) {
		log.Warn(mixedEndpointsWarning)
	}
	metricsLn, err := compatMetricsListener(f, w)
	if err != nil {
		return err
	}
	if metricsLn != nil {
		defer metricsLn.Close()
	}
	t, err := tundev.OpenMultiQueueTUN(name, queues, mtu)
	if err != nil {
		return err
	}
	// Host unreachable for the LAN's packets to no peer, as Linux's wg0
	// answers them, through raw ICMP sockets (CAP_NET_RAW); without them
	// those packets are dropped unanswered, as stock wireguard-go drops
	// them.
	if err := t.AnswerNoRoute(icmprate.Config{Rate: w.ICMPRate, Burst: w.ICMPBurst, DestInterval: w.ICMPDestInterval}); err != nil {
		log.Warn("packets to no peer's allowed IPs are dropped without host unreachable", "err", err)
	}
	// Outer packets without DF, fragmented by the kernel over the path
	// MTU, as Linux's WireGuard sends them (fragBind).
	udp := &countingBind{Bind: &fragBind{Bind: conn.NewDefaultBind(), log: log}}
	// Its error lines limited (a failed send is logged per batch).
	dev := device.NewDevice(t, udp, wglog.New(log))
	defer dev.Close()
	if err := dev.IpcSet(f.UAPI()); err != nil {
		return fmt.Errorf("%s: configure wireguard-go: %w", f.Name, err)
	}
	allowed := &mqtunAllowed{dev: dev, tun: t, log: log}
	if err := allowed.sync(); err != nil {
		return fmt.Errorf("%s: %w", f.Name, err)
	}
	if err := dev.Up(); err != nil {
		return fmt.Errorf("bring %s up: %w", name, err)
	}
	if err := addAddresses(name, f.Interface.Addresses); err != nil {
		return err
	}
	routes, err := addAllowedRoutes(log, name, f)
	if err != nil {
		return err
	}
	allowed.setRoutes(routes)
	ln, err := uapiserve.Listen(name)
	if err != nil {
		return err
	}
	// uapiserve.MaxConns connections at once: more wait up to
	// uapiserve.SlotWait, then are refused and counted.
	uapiConns := uapiserve.NewServer(log)
	uapiDone := make(chan struct{})
	defer func() {
		ln.Close()
		<-uapiDone // its connections closed
	}()
	go func() {
		defer close(uapiDone)
		uapiConns.Serve(ln, allowed.handleUAPI)
	}()
	// wgpio counts what its multi-queue TUN and the UDP sockets carry
	// and drop; what stock wireguard-go drops inside it is counted
	// nowhere (README, "Reading the drop counters").
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", runDir, err)
	}
	stats := func() GatewayStats {
		ts, us := t.Stats(), udp.Stats()
		s := compatStats(name, config.ModeCompatMQTUN, nil, &ts, &us)
		s.UAPIRefused, s.LogLinesLost = uapiConns.Refused(), logLinesLost.Load()
		return s
	}
	wg := &wgPeers{get: dev.IpcGetOperation}
	stopStats, err := serveStats(log, name, func() any { return withPeers(log, stats(), wg, -1) })
	if err != nil {
		return err
	}
	defer stopStats()
	reloads, err := serveCompatMetrics(log, metricsLn, name, stats, wg, metricsPeers(w))
	if err != nil {
		return err
	}
	log.Info("running stock wireguard-go on a multi-queue TUN; stop with Ctrl-C or SIGTERM, reload the file with SIGHUP", "name", name, "queues", queues)
	served := make(chan struct{})
	defer close(served)
	sigs.failed = mqtunFailed(log, dev, name, served)
	sig, failed := serve(log, f, uapiDevice{get: dev.IpcGet, set: allowed.set}, reloads, sigs)
	logStopping(log, sig, failed)
	logFinalMQTUN(log, stats())
	return failed
}

// logFinalMQTUN logs compat-mqtun's counters at the stop, as the other
// modes log theirs ("final counters"): the TUN's packets, drops by reason
// and host unreachable answers, and the UDP sockets' datagrams and failed
// sends.
func logFinalMQTUN(log *slog.Logger, s GatewayStats) {
	var attrs []any
	if t := s.TUN; t != nil {
		attrs = append(attrs, "tun_rx", t.RXPackets, "tun_tx", t.TXPackets, "icmp_errors", t.ICMPErrors, "icmp_suppressed", t.ICMPSuppressed)
		if l := t.Drops.List(); len(l) > 0 {
			attrs = append(attrs, "tun_drops", strings.Join(l, " "))
		}
	}
	if u := s.UDP; u != nil {
		attrs = append(attrs, "udp_rx", u.RXPackets, "udp_tx", u.TXPackets)
		if l := u.Drops.List(); len(l) > 0 {
			attrs = append(attrs, "udp_drops", strings.Join(l, " "))
		}
	}
	log.Info("final counters", attrs...)
}

// forwardingSysctls are the sysctls that let the kernel forward each
// address family between interfaces (here: between the LAN and the TUN).
var forwardingSysctls = [2]string{"net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding"}

// mixedEndpointsWarning is logged by a compat-mqtun gateway whose peers'
// configured endpoints are of both families. Stock wireguard-go's
// conn.StdNetBind (golang.zx2c4.com/wireguard v0.0.0-20260522210424,
// the newest) reuses one pooled net.UDPAddr for the destination of every
// Send and copies an IPv6 address into it before it lengthens it back to
// 16 bytes: after an IPv4 send, an IPv6 one gets the first 4 bytes of its
// address and 12 left from an earlier one (zeros, or another peer's), and
// leaves for a wrong address or fails (ENETUNREACH). Nothing outside the
// bind can mend it.
const mixedEndpointsWarning = "peers' endpoints are IPv4 and IPv6: stock wireguard-go's UDP bind may send IPv6 datagrams to a wrong address after IPv4 ones (README: compat-mqtun and dual-stack peers); use Mode = fastpath or compat for them"

// mixedEndpoints reports whether f's peers have configured endpoints of
// both families (an IPv4-mapped IPv6 address is IPv6 to StdNetBind,
// which sends it on its IPv6 socket).
func mixedEndpoints(f *config.File) bool {
	var v4, v6 bool
	for _, p := range f.Peers {
		if a := p.Endpoint.Addr(); a.IsValid() {
			if a.Is4() {
				v4 = true
			} else {
				v6 = true
			}
		}
	}
	return v4 && v6
}

// checkForwarding refuses compat-mqtun when the kernel would not forward
// the families the peers' allowed IPs use: in this mode the kernel routes
// between the LAN and the TUN, so with forwarding off every LAN host's
// packet would be dropped without a counter of ours. wgpio does not change
// the host's sysctls itself (turning IPv6 forwarding on also stops the
// interfaces from taking router advertisements); it names the one to set.
func checkForwarding(f *config.File, w config.WGPIO) error {
	off, err := forwardingOff(f)
	if err != nil || len(off) == 0 {
		return err
	}
	return keyError(f.Name, w.Lines, "Mode", "mode", fmt.Sprintf(
		"compat-mqtun forwards through the kernel, and forwarding is off in this network namespace (%s): run `sysctl -w %s` (and keep it in /etc/sysctl.d/), then start again",
		strings.Join(off, ", "), sysctlsOn(off)))
}

// procSys is where forwardingOff reads the sysctls (a variable for tests).
var procSys = "/proc/sys/"

// forwardingOff returns the forwardingSysctls that are off in this network
// namespace, of the families the peers' allowed IPs use (none of a family
// the kernel has disabled).
func forwardingOff(f *config.File) ([]string, error) {
	var family [2]bool // IPv4, IPv6
	for _, p := range f.Peers {
		for _, a := range p.AllowedIPs {
			family[btoi(a.Addr().Is6())] = true
		}
	}
	var off []string
	for i, key := range forwardingSysctls {
		if !family[i] {
			continue
		}
		b, err := os.ReadFile(procSys + strings.ReplaceAll(key, ".", "/"))
		if errors.Is(err, fs.ErrNotExist) {
			continue // IPv6 disabled in this kernel
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", key, err)
		}
		if strings.TrimSpace(string(b)) != "1" {
			off = append(off, key)
		}
	}
	return off, nil
}

// sysctlsOn is the arguments of `sysctl -w` that turn the sysctls keys on.
func sysctlsOn(keys []string) string {
	set := make([]string, len(keys))
	for i, k := range keys {
		set[i] = k + "=1"
	}
	return strings.Join(set, " ")
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// addAddresses puts the tunnel addresses on interface name.
func addAddresses(name string, addrs []netip.Prefix) error {
	if len(addrs) == 0 {
		return nil
	}
	l, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("find %s: %w", name, err)
	}
	for _, p := range addrs {
		a := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
		if err := netlink.AddrAdd(l, a); err != nil {
			return fmt.Errorf("add %v to %s: %w", p, name, err)
		}
	}
	return nil
}

// addAllowedRoutes routes every peer's allowed IPs of f into the TUN name
// (mqtunRoutes.add) at the start, and returns the routes, which the
// allowed IPs' follower (mqtunAllowed) extends as sets and reloads add
// prefixes.
func addAllowedRoutes(log *slog.Logger, name string, f *config.File) (*mqtunRoutes, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("find %s: %w", name, err)
	}
	r := &mqtunRoutes{log: log, name: name, index: l.Attrs().Index, mtu: f.Interface.MTU, routed: make(map[netip.Prefix]bool)}
	for _, p := range f.Peers {
		if err := r.add(p.AllowedIPs); err != nil {
			return nil, err
		}
	}
	r.later = make(map[netip.Prefix]bool) // the start's stay
	return r, nil
}

// mqtunRoutes are compat-mqtun's routes of the allowed IPs into its TUN,
// as wg-quick makes them (a prefix whose key a route of the host's holds
// keeps that route, with a warning), so that the host's traffic
// (forwarded or its own) to the peers' networks enters the tunnel. Unlike
// wg-quick's, which routes the allowed IPs of its start alone (wg
// syncconf and wg set add none), they follow the prefixes a UAPI set or a
// reload adds: such a prefix took the host's other routes, out of the
// WAN in cleartext where a default route leads there. A prefix of the
// start's that leaves the allowed IPs keeps its route, as wg-quick's:
// its packets go into the TUN, whose reader drops them as no_route and
// answers them, as Linux's wg0 does; one added later loses its route
// when it leaves (remove), so that the routes stay as many as the
// prefixes configured and a prefix set by mistake (one holding a peer's
// endpoint, which then took wireguard-go's own datagrams into the TUN)
// goes with it. Default routes (/0) are left out: they would take the route to
// the peers' endpoints too (wg-quick needs policy routing for that); add
// them by hand with a route to the endpoints. Not safe for concurrent
// use (mqtunAllowed's mu).
type mqtunRoutes struct {
	log   *slog.Logger
	name  string
	index int
	mtu   int
	// routed are the prefixes routed into the TUN, or left to a route of
	// the host's, or warned of (/0), each once; later those of them
	// routed after the start (nil during it), which remove takes out.
	routed, later map[netip.Prefix]bool
}

// remove deletes the routes of the prefixes of ps added after the start
// (later) and not in keep (nil: none kept), a failure logged.
func (r *mqtunRoutes) remove(ps []netip.Prefix, keep map[netip.Prefix]bool) {
	for _, a := range ps {
		if a = a.Masked(); !r.later[a] || keep[a] {
			continue
		}
		delete(r.later, a)
		delete(r.routed, a)
		rt := &netlink.Route{LinkIndex: r.index, Dst: &net.IPNet{IP: a.Addr().AsSlice(), Mask: net.CIDRMask(a.Bits(), a.Addr().BitLen())}}
		if err := netlink.RouteDel(rt); err != nil && !errors.Is(err, unix.ESRCH) {
			r.log.Warn("delete the route into the TUN of an allowed-IPs prefix that left", "prefix", a, "err", err)
		}
	}
}

// add routes the prefixes of ps not routed yet into the TUN. It returns
// the first route the kernel refused (routeError), after trying the rest;
// a refused prefix is tried again by the next add that names it.
func (r *mqtunRoutes) add(ps []netip.Prefix) error {
	var first error
	for _, a := range ps {
		if a = a.Masked(); r.routed[a] {
			continue
		}
		r.routed[a] = true
		if a.Bits() == 0 {
			r.log.Warn("default route not installed into the TUN; route it by hand, keeping a route to the endpoints", "prefix", a)
			continue
		}
		rt := &netlink.Route{LinkIndex: r.index, Dst: &net.IPNet{IP: a.Addr().AsSlice(), Mask: net.CIDRMask(a.Bits(), a.Addr().BitLen())}}
		err := netlink.RouteAdd(rt)
		if err == nil && r.later != nil {
			r.later[a] = true
		}
		switch {
		case errors.Is(err, unix.EEXIST):
			// The route of the key is the host's (an interface's
			// subnet, a static route), and stays, as wg-quick would
			// not replace it (it refuses: File exists); one of ours
			// made before (a prefix that left and came back) is
			// found by routed.
			r.log.Warn("an allowed-IPs prefix is the key of a route of the host's (an interface's subnet, a static route): that route stays and none is made into the TUN, so the host's packets to it take that route, not the tunnel", "prefix", a)
		case err != nil:
			delete(r.routed, a)
			if first == nil {
				first = routeError(a, r.name, r.mtu, err)
			}
		}
	}
	return first
}

// routeError is addAllowedRoutes' error for prefix a that the kernel
// would not route into TUN name of tunnel MTU mtu (0: the default). An
// IPv6 prefix refused with ENODEV at an MTU below 1280 says why: the
// kernel turned IPv6 off on the TUN (RFC 8200 §5's minimum), as on a
// wg0 of that MTU, where wg-quick stops at the same "No such device".
func routeError(a netip.Prefix, name string, mtu int, err error) error {
	if mtu > 0 && mtu < config.MinIPv6MTU && a.Addr().Is6() && errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("route %v into %s: %w (the kernel has no IPv6 on a TUN of MTU %d, below IPv6's minimum of %d: raise MTU in [Interface] to %d, or drop the IPv6 prefixes from AllowedIPs)",
			a, name, err, mtu, config.MinIPv6MTU, config.MinIPv6MTU)
	}
	return fmt.Errorf("route %v into %s: %w", a, name, err)
}
