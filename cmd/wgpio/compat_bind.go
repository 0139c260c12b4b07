package main

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/ipc"

	"github.com/wgpio/wgpio/arp"
	"github.com/wgpio/wgpio/bind"
	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/dataplane/afxdp"
	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/tundev"
)

// CompatStats are the counters of compat mode: stock wireguard-go's two
// sides, wgpio's bind and PortDevice.
type CompatStats struct {
	Bind bind.Stats       `json:"bind"`
	LAN  tundev.PortStats `json:"lan"`
}

// compatGateway is stock wireguard-go, unmodified, on wgpio's bind (WAN,
// AF_XDP) and PortDevice (LAN, AF_XDP).
type compatGateway struct {
	dev      *device.Device
	bind     *bind.Bind
	lanDev   *tundev.PortDevice
	wan, lan *afxdp.Port
	closers  []func() error
	stop     chan struct{}
	wg       sync.WaitGroup

	mu       sync.Mutex
	prefixes map[netip.Prefix]bool // in the LAN filter; guarded by mu
}

// ifAddrs is an interface's index and first IPv4 and global IPv6 address.
type ifAddrs struct {
	index  int
	v4, v6 netip.Addr
}

func readIfAddrs(h *netlink.Handle, name string) (ifAddrs, error) {
	l, err := h.LinkByName(name)
	if err != nil {
		return ifAddrs{}, fmt.Errorf("interface %q: %w (list them with `ip link`)", name, afxdp.ErrNoSuchInterface)
	}
	out := ifAddrs{index: l.Attrs().Index}
	addrs, err := h.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return ifAddrs{}, fmt.Errorf("list addresses of %s: %w", name, err)
	}
	for _, a := range addrs {
		ip, _ := netip.AddrFromSlice(a.IP)
		ip = ip.Unmap()
		switch {
		case ip.Is4() && !out.v4.IsValid():
			out.v4 = ip
		case ip.Is6() && !ip.IsLinkLocalUnicast() && !out.v6.IsValid():
			out.v6 = ip
		}
	}
	return out, nil
}

// startCompat starts compat mode as name on the [WGPIO] interfaces (in the
// caller's network namespace) and serves the UAPI socket.
func startCompat(log *slog.Logger, name string, f *config.File, w config.WGPIO) (_ *compatGateway, err error) {
	if w.WAN == "" || w.LAN == "" {
		return nil, fmt.Errorf("%s: compat mode needs WAN and LAN in the [WGPIO] section (or -wan and -lan)", f.Name)
	}
	if w.AddressMode == config.AddressOwned {
		return nil, fmt.Errorf("%s: [WGPIO] AddressMode = owned is not available in this build; use shared (the kernel keeps the interfaces' addresses)", f.Name)
	}
	port := f.Interface.ListenPort
	if port == 0 {
		return nil, fmt.Errorf("%s: compat mode needs a ListenPort (the XDP filter matches it)", f.Name)
	}
	mtu := f.Interface.MTU
	if mtu == 0 {
		mtu = 1420
	}
	attach := afxdp.AttachAuto
	switch w.XDPMode {
	case config.XDPNative:
		attach = afxdp.AttachNative
	case config.XDPGeneric:
		attach = afxdp.AttachGeneric
	}
	g := &compatGateway{stop: make(chan struct{}), prefixes: make(map[netip.Prefix]bool)}
	defer func() {
		if err != nil {
			g.Close()
		}
	}()
	h, err := netlink.NewHandle()
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	g.closers = append(g.closers, func() error { h.Close(); return nil })
	wan, err := readIfAddrs(h, w.WAN)
	if err != nil {
		return nil, fmt.Errorf("WAN: %w", err)
	}
	lan, err := readIfAddrs(h, w.LAN)
	if err != nil {
		return nil, fmt.Errorf("LAN: %w", err)
	}
	if !wan.v4.IsValid() && !wan.v6.IsValid() {
		return nil, fmt.Errorf("WAN %s has no IP address (shared address mode reads it from the kernel: ip addr add ... dev %s)", w.WAN, w.WAN)
	}
	neighbours := func(index int) (*arp.KernelRoutes, *arp.Table, error) {
		opts := arp.KernelOptions{LinkIndex: index}
		routes, err := arp.NewKernelRoutes(opts)
		if err != nil {
			return nil, nil, err
		}
		g.closers = append(g.closers, routes.Close)
		tbl := arp.NewTable(arp.Config{Prober: &arp.KernelProber{Handle: h, LinkIndex: index}})
		kn, err := arp.NewKernelNeighbours(tbl, opts)
		if err != nil {
			return nil, nil, err
		}
		g.closers = append(g.closers, kn.Close)
		go tbl.Run(g.stop, 0)
		return routes, tbl, nil
	}
	var wanAddrs []netip.Addr
	for _, a := range []netip.Addr{wan.v4, wan.v6} {
		if a.IsValid() {
			wanAddrs = append(wanAddrs, a)
		}
	}
	q := w.Queues
	g.wan, err = afxdp.Open(w.WAN, afxdp.Config{Queues: q, Attach: attach, Filter: bind.XDPFilter(wanAddrs, port, false)})
	if err != nil {
		return nil, fmt.Errorf("WAN: %w", err)
	}
	bc := bind.Config{Port: g.wan, Addr4: wan.v4, Addr6: wan.v6, ListenPort: port}
	if bc.Routes, bc.Neighbours, err = neighbours(wan.index); err != nil {
		return nil, err
	}
	if g.bind, err = bind.New(bc); err != nil {
		return nil, err
	}
	var host []netip.Addr
	for _, a := range []netip.Addr{lan.v4, lan.v6} {
		if a.IsValid() {
			host = append(host, a)
		}
	}
	g.lan, err = afxdp.Open(w.LAN, afxdp.Config{Queues: q, Attach: attach, Filter: afxdp.Filter{Prefixes: true, HostAddrs: host}})
	if err != nil {
		return nil, fmt.Errorf("LAN: %w", err)
	}
	fastgw.LogStrippedTags(log, g.wan, "WAN")
	fastgw.LogStrippedTags(log, g.lan, "LAN")
	// Oversized packets are answered from the LAN address, as Linux
	// answers from the address of the interface the answer leaves by.
	pc := tundev.PortConfig{Port: g.lan, Name: name, MTU: mtu, ICMPSource4: lan.v4, ICMPSource6: lan.v6}
	if pc.Routes, pc.Neighbours, err = neighbours(lan.index); err != nil {
		return nil, err
	}
	if g.lanDev, err = tundev.NewPortDevice(pc); err != nil {
		return nil, err
	}
	logger := &device.Logger{
		Verbosef: func(format string, a ...any) { log.Debug(fmt.Sprintf(format, a...)) },
		Errorf:   func(format string, a ...any) { log.Warn(fmt.Sprintf(format, a...)) },
	}
	g.dev = device.NewDevice(g.lanDev, g.bind, logger)
	if err := g.dev.IpcSet(f.UAPI()); err != nil {
		return nil, fmt.Errorf("%s: configure wireguard-go: %w", f.Name, err)
	}
	if err := g.syncPrefixes(); err != nil {
		return nil, err
	}
	if err := g.dev.Up(); err != nil {
		return nil, fmt.Errorf("bring %s up: %w", name, err)
	}
	uf, err := ipc.UAPIOpen(name)
	if err != nil {
		return nil, fmt.Errorf("UAPI socket for %s: %w", name, err)
	}
	ln, err := ipc.UAPIListen(name, uf)
	if err != nil {
		return nil, fmt.Errorf("UAPI socket for %s: %w", name, err)
	}
	g.closers = append(g.closers, ln.Close)
	g.wg.Add(2)
	go func() {
		defer g.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go g.dev.IpcHandle(c)
		}
	}()
	// wg(8) may change the allowed IPs: keep the LAN filter in step.
	go func() {
		defer g.wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-g.stop:
				return
			case <-t.C:
				if err := g.syncPrefixes(); err != nil {
					log.Warn("LAN XDP filter", "err", err)
				}
			}
		}
	}()
	return g, nil
}

