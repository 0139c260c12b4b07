//go:build linux

package main

import (
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/afxdp"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway/compatgw"
	"github.com/wgpio/wgpio/tundev"
)

// CompatStats are the counters of compat mode: stock wireguard-go's two
// sides, wgpio's bind and PortDevice.
type CompatStats = compatgw.Stats

// startCompat starts compat mode (package compatgw) as name on the [WGPIO]
// interfaces (in the caller's network namespace) and serves the UAPI
// socket.
func startCompat(log *slog.Logger, name string, f *config.File, w config.WGPIO) (*compatgw.Gateway, error) {
	// WAN, LAN, AddressMode and ListenPort: checkFile.
	attach := afxdp.AttachAuto
	switch w.XDPMode {
	case config.XDPNative:
		attach = afxdp.AttachNative
	case config.XDPGeneric:
		attach = afxdp.AttachGeneric
	}
	return compatgw.Start(compatgw.Config{
		Name: name, UAPI: f.UAPI(), ListenPort: f.Interface.ListenPort,
		WAN: w.WAN, LAN: w.LAN, Queues: w.Queues, Attach: attach, MTU: f.Interface.MTU,
		Logger: log, TunnelAddrs: prefixAddrs(f.Interface.Addresses), TunnelPrefixes: f.Interface.Addresses, MSSClamp: compatMSSClamp(w.MSSClamp),
		ICMPRate: w.ICMPRate, ICMPBurst: w.ICMPBurst, ICMPDestInterval: w.ICMPDestInterval,
		Journal: newOffloadJournal(runDir, name),
	})
}

// compatMSSClamp is config's MSSClamp as compatgw.Config's.
func compatMSSClamp(m int) int {
	switch m {
	case config.MSSClampAuto:
		return compatgw.MSSClampAuto
	case config.MSSClampOff:
		return 0
	}
	return m
}

// prefixAddrs are the addresses of ps.
func prefixAddrs(ps []netip.Prefix) []netip.Addr {
	as := make([]netip.Addr, len(ps))
	for i, p := range ps {
		as[i] = p.Addr()
	}
	return as
}

// compatStats is what the stats socket of a compat mode serves: c (nil
// for compat-mqtun), tun and udp (compat-mqtun's multi-queue TUN and UDP
// sockets; nil for compat), queues as an empty list (JSON [], as the fast
// path's with none, not null), and no control_plane or
// exception_tun_drops (GatewayStats); withPeers adds the peers.
func compatStats(name string, mode config.Mode, c *CompatStats, tun *tundev.TUNStats, udp *UDPStats) GatewayStats {
	return GatewayStats{Name: name, Mode: string(mode), Queues: []fastpath.QueueStats{}, Peers: []PeerStat{}, Compat: c, TUN: tun, UDP: udp}
}

// withPeers adds to s the number of peers wg reads and the first max of
// them (every one when max < 0); s stays without them (Peers empty,
// PeersConfigured nil) when the read fails, logged on log.
func withPeers(log *slog.Logger, s GatewayStats, wg *wgPeers, max int) GatewayStats {
	ps, n, err := wg.read(max)
	if err != nil {
		log.Warn("read wireguard-go's peers for the stats", "err", err)
		return s
	}
	count := uint64(n)
	s.PeersConfigured = &count
	if ps != nil {
		s.Peers = ps
	}
	return s
}

