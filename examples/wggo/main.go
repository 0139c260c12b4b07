// Command wggo runs stock wireguard-go (golang.zx2c4.com/wireguard/device),
// unmodified, on wgpio's dataplane: its encrypted side is a bind.Bind over
// an AF_XDP port on the WAN interface, its plaintext side a
// tundev.PortDevice over an AF_XDP port on the LAN interface. No kernel UDP
// socket and no kernel TUN: the frames go between the NIC queues and
// wireguard-go's goroutines. This is wgpio's "compat mode".
//
// It reads a wg-quick style file with a [WGPIO] section naming the
// interfaces (package config):
//
//	[Interface]
//	PrivateKey = ...
//	ListenPort = 51820
//	[WGPIO]
//	WAN = eth0
//	LAN = eth1
//	[Peer]
//	PublicKey = ...
//	Endpoint = 203.0.113.7:51820
//	AllowedIPs = 10.2.0.0/16
//
//	wggo -c wg0.conf      # then: wg show wg0
//
// It needs Linux 5.10 or later with XDP on both interfaces (native or generic) and
// root, or CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF (plus RLIMIT_MEMLOCK or
// CAP_IPC_LOCK for the UMEMs). Both interfaces keep their kernel addresses
// (shared address mode). The LAN's XDP filter redirects the peers' allowed
// IPs as configured at start; allowed IPs added later with wg(8) reach
// wireguard-go only if the filter learns them (AddPrefix), which this example
// does not do.
package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/ipc"

	"github.com/wgpio/wgpio/arp"
	"github.com/wgpio/wgpio/bind"
	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/dataplane/afxdp"
	"github.com/wgpio/wgpio/tundev"
)

// Gateway is stock wireguard-go running on wgpio ports.
type Gateway struct {
	Device   *device.Device
	Bind     *bind.Bind
	LAN      *tundev.PortDevice
	wan, lan *afxdp.Port
	uapi     interface{ Close() error }
	closers  []func() error
	stop     chan struct{}
}

// iface is an interface's index and first IPv4 and global IPv6 address.
type iface struct {
	index  int
	v4, v6 netip.Addr
}

