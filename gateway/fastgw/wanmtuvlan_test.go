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
	// An IPv4 address on the VLAN device: the outer family checked.
	if err := a.AddAddr(vlan, "198.18.1.1/24"); err != nil {
		t.Fatal(err)
	}
	var logs testenv.LogBuffer
	g := &Gateway{cfg: Config{MTU: 1420}, log: slog.New(slog.NewTextHandler(&logs, nil)), nlHandle: a.Handle()}
	done := make(chan struct{})
	defer g.linkWG.Wait()
	defer close(done)
	s := side{what: "WAN", name: vlan, trunk: trunk, vid: 100, addrDev: vlan}
	mtus := map[int]int{tk.Attrs().Index: 1500, vl.Attrs().Index: 1500}
	if err := g.watchWANMTU(a.NsHandle(), s, mtus, done); err != nil {
		t.Fatal(err)
	}
	changed := func(dev, mtu string) string { t.Helper(); return mtuChanged(t, &logs, dev, mtu) }
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

// mtuChanged waits until the WAN follower logged a change of dev to mtu
// in logs, and returns that line.
func mtuChanged(t *testing.T, logs *testenv.LogBuffer, dev, mtu string) string {
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

// TestWANMTUFamiliesOfNow: the WAN follower checks the outer families of
// the WAN's addresses at each change: the WAN's MTU dropped to 1000, the
// kernel removes its IPv6 addresses (a link below IPv6's 1280 carries no
// IPv6), and the warning names IPv4 peers alone. It named the families of
// start ("IPv4 and IPv6 peers", and IPv6's sum).
func TestWANMTUFamiliesOfNow(t *testing.T) {
	tp := testenv.Topology(t, "wf")
	a, b := testenv.NS(t, tp, "a"), testenv.NS(t, tp, "b")
	wan := testenv.Veth(t, tp, a, b).A
	for _, cidr := range []string{"198.18.1.1/24", "2001:db8:f::1/64"} {
		if err := a.AddAddr(wan, cidr); err != nil {
			t.Fatal(err)
		}
	}
	l, err := a.Handle().LinkByName(wan)
	if err != nil {
		t.Fatal(err)
	}
	var logs testenv.LogBuffer
	g := &Gateway{cfg: Config{MTU: 1420}, log: slog.New(slog.NewTextHandler(&logs, nil)), nlHandle: a.Handle()}
	done := make(chan struct{})
	defer g.linkWG.Wait()
	defer close(done)
	s := side{what: "WAN", name: wan, trunk: wan, addrDev: wan}
	if err := g.watchWANMTU(a.NsHandle(), s, map[int]int{l.Attrs().Index: 1500}, done); err != nil {
		t.Fatal(err)
	}
	if out, err := a.Run("ip", "link", "set", "dev", wan, "mtu", "1000"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	line := mtuChanged(t, &logs, wan, "1000")
	if !strings.Contains(line, "full-size tunnel packets to IPv4 peers leave as IP fragments") || strings.Contains(line, "IPv6") {
		t.Errorf("WAN MTU at 1000, its IPv6 address gone: logged\n%s\nwant IPv4 peers' packets fragmented, and no word of IPv6", line)
	}
	if out, _ := a.Run("ip", "-6", "addr", "show", "dev", wan); strings.Contains(out, "2001:db8:f::1") {
		t.Errorf("the kernel kept the IPv6 address at MTU 1000:\n%s", out)
	}
}
