//go:build linux

package topo_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

func TestTwoHostsPing(t *testing.T) {
	tp := testenv.Topology(t, "tt")
	testenv.Tool(t, "ping", "iputils-ping")
	a := testenv.NS(t, tp, "a")
	b := testenv.NS(t, tp, "b")
	v, err := tp.NewVeth(a, b, topo.VethConfig{Queues: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.AddAddr(v.A, "198.18.200.1/24"); err != nil {
		t.Fatal(err)
	}
	if err := b.AddAddr(v.B, "198.18.200.2/24"); err != nil {
		t.Fatal(err)
	}
	if out, err := a.Run("ping", "-c", "1", "-W", "2", "198.18.200.2"); err != nil {
		t.Fatalf("ping across veth: %v\n%s", err, out)
	}
	for _, e := range []struct {
		ns  *topo.NS
		dev string
	}{{a, v.A}, {b, v.B}} {
		on, err := e.ns.TXChecksum(e.dev)
		if err != nil {
			t.Fatal(err)
		}
		if on {
			t.Errorf("TXChecksum(%s) = on after NewVeth, want off", e.dev)
		}
		// Cross-check with the ethtool binary where it is installed.
		if _, err := exec.LookPath("ethtool"); err == nil {
			out, err := e.ns.Run("ethtool", "-k", e.dev)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "tx-checksumming: off") {
				t.Errorf("ethtool -k %s: TX checksum offload not off:\n%s", e.dev, out)
			}
		}
	}
	if err := a.SetTXChecksum(v.A, true); err != nil {
		t.Fatal(err)
	}
	if on, err := a.TXChecksum(v.A); err != nil || !on {
		t.Errorf("TXChecksum(%s) after SetTXChecksum(on) = %v, %v; want on", v.A, on, err)
	}
	var inNS string
	if err := a.Do(func() error {
		b, err := os.ReadFile("/proc/thread-self/net/dev")
		inNS = string(b)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(inNS, v.A) {
		t.Errorf("Do: /proc/thread-self/net/dev inside %s lacks %s:\n%s", a.Name, v.A, inNS)
	}
	name := a.Name
	if err := tp.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/run/netns/" + name); !os.IsNotExist(err) {
		t.Errorf("namespace %s still exists after Close (stat err %v)", name, err)
	}
}

// TestNamespaceAddedMeanwhile: a namespace added with `ip netns add` (by
// anyone: a user, another tool) while ours exist leaves them removable.
// iproute2 makes /run/netns a shared mount point of its own before its
// first namespace; when it was not one yet, that bind of the directory
// over itself hid the mounts of namespaces made before, whose deletion
// then failed with EBUSY and left them behind. NewNS now does the same
// first, so the directory is a shared mount point once a namespace of
// ours exists. (On a machine where something made it one already, as
// iproute2 or an earlier test does, the hazard is gone before the test
// and the test passes either way; without the fix, on a fresh machine,
// it failed with EBUSY and left the namespace behind.)
func TestNamespaceAddedMeanwhile(t *testing.T) {
	testenv.Root(t)
	testenv.Tool(t, "ip", "iproute2")
	tp := topo.New("tm")
	a, err := tp.NewNS("a")
	if err != nil {
		tp.Close()
		t.Fatal(err)
	}
	if !sharedMountPoint(t, "/run/netns") {
		t.Error("/run/netns is not a shared mount point after NewNS")
	}
	other := tp.Name("ip") // unique, removed below whatever happens
	if out, err := exec.Command("ip", "netns", "add", other).CombinedOutput(); err != nil {
		tp.Close()
		t.Fatalf("ip netns add %s: %v: %s", other, err, out)
	}
	defer exec.Command("ip", "netns", "del", other).Run()
	if err := tp.Close(); err != nil {
		t.Errorf("Close after `ip netns add`: %v", err)
	}
	if _, err := os.Stat("/run/netns/" + a.Name); !os.IsNotExist(err) {
		t.Errorf("namespace %s still listed after Close (stat: %v)", a.Name, err)
	}
}

// sharedMountPoint reports whether path is a mount point with shared
// propagation in this process's mount namespace (/proc/self/mountinfo:
// field 5 the mount point, optional fields "shared:N").
func sharedMountPoint(t *testing.T, path string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 7 || f[4] != path {
			continue
		}
		for _, opt := range f[6:] {
			if opt == "-" {
				break
			}
			if strings.HasPrefix(opt, "shared:") {
				return true
			}
		}
	}
	return false
}
