//go:build linux

package kwg_test

import (
	"net/netip"
	"testing"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/testing/kwg"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/noise"
)

// guestRig is the set-up the fast-path tests against the kernel's WireGuard
// share: a gateway namespace whose LAN is a veth to a host namespace
// (lanHost, default route via lanGateway), and a booted guest on a tap in
// the gateway namespace, keyed to talk to gwPriv at ourEndpoint.
type guestRig struct {
	gwNS, lanNS *topo.NS
	lan         *topo.Veth
	gwPriv      noise.PrivateKey
	guestPriv   kwg.Key
	guest       *kwg.Guest
}

// newGuestRig builds a guestRig in a topology named with prefix; everything
// is removed when t ends.
func newGuestRig(t *testing.T, env *kwg.Env, prefix string) *guestRig {
	t.Helper()
	tp := testenv.Topology(t, prefix)
	r := &guestRig{gwNS: testenv.NS(t, tp, "g"), lanNS: testenv.NS(t, tp, "l")}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	var err error
	r.lan, err = tp.NewVeth(r.gwNS, r.lanNS, topo.VethConfig{})
	must(err)
	must(r.gwNS.AddAddr(r.lan.A, lanGateway.String()))
	must(r.lanNS.AddAddr(r.lan.B, lanHost.String()))
	must(r.lanNS.AddRoute("default", lanGateway.Addr().String(), ""))
	r.gwPriv, err = noise.NewPrivateKey()
	must(err)
	r.guestPriv = kwg.NewPrivateKey()
	r.guest, err = kwg.Boot(env, kwg.GuestConfig{
		NS: r.gwNS, Tap: topo.UniqueName("kwt"), TapAddr: tapAddr,
		GuestAddr: guestAddr, GuestTunnel: guestTunnel, PrivateKey: r.guestPriv,
		PeerPublicKey: kwg.Key(r.gwPriv.PublicKey()), PeerEndpoint: ourEndpoint,
		PeerAllowedIPs: []netip.Prefix{netip.PrefixFrom(ourTunnel.Addr(), 32), lanNet},
	})
	must(err)
	t.Cleanup(r.guest.Close)
	return r
}
