//go:build linux

package fastgw_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/internal/testenv"
)

// TestFullTunnelFragNeeded: a road warrior's 1420-byte packet with DF (IPv4)
// or any 1420-byte IPv6 packet, forwarded by the gateway's kernel along a
// WAN route of MTU 1280, is answered by the kernel with "fragmentation needed"
// / "packet too big", which comes back through the tunnel to the road
// warrior (path-MTU discovery through a full tunnel works, as with wg0).
func TestFullTunnelFragNeeded(t *testing.T) {
	r := newFullTunnelRig(t)
	pingOut(t, r.p1, "198.18.200.1")
	pingOut(t, r.p1, "2001:db8:c8::1")
	// The route's MTU, not the WAN's: a veth of MTU 1280 would drop
	// the road warrior's 1480-byte datagrams on the way in as well.
	for _, gw := range []string{"198.18.1.254", "2001:db8:f1::fe"} {
		if out, err := r.gw.Run("ip", "route", "replace", "default", "via", gw, "mtu", "1280"); err != nil {
			t.Fatalf("set the WAN route's MTU: %v\n%s", err, out)
		}
	}
	for _, c := range []struct{ dst, size, want string }{
		{"198.18.200.1", "1392", "mtu = 1280"},
		{"2001:db8:c8::1", "1372", "mtu=1280"},
	} {
		out, _ := r.p1.Run("ping", "-c", "2", "-i", "0.3", "-W", "1", "-M", "do", "-s", c.size, c.dst)
		if !strings.Contains(out, c.want) {
			t.Errorf("ping -M do -s %s %s from the road warrior: no ICMP error naming the WAN's MTU (%q):\n%s", c.size, c.dst, c.want, out)
		}
	}
	t.Logf("gateway drops: %s", dropsString(r.g))
}

// TestFullTunnelExceptionDown: while the exception TUN is down the
// kernel refuses what the gateway hands it for the Internet: counted
// (ExceptionDrops), the worker goes on with the LAN's traffic, and the
// Internet is reached again once the TUN is up (its routes restored).
func TestFullTunnelExceptionDown(t *testing.T) {
	r := newFullTunnelRig(t)
	pingOut(t, r.p1, "198.18.200.1")
	before := r.g.ExceptionDrops()
	if out, err := r.gw.Run("ip", "link", "set", r.name, "down"); err != nil {
		t.Fatalf("set %s down: %v\n%s", r.name, err, out)
	}
	if out, err := r.p1.Run("ping", "-c", "3", "-i", "0.2", "-W", "1", "198.18.200.1"); err == nil {
		t.Errorf("ping the Internet with the exception TUN down: answered\n%s", out)
	}
	// ping gives up after a second, which does not wait for the worker.
	if !testenv.PollUntil(20*time.Second, func() bool { return r.g.ExceptionDrops()-before >= 3 }) {
		t.Errorf("exception TUN drops grew by %d with it down, want at least 3 (the echo requests)", r.g.ExceptionDrops()-before)
	}
	start := time.Now()
	pingOut(t, r.p1, "198.19.1.10") // the LAN, through the same worker
	t.Logf("LAN reached %v after the TUN went down", time.Since(start))
	if out, err := r.gw.Run("ip", "link", "set", r.name, "up"); err != nil {
		t.Fatalf("set %s up: %v\n%s", r.name, err, out)
	}
	time.Sleep(1100 * time.Millisecond) // past the worker's cached verdict
	out, err := r.p1.Run("ping", "-c", "3", "-i", "0.2", "-W", "1", "198.18.200.1")
	if err != nil {
		t.Errorf("ping the Internet host by the policy route: %v\n%s", err, out)
	}
	t.Logf("gateway drops: %s", dropsString(r.g))
}

