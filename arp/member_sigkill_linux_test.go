package arp

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// joinHelperEnv is "NS DEV GROUP" for TestJoinGroupsHelper.
const joinHelperEnv = "WGPIO_ARP_JOIN_HELPER"

// TestJoinGroupsHelper is the child of TestJoinGroupsLinkLayerSIGKILL: it
// enters namespace NS, joins GROUP on DEV at the link layer
// (JoinGroupsLinkLayer, as an owned-mode gateway on a VLAN does), says
// "ready" and waits to be killed.
func TestJoinGroupsHelper(t *testing.T) {
	arg := os.Getenv(joinHelperEnv)
	if arg == "" {
		t.Skip("helper process for TestJoinGroupsLinkLayerSIGKILL")
	}
	var nsName, dev, group string
	fmt.Sscan(arg, &nsName, &dev, &group)
	runtime.LockOSThread()
	h, err := netns.GetFromName(nsName)
	if err == nil {
		err = netns.Set(h)
	}
	if err == nil {
		_, err = JoinGroupsLinkLayer(dev, []netip.Addr{netip.MustParseAddr(group)})
	}
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	select {}
}

// TestJoinGroupsLinkLayerSIGKILL: the link-layer memberships of a process
// killed with SIGKILL (a gateway killed, or stopped by systemd's
// TimeoutStopSec) end with it, as its XDP programs and MLD memberships do.
// Joined with SIOCADDMULTI they stayed on the interface (`ip maddr`:
// "static") until a later gateway there stopped cleanly.
func TestJoinGroupsLinkLayerSIGKILL(t *testing.T) {
	tp := testenv.Topology(t, "arpk")
	us, k := testenv.NS(t, tp, "u"), testenv.NS(t, tp, "k")
	v, err := tp.NewVeth(us, k, topo.VethConfig{})
	must(t, err)
	waitUp(t, v)
	group := SolicitedNode(netip.MustParseAddr("2001:2::7"))
	const mcast = "3333ff000007"
	joined := func() bool {
		var b []byte
		must(t, us.Do(func() (err error) {
			b, err = os.ReadFile("/proc/thread-self/net/dev_mcast")
			return err
		}))
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) == 5 && f[1] == v.A && f[4] == mcast {
				return true
			}
		}
		return false
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestJoinGroupsHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), joinHelperEnv+"="+us.Name+" "+v.A+" "+group.String())
	out, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper: %q", line)
	}
	if !joined() {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper ready but %s not in %s's dev_mcast", mcast, v.A)
	}
	must(t, cmd.Process.Kill())
	cmd.Wait()
	// The kernel closes a dead process's sockets as it reaps it; a
	// moment's grace for its deferred work.
	deadline := time.Now().Add(5 * time.Second)
	for joined() {
		if time.Now().After(deadline) {
			t.Fatalf("%s still in %s's dev_mcast 5 s after the process that joined it was killed", mcast, v.A)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
