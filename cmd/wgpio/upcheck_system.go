//go:build linux

package main

// The checks of up (and check -system) against this system: the
// interfaces, addresses, queues and CPUs a configuration names, the TUN
// name it takes, and the warnings of what would stop or hamper a start
// here. The checks of the file and the flags alone are in upcheck.go.

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/dataplane/afxdp"
	"github.com/wgpio/wgpio/gateway/compatgw"
	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/kernelsock"
	"github.com/wgpio/wgpio/internal/nldump"
	"github.com/wgpio/wgpio/internal/plural"
	"github.com/wgpio/wgpio/internal/srcaddr"
)

// checkSystem makes up's checks of f (with w, its [WGPIO] as the flags
// leave it) against this system: its interfaces (WAN and LAN, and in fast
// path their VLANs and frames as the start resolves them), their
// queues and the CPUs (fast path), and in compat-mqtun the forwarding
// sysctls (checkForwarding). A reload that changed keys only a start
// applies makes them too, and warns of what would stop the next start.
// name is the gateway's (up's -name, else the file's), which its TUN
// takes (checkTUNName).
func checkSystem(f *config.File, w config.WGPIO, name string) error {
	if err := checkTUNName(f, w, name); err != nil {
		return err
	}
	switch w.Mode {
	case config.ModeFastPath, config.ModeCompat:
		if err := checkInterfaces(f, w); err != nil {
			return err
		}
		if err := checkWANAddress(f, w); err != nil {
			return err
		}
		if w.Mode == config.ModeCompat {
			// The interfaces as the start reads them (not Ethernet:
			// the loopback, a TUN), which check -system said ok of.
			if _, _, err := compatgw.CheckMTU(w.WAN, w.LAN, f.Interface.MTU); err != nil {
				return startError(f, err)
			}
		}
	case config.ModeCompatMQTUN:
		return checkForwarding(f, w)
	}
	if w.Mode == config.ModeFastPath {
		if err := checkQueues(f.Name, w); err != nil {
			return err
		}
		if len(w.CPUs) > 0 {
			if err := checkCPUs(f.Name, w); err != nil {
				return err
			}
		}
		// The sides as the start resolves them: a WANVLAN or LANVLAN
		// without its kernel VLAN device in shared mode, a VLAN device
		// whose MAC is not its trunk's, frames the LAN cannot carry.
		// check -system said ok of those, and the start refused them.
		// Without the peers, which it reads nothing of (a start with
		// 100,000 of them copied each once more).
		nopeers := *f
		nopeers.Peers = nil
		cfg := fastgwConfig(f.Name, &nopeers, w, false, nil)
		_, _, err := fastgw.CheckMTU(cfg)
		cfg.PrivateKey.Zero() // a copy; not needed here
		if err != nil {
			return startError(f, err)
		}
	}
	return nil
}

