//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/internal/testenv"
)

// TestForwardingRules: a fresh namespace has no forwarding rules; an
// nftables forward chain with a rule, and a postrouting chain that drops
// by policy, are both reported; a chain on another hook is not.
func TestForwardingRules(t *testing.T) {
	tp := testenv.Topology(t, "nf")
	ns := testenv.NS(t, tp, "a")
	legacyMissing := ""
	// t.Fatal and t.Skip stay on the test's goroutine, outside ns.Do.
	err := ns.Do(func() error {
		rules, err := forwardingRules([]string{"lo"})
		if err != nil {
			return err
		}
		if len(rules) != 0 {
			t.Errorf("fresh namespace: forwardingRules = %q, want none", rules)
		}
		// Empty legacy tables (asking for one makes the kernel create
		// it in this namespace) hold only their built-in chains: not
		// reported.
		for _, table := range []string{"filter", "nat"} {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
			if err != nil {
				return err
			}
			var info iptGetinfo
			copy(info.Name[:], table)
			n := uint32(unsafe.Sizeof(info))
			_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_IP, iptSOGetInfo, uintptr(unsafe.Pointer(&info)), uintptr(unsafe.Pointer(&n)), 0)
			unix.Close(fd)
			if e != 0 {
				legacyMissing = table
				return nil
			}
		}
		if names, _ := os.ReadFile("/proc/thread-self/net/ip_tables_names"); !strings.Contains(string(names), "filter") {
			return fmt.Errorf("/proc/thread-self/net/ip_tables_names = %q after asking for the filter table, want it listed", names)
		}
		if rules, err = forwardingRules([]string{"lo"}); err != nil || len(rules) != 0 {
			t.Errorf("empty legacy tables: forwardingRules = %q, %v; want none", rules, err)
		}
		c, err := nftables.New()
		if err != nil {
			return err
		}
		tb := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "wgpiotest"})
		fwd := c.AddChain(&nftables.Chain{Name: "fwd", Table: tb, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter})
		c.AddRule(&nftables.Rule{Table: tb, Chain: fwd, Exprs: []expr.Any{&expr.Counter{}}})
		drop := nftables.ChainPolicyDrop
		c.AddChain(&nftables.Chain{Name: "post", Table: tb, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityFilter, Policy: &drop})
		in := c.AddChain(&nftables.Chain{Name: "in", Table: tb, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter})
		c.AddRule(&nftables.Rule{Table: tb, Chain: in, Exprs: []expr.Any{&expr.Counter{}}})
		if err := c.Flush(); err != nil {
			return err
		}
		rules, err = forwardingRules([]string{"lo"})
		if err != nil {
			return err
		}
		all := strings.Join(rules, "\n")
		for _, want := range []string{
			"nftables inet wgpiotest chain fwd (forward hook, type filter): 1 rule",
			"nftables inet wgpiotest chain post (postrouting hook, type filter): 0 rules, policy drop",
		} {
			if !strings.Contains(all, want) {
				t.Errorf("forwardingRules = %q, want a line %q", rules, want)
			}
		}
		if len(rules) != 2 {
			t.Errorf("forwardingRules = %q, want 2 lines (the input chain is not transit traffic's)", rules)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if legacyMissing != "" {
		testenv.Missing(t, "legacy iptables table "+legacyMissing, "a kernel with CONFIG_IP_NF_IPTABLES_LEGACY")
	}
}

// TestNetfilterWarningHostForwards: the start-up warning says that a full
// tunnel's Internet traffic passes the host's rules only when the gateway
// hands it to the kernel (fast path, shared mode, an Address); without an
// exception TUN that traffic is dropped (off_lan), so saying it passes
// them sent a reader looking for a NAT rule that can never apply.
func TestNetfilterWarningHostForwards(t *testing.T) {
	const tun = "through the exception TUN and passes them"
	if w := netfilterWarning(true); !strings.Contains(w, tun) {
		t.Errorf("netfilterWarning(true) = %q, want it to say %q", w, tun)
	}
	if w := netfilterWarning(false); strings.Contains(w, "exception TUN") || strings.Contains(w, "full-tunnel") {
		t.Errorf("netfilterWarning(false) = %q, want no word of the exception TUN or full tunnels", w)
	}
	if w := netfilterWarning(false); !strings.Contains(w, "does not pass them") {
		t.Errorf("netfilterWarning(false) = %q, want the transit warning itself", w)
	}
}

// TestLegacyNamesErrorSaysWhatToDo: a gateway running as the unit's
// unprivileged user cannot read /proc/net/ip_tables_names (root's alone),
// and its log said only "permission denied": the error now says that the
// legacy rules went unchecked, why, and the command that lists them.
func TestLegacyNamesErrorSaysWhatToDo(t *testing.T) {
	perm := &os.PathError{Op: "open", Path: "/proc/thread-self/net/ip6_tables_names", Err: os.ErrPermission}
	err := legacyNamesError("ip6tables", perm, 998)
	for _, want := range []string{"ip6tables (legacy) rules not checked", "permission denied", "root's alone", "uid 998", "ip6tables-legacy-save"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("legacyNamesError = %q, want it to say %q", err, want)
		}
	}
	if !errors.Is(err, os.ErrPermission) {
		t.Errorf("legacyNamesError = %v, want it to wrap os.ErrPermission", err)
	}
	other := &os.PathError{Op: "read", Path: "/proc/thread-self/net/ip_tables_names", Err: unix.EIO}
	if err := legacyNamesError("iptables", other, 0); !strings.Contains(err.Error(), "iptables (legacy) rules not checked") || strings.Contains(err.Error(), "root's alone") {
		t.Errorf("legacyNamesError(EIO) = %q, want it to say the rules were not checked, and no word of permissions", err)
	}
}
