//go:build linux

package kwg_test

import (
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
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

// TestKernelRouter checks the fast path's router behaviour against the
// kernel's WireGuard: time exceeded both ways (a LAN host's `ping -t 1`,
// the guest's own TTL-1 packets arriving through the tunnel), IPv4
// fragmentation of non-DF packets over the tunnel MTU (4,000-byte pings the
// guest reassembles), and "fragmentation needed (mtu 1420)" with DF.
func TestKernelRouter(t *testing.T) {
	env := requireGuest(t)
	r := newGuestRig(t, env, "kwr")
	gwNS, lanNS, lan, gwPriv, guestPriv, g := r.gwNS, r.lanNS, r.lan, r.gwPriv, r.guestPriv, r.guest
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	var gw *fastgw.Gateway
	must(gwNS.Do(func() (err error) {
		gw, err = fastgw.Start(fastgw.Config{
			Name: topo.UniqueName("kwgr"), PrivateKey: gwPriv, ListenPort: ourPort,
			WAN: g.Tap(), LAN: lan.A, Attach: afxdp.AttachGeneric,
			Addresses: []netip.Prefix{ourTunnel},
			Peers: []gateway.PeerConfig{{
				PublicKey: noise.PublicKey(kwg.PublicKey(guestPriv)), Endpoint: guestEP,
				AllowedIPs: []netip.Prefix{guestAllow},
			}},
			Logger: slog.New(slog.DiscardHandler),
		})
		return err
	}))
	t.Cleanup(func() { gw.Close() })
	// The LAN host's MAC into the neighbour table first (see
	// TestKernelFastPath), then a session.
	if _, err := lanNS.Run("ping", "-c", "1", "-W", "5", lanGateway.Addr().String()); err != nil {
		t.Fatal(err)
	}
	guest := guestTunnel.Addr().String()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := lanNS.Run("ping", "-c", "1", "-W", "2", guest); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no session with the kernel peer; drops %s", drops(gw))
		}
	}

	// The LAN host's error is counted once the port took it, after the
	// LAN host may already have printed it: the count settles first, so
	// that the guest's step below counts only its own.
	lanBefore := icmpSent(gw)
	if out, _ := lanNS.Run("ping", "-c", "1", "-W", "3", "-t", "1", guest); !strings.Contains(out, "From "+lanGateway.Addr().String()) || !strings.Contains(out, "Time to live exceeded") {
		t.Errorf("ping -t 1 %s from the LAN: want time exceeded from %v, got:\n%s", guest, lanGateway.Addr(), out)
	}
	before := icmpSentAtLeast(gw, lanBefore+1)
	if before != lanBefore+1 {
		t.Errorf("ping -t 1 %s from the LAN: gateway ICMP sent %d → %d, want one", guest, lanBefore, before)
	}
	// The guest's own packet with TTL 1 expires at the gateway, which
	// answers from its tunnel address through the tunnel (counted before
	// it is sealed): the guest's kernel counts it (busybox ping does not
	// print it).
	te0 := guestTimeExceeded(t, g)
	out, _ := g.Ctl(20*time.Second, "ping -c 1 -W 3 -t 1 "+lanHost.Addr().String())
	if te, after := guestTimeExceeded(t, g), icmpSent(gw); te != te0+1 || after != before+1 {
		t.Errorf("guest ping -t 1 %v: guest InTimeExcds %d → %d, gateway ICMP sent %d → %d; want one time exceeded; guest said:\n%s",
			lanHost.Addr(), te0, te, before, after, out)
	}
	for _, size := range []string{"1472", "4000"} {
		if out, err := lanNS.Run("ping", "-c", "2", "-W", "3", "-M", "dont", "-s", size, guest); err != nil {
			t.Errorf("ping -M dont -s %s %s: %v\n%s", size, guest, err, out)
		}
	}
	if st := gw.Engine().Stats()[0]; st.Fragmented == 0 {
		t.Errorf("nothing fragmented: %+v", st)
	}
	if out, _ := lanNS.Run("ping", "-c", "1", "-W", "3", "-M", "do", "-s", "1472", guest); !strings.Contains(out, "mtu = 1420") {
		t.Errorf("ping -M do -s 1472: want frag needed (mtu = 1420), got:\n%s", out)
	}
	if d := fastpath.TotalDrops(gw.Engine().Stats()); d[fastpath.DropTTLExceeded] < 2 {
		t.Errorf("ttl_exceeded = %d, want 2; drops %s", d[fastpath.DropTTLExceeded], drops(gw))
	}
}

// icmpSent is the number of ICMP errors the gateway's queues sent.
func icmpSent(gw *fastgw.Gateway) uint64 {
	var n uint64
	for _, q := range gw.Engine().Stats() {
		n += q.ICMPSent
	}
	return n
}

// icmpSentAtLeast waits up to five seconds for icmpSent to reach want and
// returns it then (or at the deadline).
func icmpSentAtLeast(gw *fastgw.Gateway, want uint64) uint64 {
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := icmpSent(gw)
		if n >= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// guestTimeExceeded reads the guest kernel's count of ICMP time exceeded
// messages received (Icmp InTimeExcds in /proc/net/snmp).
func guestTimeExceeded(t *testing.T, g *kwg.Guest) int {
	t.Helper()
	out, err := g.Ctl(10*time.Second, "grep Icmp: /proc/net/snmp")
	if err != nil {
		t.Fatalf("read the guest's ICMP counters: %v", err)
	}
	var names, values []string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "Icmp:" {
			continue
		}
		if names == nil {
			names = f
		} else {
			values = f
		}
	}
	for i, n := range names {
		if n == "InTimeExcds" && i < len(values) {
			v, err := strconv.Atoi(values[i])
			if err == nil {
				return v
			}
		}
	}
	t.Fatalf("no InTimeExcds in the guest's /proc/net/snmp:\n%s", out)
	return 0
}