// checkTUNName refuses a gateway name that an interface of this network
// namespace already has, where the gateway makes a TUN of that name (fast
// path with an Address: the exception TUN; compat-mqtun), as wg-quick
// refuses ("`wg0' already exists"). One of another type failed the start
// after it had opened its ports (typically the kernel's wg0 of wg-quick,
// still up). A TUN or TAP was worse: Linux's TUNSETIFF attaches to an
// existing TUN of the same queue kind (drivers/net/tun.c, tun_set_iff),
// so the gateway took over a persistent one (`ip tuntap add`) silently
// and left it after its stop with the gateway's address, the routes of
// the allowed IPs, its MTU and offloads, to be taken over again at the
// next start; one another program holds open it would join or fail on.
// A gateway's own TUN is never persistent: Linux deletes it when the last
// descriptor on it closes, at the stop or with a process killed by
// SIGKILL, so it is no obstacle to a restart. A TUN while a gateway of
// this name runs (its name lock held, lockHeld) is that gateway's:
// lockInstance refuses a second one in its own words, check -system
// warns of it (heldWarnings), and a reload checks its own.
func checkTUNName(f *config.File, w config.WGPIO, name string) error {
	tun := w.Mode == config.ModeCompatMQTUN || w.Mode == config.ModeFastPath && len(f.Interface.Addresses) > 0
	if !tun || name == "" {
		return nil
	}
	l, err := netlink.LinkByName(name)
	if err != nil {
		return nil // none (or unreadable: the start says)
	}
	fix := fmt.Sprintf("remove it (ip link del %s), or start the gateway under another name with -name (by default the file's name without .conf)", name)
	t, ok := l.(*netlink.Tuntap)
	if !ok {
		hint := ""
		if l.Type() == "wireguard" {
			hint = fmt.Sprintf(" (the kernel's WireGuard, as wg-quick makes it: wg-quick down %s, or ip link del %s, first)", name, name)
		}
		return fmt.Errorf("%s: the gateway %s makes a TUN named %s, but an interface of that name, of type %s, is in this network namespace (ip -d link show %s)%s; %s",
			f.Name, name, name, l.Type(), name, hint, fix)
	}
	if held, _, _ := lockHeld(nameLockPath(name)); held {
		return nil
	}
	kind := "TUN"
	if t.Mode == netlink.TUNTAP_MODE_TAP {
		kind = "TAP"
	}
	if !t.NonPersist {
		return fmt.Errorf("%s: the gateway %s makes a TUN named %s, but a persistent %s of that name is in this network namespace (ip -d link show %s), made by someone else (ip tuntap add, or another program; "+
			"wgpio's own TUN is never persistent and goes with its process, even one killed with SIGKILL): the gateway would take it over and leave it changed after its stop "+
			"(its address, routes, MTU); %s", f.Name, name, name, kind, name, fix)
	}
	return fmt.Errorf("%s: the gateway %s makes a TUN named %s, but a %s of that name, which another program holds open, is in this network namespace (ip -d link show %s; "+
		"a wireguard-go or another VPN of that name?); stop that program, or start the gateway under another name with -name (by default the file's name without .conf)",
		f.Name, name, name, kind, name)
}

// systemWarnings are the warnings of f (with w) against this system that
// up logs at a start, for `wgpio check -system` to give before one (after
// checkSystem passed), in the start's own words (fastgw.CheckMTU,
// compatgw.CheckMTU): the tunnel MTU against the WAN's, where full-size
// tunnel packets would leave as IP fragments ("WAN MTU: ..."), and a LAN
// whose full frames no AF_XDP frame holds, which the kernel drops before
// the gateway sees them ("LAN MTU: ..."), a LAN without an IPv4 or
// global IPv6 address in shared mode (lanAddressWarning), and the
// forwarding sysctls off for a fast-path gateway with an exception TUN
// in shared mode (warnForwarding), of the gateway name. What cannot be read here gives
// none: the start reports it.
func systemWarnings(f *config.File, w config.WGPIO, name string) []string {
	var wan, lan string
	var out []string
	switch w.Mode {
	case config.ModeFastPath:
		if len(f.Interface.Addresses) > 0 && w.AddressMode != config.AddressOwned {
			if off, err := forwardingOff(f); err == nil && len(off) > 0 {
				out = append(out, forwardingWarning(off, name))
			}
		}
		if w.AddressMode == config.AddressOwned {
			out = append(out, ownedKernelAddrWarnings(f, w)...)
		}
		cfg := fastgwConfig(f.Name, f, w, false, nil)
		cfg.PrivateKey.Zero() // a copy; not needed here
		wan, lan, _ = fastgw.CheckMTU(cfg)
	case config.ModeCompat:
		wan, lan, _ = compatgw.CheckMTU(w.WAN, w.LAN, f.Interface.MTU)
	}
	if warn := lanAddressWarning(f, w); warn != "" {
		out = append(out, warn)
	}
	if warn := listenPortWarning(f, w); warn != "" {
		out = append(out, warn)
	}
	out = append(out, heldWarnings(f, w, name)...)
	out = append(out, routeKeyWarnings(f, w, name)...)
	if w.Mode == config.ModeFastPath || w.Mode == config.ModeCompat {
		// As up warns at start (warnNetfilter), before the rules
		// silently stop applying.
		msg, rules, err := netfilterCheck(f, w)
		if len(rules) > 0 {
			out = append(out, msg+" Rules: "+strings.Join(rules, "; "))
		}
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", netfilterReadError, err))
		}
	}
	if wan != "" {
		out = append(out, "WAN MTU: "+wan)
	}
	if lan != "" {
		out = append(out, "LAN MTU: "+lan)
	}
	return out
}

