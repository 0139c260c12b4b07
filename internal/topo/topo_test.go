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