// syncPrefixes makes the LAN XDP filter redirect exactly the allowed IPs
// wireguard-go has (read over its UAPI "get").
func (g *compatGateway) syncPrefixes() error {
	var sb strings.Builder
	if err := g.dev.IpcGetOperation(&sb); err != nil {
		return fmt.Errorf("read wireguard-go's allowed IPs: %w", err)
	}
	want := make(map[netip.Prefix]bool)
	sc := bufio.NewScanner(strings.NewReader(sb.String()))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "allowed_ip="); ok {
			if p, err := netip.ParsePrefix(v); err == nil {
				want[p.Masked()] = true
			}
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var errs []error
	for p := range want {
		if !g.prefixes[p] {
			if err := g.lan.AddPrefix(p); err != nil {
				errs = append(errs, fmt.Errorf("add %v: %w", p, err))
				continue
			}
			g.prefixes[p] = true
		}
	}
	for p := range g.prefixes {
		if !want[p] {
			if err := g.lan.DeletePrefix(p); err != nil {
				errs = append(errs, fmt.Errorf("delete %v: %w", p, err))
				continue
			}
			delete(g.prefixes, p)
		}
	}
	return errors.Join(errs...)
}

func (g *compatGateway) stats() CompatStats {
	return CompatStats{Bind: g.bind.Stats(), LAN: g.lanDev.Stats()}
}

// Close stops wireguard-go (which closes the bind and the PortDevice),
// removes the UAPI socket and detaches the XDP programs.
func (g *compatGateway) Close() error {
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

// upCompat runs compat mode until SIGINT or SIGTERM.
func upCompat(log *slog.Logger, name string, f *config.File, w config.WGPIO) error {
	g, err := startCompat(log, name, f, w)
	if err != nil {
		return explain(err)
	}
	stopStats, err := serveStats(name, func() any {
		s := g.stats()
		return GatewayStats{Name: name, Mode: string(config.ModeCompat), Compat: &s}
	})
	if err != nil {
		g.Close()
		return err
	}
	log.Info("running stock wireguard-go on wgpio bind and tundev; stop with Ctrl-C or SIGTERM", "name", name, "uapi", "/var/run/wireguard/"+name+".sock")
	sig := waitSignal()
	log.Info("stopping", "signal", sig.String())
	final := g.stats()
	stopStats()
	err = g.Close()
	log.Info("final counters", "bind_rx", final.Bind.RXPackets, "bind_tx", final.Bind.TXPackets, "lan_rx", final.LAN.RXPackets, "lan_tx", final.LAN.TXPackets)
	return err
}
