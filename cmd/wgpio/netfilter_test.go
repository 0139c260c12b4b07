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

// TestSkippedRules: a fresh namespace has no rules the gateway's traffic
// skips; an nftables forward chain with a rule, and a postrouting chain
// that drops by policy, are both reported (transit traffic's), and so are
// an input chain and a prerouting chain that drop a source's datagrams to
// the WireGuard port (the gateway's own datagrams skip them too: the XDP
// program takes them first; before, an input chain was not reported, and
// a wg0 user's firewall rule on the port silently stopped applying); a
// chain with neither rules nor a drop policy is not.
func TestSkippedRules(t *testing.T) {
	tp := testenv.Topology(t, "nf")
	ns := testenv.NS(t, tp, "a")
	legacyMissing := ""
	// t.Fatal and t.Skip stay on the test's goroutine, outside ns.Do.
	err := ns.Do(func() error {
		rules, err := skippedRules([]string{"lo"})
		if err != nil {
			return err
		}
		if len(rules) != 0 {
			t.Errorf("fresh namespace: skippedRules = %q, want none", rules)
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
		if rules, err = skippedRules([]string{"lo"}); err != nil || len(rules) != 0 {
			t.Errorf("empty legacy tables: skippedRules = %q, %v; want none", rules, err)
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
		// The user's report: ip saddr 198.18.1.2 udp dport 51820 drop,
		// at input and at prerouting priority -300.
		block := []expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{198, 18, 1, 2}},
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_UDP}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{51820 >> 8, 51820 & 0xff}},
			&expr.Counter{},
			&expr.Verdict{Kind: expr.VerdictDrop},
		}
		in := c.AddChain(&nftables.Chain{Name: "in", Table: tb, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter})
		c.AddRule(&nftables.Rule{Table: tb, Chain: in, Exprs: block})
		pre := c.AddChain(&nftables.Chain{Name: "pre", Table: tb, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityRef(-300)})
		c.AddRule(&nftables.Rule{Table: tb, Chain: pre, Exprs: block})
		// A legacy-style host firewall: output dropping by policy.
		c.AddChain(&nftables.Chain{Name: "out", Table: tb, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter, Policy: &drop})
		// An ingress filter on one of the gateway's interfaces (lo
		// here): after XDP, so the gateway's traffic skips it.
		nd := c.AddTable(&nftables.Table{Family: nftables.TableFamilyNetdev, Name: "wgpiotest"})
		ing := c.AddChain(&nftables.Chain{Name: "ing", Table: nd, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookIngress, Priority: nftables.ChainPriorityFilter, Device: "lo"})
		c.AddRule(&nftables.Rule{Table: nd, Chain: ing, Exprs: []expr.Any{&expr.Counter{}}})
		// Neither rules nor a drop policy: passes everything.
		c.AddChain(&nftables.Chain{Name: "in2", Table: tb, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter})
		if err := c.Flush(); err != nil {
			return err
		}
		rules, err = skippedRules([]string{"lo"})
		if err != nil {
			return err
		}
		all := strings.Join(rules, "\n")
		for _, want := range []string{
			"nftables inet wgpiotest chain fwd (forward hook, type filter): 1 rule",
			"nftables inet wgpiotest chain post (postrouting hook, type filter): 0 rules, policy drop",
			"nftables inet wgpiotest chain in (input hook, type filter): 1 rule",
			"nftables inet wgpiotest chain pre (prerouting hook, type filter): 1 rule",
			"nftables inet wgpiotest chain out (output hook, type filter): 0 rules, policy drop",
			"nftables netdev wgpiotest chain ing (netdev lo hook, type filter): 1 rule",
		} {
			if !strings.Contains(all, want) {
				t.Errorf("skippedRules = %q, want a line %q", rules, want)
			}
		}
		if len(rules) != 6 {
			t.Errorf("skippedRules = %q, want 6 lines (not the chain in2, which has no rules and accepts)", rules)
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
	const tun = "through the exception TUN and passes its prerouting, forward and postrouting chains"
	if w := netfilterWarning(51820, 1, true); !strings.Contains(w, tun) {
		t.Errorf("netfilterWarning(true) = %q, want it to say %q", w, tun)
	}
	if w := netfilterWarning(51820, 1, false); strings.Contains(w, "exception TUN") || strings.Contains(w, "full-tunnel") {
		t.Errorf("netfilterWarning(false) = %q, want no word of the exception TUN or full tunnels", w)
	}
}

// TestNetfilterWarningSaysWhich: the warning says which traffic skips
// which chains, both kinds true of the chains it lists: the WireGuard
// datagrams to the gateway's port skip prerouting and input (a firewall
// rule on the port no longer applies: it said only "rules for forwarded
// traffic", and a wg0 user's drop of a source's handshakes went unseen),
// the transit traffic skips forward; and what to do instead.
func TestNetfilterWarningSaysWhich(t *testing.T) {
	for _, tc := range []struct {
		port, ports uint16
		want        string
	}{
		{51820, 1, "UDP port 51820 at its WAN addresses"},
		{51820, 4, "UDP ports 51820-51823 at its WAN addresses"},
		{0, 1, "UDP to its listen port at its WAN addresses"},
	} {
		w := netfilterWarning(tc.port, tc.ports, false)
		for _, want := range []string{
			tc.want,
			"Prerouting and input chains do not see the WireGuard datagrams to the gateway",
			"a rule on that port (a blocked or allowed source, a rate limit) does not apply",
			"forward, prerouting and postrouting chains do not see the traffic it carries between WAN and LAN",
			"Filter the WireGuard port in front of the gateway, or run Mode = compat-mqtun",
		} {
			if !strings.Contains(w, want) {
				t.Errorf("netfilterWarning(%d, %d) = %q, want it to say %q", tc.port, tc.ports, w, want)
			}
		}
		if strings.Contains(w, "for forwarded traffic") {
			t.Errorf("netfilterWarning = %q: the rules it lists are not all for forwarded traffic", w)
		}
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
