//go:build linux

package compatgw

import (
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/bind"
	"github.com/wgpio/wgpio/internal/testenv"
)

// TestListenPortMoves: wg set NAME listen-port N on a running compat
// gateway moves it as it moves wireguard-go's sockets: datagrams to the
// new port reach wireguard-go (the bind's RXPackets) and those to the old
// one go to the host's kernel, what wireguard-go sends leaves from the new
// port, and a port a socket of the host holds is refused with EADDRINUSE.
// (The bind refused every other port with EADDRINUSE and left wireguard-go
// without one: traffic stopped until the old port was set again.)
func TestListenPortMoves(t *testing.T) {
	s := newSite(t)
	pc := s.listenPeer(t)
	delivered := func(port uint16) bool {
		t.Helper()
		return s.reachesWG(t, netip.AddrPortFrom(netip.MustParseAddr("198.18.0.1"), port))
	}
	if !delivered(51820) {
		t.Fatal("a datagram to the listen port 51820 did not reach wireguard-go")
	}
	if got := uapiSet(t, s.name, "listen_port=51900"); got != "errno=0" {
		t.Fatalf("set listen_port=51900: reply %q, want errno=0", got)
	}
	if !delivered(51900) {
		t.Error("after listen-port 51900, a datagram to 51900 did not reach wireguard-go")
	}
	if delivered(51820) {
		t.Error("after listen-port 51900, a datagram to the old port 51820 still reached wireguard-go")
	}
	// Data for the peer makes wireguard-go send a handshake initiation to
	// its endpoint, from the new port.
	if from, want := s.sentFrom(t, pc), netip.MustParseAddrPort("198.18.0.1:51900"); from != want {
		t.Errorf("datagram from %v, want from %v", from, want)
	}

	var held *net.UDPConn
	if err := s.gw.Do(func() (err error) {
		held, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("198.18.0.1:51910")))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if got := uapiSet(t, s.name, "listen_port=51910"); got != "errno=-98" {
		t.Errorf("set listen_port=51910, which a socket of the host holds: reply %q, want errno=-98 (EADDRINUSE)", got)
	}
}

// fateWait bounds how long reachesWG waits for a datagram's fate: on a
// loaded machine the kernel's receive and the bind's reader can each take
// long; a datagram that neither has counted by then is a failure.
const fateWait = 15 * time.Second

