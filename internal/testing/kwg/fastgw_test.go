//go:build linux

package kwg_test

import (
	"fmt"
	"github.com/wgpio/wgpio/internal/testenv"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane/afxdp"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/testing/kwg"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/noise"
)

// TestKernelFastPath checks wgpio's fast-path gateway (its own protocol
// engine and control plane) against the kernel's WireGuard. The gateway's
// WAN port is the guest's tap (generic XDP: a tap has no native AF_XDP
// TX), its LAN port a veth to a host namespace that runs the probes; the
// gateway's own tunnel address answers through its exception TUN.
func TestKernelFastPath(t *testing.T) {
	env := requireGuest(t)
	r := newGuestRig(t, env, "kwf")
	gwNS, lanNS, lan, gwPriv, guestPriv, g := r.gwNS, r.lanNS, r.lan, r.gwPriv, r.guestPriv, r.guest
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("guest booted in %v (%s)", g.Boot.Round(time.Millisecond), env.Accel)

	var logs testenv.LogBuffer
	var mu sync.Mutex
	var gw *fastgw.Gateway
	name := topo.UniqueName("kwgp")
	start := func() error {
		mu.Lock()
		defer mu.Unlock()
		if gw != nil {
			fmt.Fprintf(&logs, "fast-path drops before the restart: %s\n", drops(gw))
			if err := gw.Close(); err != nil {
				return err
			}
			gw = nil
		}
		return gwNS.Do(func() (err error) {
			gw, err = fastgw.Start(fastgw.Config{
				Name: name, PrivateKey: gwPriv, ListenPort: ourPort,
				WAN: g.Tap(), LAN: lan.A, Attach: afxdp.AttachGeneric,
				Addresses: []netip.Prefix{ourTunnel},
				Peers: []gateway.PeerConfig{{
					PublicKey: noise.PublicKey(kwg.PublicKey(guestPriv)), Endpoint: guestEP,
					AllowedIPs: []netip.Prefix{guestAllow},
				}},
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			})
			return err
		})
	}
	must(start())
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if gw != nil {
			gw.Close()
		}
	})
	current := func() *fastgw.Gateway {
		mu.Lock()
		defer mu.Unlock()
		return gw
	}

	in := newInterop(t, g, peer{
		probe:        lanNS,
		guestTargets: []netip.Addr{lanHost.Addr(), ourTunnel.Addr()},
		restart:      start,
		counters: func() counters {
			s := current().Device().Stats()
			return counters{
				InitiationsSent: s.InitiationsSent, ResponsesSent: s.ResponsesSent, Sessions: s.KeypairsInstalledTotal,
				Invalid: s.Drops[gateway.DropHandshakeInvalid] + s.Drops[gateway.DropUnknownPeer] + s.Drops[gateway.DropUnknownIndex],
			}
		},
		log: func() string { return logs.String() + "\nfast-path drops: " + drops(current()) },
		final: func(t *testing.T) {
			// The workers publish their byte counts and stamps at most
			// every 50 ms. The byte counts include the handshake's
			// messages: transfer both ways shows in the data stamps.
			var st gateway.PeerStatus
			var sent, received int64
			for i := 0; i < 20; i++ {
				ps := current().Device().Peers()
				if len(ps) == 1 {
					st = ps[0]
					if fp := current().Device().FastPeer(st.PublicKey); fp != nil {
						sent, received = fp.Stamps.LastDataSent.Load(), fp.Stamps.LastDataReceived.Load()
					}
					if !st.LastHandshake.IsZero() && st.TxBytes > 0 && st.RxBytes > 0 && sent > 0 && received > 0 {
						break
					}
				}
				time.Sleep(100 * time.Millisecond)
			}
			if st.LastHandshake.IsZero() || st.TxBytes == 0 || st.RxBytes == 0 || sent == 0 || received == 0 || st.Endpoint != guestEP {
				t.Errorf("wgpio's view of the guest: %+v (data last sent at %d, received at %d ns), want endpoint %v, a handshake and transfer both ways", st, sent, received, guestEP)
			}
			t.Logf("wgpio control plane: %+v", current().Device().Stats())
			t.Logf("wgpio fast-path drops: %s", drops(current()))
		},
	}, kwg.Key(gwPriv.PublicKey()))
	// The fast path drops a packet whose LAN next hop has no MAC yet
	// (no_neighbour; the kernel would queue it during ARP resolution), and
	// the guest's first ping is a single packet: let the LAN host talk to
	// its gateway first, so the gateway's kernel (and the neighbour table
	// the fast path mirrors from it) knows its MAC.
	if _, err := lanNS.Run("ping", "-c", "1", "-W", "5", lanGateway.Addr().String()); err != nil {
		t.Fatal(err)
	}
	in.run()
}

// drops lists the fast path's non-zero drop counters.
func drops(gw *fastgw.Gateway) string {
	if gw == nil {
		return "(gateway stopped)"
	}
	var b strings.Builder
	for r, n := range fastpath.TotalDrops(gw.Engine().Stats()) {
		if n > 0 {
			fmt.Fprintf(&b, "%v=%d ", fastpath.DropReason(r), n)
		}
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}