func readIface(h *netlink.Handle, name string) (iface, error) {
	l, err := h.LinkByName(name)
	if err != nil {
		return iface{}, fmt.Errorf("interface %s: %w", name, err)
	}
	out := iface{index: l.Attrs().Index}
	addrs, err := h.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return iface{}, fmt.Errorf("addresses of %s: %w", name, err)
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

// Start runs wireguard-go as name on the interfaces of f's [WGPIO] section,
// which must be in the calling thread's network namespace, configured with
// f's [Interface] and [Peer] sections, and serves its UAPI socket.
func Start(f *config.File, name string, log *slog.Logger) (_ *Gateway, err error) {
	w := f.WGPIO
	if w.WAN == "" || w.LAN == "" {
		return nil, errors.New("wggo: WAN and LAN are required in [WGPIO]")
	}
	port := f.Interface.ListenPort
	if port == 0 {
		return nil, errors.New("wggo: ListenPort is required (the XDP filter matches it)")
	}
	mtu := f.Interface.MTU
	if mtu == 0 {
		mtu = 1420
	}
	g := &Gateway{stop: make(chan struct{})}
	defer func() {
		if err != nil {
			g.Close()
		}
	}()
	h, err := netlink.NewHandle()
	if err != nil {
		return nil, fmt.Errorf("wggo: netlink: %w", err)
	}
	g.closers = append(g.closers, func() error { h.Close(); return nil })
	wan, err := readIface(h, w.WAN)
	if err != nil {
		return nil, fmt.Errorf("wggo: %w", err)
	}
	lan, err := readIface(h, w.LAN)
	if err != nil {
		return nil, fmt.Errorf("wggo: %w", err)
	}
	// neighbours follows the kernel's routes and neighbours of one
	// interface (shared address mode).
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

	// The encrypted side: UDP to our address and port goes to AF_XDP.
	if g.wan, err = afxdp.Open(w.WAN, afxdp.Config{Filter: bind.XDPFilter([]netip.Addr{wan.v4, wan.v6}, port, false)}); err != nil {
		return nil, fmt.Errorf("wggo: %w", err)
	}
	bc := bind.Config{Port: g.wan, Addr4: wan.v4, Addr6: wan.v6, ListenPort: port}
	if bc.Routes, bc.Neighbours, err = neighbours(wan.index); err != nil {
		return nil, fmt.Errorf("wggo: %w", err)
	}
	if g.Bind, err = bind.New(bc); err != nil {
		return nil, fmt.Errorf("wggo: %w", err)
	}

	// The plaintext side: frames to the peers' allowed IPs (not to the
	// host's own addresses) go to AF_XDP.
	var host []netip.Addr
	for _, a := range []netip.Addr{lan.v4, lan.v6} {
		if a.IsValid() {
			host = append(host, a)
		}
	}
	if g.lan, err = afxdp.Open(w.LAN, afxdp.Config{Filter: afxdp.Filter{Prefixes: true, HostAddrs: host}}); err != nil {
		return nil, fmt.Errorf("wggo: %w", err)
	}
	for _, p := range f.Peers {
		for _, a := range p.AllowedIPs {
			if err := g.lan.AddPrefix(a); err != nil {
				return nil, fmt.Errorf("wggo: LAN filter: %w", err)
			}
		}
	}
	// Oversized packets are answered from the LAN address, as Linux
	// answers from the address of the interface the answer leaves by.
	pc := tundev.PortConfig{Port: g.lan, Name: name, MTU: mtu, ICMPSource4: lan.v4, ICMPSource6: lan.v6}
	if pc.Routes, pc.Neighbours, err = neighbours(lan.index); err != nil {
		return nil, fmt.Errorf("wggo: %w", err)
	}
	if g.LAN, err = tundev.NewPortDevice(pc); err != nil {
		return nil, fmt.Errorf("wggo: %w", err)
	}

	// Stock wireguard-go on the two.
	logger := &device.Logger{
		Verbosef: func(format string, a ...any) { log.Debug(fmt.Sprintf(format, a...)) },
		Errorf:   func(format string, a ...any) { log.Warn(fmt.Sprintf(format, a...)) },
	}
	g.Device = device.NewDevice(g.LAN, g.Bind, logger)
	if err := g.Device.IpcSet(f.UAPI()); err != nil {
		return nil, fmt.Errorf("wggo: configure wireguard-go: %w", err)
	}
	if err := g.Device.Up(); err != nil {
		return nil, fmt.Errorf("wggo: %w", err)
	}
	uf, err := ipc.UAPIOpen(name)
	if err != nil {
		return nil, fmt.Errorf("wggo: UAPI socket: %w", err)
	}
	ln, err := ipc.UAPIListen(name, uf)
	if err != nil {
		return nil, fmt.Errorf("wggo: UAPI socket: %w", err)
	}
	g.uapi = ln
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go g.Device.IpcHandle(c)
		}
	}()
	return g, nil
}

// Close stops wireguard-go, removes the UAPI socket and detaches the XDP
// programs.
func (g *Gateway) Close() {
	if g.uapi != nil {
		g.uapi.Close()
	}
	if g.Device != nil {
		g.Device.Close() // closes the bind and the PortDevice
	}
	if g.lan != nil {
		g.lan.Close()
	}
	if g.wan != nil {
		g.wan.Close()
	}
	close(g.stop)
	for i := len(g.closers) - 1; i >= 0; i-- {
		g.closers[i]()
	}
}

func main() {
	conf := flag.String("c", "", "wg-quick style configuration `file` with a [WGPIO] section (required)")
	flag.Parse()
	if *conf == "" {
		flag.Usage()
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	f, err := config.Load(*conf)
	if err != nil {
		fmt.Fprintln(os.Stderr, "wggo:", err)
		os.Exit(1)
	}
	name := strings.TrimSuffix(filepath.Base(*conf), ".conf")
	g, err := Start(f, name, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	log.Info("stock wireguard-go on wgpio bind and tundev", "name", name, "wan", f.WGPIO.WAN, "lan", f.WGPIO.LAN)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	s := g.Bind.Stats()
	log.Info("stopping", "bind_rx", s.RXPackets, "bind_tx", s.TXPackets)
	g.Close()
}
