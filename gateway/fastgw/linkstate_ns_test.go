//go:build linux

package fastgw_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestLinkDownLogged: the LAN or the WAN set down while the gateway runs
// is logged at warning level, naming the interface, what does not leave
// (set down: the port's TX ring holds it, to send it late) and the fix, and set up again is logged too; traffic flows both ways after each,
// and no descriptor or goroutine is left over.
// The gateway stayed silent while what it sent out of a down link was
// counted as sent by it and as TX dropped only by the kernel.
func TestLinkDownLogged(t *testing.T) {
	testenv.Short(t, "builds namespaces and runs a gateway")
	s, _, logs := startLogged(t, "s20old")
	ping := func(when string) {
		t.Helper()
		if err := s.HostA.Ping(twosite.HostB4, 15*time.Second); err != nil {
			t.Fatalf("%s: %v\n%s", when, err, logs.String())
		}
		if err := s.HostB.Ping(twosite.HostA4, 5*time.Second); err != nil {
			t.Fatalf("%s: %v\n%s", when, err, logs.String())
		}
	}
	ping("before")
	before, goroutines := fdTargets(t), runtime.NumGoroutine()
	for _, c := range []struct{ side, dev string }{{"LAN", s.LANA}, {"WAN", s.WANA}} {
		if _, err := s.GwA.Run("ip", "link", "set", "dev", c.dev, "down"); err != nil {
			t.Fatal(err)
		}
		waitLogged(t, logs, c.side+" link down: nothing arrives through it", 1)
		waitLogged(t, logs, "set down, the port's TX ring holds it and sends it late once the link is up (Linux drops it), counted as sent then", 1)
		waitLogged(t, logs, "fix=\"ip link set dev "+c.dev+" up, or check the cable", 1)
		if _, err := s.GwA.Run("ip", "link", "set", "dev", c.dev, "up"); err != nil {
			t.Fatal(err)
		}
		waitLogged(t, logs, c.side+" link up again", 1)
		ping("after the " + c.side + " was set down and up")
	}
	// Nothing the flaps made is left behind.
	if !testenv.PollUntil(10*time.Second, func() bool { return openFDs(t) <= len(before) && runtime.NumGoroutine() <= goroutines }) {
		t.Errorf("after the flaps: %d open files (%d before; new: %s), %d goroutines (%d before)",
			openFDs(t), len(before), newFDs(before, fdTargets(t)), runtime.NumGoroutine(), goroutines)
	}
}
