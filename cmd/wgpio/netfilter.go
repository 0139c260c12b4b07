//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"unsafe"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/internal/plural"
)

// Transit traffic the fast path (and compat mode) carries between the
// NIC queues never enters the host's IP stack, so netfilter does not see
// it: no FORWARD rules, no conntrack, no NAT, no tcpdump on the host. The
// check below finds the host's rules that such traffic used to pass, so
// that `wgpio up` can say they no longer apply.

// forwardingRules lists, one line each, the netfilter rules of this
// network namespace that transit traffic would meet on a Linux router and
// that the gateway's traffic now skips:
//   - nftables (read over netlink): base chains of the ip, ip6 and inet
//     families on the forward, prerouting and postrouting hooks (filter,
//     NAT, mangle) that hold rules or drop by policy, and netdev chains on
//     the gateway's interfaces (devs);
//   - legacy iptables: the tables /proc/thread-self/net/ip_tables_names and
//     ip6_tables_names list that hold more than their empty built-in
//     chains (IPT_SO_GET_INFO; a legacy chain's policy is not read).
//     thread-self, not /proc/net (the main thread's namespace): the
//     caller's thread may be in another network namespace.
//
// iptables-nft rules are nftables tables and show up as such. An error
// means some state could not be read; the lines found so far are returned.
func forwardingRules(devs []string) ([]string, error) {
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
	var out []string
	for _, ch := range chains {
		if ch.Hooknum == nil || ch.Table == nil {
			continue // not a base chain: reached only by jumps from one
		}
		hook := ""
		switch ch.Table.Family {
		case nftables.TableFamilyIPv4, nftables.TableFamilyIPv6, nftables.TableFamilyINet:
			switch *ch.Hooknum {
			case *nftables.ChainHookForward:
				hook = "forward"
			case *nftables.ChainHookPrerouting:
				hook = "prerouting"
			case *nftables.ChainHookPostrouting:
				hook = "postrouting"
			}
		case nftables.TableFamilyNetdev:
			if slices.Contains(devs, ch.Device) {
				hook = "netdev " + ch.Device
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
	return out, nil
}

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
			out = append(out, fmt.Sprintf("%s (legacy) table %s: %s beyond its empty built-in chains", what, name, plural.Count(extra, "entry", "entries")))
		}
	}
	return out, nil
}
