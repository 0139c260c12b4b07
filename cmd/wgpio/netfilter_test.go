package main

import (
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/wgpio/wgpio/internal/testenv"
)

// TestForwardingRules: a fresh namespace has no forwarding rules; an
// nftables forward chain with a rule, and a postrouting chain that drops
// by policy, are both reported; a chain on another hook is not.
func TestForwardingRules(t *testing.T) {
	tp := testenv.Topology(t, "nf")
	ns := testenv.NS(t, tp, "a")
	err := ns.Do(func() error {
		rules, err := forwardingRules([]string{"lo"})
		if err != nil {
			return err
		}
		if len(rules) != 0 {
			t.Errorf("fresh namespace: forwardingRules = %q, want none", rules)
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
			"nftables inet wgpiotest chain fwd (forward hook, type filter): 1 rules",
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
}
