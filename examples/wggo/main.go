//go:build linux

// Command wggo runs stock wireguard-go (golang.zx2c4.com/wireguard/device),
// unmodified, on wgpio's dataplane: its encrypted side is a bind.Bind over
// an AF_XDP port on the WAN interface, its plaintext side a
// tundev.PortDevice over an AF_XDP port on the LAN interface. No kernel UDP
// socket and no kernel TUN: the frames go between the NIC queues and
// wireguard-go's goroutines. This is wgpio's "compat mode".
//
// The wiring (ports, XDP filters, next hops from the kernel, wireguard-go,
// its UAPI socket, the LAN filter following the allowed IPs) is package
// gateway/compatgw's, which `wgpio up` uses too; read its Start for the
// steps one by one. This example shows the embedding: a configuration file
// in, a running gateway out, its counters at the end.
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
// (shared address mode).
//
// Linux only: every file is built for Linux alone.
package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/gateway/compatgw"
)

// Ignored lists what wggo does not act on in f, as `wgpio up` would warn
// of it: the file's own warnings (keys wgpio never acts on, such as DNS
// or PostUp), a FwMark (wgpio's bind sends through no socket to mark), and every [WGPIO] key but WAN and LAN (MetricsAddress,
// XDPMode, a Mode other than compat...: run `wgpio up` for those). A file written for `wgpio up`
// otherwise started here without its metrics or mode, and said nothing.
func Ignored(f *config.File) []config.Warning {
	out := slices.Clone(f.Warnings)
	if line, ok := f.Interface.Lines["FwMark"]; ok && f.Interface.FwMark != 0 {
		out = append(out, config.Warning{File: f.Name, Line: line, Key: "FwMark",
			Msg: "reported by wg show, but marks no packet: wggo's bind sends through no socket"})
	}
	w := f.WGPIO
	for key, line := range w.Lines {
		// What wggo does anyway is not ignored: compat mode, the kernel
		// owning the addresses.
		same := key == "Mode" && w.Mode == config.ModeCompat || key == "AddressMode" && w.AddressMode == config.AddressShared
		if key != "WAN" && key != "LAN" && !same {
			out = append(out, config.Warning{File: f.Name, Line: line, Key: key,
				Msg: "ignored by wggo, which reads only WAN and LAN of [WGPIO] (wgpio up acts on it)"})
		}
	}
	slices.SortStableFunc(out, func(a, b config.Warning) int { return cmp.Compare(a.Line, b.Line) })
	return out
}

// Start runs wireguard-go as name on the interfaces of f's [WGPIO] section,
// which must be in the calling thread's network namespace, configured with
// f's [Interface] and [Peer] sections, and serves its UAPI socket.
func Start(f *config.File, name string, log *slog.Logger) (*compatgw.Gateway, error) {
	if f.WGPIO.WAN == "" || f.WGPIO.LAN == "" {
		return nil, errors.New("wggo: WAN and LAN are required in [WGPIO]")
	}
	return compatgw.Start(compatgw.Config{
		Name:       name,
		UAPI:       f.UAPI(), // private key, listen port, peers: wireguard-go's own configuration
		ListenPort: f.Interface.ListenPort,
		WAN:        f.WGPIO.WAN,
		LAN:        f.WGPIO.LAN,
		MTU:        f.Interface.MTU,
		Logger:     log,
		// The tunnel's networks: the LAN's packets to their addresses
		// no peer holds are dropped and answered, not routed out of
		// the WAN in cleartext; the first address of each family is the
		// source of the time exceeded sent into the tunnel.
		TunnelPrefixes: f.Interface.Addresses,
		TunnelAddrs:    tunnelAddrs(f.Interface.Addresses),
	})
}

// tunnelAddrs are the addresses of the prefixes ps.
func tunnelAddrs(ps []netip.Prefix) []netip.Addr {
	var out []netip.Addr
	for _, p := range ps {
		out = append(out, p.Addr())
	}
	return out
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
	for _, w := range Ignored(f) {
		log.Warn("config", "warning", w.String())
	}
	// Signals are caught before Start, so that one that comes while it
	// runs stops the gateway once it is up, as one that comes later does.
	// SIGHUP: the terminal it ran in was closed.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	g, err := Start(f, name, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "wggo:", err)
		os.Exit(1)
	}
	log.Info("stock wireguard-go on wgpio bind and tundev", "name", name, "wan", f.WGPIO.WAN, "lan", f.WGPIO.LAN)
	<-sig
	s := g.Stats()
	log.Info("stopping", "bind_rx", s.Bind.RXPackets, "bind_tx", s.Bind.TXPackets, "lan_rx", s.LAN.RXPackets, "lan_tx", s.LAN.TXPackets)
	g.Close()
}
