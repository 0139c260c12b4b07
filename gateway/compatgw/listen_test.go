package compatgw

import (
	"net"
	"net/netip"
	"testing"
	"time"
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
	var pc *net.UDPConn // the peer's socket at the gateway's endpoint for it
	if err := s.peer.Do(func() (err error) {
		pc, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("198.18.0.2:51820")))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	// delivered sends a datagram from the peer's namespace to the
	// gateway's port and reports whether the bind handed it to
	// wireguard-go within wait.
	delivered := func(port uint16, wait time.Duration) bool {
		t.Helper()
		before := s.g.Stats().Bind.RXPackets
		if err := s.peer.Do(func() error {
			c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr("198.18.0.1"), port)))
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Write([]byte{9, 9, 9, 9})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		for end := time.Now().Add(wait); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if s.g.Stats().Bind.RXPackets > before {
				return true
			}
		}
		return false
	}
	if !delivered(51820, 2*time.Second) {
		t.Fatal("a datagram to the listen port 51820 did not reach wireguard-go")
	}
	if got := uapiSet(t, s.name, "listen_port=51900"); got != "errno=0" {
		t.Fatalf("set listen_port=51900: reply %q, want errno=0", got)
	}
	if !delivered(51900, 2*time.Second) {
		t.Error("after listen-port 51900, a datagram to 51900 did not reach wireguard-go")
	}
	if delivered(51820, 300*time.Millisecond) {
		t.Error("after listen-port 51900, a datagram to the old port 51820 still reached wireguard-go")
	}
	// Data for the peer makes wireguard-go send a handshake initiation to
	// its endpoint, from the new port.
	s.host.Run("ping", "-c", "1", "-W", "1", "198.18.9.1")
	pc.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 2048)
	if _, from, err := pc.ReadFromUDPAddrPort(buf); err != nil {
		t.Errorf("no datagram from the gateway after listen-port 51900: %v", err)
	} else if want := netip.MustParseAddrPort("198.18.0.1:51900"); from != want {
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
