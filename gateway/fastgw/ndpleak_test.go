//go:build linux

package fastgw_test

import (
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestNDPUnicastThroughFastPath: ICMPv6 neighbour solicitations and
// advertisements from the LAN to a host beyond the tunnel (unicast,
// neither to nor about the gateway) cross the tunnel through the fast
// path, as Linux forwards them into wg0. Before, the XDP program passed
// every NS and NA it was not addressed by to the host kernel, which with
// AllowedIPs = ::/0 (no route into the exception TUN) and forwarding on
// sent them out of the WAN by its default route, unencrypted: a LAN host
// could put any bytes on the WAN in cleartext (NDP options it chose).
func TestNDPUnicastThroughFastPath(t *testing.T) {
	testenv.Tool(t, "nstat", "iproute2")
	s := newSite(t, twosite.Config{AllowedA: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}})
	// gwA as the Linux router it replaced: forwarding on, a default
	// route out of the WAN.
	if err := s.GwA.Forwarding(); err != nil {
		t.Fatal(err)
	}
	if err := s.GwA.AddRoute("default", "2001:db8:f::2", ""); err != nil {
		t.Fatal(err)
	}
	ping(t, s.HostA, twosite.HostB6.String(), 0)
	before := s.Gateway.Engine().Stats()[0].Encrypted
	const n = 10
	err := s.HostA.Do(func() error {
		fd, err := syscall.Socket(syscall.AF_INET6, syscall.SOCK_RAW, syscall.IPPROTO_ICMPV6)
		if err != nil {
			return err
		}
		defer syscall.Close(fd)
		to := &syscall.SockaddrInet6{Addr: twosite.HostB6.As16()}
		for i := range n {
			// Type, code, checksum (the kernel's), reserved or
			// flags, target (RFC 4861 §4.3, §4.4).
			msg := append([]byte{byte(135 + i%2), 0, 0, 0, 0, 0, 0, 0}, to.Addr[:]...)
			if err := syscall.Sendto(fd, msg, 0, to); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var enc uint64
	testenv.PollUntil(10*time.Second, func() bool {
		enc = s.Gateway.Engine().Stats()[0].Encrypted - before
		return enc >= n
	})
	st := runOK(t, s.GwA, "nstat", "-asz")
	if fwd := nstatValue(t, st, "Ip6OutForwDatagrams"); fwd != 0 {
		t.Errorf("gwA's kernel forwarded %d IPv6 datagrams (NS/NA left the fast path, out of the WAN in cleartext)", fwd)
	}
	if enc < n {
		t.Errorf("the fast path encrypted %d packets, want at least the %d NS and NA", enc, n)
	}
}
