//go:build linux

package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"unsafe"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/internal/plural"
)

// The gateway's traffic (fast path and Mode = compat) never enters the
// host's IP stack, so netfilter does not see it: the WAN's XDP program
// takes the WireGuard datagrams to the gateway's port (handshakes, data)
// before the kernel's prerouting and input hooks, the gateway sends its
// own through AF_XDP past the output and postrouting hooks, and the
// transit traffic it carries between WAN and LAN passes no forward hook
// (no conntrack, NAT, nor tcpdump on the host either). A Linux wg0's
// datagrams are a UDP socket's and meet all of them, so a firewall rule
// on the WireGuard port (a blocked or allowed source, a rate limit) that
// held there silently stops holding here. The check below finds the
// host's rules that the gateway's traffic skips, so that `wgpio up` and
// `wgpio check -system` can say they no longer apply to it. Mode =
// compat-mqtun is not checked: its datagrams go through the kernel's
// sockets and its transit traffic through the kernel's forwarding, which
// pass netfilter.

// warnNetfilter logs, in one record, the host's netfilter rules that the
// gateway's traffic no longer passes (netfilterCheck), and what to use
// instead.
func warnNetfilter(log *slog.Logger, f *config.File, w config.WGPIO) {
	msg, rules, err := netfilterCheck(f, w)
	if len(rules) > 0 {
		log.Warn(msg, "rules", strings.Join(rules, "; "))
	}
	if err != nil {
		log.Warn(netfilterReadError, "err", err)
	}
}

// netfilterReadError is the warning of rules that could not be read.
const netfilterReadError = "could not read all of the host's netfilter rules: those that the gateway's traffic skips may go unreported here"

// netfilterCheck is the warning of `wgpio up` and `wgpio check -system`
// (fastpath and compat modes) and the rules it is about (skippedRules, on
// the WAN, the LAN and their trunks), empty when there are none.
func netfilterCheck(f *config.File, w config.WGPIO) (msg string, rules []string, err error) {
	rules, err = skippedRules([]string{w.WAN, w.LAN, trunkOf(w.WAN), trunkOf(w.LAN)})
	port, ports := gatewayPorts(f, w)
	hostForwards := w.Mode == config.ModeFastPath && w.AddressMode != config.AddressOwned && len(f.Interface.Addresses) > 0
	return netfilterWarning(port, ports, hostForwards), rules, err
}

// netfilterWarning is netfilterCheck's message, for the gateway's WAN
// ports from port on (gatewayPorts; 0: not known). It names both kinds of
// traffic that skip the rules, since the chains it lists may be on the
// way of either: a prerouting or input chain that held a wg0 user's
// firewall rule on the WireGuard port, a forward one that held the
// transit traffic's. Only where hostForwards does it say that a full
// tunnel's Internet traffic passes the rules: without an exception TUN
// the fast path drops that traffic (off_lan), and so does compat mode's
// tundev, which sends only to the LAN.
func netfilterWarning(port, ports uint16, hostForwards bool) string {
	udp := fmt.Sprintf("UDP port %d", port)
	switch {
	case port == 0:
		udp = "UDP to its listen port"
	case ports > 1:
		udp = fmt.Sprintf("UDP ports %d-%d", port, int(port)+int(ports)-1)
	}
	msg := "the host has netfilter rules that this gateway's traffic no longer passes: its XDP programs take that traffic before the host's IP stack, and it sends through AF_XDP (no conntrack, NAT, nor tcpdump on the host). " +
		"Prerouting and input chains do not see the WireGuard datagrams to the gateway (" + udp + " at its WAN addresses: handshakes and data; but for those that arrive as IP fragments, which the kernel reassembles), nor output and postrouting chains those it sends, " +
		"so a rule on that port (a blocked or allowed source, a rate limit) does not apply to them; " +
		"forward, prerouting and postrouting chains do not see the traffic it carries between WAN and LAN; netdev chains on its WAN and LAN see neither. " +
		"Filter the WireGuard port in front of the gateway, or run Mode = compat-mqtun, whose datagrams pass netfilter; restrict what crosses with each peer's AllowedIPs, and look at it with `wgpio capture`."
	if hostForwards {
		msg += " (Decrypted traffic the host routes out of another interface than the LAN, such as a full-tunnel peer's Internet traffic, goes to the kernel through the exception TUN and passes its prerouting, forward and postrouting chains.)"
	}
	return msg
}

