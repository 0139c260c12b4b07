//go:build linux

package compatgw

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane/afxdp"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// uapiSet sends one set=1 operation (lines without their newlines) to the
// UAPI socket of name and returns the reply's errno line.
func uapiSet(t *testing.T, name string, lines ...string) string {
	t.Helper()
	c, err := net.Dial("unix", "/var/run/wireguard/"+name+".sock")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "set=1\n"+strings.Join(lines, "\n")+"\n\n"); err != nil {
		t.Fatal(err)
	}
	reply, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("read the reply to set %q: %v", lines, err)
	}
	return strings.TrimSuffix(reply, "\n")
}

// site is a compat gateway between a WAN (198.18.0.1/24, the peer's
// namespace at 198.18.0.2) and a LAN (198.18.1.1/24, a host at
// 198.18.1.2 that routes 198.18.5.0/24 and 198.18.9.0/24 through it),
// configured with one peer (peerKey, endpoint 198.18.0.2:51820, allowed
// IPs 198.18.9.0/24). The periodic sync of the LAN filter is set to an
// hour.
type site struct {
	gw, peer, host *topo.NS
	g              *Gateway
	name, peerKey  string
	wanDev, lanDev string // the gateway's WAN and LAN interfaces
	hostDev        string // the LAN host's interface
	peerDev        string // the peer's WAN interface
}

func newSite(t *testing.T, opts ...func(*Config)) *site {
	t.Helper()
	testenv.Root(t)
	testenv.Tool(t, "ping", "iputils-ping")
	tp := testenv.Topology(t, "cgu")
	s := &site{gw: testenv.NS(t, tp, "g"), peer: testenv.NS(t, tp, "p"), host: testenv.NS(t, tp, "h")}
	wan, err := tp.NewVeth(s.gw, s.peer, topo.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	lan, err := tp.NewVeth(s.gw, s.host, topo.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []struct {
		ns        *topo.NS
		dev, cidr string
	}{
		{s.gw, wan.A, "198.18.0.1/24"}, {s.peer, wan.B, "198.18.0.2/24"},
		{s.gw, lan.A, "198.18.1.1/24"}, {s.host, lan.B, "198.18.1.2/24"},
	} {
		if err := a.ns.AddAddr(a.dev, a.cidr); err != nil {
			t.Fatal(err)
		}
	}
	for _, dst := range []string{"198.18.5.0/24", "198.18.9.0/24"} {
		if err := s.host.AddRoute(dst, "198.18.1.1", ""); err != nil {
			t.Fatal(err)
		}
	}
	s.wanDev, s.lanDev, s.hostDev, s.peerDev = wan.A, lan.A, lan.B, wan.B
	s.name = topo.UniqueName("wgpu")
	s.peerKey = strings.Repeat("22", 32)
	cfg := Config{
		Name: s.name, ListenPort: 51820, WAN: wan.A, LAN: lan.A,
		Attach:       afxdp.AttachGeneric,
		SyncInterval: time.Hour,
		UAPI: "private_key=" + strings.Repeat("11", 32) + "\nlisten_port=51820\n" +
			"public_key=" + s.peerKey + "\nendpoint=198.18.0.2:51820\nallowed_ip=198.18.9.0/24\n",
	}
	for _, o := range opts {
		o(&cfg)
	}
	if err := s.gw.Do(func() (err error) {
		s.g, err = Start(cfg)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.g.Close() })
	return s
}

// TestUAPISetFollowedAtOnce: an allowed IP added or removed through the
// UAPI socket (wg set, wg syncconf) is in the LAN's XDP filter when the
// reply comes, as a Linux wg0 routes by it when wg returns: a LAN host's
// packet to a prefix just added reaches wireguard-go (the LAN device's
// RXPackets), one to a prefix just removed goes to the host's kernel. The
// periodic sync is set to an hour, so only the reply path can pass.
func TestUAPISetFollowedAtOnce(t *testing.T) {
	s := newSite(t)
	g, host, name, peerKey := s.g, s.host, s.name, s.peerKey

	// reaches sends one ping from the host to dst and reports whether the
	// LAN device read a packet within 5 s (the ping itself is never
	// answered: the peer does not exist; it gives up after a second,
	// before a busy machine's read).
	reaches := func(dst string) bool {
		before := g.Stats().LAN.RXPackets
		host.Run("ping", "-c", "1", "-W", "1", dst)
		return testenv.PollUntil(5*time.Second, func() bool { return g.Stats().LAN.RXPackets > before })
	}
	if reaches("198.18.5.1") {
		t.Fatalf("a packet to 198.18.5.1, in no peer's allowed IPs, reached wireguard-go")
	}
	if got := uapiSet(t, name, "public_key="+peerKey, "allowed_ip=198.18.5.0/24"); got != "errno=0" {
		t.Fatalf("set allowed_ip=198.18.5.0/24: reply %q, want errno=0", got)
	}
	if !reaches("198.18.5.1") {
		t.Errorf("just after wg set added 198.18.5.0/24, a packet to 198.18.5.1 did not reach wireguard-go (the LAN filter does not have the prefix yet)")
	}
	if got := uapiSet(t, name, "public_key="+peerKey, "replace_allowed_ips=true", "allowed_ip=198.18.9.0/24"); got != "errno=0" {
		t.Fatalf("set replace_allowed_ips: reply %q, want errno=0", got)
	}
	if reaches("198.18.5.1") {
		t.Errorf("just after wg set removed 198.18.5.0/24, a packet to 198.18.5.1 still reached wireguard-go")
	}
	// A bad request is answered as wireguard-go answers it.
	if got := uapiSet(t, name, "public_key="+peerKey, "allowed_ip=nonsense"); got != "errno=-22" {
		t.Errorf("set allowed_ip=nonsense: reply %q, want errno=-22 (EINVAL)", got)
	}
}
