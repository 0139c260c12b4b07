package fastgw_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/testing/wgpeer"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/internal/twosite"
	"github.com/wgpio/wgpio/noise"
)

// stockEndpoint returns the endpoint stock wireguard-go dev has for its
// only peer (UAPI get), "" when none.
func stockEndpoint(t *testing.T, dev *wgpeer.Device) string {
	t.Helper()
	out, err := dev.Dev.IpcGet()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "endpoint="); ok {
			return v
		}
	}
	return ""
}

// TestWANSecondaryAddress: WireGuard is taken at every address of the WAN,
// as Linux's WireGuard takes it at every address of the host. The WAN has
// a second address beside its first (a keepalived virtual address); a
// stock wireguard-go road warrior that knows the gateway only by that
// address (the gateway has no endpoint for it) handshakes and pings a LAN
// host, and what the gateway sends it leaves from that address (captured
// beside the WAN veth; the road warrior's endpoint for the gateway, which
// follows the source of what it authenticates, stays there), while the
// site peer on the first address keeps working. When the address is
// removed from the WAN, the gateway sends to the road warrior from the
// first address (its persistent keepalive here), the road warrior follows
// it (roaming) and reaches the LAN again.
func TestWANSecondaryAddress(t *testing.T) {
	testenv.Short(t, "builds namespaces and runs a gateway and two stock peers")
	testenv.Tool(t, "ping", "iputils-ping")
	tcpdump := testenv.Tool(t, "tcpdump", "tcpdump")
	tp := testenv.Topology(t, "wa")
	s, err := twosite.Build(tp, twosite.Config{Routed: true, NoFastPath: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	const (
		primary   = "198.18.1.1"
		secondary = "198.18.1.100"
		rwOuter   = "198.18.3.2"
	)
	rw, err := tp.NewNS("rw")
	if err != nil {
		t.Fatal(err)
	}
	v, err := tp.NewVeth(s.Router, rw, topo.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		s.GwA.AddAddr(s.WANA, secondary+"/24"),
		s.Router.AddAddr(v.A, "198.18.3.254/24"),
		rw.AddAddr(v.B, rwOuter+"/24"),
		rw.AddRoute("default", "198.18.3.254", ""),
		s.GwA.AddRoute("198.18.3.0/24", "198.18.1.254", ""),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	rwKey, err := noise.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	rwInner := netip.MustParsePrefix("198.19.101.2/32")
	cfg := s.FastConfig
	cfg.Peers = append(cfg.Peers, gateway.PeerConfig{PublicKey: rwKey.PublicKey(), AllowedIPs: []netip.Prefix{rwInner}, PersistentKeepalive: time.Second})
	var g *fastgw.Gateway
	if err := s.GwA.Do(func() (err error) {
		g, err = fastgw.Start(cfg)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	if got := g.Engine().WANAddrs(); len(got) != 1 || got[0] != netip.MustParseAddr(secondary) {
		t.Fatalf("engine's further WAN addresses = %v, want [%s]", got, secondary)
	}
	wan := ifaceWith(t, s.Router, "198.18.1.254") // the router's end of gwA's WAN veth
	capt := startCapture(t, tcpdump, s.Router, wan, t.TempDir()+"/wan.pcap", "udp and host "+rwOuter)
	rwDev, err := wgpeer.Start(rw, wgpeer.Config{
		Name: topo.UniqueName("wgrw"), PrivateKey: rwKey, ListenPort: 51820,
		Address: rwInner, Routes: []netip.Prefix{netip.MustParsePrefix("198.19.1.0/24")},
		Peers: []wgpeer.Peer{{
			PublicKey: cfg.PrivateKey.PublicKey(), Endpoint: netip.MustParseAddrPort(secondary + ":51820"),
			AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.1.0/24")},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rwDev.Close)

	ping(t, rw, "198.19.1.10", 0)
	ping(t, s.HostB, "198.19.1.10", 0) // the site peer, on the first address
	if ep := stockEndpoint(t, rwDev); ep != secondary+":51820" {
		t.Errorf("road warrior's endpoint for the gateway = %q, want %s:51820 (the gateway answered from elsewhere); drops %s", ep, secondary, dropsString(g))
	}
	if ep := stockEndpoint(t, s.Stock); ep != primary+":51820" {
		t.Errorf("site peer's endpoint for the gateway = %q, want %s:51820", ep, primary)
	}
	fromGw, fromOther := 0, 0
	// The kernel hands captured frames to tcpdump a ring block at a time
	// (TPACKET_V3, with a timeout): wait until what was sent is in the
	// file before stopping it.
	sentFrom := " " + secondary + ".51820 > " + rwOuter + "."
	pollUntil(10*time.Second, func() bool {
		out, _ := s.Router.Run(tcpdump, "-n", "-r", capt.file)
		return strings.Contains(out, sentFrom)
	})
	for _, l := range capt.lines(t) {
		switch {
		case strings.Contains(l, sentFrom):
			fromGw++
		case strings.Contains(l, " > "+rwOuter+"."):
			fromOther++
			t.Errorf("sent to the road warrior from another address than %s: %s", secondary, l)
		}
	}
	if fromGw == 0 {
		t.Errorf("captured nothing from %s to the road warrior (%d from elsewhere)", secondary, fromOther)
	}

	// The address leaves the WAN: the road warrior is sent to from the
	// first address (its persistent keepalive every second) and follows.
	delAddr(t, s.GwA, s.WANA, secondary+"/24")
	if !pollUntil(10*time.Second, func() bool { return len(g.Engine().WANAddrs()) == 0 }) {
		t.Fatalf("engine's further WAN addresses after the removal = %v, want none", g.Engine().WANAddrs())
	}
	if !pollUntil(10*time.Second, func() bool { return stockEndpoint(t, rwDev) == primary+":51820" }) {
		t.Fatalf("road warrior's endpoint for the gateway after %s left = %q, want %s:51820; drops %s", secondary, stockEndpoint(t, rwDev), primary, dropsString(g))
	}
	ping(t, rw, "198.19.1.10", 0)
	ping(t, s.HostB, "198.19.1.10", 0)
}