// skippedRules lists, one line each, the netfilter rules of this network
// namespace that the gateway's traffic would meet on a Linux host with
// wg0 and now skips:
//   - nftables (read over netlink): base chains of the ip, ip6 and inet
//     families on any of the five hooks (prerouting, input, forward,
//     output, postrouting: filter, NAT, mangle, route) that hold rules or
//     drop by policy, and netdev chains on the gateway's interfaces
//     (devs);
//   - legacy iptables: the tables /proc/thread-self/net/ip_tables_names and
//     ip6_tables_names list that hold more than their empty built-in
//     chains (IPT_SO_GET_INFO), with the built-in chains (INPUT, FORWARD,
//     ...) that hold rules (a legacy chain's policy is not read).
//     thread-self, not /proc/net (the main thread's namespace): the
//     caller's thread may be in another network namespace.
//
// iptables-nft rules are nftables tables and show up as such. An error
// means some state could not be read; the lines found so far are returned.
func skippedRules(devs []string) ([]string, error) {
	var out []string
	var errs []error
	nft, err := nftablesRules(devs)
	out = append(out, nft...)
	errs = append(errs, err)
	for _, fam := range []struct {
		names string
		level int
		what  string
	}{{"/proc/thread-self/net/ip_tables_names", unix.SOL_IP, "iptables"}, {"/proc/thread-self/net/ip6_tables_names", unix.SOL_IPV6, "ip6tables"}} {
		lines, err := legacyRules(fam.names, fam.level, fam.what)
		out = append(out, lines...)
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

func nftablesRules(devs []string) ([]string, error) {
	c, err := nftables.New()
	if err != nil {
		return nil, fmt.Errorf("nftables: %w", err)
	}
	defer c.CloseLasting()
	chains, err := c.ListChains()
	if err != nil {
		return nil, fmt.Errorf("nftables: list chains: %w", err)
	}
	chainDevs, devErr := chainDevices()
	if devErr != nil {
		devErr = fmt.Errorf("nftables: devices of the netdev chains: %w", devErr)
	}
	// ours are the devices among devs that the chain ch hooks.
	ours := func(ch *nftables.Chain) string {
		var on []string
		for _, d := range chainDevs[chainKey{ch.Table.Family, ch.Table.Name, ch.Name}] {
			if slices.Contains(devs, d) && !slices.Contains(on, d) {
				on = append(on, d)
			}
		}
		return strings.Join(on, ",")
	}
	var out []string
	for _, ch := range chains {
		if ch.Hooknum == nil || ch.Table == nil {
			continue // not a base chain: reached only by jumps from one
		}
		hook := ""
		switch ch.Table.Family {
		case nftables.TableFamilyIPv4, nftables.TableFamilyIPv6, nftables.TableFamilyINet:
			switch h := int(*ch.Hooknum); {
			case h < len(inetHookNames):
				hook = inetHookNames[h]
			case h == nfInetIngress:
				// An inet ingress chain (Linux 5.10) runs where a
				// netdev one does: after XDP.
				if d := ours(ch); d != "" {
					hook = "ingress " + d
				}
			}
		case nftables.TableFamilyNetdev:
			if d := ours(ch); d != "" {
				hook = "netdev " + d
			}
		}
		if hook == "" {
			continue
		}
		rules, err := c.GetRules(ch.Table, ch)
		if err != nil {
			return out, fmt.Errorf("nftables: rules of %s: %w", ch.Name, err)
		}
		drop := ch.Policy != nil && *ch.Policy == nftables.ChainPolicyDrop
		if len(rules) == 0 && !drop {
			continue
		}
		line := fmt.Sprintf("nftables %s %s chain %s (%s hook, type %s): %s", familyName(ch.Table.Family), ch.Table.Name, ch.Name, hook, ch.Type, plural.Count(len(rules), "rule", "rules"))
		if drop {
			line += ", policy drop"
		}
		out = append(out, line)
	}
	return out, devErr
}

// chainKey names an nftables chain.
type chainKey struct {
	family       nftables.TableFamily
	table, chain string
}

// NFTA_HOOK_DEVS and NFTA_DEVICE_NAME of
// include/uapi/linux/netfilter/nf_tables.h (Linux 5.5: a chain on several
// devices), which golang.org/x/sys/unix lacks.
const (
	nftaHookDevs   = 4
	nftaDeviceName = 1
)

// chainDevices reads the devices of the nftables chains that hook any
// (netdev chains, inet ingress chains), by chain, with one
// NFT_MSG_GETCHAIN dump, as `nft list chains` reads them:
// github.com/google/nftables v0.3.0's ListChains decodes neither
// NFTA_HOOK_DEV nor NFTA_HOOK_DEVS, leaving Chain.Device empty, so that a
// netdev chain on the gateway's WAN or LAN, which the XDP program's
// traffic skips, was never reported.
func chainDevices() (map[chainKey][]string, error) {
	conn, err := netlink.Dial(unix.NETLINK_NETFILTER, nil)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	msgs, err := conn.Execute(netlink.Message{
		Header: netlink.Header{
			Type:  netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETCHAIN),
			Flags: netlink.Request | netlink.Dump,
		},
		Data: []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0}, // struct nfgenmsg: every family
	})
	if err != nil {
		return nil, err
	}
	out := make(map[chainKey][]string)
	for _, m := range msgs {
		if len(m.Data) < 4 {
			continue
		}
		key := chainKey{family: nftables.TableFamily(m.Data[0])}
		var devs []string
		ad, err := netlink.NewAttributeDecoder(m.Data[4:])
		if err != nil {
			return nil, err
		}
		for ad.Next() {
			switch ad.Type() {
			case unix.NFTA_CHAIN_TABLE:
				key.table = ad.String()
			case unix.NFTA_CHAIN_NAME:
				key.chain = ad.String()
			case unix.NFTA_CHAIN_HOOK:
				ad.Nested(func(hook *netlink.AttributeDecoder) error {
					for hook.Next() {
						switch hook.Type() {
						case unix.NFTA_HOOK_DEV:
							devs = append(devs, hook.String())
						case nftaHookDevs:
							hook.Nested(func(names *netlink.AttributeDecoder) error {
								for names.Next() {
									if names.Type() == nftaDeviceName {
										devs = append(devs, names.String())
									}
								}
								return nil
							})
						}
					}
					return nil
				})
			}
		}
		if err := ad.Err(); err != nil {
			return nil, err
		}
		if len(devs) > 0 {
			out[key] = devs
		}
	}
	return out, nil
}

