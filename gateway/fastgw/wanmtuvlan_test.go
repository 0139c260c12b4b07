//go:build linux

package fastgw

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
)

// TestWANMTUTrunkRaisedVLANLow: with the WAN on a VLAN, the WAN follower
// checks the tunnel MTU against the least MTU of the trunk and its VLAN
// device, the one the WAN port takes (setWANMTU), not against the MTU of
// the interface that changed. Linux lowers a VLAN device's MTU with its
// parent's but never raises it (a VLAN device's MTU is at most its
// parent's): after ip link set dev eth0 mtu 1400 and back to 1500, eth0.100
// stays at 1400, and full-size tunnel packets (1420 + 60 bytes) still
// leave as fragments. The follower logged the raise as "the tunnel MTU
// fits". No 8021q in the test kernels: two veths stand for the trunk and its
// VLAN device, their MTUs set as the kernel sets a VLAN's.
func TestWANMTUTrunkRaisedVLANLow(t *testing.T) {
	tp := testenv.Topology(t, "wv")
	a, b := testenv.NS(t, tp, "a"), testenv.NS(t, tp, "b")
	trunk, vlan := testenv.Veth(t, tp, a, b).A, testenv.Veth(t, tp, a, b).A
	tk, err := a.Handle().LinkByName(trunk)
	if err != nil {
		t.Fatal(err)
	}
	vl, err := a.Handle().LinkByName(vlan)
	if err != nil {
		t.Fatal(err)
	}
	var logs testenv.LogBuffer
	g := &Gateway{cfg: Config{MTU: 1420}, log: slog.New(slog.NewTextHandler(&logs, nil)), nlHandle: a.Handle()}
	done := make(chan struct{})
	defer g.linkWG.Wait()
	defer close(done)
	s := side{what: "WAN", name: vlan, trunk: trunk, vid: 100, addrDev: vlan}
	mtus := map[int]int{tk.Attrs().Index: 1500, vl.Attrs().Index: 1500}
	if err := g.watchWANMTU(a.NsHandle(), s, mtus, true, false, done); err != nil {
		t.Fatal(err)
	}
	// changed waits until the follower logged a change of dev to mtu,
	// and returns that line.
	changed := func(dev, mtu string) string {
		t.Helper()
		var line string
		// A minute bounds only the change never being logged.
		if !testenv.PollUntil(time.Minute, func() bool {
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, "WAN MTU changed") && strings.Contains(l, "interface="+dev+" ") && strings.Contains(l, "mtu="+mtu+" ") {
					line = l
					return true
				}
			}
			return false
		}) {
			t.Fatalf("no change of %s to MTU %s logged:\n%s", dev, mtu, logs.String())
		}
		return line
	}
	set := func(dev, mtu string) {
		t.Helper()
		if out, err := a.Run("ip", "link", "set", "dev", dev, "mtu", mtu); err != nil {
			t.Fatalf("set %s mtu %s: %v\n%s", dev, mtu, err, out)
		}
	}
	// The trunk lowered: the kernel lowers the VLAN device with it.
	set(trunk, "1400")
	set(vlan, "1400")
	changed(trunk, "1400")
	changed(vlan, "1400")
	// The trunk raised back: the VLAN device stays at 1400.
	set(trunk, "1500")
	line := changed(trunk, "1500")
	if !strings.Contains(line, "leave as IP fragments") || !strings.Contains(line, "MTU 1400 of WAN "+vlan) {
		t.Errorf("trunk raised to 1500, its VLAN device still at 1400 (a tunnel MTU of 1420 needs 1480): logged\n%s\nwant the fragments, with the VLAN device's MTU 1400", line)
	}
	// The VLAN device raised too: the tunnel MTU fits again.
	set(vlan, "1500")
	if line := changed(vlan, "1500"); !strings.Contains(line, "the tunnel MTU fits") {
		t.Errorf("trunk and VLAN device back at 1500: logged\n%s\nwant the tunnel MTU to fit", line)
	}
}
