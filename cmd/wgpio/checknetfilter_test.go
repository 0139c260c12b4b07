//go:build linux

package main

import (
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// TestCheckSystemNetfilter: `wgpio check -system` gives the warning up
// logs at start of the host's netfilter rules that the gateway's traffic
// skips, here an input chain's rule (a wg0 user's firewall on the
// WireGuard port), in fastpath and compat modes, naming the chain and
// the port; it said ok without a word, and the rule silently stopped
// applying once the gateway was up. Not in Mode = compat-mqtun, whose
// datagrams the kernel's sockets take through netfilter; nor without
// rules.
func TestCheckSystemNetfilter(t *testing.T) {
	a, wan, lan, priv, peer := checkSystemRig(t, "cn")
	for dev, addr := range map[string]string{wan.A: "198.18.98.1/24", lan.A: "198.18.97.1/24"} {
		if err := a.AddAddr(dev, addr); err != nil {
			t.Fatal(err)
		}
	}
	fakeForwarding(t, "1", "1") // compat-mqtun refuses to start without it
	dir := t.TempDir()
	run := func(mode string) (string, error) {
		t.Helper()
		return checkSystemOut(t, a, dir, mode, "[Interface]\nPrivateKey = "+priv.Base64()+"\nListenPort = 51820\n[WGPIO]\nMode = "+mode+"\nWAN = "+wan.A+"\nLAN = "+lan.A+
			"\n[Peer]\nPublicKey = "+peer.PublicKey().Base64()+"\nAllowedIPs = 198.18.99.0/24\n")
	}
	modes := []string{"fastpath", "compat", "compat-mqtun"}
	for _, mode := range modes {
		if stderr, err := run(mode); err != nil || strings.Contains(stderr, "netfilter") {
			t.Errorf("Mode = %s, no rules: check -system = %v, stderr %q, want nil and no word of netfilter", mode, err, stderr)
		}
	}
	if err := a.Do(func() error {
		c, err := nftables.New()
		if err != nil {
			return err
		}
		tb := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "t"})
		in := c.AddChain(&nftables.Chain{Name: "input", Table: tb, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter})
		c.AddRule(&nftables.Rule{Table: tb, Chain: in, Exprs: []expr.Any{&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop}}})
		return c.Flush()
	}); err != nil {
		t.Fatal(err)
	}
	for _, mode := range modes[:2] {
		stderr, err := run(mode)
		for _, want := range []string{
			"wgpio: warning: the host has netfilter rules that this gateway's traffic no longer passes",
			"Prerouting and input chains do not see the WireGuard datagrams to the gateway (UDP port 51820 at its WAN addresses",
			"Rules: nftables inet t chain input (input hook, type filter): 1 rule",
		} {
			if err != nil || !strings.Contains(stderr, want) {
				t.Errorf("Mode = %s, an input rule: check -system = %v, stderr %q, want nil and a warning saying %q", mode, err, stderr, want)
			}
		}
	}
	if stderr, err := run("compat-mqtun"); err != nil || strings.Contains(stderr, "netfilter") {
		t.Errorf("Mode = compat-mqtun, an input rule: check -system = %v, stderr %q, want nil and no word of netfilter (its datagrams pass it)", err, stderr)
	}
}