// inetHookNames are the names of the ip, ip6 and inet families' hooks,
// by number (NF_INET_PRE_ROUTING to NF_INET_POST_ROUTING of
// include/uapi/linux/netfilter.h), as nft(8) names them; legacyHookNames
// are iptables' names of the built-in chains on them.
var (
	inetHookNames   = [...]string{"prerouting", "input", "forward", "output", "postrouting"}
	legacyHookNames = [...]string{"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"}
)

// nfInetIngress is NF_INET_INGRESS of include/uapi/linux/netfilter.h: the
// inet family's per-device ingress hook (Linux 5.10).
const nfInetIngress = 5

// legacyNamesError is legacyRules' error when the list of legacy tables
// cannot be read: the kernel makes it root's alone (mode 0440), so a
// gateway running as another user with capabilities (dist/wgpio.service)
// cannot read it. The error says what was left unchecked and how to
// check it by hand, where the bare "permission denied" left a reader of
// the log guessing. euid is the process's effective user ID.
func legacyNamesError(what string, err error, euid int) error {
	if !errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("%s (legacy) rules not checked: %w", what, err)
	}
	return fmt.Errorf("%s (legacy) rules not checked: %w (the list of tables is root's alone and this process runs as uid %d; list them as root with %s-legacy-save)", what, err, euid, what)
}

