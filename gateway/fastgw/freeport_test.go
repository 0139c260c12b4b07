//go:build linux

package fastgw

import (
	"net"
	"net/netip"
	"os"
	"testing"

	"github.com/wgpio/wgpio/internal/testenv"
)

// TestFreePortRange: listen-port 0 with SourcePorts 2 picks a port whose
// whole range is free. In a namespace whose ephemeral ports are 40000 to
// 40003 and another socket holding 40001, the kernel offers 40000 one
// time in three, and its range (40000-40001) is not free: before, the
// move to it was refused as "address already in use", though any free
// port was asked for.
func TestFreePortRange(t *testing.T) {
	testenv.Root(t)
	tp := testenv.Topology(t, "fp")
	ns := testenv.NS(t, tp, "a")
	var got []uint16
	if err := ns.Do(func() error {
		if err := os.WriteFile("/proc/sys/net/ipv4/ip_local_port_range", []byte("40000 40003"), 0); err != nil {
			return err
		}
		held, err := net.ListenUDP("udp4", &net.UDPAddr{Port: 40001})
		if err != nil {
			return err
		}
		defer held.Close()
		g := &Gateway{}
		g.cfg.SourcePorts = 2
		g.wanV4 = netip.MustParseAddr("198.18.0.1")
		for range 20 {
			p, err := g.freePort()
			if err != nil {
				return err
			}
			got = append(got, p)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, p := range got {
		if p == 40000 || p == 40001 {
			t.Fatalf("freePort with SourcePorts 2 and 40001 held gave %v; want none whose range holds 40001", got)
		}
	}
}