// reachesWG sends a datagram from the peer's namespace to dst and reports
// whether it reached wireguard-go: true when the bind handed it on (the
// bind's RXPackets), false when the bind dropped it as not for its
// addresses and port (not_ours) or the WAN's XDP filter left it to the
// gateway's kernel, which has no socket for it (UdpNoPorts) or no longer
// the address (IpInAddrErrors: forwarding is off). Nothing else the tests
// send moves those counters, so the first that moves is this datagram's
// fate, known before reachesWG returns: no datagram of one call is still
// on its way during the next. It fails the test when none moves within
// fateWait.
func (s *site) reachesWG(t *testing.T, dst netip.AddrPort) bool {
	t.Helper()
	f0 := s.fates(t)
	if err := s.peer.Do(func() error {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
		if err != nil {
			return err
		}
		defer c.Close()
		// Transport data for no session: the bind's screen passes it
		// (bind.Config.Screen), wireguard-go drops it (unknown index).
		_, err = c.Write(append([]byte{4, 0, 0, 0}, make([]byte, 28)...))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var f [3]uint64
	moved := 0
	if !testenv.PollUntil(fateWait, func() bool {
		f, moved = s.fates(t), 0
		for i := range f {
			if f[i] > f0[i] {
				moved++
			}
		}
		return moved > 0
	}) {
		t.Fatalf("a datagram to %v: in %v, neither wireguard-go, the bind's drops nor the gateway's kernel had it (bind rx_packets, not_ours, IpInAddrErrors + UdpNoPorts: %v)", dst, fateWait, f)
	}
	if moved > 1 {
		t.Fatalf("a datagram to %v: counted in more than one place (bind rx_packets, not_ours, IpInAddrErrors + UdpNoPorts: %v → %v)", dst, f0, f)
	}
	return f[0] > f0[0]
}

// fates returns the counters of where a datagram from the peer can end:
// the bind's RXPackets and not_ours drops, and the gateway namespace's
// IpInAddrErrors + UdpNoPorts (its kernel received it for an address it
// does not have or a port without a socket).
func (s *site) fates(t *testing.T) [3]uint64 {
	t.Helper()
	var snmp []byte
	if err := s.gw.Do(func() (err error) {
		snmp, err = os.ReadFile("/proc/thread-self/net/snmp")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	b := s.g.Stats().Bind
	return [3]uint64{b.RXPackets, b.Drops[bind.DropNotOurs], testenv.SNMPValue(t, snmp, "Ip", "InAddrErrors") + testenv.SNMPValue(t, snmp, "Udp", "NoPorts")}
}

// followWait bounds how long a test waits for the gateway to follow a
// change of the WAN's addresses (netlink, then the XDP filter).
const followWait = 20 * time.Second

// reachesWGWithin sends datagrams to dst, one at a time (reachesWG), until
// one reaches wireguard-go, for at most wait; it reports whether one did.
func (s *site) reachesWGWithin(t *testing.T, dst netip.AddrPort, wait time.Duration) bool {
	t.Helper()
	for end := time.Now().Add(wait); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if s.reachesWG(t, dst) {
			return true
		}
	}
	return false
}

// pinNeighbour fixes the peer's neighbour entry for addr to the gateway's
// WAN MAC address.
func (s *site) pinNeighbour(t *testing.T, addr netip.Addr) {
	t.Helper()
	mac, err := s.gw.LinkMAC(s.wanDev)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := s.peer.Run("ip", "neigh", "replace", addr.String(), "lladdr", mac.String(), "dev", s.peerDev, "nud", "permanent"); err != nil {
		t.Fatalf("ip neigh replace %v: %v\n%s", addr, err, out)
	}
}

// listenPeer opens the peer's socket at the gateway's endpoint for it
// (198.18.0.2:51820).
func (s *site) listenPeer(t *testing.T) *net.UDPConn {
	t.Helper()
	var pc *net.UDPConn
	if err := s.peer.Do(func() (err error) {
		pc, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("198.18.0.2:51820")))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc
}

// sentFrom makes wireguard-go send to the peer (a LAN host's packet for
// it starts a handshake) and returns the source of what arrives at pc.
func (s *site) sentFrom(t *testing.T, pc *net.UDPConn) netip.AddrPort {
	t.Helper()
	s.host.Run("ping", "-c", "1", "-W", "1", "198.18.9.1")
	pc.SetReadDeadline(time.Now().Add(fateWait))
	buf := make([]byte, 2048)
	_, from, err := pc.ReadFromUDPAddrPort(buf)
	if err != nil {
		t.Fatalf("no datagram from the gateway: %v", err)
	}
	return from
}

// TestWANRenumbered: when the WAN's address is replaced (DHCP,
// renumbering), the compat gateway listens on and sends from the new one,
// as the fast path does and as wireguard-go's wildcard sockets do: a
// datagram to the new address reaches wireguard-go, one to the old address
// does not, and what wireguard-go sends leaves from the new address. (It
// kept the addresses of start: the tunnel died until a restart.)
func TestWANRenumbered(t *testing.T) {
	s := newSite(t)
	pc := s.listenPeer(t)
	old, renumbered := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.7")
	// The peer's neighbour entries for both addresses are fixed: a
	// datagram to the old address leaves the peer whether or not the
	// gateway's kernel would still answer ARP for it.
	s.pinNeighbour(t, old)
	s.pinNeighbour(t, renumbered)
	if !s.reachesWG(t, netip.AddrPortFrom(old, 51820)) {
		t.Fatal("a datagram to the WAN address did not reach wireguard-go")
	}
	// The old address goes first (deleting a primary address deletes
	// the secondaries of its subnet too).
	if out, err := s.gw.Run("ip", "addr", "del", "198.18.0.1/24", "dev", s.wanDev); err != nil {
		t.Fatalf("ip addr del: %v\n%s", err, out)
	}
	if err := s.gw.AddAddr(s.wanDev, "198.18.0.7/24"); err != nil {
		t.Fatal(err)
	}
	// The gateway learns of it through netlink: until then the kernel
	// has datagrams to it.
	if !s.reachesWGWithin(t, netip.AddrPortFrom(renumbered, 51820), followWait) {
		t.Errorf("after renumbering to %v, a datagram to it did not reach wireguard-go", renumbered)
	}
	if s.reachesWG(t, netip.AddrPortFrom(old, 51820)) {
		t.Errorf("after renumbering, a datagram to the old address %v still reached wireguard-go", old)
	}
	if from, want := s.sentFrom(t, pc), netip.AddrPortFrom(renumbered, 51820); from != want {
		t.Errorf("after renumbering, datagram from %v, want from %v", from, want)
	}
}

// TestWANRenumberedAfterChurn: a burst of address changes on the WAN
// interface (hundreds added and removed at once) ends the address
// subscription when its socket overflows (ENOBUFS); the gateway
// subscribes again and re-reads the WAN, so that a renumbering after the
// burst is still followed: a datagram to the new address reaches
// wireguard-go. (The follower ended with its subscription, silently.)
func TestWANRenumberedAfterChurn(t *testing.T) {
	s := newSite(t)
	testenv.AddressChurn(t, s.gw, s.wanDev)
	if out, err := s.gw.Run("ip", "addr", "del", "198.18.0.1/24", "dev", s.wanDev); err != nil {
		t.Fatalf("ip addr del: %v\n%s", err, out)
	}
	if err := s.gw.AddAddr(s.wanDev, "198.18.0.7/24"); err != nil {
		t.Fatal(err)
	}
	renumbered := netip.AddrPortFrom(netip.MustParseAddr("198.18.0.7"), 51820)
	if !s.reachesWGWithin(t, renumbered, followWait) {
		t.Errorf("after the burst and renumbering to %v, a datagram to it did not reach wireguard-go", renumbered)
	}
}

// TestLANAddressesFollowed: the LAN's addresses of now are the host's, as
// in fast-path mode. An address added to the LAN interface while running
// (a keepalived virtual address) that lies in a peer's allowed IPs is
// answered by the host, not sent into the tunnel; and an IPv6 address
// added after start is the source of "packet too big" toward LAN hosts.
// (Compat kept the addresses of start: the first went to wireguard-go and
// the second got no answer at all.)
func TestLANAddressesFollowed(t *testing.T) {
	s := newSite(t)
	before := s.g.Stats().LAN.RXPackets
	s.host.Run("ping", "-c", "1", "-W", "1", "198.18.9.77")
	// ping gives up after a second, which does not wait for the read.
	if !testenv.PollUntil(5*time.Second, func() bool { return s.g.Stats().LAN.RXPackets > before }) {
		t.Fatal("a ping to 198.18.9.77, in the peer's allowed IPs, did not reach wireguard-go")
	}
	if err := s.gw.AddAddr(s.lanDev, "198.18.9.77/32"); err != nil {
		t.Fatal(err)
	}
	var out string
	answered := false
	for end := time.Now().Add(5 * time.Second); !answered && time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		var err error
		out, err = s.host.Run("ping", "-c", "1", "-W", "1", "198.18.9.77")
		answered = err == nil
	}
	if !answered {
		t.Errorf("after adding 198.18.9.77 to the LAN interface, the LAN host's ping to it was not answered by the host:\n%s", out)
	}

	// IPv6 on the LAN, added after start: a LAN host's packet over the
	// tunnel MTU (1420) is answered from the new address.
	if got := uapiSet(t, s.name, "public_key="+s.peerKey, "allowed_ip=2001:2:0:9::/64"); got != "errno=0" {
		t.Fatalf("set allowed_ip=2001:2:0:9::/64: reply %q, want errno=0", got)
	}
	for _, err := range []error{
		s.gw.AddAddr(s.lanDev, "2001:2:0:1::1/64"),
		s.host.AddAddr(s.hostDev, "2001:2:0:1::2/64"),
		s.host.AddRoute("2001:2:0:9::/64", "2001:2:0:1::1", ""),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	ok := false
	for end := time.Now().Add(5 * time.Second); !ok && time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		// ping exits 1 on the error; its output says who sent it. A
		// packet too big of a try before the address was followed left
		// the path MTU cached, and ping would then fail locally ("message
		// too long") without sending: flushed before each try.
		s.host.Run("ip", "-6", "route", "flush", "cache")
		out, _ = s.host.Run("ping", "-6", "-c", "1", "-W", "1", "-M", "do", "-s", "1450", "2001:2:0:9::5")
		ok = strings.Contains(out, "From 2001:2:0:1::1") && strings.Contains(out, "Packet too big: mtu=1420")
	}
	if !ok {
		t.Errorf("ping -6 -s 1450 from the LAN after the LAN got 2001:2:0:1::1: want packet too big from it, got:\n%s", out)
	}
}
