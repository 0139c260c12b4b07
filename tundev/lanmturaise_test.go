package tundev

import (
	"net/netip"
	"testing"

	"github.com/wgpio/wgpio/arp"
	"github.com/wgpio/wgpio/dataplane/memport"
)

// raisablePort is a memport.Port whose MTU of the moment (mtu) is below
// the largest its frames hold (maxMTU), as an afxdp.Port opened on a LAN
// of MTU 1500 whose MTU SetMTU may raise to 3,822.
type raisablePort struct {
	*memport.Port
	mtu, maxMTU int
}

func (p raisablePort) MTU() int    { return p.mtu }
func (p raisablePort) MaxMTU() int { return p.maxMTU }

// TestPortDeviceFragmentsAfterMTURaise: a device over a port opened at MTU
// 1500 whose frames hold 3,000 bytes keeps room for a whole batch of
// received packets of the larger MTU, so that once the LAN's MTU was
// raised (afxdp.Port.SetMTU, compatgw's follower) a burst of 128 LAN
// packets of 2,000 bytes without DF over the tunnel MTU is cut into
// fragments whole. Before, the fragmentation buffer held a batch of
// packets of the port's MTU at start, and the last 32 of the burst were
// dropped as cannot_fragment.
func TestPortDeviceFragmentsAfterMTURaise(t *testing.T) {
	a, b, err := memport.NewPair(memport.Config{MTU: 3000, MACA: macGW, MACB: macHost, RingSize: 2048})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	routes, err := arp.NewStaticRoutes([]arp.Route{{Prefix: netip.MustParsePrefix("198.18.11.0/24")}})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := NewPortDevice(PortConfig{Port: raisablePort{Port: a, mtu: 1500, maxMTU: 3000}, MTU: 1420, Routes: routes, Neighbours: arp.NewTable(arp.Config{})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	r := &portRig{a: a, b: b, dev: dev}
	frames := make([][]byte, PortBatchSize)
	for i := range frames {
		frames[i] = eth4(bigPacket(hostIP, peerA, 2000-28, false, uint16(i)))
	}
	// A small packet after the burst marks its end: Read returns it
	// after the fragments (it blocks while nothing is left).
	marker := ipPacket(hostIP, peerA, []byte("end"))
	r.inject(t, 0, append(frames, eth4(marker))...)
	var got [][]byte
	bufs, sizes := make([][]byte, PortBatchSize), make([]int, PortBatchSize)
	for i := range bufs {
		bufs[i] = make([]byte, 2000)
	}
	for done := false; !done; {
		n, err := dev.Read(bufs, sizes, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if sizes[i] == len(marker) {
				done = true
				continue
			}
			got = append(got, bufs[i][:sizes[i]])
		}
	}
	if s := dev.Stats(); len(got) != 2*len(frames) || s.Fragmented != uint64(len(frames)) || s.Drops.Total() != 0 {
		t.Errorf("%d packets of 2000 bytes over the tunnel MTU 1420: Read %d fragments, stats %+v; want %d fragments of %d packets, no drop",
			len(frames), len(got), s, 2*len(frames), len(frames))
	}
}