// upCompat runs compat mode until SIGINT or SIGTERM, or the gateway's
// failure (compatgw.Gateway.Failed), which it returns after the shutdown.
func upCompat(log *slog.Logger, name string, f *config.File, w config.WGPIO, sigs signals) error {
	metricsLn, err := compatMetricsListener(f, w)
	if err != nil {
		return err
	}
	if metricsLn != nil {
		defer metricsLn.Close()
	}
	g, err := startCompat(log, name, f, w)
	if err != nil {
		return startError(f, err)
	}
	stats := func() GatewayStats {
		s := g.Stats()
		gs := compatStats(name, config.ModeCompat, &s, nil, nil)
		gs.UAPIRefused, gs.LogLinesLost = s.UAPIRefused, logLinesLost.Load()
		gs.XDP = xdpCounters(g.Ports())
		return gs
	}
	wg := &wgPeers{get: g.Device().IpcGetOperation}
	stopStats, err := serveStats(log, name, func() any { return withPeers(log, stats(), wg, -1) })
	if err != nil {
		g.Close()
		return err
	}
	reloads, err := serveCompatMetrics(log, metricsLn, name, stats, wg, metricsPeers(w))
	if err != nil {
		stopStats()
		g.Close()
		return err
	}
	log.Info("running stock wireguard-go on wgpio bind and tundev; stop with Ctrl-C or SIGTERM, reload the file with SIGHUP", "name", name, "uapi", "/var/run/wireguard/"+name+".sock")
	sigs.failed = g.Failed()
	sig, failed := serve(log, f, uapiDevice{get: g.Device().IpcGet, set: g.IpcSet}, reloads, sigs)
	logStopping(log, sig, failed)
	final := g.Stats()
	stopStats()
	err = g.Close()
	logFinalCompat(log, final)
	return exitError(log, failed, err)
}

// logFinalCompat logs compat mode's counters at exit: the bind's and
// tundev's packets and drops by reason, the bind's datagrams sent as
// fragments and received via the kernel (when there were), and what each port queue and
// the kernel at its socket lost before them (dataplane.Stats.Losses), as
// logFinal logs the fast path's.
func logFinalCompat(log *slog.Logger, c CompatStats) {
	attrs := []any{"bind_rx", c.Bind.RXPackets, "bind_tx", c.Bind.TXPackets, "lan_rx", c.LAN.RXPackets, "lan_tx", c.LAN.TXPackets}
	if c.Bind.Fragmented > 0 {
		attrs = append(attrs, "bind_fragmented", c.Bind.Fragmented, "bind_fragments", c.Bind.Fragments)
	}
	if c.Bind.FromKernel > 0 {
		attrs = append(attrs, "bind_from_kernel", c.Bind.FromKernel)
	}
	if l := c.Bind.Drops.List(); len(l) > 0 {
		attrs = append(attrs, "bind_drops", strings.Join(l, " "))
	}
	if l := c.LAN.Drops.List(); len(l) > 0 {
		attrs = append(attrs, "lan_drops", strings.Join(l, " "))
	}
	for _, p := range []struct {
		key string
		qs  []dataplane.Stats
	}{{"wan_port_losses", c.WANQueues}, {"lan_port_losses", c.LANQueues}} {
		for i, st := range p.qs {
			if l := st.Losses(); len(l) > 0 {
				attrs = append(attrs, p.key+"_"+strconv.Itoa(i), strings.Join(l, " "))
			}
		}
	}
	log.Info("final counters", attrs...)
}

// compatMetricsListener listens on w.MetricsAddress, if set, before a
// compat mode starts: a port in use fails the start before it touches the
// interfaces, as in fastpath mode.
func compatMetricsListener(f *config.File, w config.WGPIO) (net.Listener, error) {
	if w.MetricsAddress == "" {
		return nil, nil
	}
	return listenMetrics(f.Name, w)
}

// serveCompatMetrics serves a compat mode's counters (stats) on ln, if
// not nil, with the reload metrics of the reloadState it returns (nil
// without ln), and wireguard-go's peers read through wg at each scrape:
// wgpio_peers, and the per-peer metrics while there are at most
// maxPeers ([WGPIO] MetricsPeers; 0: none).
func serveCompatMetrics(log *slog.Logger, ln net.Listener, name string, stats func() GatewayStats, wg *wgPeers, maxPeers int) (*reloadState, error) {
	if ln == nil {
		return nil, nil
	}
	reloads := newReloadState(time.Now())
	scraped := func() GatewayStats { return withPeers(log, stats(), wg, max(maxPeers, 0)) }
	if err := serveMetrics(log, ln, name, scraped, nil, maxPeers, reloads); err != nil {
		return nil, err
	}
	return reloads, nil
}