// TestFullTunnelRouteChange: the gateway's kernel routes move while a road
// warrior pings the Internet host: the default route from the WAN to the
// LAN (hl, which holds the Internet host's address too and answers with
// TTL 50, so 49 at the road warrior) and back, then a more specific route
// of the LAN added and removed. Each time the verdict follows within
// about a second (the worker asks the routes once per destination a
// second, README "Full tunnels"); the test logs how long it took, and
// fails past 5 s. The road warrior's endpoint keeps a route of its own
// out of the WAN: the default route to the LAN would take it there too,
// where Linux's wg0 would send its datagrams (to a LAN host that does
// not route them), and the gateway sends it nothing then
// (Options.Routed).
func TestFullTunnelRouteChange(t *testing.T) {
	r := newFullTunnelRig(t)
	pingOut(t, r.p1, "198.19.1.10")
	if out, err := r.gw.Run("ip", "route", "add", "198.18.2.0/24", "via", "198.18.1.254"); err != nil {
		t.Fatalf("route toward the road warrior: %v\n%s", err, out)
	}
	for _, c := range [][]string{
		{"ip", "addr", "add", "198.18.200.1/32", "dev", r.lan.B},
		{"sysctl", "-qw", "net.ipv4.ip_default_ttl=50"},
	} {
		if out, err := r.hl.Run(c[0], c[1:]...); err != nil {
			t.Fatalf("%v in hl: %v\n%s", c, err, out)
		}
	}
	until := func(step, want string) {
		t.Helper()
		start := time.Now()
		for {
			out, _ := r.p1.Run("ping", "-c", "1", "-W", "0.2", "198.18.200.1")
			if strings.Contains(out, want) {
				t.Logf("%s: %s after %v", step, want, time.Since(start).Round(time.Millisecond))
				return
			}
			if time.Since(start) > 5*time.Second {
				t.Fatalf("%s: no reply with %s within 5 s; last:\n%s\ngateway drops: %s", step, want, out, dropsString(r.g))
			}
		}
	}
	until("start", "ttl=63")
	for _, s := range []struct {
		step string
		cmd  []string
		want string
	}{
		{"default route to the LAN", []string{"ip", "route", "replace", "default", "via", "198.19.1.10"}, "ttl=49"},
		{"default route back to the WAN", []string{"ip", "route", "replace", "default", "via", "198.18.1.254"}, "ttl=63"},
		{"a /24 of the LAN added", []string{"ip", "route", "add", "198.18.200.0/24", "via", "198.19.1.10"}, "ttl=49"},
		{"the /24 removed", []string{"ip", "route", "del", "198.18.200.0/24"}, "ttl=63"},
	} {
		if out, err := r.gw.Run(s.cmd[0], s.cmd[1:]...); err != nil {
			t.Fatalf("%v in gw: %v\n%s", s.cmd, err, out)
		}
		until(s.step, s.want)
	}
	t.Logf("gateway drops: %s", dropsString(r.g))
}