func familyName(f nftables.TableFamily) string {
	switch f {
	case nftables.TableFamilyIPv4:
		return "ip"
	case nftables.TableFamilyIPv6:
		return "ip6"
	case nftables.TableFamilyINet:
		return "inet"
	case nftables.TableFamilyNetdev:
		return "netdev"
	}
	return fmt.Sprintf("family-%d", f)
}

// iptGetinfo is struct ipt_getinfo (and ip6t_getinfo) of
// include/uapi/linux/netfilter_ipv4/ip_tables.h.
type iptGetinfo struct {
	Name       [32]byte
	ValidHooks uint32
	HookEntry  [5]uint32
	Underflow  [5]uint32
	NumEntries uint32
	Size       uint32
}

// legacyChainsWithRules names the built-in chains of a legacy table that
// hold rules. A built-in chain's entries run from its hook entry to its
// policy entry (the underflow), both byte offsets into the table's blob
// (struct xt_table_info, net/netfilter/x_tables.c), so one whose hook
// entry lies before its underflow holds rules, and an empty one has the
// two equal; user-defined chains are reached only by jumps from them.
func legacyChainsWithRules(info *iptGetinfo) []string {
	var out []string
	for h, name := range legacyHookNames {
		if info.ValidHooks&(1<<h) != 0 && info.HookEntry[h] < info.Underflow[h] {
			out = append(out, name)
		}
	}
	return out
}

// iptSOGetInfo is IPT_SO_GET_INFO and IP6T_SO_GET_INFO (IPT_BASE_CTL).
const iptSOGetInfo = 64

// legacyRules reports the legacy tables listed in namesFile that hold
// more entries than their empty built-in chains (one policy entry per
// hook and the final error entry). Only listed tables are asked about, so
// that asking loads no table.
func legacyRules(namesFile string, level int, what string) ([]string, error) {
	b, err := os.ReadFile(namesFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // no legacy tables in this kernel or namespace
	}
	if err != nil {
		return nil, legacyNamesError(what, err, os.Geteuid())
	}
	family := unix.AF_INET
	if level == unix.SOL_IPV6 {
		family = unix.AF_INET6
	}
	var out []string
	var fd = -1
	for _, name := range strings.Fields(string(b)) {
		if fd < 0 {
			if fd, err = unix.Socket(family, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW); err != nil {
				return nil, fmt.Errorf("%s: %w", what, os.NewSyscallError("socket", err))
			}
			defer unix.Close(fd)
		}
		var info iptGetinfo
		copy(info.Name[:len(info.Name)-1], name)
		n := uint32(unsafe.Sizeof(info))
		if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), iptSOGetInfo,
			uintptr(unsafe.Pointer(&info)), uintptr(unsafe.Pointer(&n)), 0); e != 0 {
			return out, fmt.Errorf("%s table %s: %w", what, name, os.NewSyscallError("getsockopt", e))
		}
		hooks := 0
		for h := info.ValidHooks; h != 0; h &= h - 1 {
			hooks++
		}
		if extra := int(info.NumEntries) - hooks - 1; extra > 0 {
			line := fmt.Sprintf("%s (legacy) table %s: %s beyond its empty built-in chains", what, name, plural.Count(extra, "entry", "entries"))
			if chains := legacyChainsWithRules(&info); len(chains) > 0 {
				line += ", rules in " + strings.Join(chains, ", ")
			}
			out = append(out, line)
		}
	}
	return out, nil
}
