//go:build linux

package afxdp_test

import (
	"log"
	"net/netip"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/afxdp"
)

// Open a port whose XDP program redirects WireGuard's UDP port and leaves
// everything else to the kernel, then echo what arrives on queue 0 back to
// its sender with MACs swapped. Needs Linux 5.10+ and root; eth0 stands for
// an interface of the current network namespace.
func ExampleOpen() {
	port, err := afxdp.Open("eth0", afxdp.Config{
		Filter: afxdp.Filter{UDP: []afxdp.UDPMatch{
			{Addr: netip.MustParseAddr("198.18.0.2"), PortLo: 51820, PortHi: 51820},
		}},
	})
	if err != nil {
		log.Fatal(err) // e.g. afxdp.ErrPermission: run as root
	}
	defer port.Close()

	q := port.Queue(0)
	rx, tx := q.RX(), q.TX()
	w, err := dataplane.NewWaiter()
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	w.Add(rx)
	frames := make([]dataplane.Frame, 64)
	for range 1000 {
		n := rx.Receive(frames) // we own frames[:n] now
		if n == 0 {
			tx.Reclaim()
			w.Wait(100 * time.Millisecond)
			continue
		}
		for i := range n {
			b := frames[i].Data()
			var mac [6]byte
			copy(mac[:], b[0:6])
			copy(b[0:6], b[6:12])
			copy(b[6:12], mac[:])
		}
		m := tx.Transmit(frames[:n]) // the queue owns frames[:m]
		rx.Free(frames[m:n])         // give back what the TX ring had no room for
	}
}