// TestFullTunnelFlood: a flood of the road warrior's Internet traffic
// (1200-byte UDP datagrams as fast as its wireguard-go sends them, for
// about a second, far more than the road warrior's own TUN queue takes)
// goes through the gateway's worker and kernel: everything the worker
// decrypts is handed to the host (to_host: the exception TUN's write does
// not block, the kernel takes each packet in the write), nothing is
// dropped uncounted at the gateway, and the LAN answers at once after it.
// (The road warrior's LAN pings during the flood are lost in its own TUN
// queue, not at the gateway: they are not asserted.)
func TestFullTunnelFlood(t *testing.T) {
	r := newFullTunnelRig(t)
	pingOut(t, r.p1, "198.18.200.1")
	pingOut(t, r.p1, "198.19.1.10")
	sum := func() (s fastpath.QueueStats) {
		for _, q := range r.g.Engine().Stats() {
			s.Decrypted += q.Decrypted
			s.KeepalivesReceived += q.KeepalivesReceived
			s.ToHost += q.ToHost
			s.WAN.RXPackets += q.WAN.RXPackets
			s.LAN.TXPackets += q.LAN.TXPackets
			for i, d := range q.Drops {
				s.Drops[i] += d
			}
		}
		return s
	}
	before := sum()
	deadline := time.Now().Add(time.Second)
	n := 0
	err := r.p1.Do(func() error {
		c, err := net.Dial("udp", "198.18.200.1:9")
		if err != nil {
			return err
		}
		defer c.Close()
		b := make([]byte, 1200)
		for time.Now().Before(deadline) {
			if _, err := c.Write(b); err == nil {
				n++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	pingOut(t, r.p1, "198.19.1.10")
	t.Logf("the LAN answered %v after the flood", time.Since(start).Round(time.Millisecond))
	// A worker counts what it decrypted before it counts where the
	// packets went (after sending them on): the answered ping's own burst
	// may not be counted whole yet.
	var after fastpath.QueueStats
	var dec, host, lan uint64
	testenv.PollUntil(10*time.Second, func() bool {
		after = sum()
		dec = after.Decrypted - before.Decrypted - (after.KeepalivesReceived - before.KeepalivesReceived)
		host = after.ToHost - before.ToHost
		lan = after.LAN.TXPackets - before.LAN.TXPackets
		return host+lan >= dec
	})
	var drops uint64
	for i := range after.Drops {
		if fastpath.DropReason(i) != fastpath.DropHostMulticast {
			drops += after.Drops[i] - before.Drops[i]
		}
	}
	t.Logf("flood: %d datagrams written, %d decrypted, to_host %d, to the LAN %d, exception TUN drops %d, gateway drops: %s",
		n, dec, host, lan, r.g.ExceptionDrops(), dropsString(r.g))
	if host < 1000 || host+lan < dec || drops != 0 || r.g.ExceptionDrops() != 0 {
		t.Errorf("decrypted %d = to_host %d + LAN %d with drops %d and exception TUN drops %d; want at least 1000 to the host, all accounted, no drops",
			dec, host, lan, drops, r.g.ExceptionDrops())
	}
}

// TestFullTunnelPolicyRoute: the gateway's default route toward the
// Internet lives in another table, chosen by an ip rule for what comes in
// through the exception TUN (a multi-WAN host's policy routing): the main
// table has no route toward the Internet host. The fast path cannot
// follow it, but the kernel can: the road warrior's packet goes to the
// host, whose kernel forwards it by its rules, as with Linux's wg0 (not
// held for a LAN neighbour that no route names). The main table keeps a
// route toward the road warrior's endpoint, as wg0 needs one: its own
// datagrams are the host's, which the rule (iif) does not match, and
// without one Linux's wg0 could not send the answer back (ENETUNREACH),
// nor does the gateway (Options.Routed: the endpoint's MAC is taken back
// when its route goes).
func TestFullTunnelPolicyRoute(t *testing.T) {
	r := newFullTunnelRig(t)
	pingOut(t, r.p1, "198.18.200.1")
	for _, c := range [][]string{
		{"ip", "route", "add", "198.18.2.0/24", "via", "198.18.1.254"},
		{"ip", "route", "add", "default", "via", "198.18.1.254", "table", "100"},
		{"ip", "rule", "add", "iif", r.name, "lookup", "100"},
		{"ip", "route", "del", "default"},
	} {
		if out, err := r.gw.Run(c[0], c[1:]...); err != nil {
			t.Fatalf("%v in gw: %v\n%s", c, err, out)
		}
	}
	time.Sleep(1100 * time.Millisecond) // past the worker's cached verdict
	out, err := r.p1.Run("ping", "-c", "3", "-i", "0.2", "-W", "1", "198.18.200.1")
	if err != nil {
		t.Errorf("ping the Internet host by the policy route: %v\n%s", err, out)
	}
	t.Logf("gateway drops: %s", dropsString(r.g))
}

// TestFullTunnelBackIntoTUN: a destination no peer's allowed IPs hold but
// the gateway's kernel routes into the exception TUN (an operator's route
// into wg0, as a route kept for a prefix that left the configuration):
// the worker hands the road warrior's packets to the host (its route
// without wg0's is the WAN's default), the kernel sends them back into
// the TUN once, and the engine drops them there as no_route: no loop,
// each counted once on each side.
func TestFullTunnelBackIntoTUN(t *testing.T) {
	r := newFullTunnelRig(t)
	pingOut(t, r.p1, "198.18.200.1")
	if out, err := r.gw.Run("ip", "route", "add", "198.18.200.128/25", "dev", r.name); err != nil {
		t.Fatalf("route into the TUN: %v\n%s", err, out)
	}
	sum := func() (host, noRoute uint64) {
		for _, q := range r.g.Engine().Stats() {
			host += q.ToHost
			noRoute += q.Drops[fastpath.DropNoRoute]
		}
		return host, noRoute
	}
	host0, noRoute0 := sum()
	if out, err := r.p1.Run("ping", "-c", "5", "-i", "0.2", "-W", "1", "198.18.200.129"); err == nil {
		t.Errorf("ping a destination routed back into the TUN: answered\n%s", out)
	}
	// Both counts: the worker counts its handing to the host after the
	// write, by which the kernel may have sent the packet back and the
	// TUN's reader counted it no_route.
	var host, noRoute uint64
	testenv.PollUntil(10*time.Second, func() bool {
		host, noRoute = sum()
		return host-host0 >= 5 && noRoute-noRoute0 >= 5
	})
	if host-host0 != 5 || noRoute-noRoute0 != 5 {
		t.Errorf("to_host grew by %d, no_route by %d; want 5, 5 (once each: no loop)", host-host0, noRoute-noRoute0)
	}
	t.Logf("gateway drops: %s", dropsString(r.g))
}
