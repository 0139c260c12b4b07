//go:build linux

package fastgw_test

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/internal/twosite"
	"github.com/wgpio/wgpio/noise"
)

func queueHeld(g *fastgw.Gateway) (held uint64) {
	for _, q := range g.Engine().Stats() {
		held += q.Held
	}
	return held
}

// TestRemovedStalledPeersFreeHeld: ten peers whose endpoints never answer
// fill the queue's held packets (1,024); removing them frees every one
// (counted peer_removed), and then the stock peer's pre-handshake packets
// are held and delivered, not lost as held_overflow.
func TestRemovedStalledPeersFreeHeld(t *testing.T) {
	s := newSite(t, twosite.Config{})
	g := s.Gateway
	var stalled []noise.PublicKey
	for i := range 10 {
		k, err := noise.NewPrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		pc := gateway.PeerConfig{PublicKey: k.PublicKey(),
			Endpoint:   netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, 1, byte(200 + i)}), 51820),
			AllowedIPs: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 19, 50, byte(1 + i)}), 32)}}
		if err := g.Device().AddPeer(pc); err != nil {
			t.Fatal(err)
		}
		stalled = append(stalled, pc.PublicKey)
	}
	const perPeer = 150
	lostBefore, _ := lanPathLosses(t, s)
	for i := range 10 {
		testenv.SendUDP(t, s.HostA, netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 19, 50, byte(1 + i)}), 9), perPeer)
	}
	// Held counts the handshake initiations waiting for the stalled
	// endpoints' neighbours too, so it can reach the cap before every data
	// packet arrived: wait until the overflow says all of them did (the
	// data packets held are then exactly the cap). All that arrived: the
	// datagrams sent back to back, less what a loaded machine's kernel
	// dropped before the gateway (and counted).
	capHeld := uint64(fastpath.DefaultMaxHeldPerQueue)
	overflow := func() uint64 { return fastpath.TotalDrops(g.Engine().Stats())[fastpath.DropHeldOverflow] }
	arrived := func() uint64 {
		lost, _ := lanPathLosses(t, s)
		return 10*perPeer - min(lost-lostBefore, 10*perPeer)
	}
	if !testenv.PollUntil(10*time.Second, func() bool { return overflow()+capHeld >= arrived() && queueHeld(g) >= capHeld }) {
		_, detail := lanPathLosses(t, s)
		t.Fatalf("held = %d, held_overflow = %d, want the queue's cap %d and %d over it (%d of %d arrived; kernel drops:%s); drops %s",
			queueHeld(g), overflow(), capHeld, arrived()-min(arrived(), capHeld), arrived(), 10*perPeer, detail, dropsString(g))
	}
	for _, k := range stalled {
		if !g.Device().RemovePeer(k) {
			t.Fatalf("RemovePeer(%v) = false", k)
		}
	}
	if !testenv.PollUntil(10*time.Second, func() bool { return queueHeld(g) == 0 }) {
		t.Fatalf("held after removing the stalled peers = %d, want 0; drops %s", queueHeld(g), dropsString(g))
	}
	if n := fastpath.TotalDrops(g.Engine().Stats())[fastpath.DropPeerRemoved]; n < capHeld {
		t.Errorf("peer_removed = %d, want at least %d; drops %s", n, capHeld, dropsString(g))
	}

	// The stock peer has no session yet: its first packets are held for
	// the handshake, then delivered.
	const n = 100
	var rc *net.UDPConn
	if err := s.HostB.Do(func() (err error) {
		rc, err = net.ListenUDP("udp4", &net.UDPAddr{IP: twosite.HostB4.AsSlice(), Port: 9100})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	overflow0 := fastpath.TotalDrops(g.Engine().Stats())[fastpath.DropHeldOverflow]
	testenv.SendUDP(t, s.HostA, netip.AddrPortFrom(twosite.HostB4, 9100), n)
	seen := make(map[uint32]bool)
	buf := make([]byte, 2048)
	rc.SetReadDeadline(time.Now().Add(15 * time.Second))
	for len(seen) < n {
		k, err := rc.Read(buf)
		if err != nil {
			break
		}
		if k == 64 {
			seen[binary.BigEndian.Uint32(buf)] = true
		}
	}
	if len(seen) != n {
		t.Errorf("%d of %d pre-handshake datagrams delivered; held_overflow +%d; drops %s", len(seen), n,
			fastpath.TotalDrops(g.Engine().Stats())[fastpath.DropHeldOverflow]-overflow0, dropsString(g))
	}
}

// TestColdStartIPv6FirstHandshake: over an IPv6 WAN, the first packet after
// start makes gwA send one initiation while the WAN next hop is not yet
// resolved; it waits for the neighbour instead of being dropped, so the
// handshake completes without a retry (one initiation, no no_neighbour).
func TestColdStartIPv6FirstHandshake(t *testing.T) {
	s := newSite(t, twosite.Config{Outer6: true})
	g := s.Gateway
	testenv.SendUDP(t, s.HostA, netip.AddrPortFrom(twosite.HostB4, 9), 1)
	// A handshake worker counts its initiation once its post returns,
	// which may be after the response came back: wait for both.
	if !testenv.PollUntil(20*time.Second, func() bool {
		st := g.Device().Stats()
		return st.KeypairsInstalledTotal > 0 && st.InitiationsSent > 0
	}) {
		t.Fatalf("no handshake; stats %+v; drops %s", g.Device().Stats(), dropsString(g))
	}
	st := g.Device().Stats()
	if st.InitiationsSent != 1 {
		t.Errorf("initiations sent before the first handshake completed = %d, want 1 (no retry)", st.InitiationsSent)
	}
	if n := fastpath.TotalDrops(g.Engine().Stats())[fastpath.DropNoNeighbour]; n != 0 {
		t.Errorf("no_neighbour drops = %d, want 0", n)
	}
	t.Logf("control plane: %+v", st)
}

func wgCmd(t *testing.T, args ...string) string {
	t.Helper()
	testenv.Tool(t, "wg", "wireguard-tools")
	out, err := exec.Command("wg", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("wg %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestListenPortLive: `wg set NAME listen-port N` moves a running fast-path
// gateway (XDP filter, kernel sockets, source port): the stock peer follows
// our new source port (roaming) and traffic keeps flowing; `wg setconf`
// with another port and `listen-port 0` (any free port) work too.
func TestListenPortLive(t *testing.T) {
	s := newSite(t, twosite.Config{})
	testenv.Tool(t, "ping", "iputils-ping")
	ping(t, s.HostA, twosite.HostB4.String(), 0)
	check := func(want string) {
		t.Helper()
		if got := wgCmd(t, "show", s.GwName, "listen-port"); want != "" && got != want {
			t.Fatalf("wg show listen-port = %s, want %s", got, want)
		}
		ping(t, s.HostA, twosite.HostB4.String(), 0)
		port := wgCmd(t, "show", s.GwName, "listen-port")
		if ep := wgCmd(t, "show", s.StockName, "endpoints"); !strings.HasSuffix(ep, ":"+port) {
			t.Errorf("stock peer's endpoint for us = %q, want port %s", ep, port)
		}
		tcpTransfer(t, s.HostA, s.HostB, twosite.HostB4, 1<<20)
	}
	wgCmd(t, "set", s.GwName, "listen-port", "51900")
	check("51900")

	conf := wgCmd(t, "showconf", s.GwName)
	conf = strings.Replace(conf, "ListenPort = 51900", "ListenPort = 51910", 1)
	f := t.TempDir() + "/wg.conf"
	if err := os.WriteFile(f, []byte(conf+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wgCmd(t, "setconf", s.GwName, f)
	check("51910")

	// A port the host already uses is refused (EADDRINUSE, as wireguard-go
	// answers) and the gateway keeps its port.
	var busy *net.UDPConn
	if err := s.GwA.Do(func() (err error) {
		busy, err = net.ListenUDP("udp4", &net.UDPAddr{Port: 51920})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("wg", "set", s.GwName, "listen-port", "51920").CombinedOutput()
	busy.Close()
	if err == nil {
		t.Errorf("wg set listen-port 51920 (in use) succeeded, want an error\n%s", out)
	} else if !strings.Contains(string(out), "in use") {
		t.Errorf("wg set listen-port 51920 (in use): %v: %s; want address in use", err, out)
	}
	check("51910")

	wgCmd(t, "set", s.GwName, "listen-port", "0")
	if p := wgCmd(t, "show", s.GwName, "listen-port"); p == "0" || p == "51910" {
		t.Fatalf("after listen-port 0: port %s, want a new free one", p)
	}
	check("")
}

func delAddr(t *testing.T, ns *topo.NS, dev, cidr string) {
	t.Helper()
	if err := ns.Do(func() error {
		l, err := netlink.LinkByName(dev)
		if err != nil {
			return err
		}
		a, err := netlink.ParseAddr(cidr)
		if err != nil {
			return err
		}
		return netlink.AddrDel(l, a)
	}); err != nil {
		t.Fatalf("delete %s from %s: %v", cidr, dev, err)
	}
}

// TestWANAddressReplaced: the WAN interface's IPv4 address is replaced
// while the gateway runs. The gateway follows (netlink): it sends from the
// new address, the stock peer's endpoint follows (roaming) and the tunnel
// recovers. With no IPv4 address at all, what cannot be sent is counted
// (no_wan_address), and adding one brings the tunnel back.
func TestWANAddressReplaced(t *testing.T) {
	s := newSite(t, twosite.Config{})
	testenv.Tool(t, "ping", "iputils-ping")
	g := s.Gateway
	ping(t, s.HostA, twosite.HostB4.String(), 0)

	delAddr(t, s.GwA, s.WANA, "198.18.1.1/24")
	if err := s.GwA.AddAddr(s.WANA, "198.18.1.11/24"); err != nil {
		t.Fatal(err)
	}
	newAddr := netip.MustParseAddr("198.18.1.11")
	if !testenv.PollUntil(10*time.Second, func() bool { _, a4, _ := g.Engine().WAN(); return a4 == newAddr }) {
		_, a4, _ := g.Engine().WAN()
		t.Fatalf("engine's WAN address = %v, want %v", a4, newAddr)
	}
	ping(t, s.HostA, twosite.HostB4.String(), 0)
	if ep := wgCmd(t, "show", s.StockName, "endpoints"); !strings.Contains(ep, "198.18.1.11:51820") {
		t.Errorf("stock peer's endpoint for us = %q, want 198.18.1.11:51820", ep)
	}
	tcpTransfer(t, s.HostA, s.HostB, twosite.HostB4, 1<<20)

	// No IPv4 address: counted, not silent.
	delAddr(t, s.GwA, s.WANA, "198.18.1.11/24")
	// The engine moves first, then the control plane moves the peers'
	// endpoints; a datagram sent between the two still leaves from the
	// old address (as it would from wg0 in that instant), not counted.
	if !testenv.PollUntil(10*time.Second, func() bool {
		_, a4, _ := g.Engine().WAN()
		d4, _ := g.Device().WANAddrs()
		return !a4.IsValid() && !d4.IsValid()
	}) {
		t.Fatal("engine or control plane still has an IPv4 WAN address after the last one was removed")
	}
	before := fastpath.TotalDrops(g.Engine().Stats())[fastpath.DropNoWANAddress]
	testenv.SendUDP(t, s.HostA, netip.AddrPortFrom(twosite.HostB4, 9), 5)
	if !testenv.PollUntil(5*time.Second, func() bool {
		return fastpath.TotalDrops(g.Engine().Stats())[fastpath.DropNoWANAddress] >= before+5
	}) {
		t.Errorf("no_wan_address drops = %d, want at least %d; drops %s", fastpath.TotalDrops(g.Engine().Stats())[fastpath.DropNoWANAddress], before+5, dropsString(g))
	}
	if err := s.GwA.AddAddr(s.WANA, "198.18.1.12/24"); err != nil {
		t.Fatal(err)
	}
	ping(t, s.HostA, twosite.HostB4.String(), 0)
}

// TestListenPortLiveWithinRange: with SourcePorts 4, `wg set NAME
// listen-port` to a port of the range it has (51820-51823 to 51822) moves
// the gateway, and traffic flows from the new range. Before, the kernel
// sockets of the shared ports were bound again beside the gateway's own
// and the move was refused as "address in use".
func TestListenPortLiveWithinRange(t *testing.T) {
	s := newSite(t, twosite.Config{SourcePorts: 4, CPUs: []int{0}})
	testenv.Tool(t, "ping", "iputils-ping")
	ping(t, s.HostA, twosite.HostB4.String(), 0)
	wgCmd(t, "set", s.GwName, "listen-port", "51822")
	if got := wgCmd(t, "show", s.GwName, "listen-port"); got != "51822" {
		t.Fatalf("wg show listen-port = %s, want 51822", got)
	}
	ping(t, s.HostA, twosite.HostB4.String(), 0)
}

// TestStartPortInUseAttachesNothing: a start refused for a listen port
// another socket holds (a wg0 still up) is refused before the WAN's XDP
// program is attached, so the holder loses none of its datagrams to it.
// Before, the refusal came at the kernel sockets, after the ports, the
// engine and the device had started: the program took the port's
// datagrams for the whole start, and again at every retry of a unit
// that restarts on failure.
func TestStartPortInUseAttachesNothing(t *testing.T) {
	s := newSite(t, twosite.Config{NoFastPath: true, CPUs: []int{0}})
	fc := s.FastConfig
	if fc.ListenPort == 0 {
		fc.ListenPort = 51820
	}
	var held *net.UDPConn
	if err := s.GwA.Do(func() (err error) {
		held, err = net.ListenUDP("udp4", &net.UDPAddr{Port: int(fc.ListenPort)})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	// Watch the WAN for an XDP program while the start runs.
	stop, attached := make(chan struct{}), make(chan bool, 1)
	ready := make(chan struct{})
	go func() {
		seen := false
		s.GwA.Do(func() error {
			close(ready)
			for {
				if l, err := netlink.LinkByName(s.WANA); err == nil && l.Attrs().Xdp != nil && l.Attrs().Xdp.Attached {
					seen = true
				}
				select {
				case <-stop:
					return nil
				case <-time.After(100 * time.Microsecond):
				}
			}
		})
		attached <- seen
	}()
	<-ready
	var err error
	if derr := s.GwA.Do(func() error {
		s.Gateway, err = fastgw.Start(fc)
		return nil
	}); derr != nil {
		t.Fatal(derr)
	}
	time.Sleep(5 * time.Millisecond)
	close(stop)
	var se *fastgw.SettingError
	if !errors.As(err, &se) || se.Key != "ListenPort" {
		if s.Gateway != nil {
			s.Gateway.Close()
		}
		t.Fatalf("Start with the listen port held = %v, want a ListenPort SettingError", err)
	}
	if <-attached {
		t.Errorf("an XDP program was attached to %s during a start refused for its listen port", s.WANA)
	}
}
