package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/ipc"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/tundev"
)

// upCompatMQTUN runs stock wireguard-go, unmodified, on wgpio's multi-queue
// kernel TUN and the standard UDP bind: no XDP needed.
func upCompatMQTUN(log *slog.Logger, name string, f *config.File, w config.WGPIO) error {
	queues := w.Queues
	if queues <= 0 {
		queues = 1
	}
	mtu := f.Interface.MTU
	if mtu == 0 {
		mtu = 1420
	}
	t, err := tundev.OpenMultiQueueTUN(name, queues, mtu)
	if err != nil {
		return err
	}
	logger := &device.Logger{
		Verbosef: func(format string, a ...any) { log.Debug(fmt.Sprintf(format, a...)) },
		Errorf:   func(format string, a ...any) { log.Warn(fmt.Sprintf(format, a...)) },
	}
	dev := device.NewDevice(t, conn.NewDefaultBind(), logger)
	defer dev.Close()
	if err := dev.IpcSet(f.UAPI()); err != nil {
		return fmt.Errorf("%s: configure wireguard-go: %w", f.Name, err)
	}
	if err := dev.Up(); err != nil {
		return fmt.Errorf("bring %s up: %w", name, err)
	}
	if err := addAddresses(name, f.Interface.Addresses); err != nil {
		return err
	}
	if err := addAllowedRoutes(log, name, f); err != nil {
		return err
	}
	uf, err := ipc.UAPIOpen(name)
	if err != nil {
		return fmt.Errorf("UAPI socket for %s: %w", name, err)
	}
	ln, err := ipc.UAPIListen(name, uf)
	if err != nil {
		return fmt.Errorf("UAPI socket for %s: %w", name, err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go dev.IpcHandle(c)
		}
	}()
	log.Info("running stock wireguard-go on a multi-queue TUN; stop with Ctrl-C or SIGTERM", "name", name, "queues", queues)
	sig := waitSignal()
	log.Info("stopping", "signal", sig.String())
	return nil
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

// addAllowedRoutes routes every peer's allowed IPs into the TUN, as
// wg-quick does, so that the host's traffic (forwarded or its own) to the
// peers' networks enters the tunnel. Default routes (/0) are left out: they
// would take the route to the peers' endpoints too (wg-quick needs policy
// routing for that); add them by hand with a route to the endpoints.
func addAllowedRoutes(log *slog.Logger, name string, f *config.File) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("find %s: %w", name, err)
	}
	for _, p := range f.Peers {
		for _, a := range p.AllowedIPs {
			if a.Bits() == 0 {
				log.Warn("default route not installed into the TUN; route it by hand, keeping a route to the endpoints", "prefix", a)
				continue
			}
			r := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: &net.IPNet{IP: a.Addr().AsSlice(), Mask: net.CIDRMask(a.Bits(), a.Addr().BitLen())}}
			if err := netlink.RouteReplace(r); err != nil {
				return fmt.Errorf("route %v into %s: %w", a, name, err)
			}
		}
	}
	return nil
}