// ownedKernelAddrWarnings warns, at the AddressMode line, of the
// addresses the kernel has on the WAN and LAN interfaces in owned address
// mode (IPv6 link-local ones aside, which the kernel makes whenever IPv6
// is on), as the start warns of them (fastgw's ownedMode): the kernel
// routes and answers for them as before, while the XDP programs take the
// ARP and NDP for WANAddress and LANAddress, which it does not see. An
// interface that cannot be read is
// checkInterfaces' to report.
func ownedKernelAddrWarnings(f *config.File, w config.WGPIO) []string {
	var out []string
	for _, x := range []struct{ key, name string }{{"WAN", w.WAN}, {"LAN", w.LAN}} {
		ifi, err := net.InterfaceByName(x.name)
		if err != nil {
			continue
		}
		addrs, err := ifi.Addrs()
		if err != nil {
			continue
		}
		var own []string
		for _, a := range addrs {
			p, err := netip.ParsePrefix(a.String())
			if err != nil || p.Addr().IsLinkLocalUnicast() {
				continue
			}
			own = append(own, p.String())
		}
		if len(own) == 0 {
			continue
		}
		out = append(out, config.Warning{File: f.Name, Line: w.Lines["AddressMode"], Key: "AddressMode", Msg: fmt.Sprintf(
			"owned, but the kernel has addresses of its own on %s %s (%s): it routes and answers for them as before, while the XDP programs take the ARP and NDP for WANAddress and LANAddress, which it does not see; "+
				"remove them (ip addr del %s dev %s) or keep AddressMode = shared", x.key, x.name, strings.Join(own, ", "), own[0], x.name)}.String())
	}
	return out
}

// checkInterfaces makes sure WAN and LAN name interfaces of this network
// namespace, reporting a missing one at its key's line (checkFile refused
// a LAN that is the WAN).
func checkInterfaces(f *config.File, w config.WGPIO) error {
	for _, x := range []struct{ key, flag, name string }{{"WAN", "wan", w.WAN}, {"LAN", "lan", w.LAN}} {
		if x.name == "" {
			continue
		}
		if _, err := net.InterfaceByName(x.name); err != nil {
			return keyError(f.Name, w.Lines, x.key, x.flag,
				fmt.Sprintf("no interface %q in this network namespace (list them with `ip link`)%s", x.name, vlanDeviceHint(x.key, x.name, w.Mode)))
		}
	}
	return nil
}

// checkWANAddress refuses, in shared address mode, a WAN whose address
// device has no IPv4 nor usable IPv6 address (srcaddr.Choose, as the
// start reads it), as fastgw and compatgw refuse it at the start: before,
// `wgpio check -system` said ok of such a file and the start failed. The
// address device is the WAN, or with WANVLAN (fast path) the kernel's
// VLAN device of that VLAN on it; where there is none, the start says
// so (checkVLANMode's and fastgw's errors), so nothing is reported here.
//
// It then makes the start's frame check for the WAN's address families
// (checkWANFrames): an IPv6 WAN's outer headers are 20 bytes longer than
// the file-only check (checkFrameMTU) assumes.
func checkWANAddress(f *config.File, w config.WGPIO) error {
	if w.WAN == "" {
		return nil
	}
	if w.AddressMode == config.AddressOwned {
		a := w.WANAddress.Addr()
		return checkWANFrames(f, w, a.Is4(), a.Is6())
	}
	dev, v4, v6, ok := wanSources(w)
	if !ok {
		return nil // checkInterfaces reported it, or the start reports what it cannot read
	}
	if v4.IsValid() || v6.IsValid() {
		return checkWANFrames(f, w, v4.IsValid(), v6.IsValid())
	}
	return keyError(f.Name, w.Lines, "WAN", "wan",
		fmt.Sprintf("WAN %s has no IP address (shared address mode reads it from the kernel: ip addr add ... dev %s; or AddressMode = owned with WANAddress)", dev, dev))
}

// wanSources reads, in shared address mode, the addresses the start would
// send from on w's WAN (its VLAN device in fast-path mode with WANVLAN):
// the device's name and its IPv4 and IPv6 sources (srcaddr.Choose); ok is
// false when the interface or its addresses cannot be read.
func wanSources(w config.WGPIO) (dev string, v4, v6 netip.Addr, ok bool) {
	return sideSources(w.WAN, w.WANVLAN, w.Mode)
}

