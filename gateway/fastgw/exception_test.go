package fastgw_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestExceptionTUNDownAndUp: with the exception TUN down (ip link set wg0
// down), the kernel refuses what the gateway hands it for the host; those
// packets are counted (ExceptionDrops). Brought up again, the interface
// gets back what the kernel removed with it, the routes of the allowed
// IPs into it and the IPv6 tunnel address, and the host answers again.
func TestExceptionTUNDownAndUp(t *testing.T) {
	s := newSite(t, twosite.Config{NoFastPath: true})
	testenv.Tool(t, "ping", "iputils-ping")
	fc := s.FastConfig
	fc.Addresses = append(fc.Addresses, netip.MustParsePrefix("fd00:5::1/64"))
	if err := s.GwA.Do(func() (err error) {
		s.Gateway, err = fastgw.Start(fc)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ping(t, s.HostB, twosite.TunnelA.String(), 0)
	if n := s.Gateway.ExceptionDrops(); n != 0 {
		t.Fatalf("ExceptionDrops = %d with the interface up, want 0", n)
	}
	runOK(t, s.GwA, "ip", "link", "set", s.GwName, "down")
	for range 3 {
		if out, err := s.HostB.Run("ping", "-c", "1", "-W", "1", twosite.TunnelA.String()); err == nil {
			t.Fatalf("ping answered with the exception TUN down:\n%s", out)
		}
	}
	if n := s.Gateway.ExceptionDrops(); n < 3 {
		t.Errorf("ExceptionDrops = %d after 3 pings to a down exception TUN, want >= 3", n)
	}
	runOK(t, s.GwA, "ip", "link", "set", s.GwName, "up")
	ping(t, s.HostB, twosite.TunnelA.String(), 0)
	// The kernel removed the IPv6 address with the link going down.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		out, _ := s.GwA.Run("ip", "-6", "addr", "show", "dev", s.GwName)
		if strings.Contains(out, "fd00:5::1/64") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the IPv6 tunnel address is not back on %s:\n%s", s.GwName, out)
		}
	}
}