// sideSources is wanSources for the interface name of either side, with
// vid its VLAN (WANVLAN, LANVLAN; fast-path mode only) in mode.
func sideSources(name string, vid uint16, mode config.Mode) (dev string, v4, v6 netip.Addr, ok bool) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return "", v4, v6, false
	}
	if vid != 0 && mode == config.ModeFastPath {
		if v, isVLAN := l.(*netlink.Vlan); !isVLAN || v.VlanId != int(vid) {
			links, err := nldump.Retry(netlink.LinkList)
			if err != nil {
				return "", v4, v6, false
			}
			v := fastgw.VLANDevice(links, l.Attrs().Index, vid)
			if v == nil {
				return "", v4, v6, false
			}
			l = v
		}
	}
	addrs, err := nldump.Retry(func() ([]netlink.Addr, error) { return netlink.AddrList(l, netlink.FAMILY_ALL) })
	if err != nil {
		return "", v4, v6, false
	}
	v4, v6, _ = srcaddr.Choose(addrs)
	return l.Attrs().Name, v4, v6, true
}

// lanAddressWarning is the warning the start logs, in shared address
// mode, of a LAN (its VLAN device in fast-path mode with LANVLAN) without
// an IPv4 or a global IPv6 address (fastgw.NoLANAddress,
// compatgw.NoLANAddress, in the mode's words: a start, not refused, with
// nothing crossing from the LAN), at the LAN key, "" for none or for a
// LAN that cannot be read (the start says).
func lanAddressWarning(f *config.File, w config.WGPIO) string {
	text := fastgw.NoLANAddress
	switch {
	case w.Mode == config.ModeCompat:
		text = compatgw.NoLANAddress
	case w.Mode != config.ModeFastPath || w.AddressMode == config.AddressOwned:
		return ""
	}
	dev, v4, v6, ok := sideSources(w.LAN, w.LANVLAN, w.Mode)
	if !ok || v4.IsValid() || v6.IsValid() {
		return ""
	}
	return forCheck(keyError(f.Name, w.Lines, "LAN", "lan", fmt.Sprintf("%s: %s; ip addr add ADDRESS/PREFIX dev %s", dev, text, dev))).Error()
}

// listenPortWarning is the warning of `wgpio check -system` for a
// ListenPort another socket of this host holds on the WAN's addresses
// (kernelsock.Probe, as the start probes it before it attaches anything:
// up refuses it), "" for none. A warning, not an error: the holder may be
// this very gateway, already up (its own sockets hold the port).
func listenPortWarning(f *config.File, w config.WGPIO) string {
	if w.Mode != config.ModeFastPath && w.Mode != config.ModeCompat || w.AddressMode == config.AddressOwned {
		return ""
	}
	port, ports := gatewayPorts(f, w)
	if port == 0 {
		return ""
	}
	_, v4, v6, ok := wanSources(w)
	if !ok || !v4.IsValid() && !v6.IsValid() {
		return ""
	}
	if err := kernelsock.Probe(netns.None(), port, ports, v4, v6); err != nil {
		msg := fmt.Sprintf("%v; wgpio up refuses it, unless that socket is this gateway's, already up", err)
		switch {
		case w.Mode == config.ModeFastPath && w.SourcePorts.First != 0:
			return keyError(f.Name, f.WGPIO.Lines, "SourcePorts", "", msg).Error()
		case f.Interface.Lines["ListenPort"] != 0:
			return keyError(f.Name, f.Interface.Lines, "ListenPort", "", msg).Error()
		}
		return fmt.Sprintf("%s: [Interface] ListenPort (left out: the default, %d): %s", f.Name, port, msg)
	}
	return ""
}

// gatewayPorts are the WAN's UDP ports up takes, from port on, ports of
// them (upFastpath: SourcePorts' range, else ListenPort, fastgw's default
// when left out; compat mode: ListenPort, which it requires: 0 when left
// out).
func gatewayPorts(f *config.File, w config.WGPIO) (port, ports uint16) {
	port, ports = f.Interface.ListenPort, 1
	if w.Mode == config.ModeFastPath {
		switch {
		case w.SourcePorts.First != 0:
			port, ports = w.SourcePorts.First, uint16(w.SourcePorts.Len())
		case port == 0:
			port = fastgw.DefaultListenPort
		}
	}
	return port, ports
}

// heldWarnings are the warnings of what up takes in every mode and
// refuses to start on while another process holds it: the UAPI socket of
// the gateway's name (uapiNameFree) and the MetricsAddress
// (listenMetrics). Warnings, not errors, as listenPortWarning's: the
// holder may be this gateway, already up. check -system said ok of both,
// and the start then failed.
func heldWarnings(f *config.File, w config.WGPIO, name string) []string {
	var out []string
	if checkGatewayName(name) == nil {
		if err := uapiNameFree(name); err != nil {
			out = append(out, fmt.Sprintf("%s: %s; unless that is this gateway, already up",
				f.Name, strings.TrimPrefix(err.Error(), "up: ")))
		}
	}
	if w.MetricsAddress != "" {
		ln, err := listenMetrics(f.Name, w)
		if err != nil {
			out = append(out, forCheck(err).Error()+"; wgpio up refuses it, unless that is this gateway's, already up")
		} else {
			ln.Close()
		}
	}
	return out
}

// vlanDeviceHint says how to get VLAN vid of trunk when a missing
// interface is named as the kernel's VLAN device for it ("eth1.200", the
// README's `LAN = eth1.200`) and trunk exists: make that device (module
// 8021q, which a host without VLANs has not loaded), or, in owned
// address mode, which needs none, name the trunk and the VLAN key.
// Nothing in the compat modes, which run on no VLAN of a trunk, or when
// the name is not of that shape.
func vlanDeviceHint(key, name string, mode config.Mode) string {
	if mode != config.ModeFastPath {
		return ""
	}
	i := strings.LastIndexByte(name, '.')
	if i <= 0 {
		return ""
	}
	trunk, id := name[:i], name[i+1:]
	vid, err := strconv.Atoi(id)
	if err != nil || vid < 1 || vid > config.MaxVLANID || strconv.Itoa(vid) != id {
		return ""
	}
	if _, err := net.InterfaceByName(trunk); err != nil {
		return ""
	}
	return fmt.Sprintf("; for VLAN %d of %s make the kernel's VLAN device, `ip link add link %s name %s type vlan id %d` (module 8021q), "+
		"or, in AddressMode = owned, which needs none, set %s = %s and %sVLAN = %d", vid, trunk, trunk, name, vid, key, trunk, key, vid)
}

// maxFastQueues is the most queues (workers) of a fast-path gateway.
const maxFastQueues = 256

// checkQueues checks Queues against the fast path's limit and the RX
// queues WAN and LAN have.
func checkQueues(file string, w config.WGPIO) error {
	if w.Queues > maxFastQueues {
		return keyError(file, w.Lines, "Queues", "queues", fmt.Sprintf("%d queues; the fast path runs at most %d", w.Queues, maxFastQueues))
	}
	for _, dev := range []string{trunkOf(w.WAN), trunkOf(w.LAN)} {
		if n := afxdp.DeviceQueues(dev); dev != "" && n > 0 && w.Queues > n {
			return keyError(file, w.Lines, "Queues", "queues", fmt.Sprintf(
				"%d queues, but %s has %s (ask for fewer, or add queues with ethtool -L %s combined N; on veth: ethtool -L %s rx N tx N)",
				w.Queues, dev, plural.Count(n, "RX queue", "RX queues"), dev, dev))
		}
	}
	return nil
}

// trunkOf returns the parent of a kernel VLAN device (the interface the
// fast path opens for it), else name itself.
func trunkOf(name string) string {
	if l, err := netlink.LinkByName(name); err == nil {
		if v, ok := l.(*netlink.Vlan); ok {
			if p, err := netlink.LinkByIndex(v.ParentIndex); err == nil {
				return p.Attrs().Name
			}
		}
	}
	return name
}

// checkCPUs reports, as an error of the configuration file, a CPU in
// w.CPUs that this process may not run on (outside its affinity mask: not
// on the machine, offline, or excluded by taskset or a cgroup).
func checkCPUs(file string, w config.WGPIO) error {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return fmt.Errorf("read CPU affinity: %w", os.NewSyscallError("sched_getaffinity", err))
	}
	var allowed []string
	for c := range 1024 {
		if set.IsSet(c) {
			allowed = append(allowed, strconv.Itoa(c))
		}
	}
	for _, c := range w.CPUs {
		if !set.IsSet(c) {
			return keyError(file, w.Lines, "CPUs", "",
				fmt.Sprintf("CPU %d is not one this process may run on (allowed: %s)", c, strings.Join(allowed, ",")))
		}
	}
	return nil
}
