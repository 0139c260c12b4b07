package bind

import (
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/header"
)

// TestSendLongerThanUDP: a datagram longer than UDP over IPv4 (65,507
// bytes) or IPv6 (65,527) can carry is dropped as too_big, on a port whose
// frames hold it (memport's of 128 KiB); its lengths wrapped to 16 bits
// and it left broken (IPv4) or Send panicked (IPv6). One of the longest
// still goes, as fragments.
func TestSendLongerThanUDP(t *testing.T) {
	r := newRigPorts(t, memport.Config{Queues: 1, RingSize: 4096, FrameSize: 1 << 17, MTU: 9000}, nil)
	for _, c := range []struct {
		dst     netip.Addr
		longest int
	}{{peerIP4, 65507}, {peerIP6, 65527}} {
		ep, err := r.bind.ParseEndpoint(netip.AddrPortFrom(c.dst, 51821).String())
		if err != nil {
			t.Fatal(err)
		}
		for _, size := range []int{c.longest + 1, c.longest + 20, 70000} {
			before := r.bind.Stats()
			if err := r.bind.Send([][]byte{make([]byte, size)}, ep); err != nil {
				t.Errorf("%v, %d bytes: Send = %v, want nil (dropped and counted)", c.dst, size, err)
			}
			after := r.bind.Stats()
			if d := after.Drops[DropTooBig] - before.Drops[DropTooBig]; d != 1 || after.TXPackets != before.TXPackets {
				t.Errorf("%v, %d bytes: too_big +%d, sent +%d; want +1 and none", c.dst, size, d, after.TXPackets-before.TXPackets)
			}
			if f := r.collect(t, 1, 50*time.Millisecond); len(f) != 0 {
				t.Errorf("%v, %d bytes: %d frames out, want none", c.dst, size, len(f))
			}
		}
		if err := r.bind.Send([][]byte{make([]byte, c.longest)}, ep); err != nil {
			t.Fatal(err)
		}
		frames := r.collect(t, 8, time.Second)
		got := 0
		for _, f := range frames {
			var p header.Packet
			if rs := header.Parse(f, &p); rs != header.OK && rs != header.ReasonFragment {
				t.Fatalf("%v: a fragment of the longest datagram does not parse: %v", c.dst, rs)
			}
			got += p.L3End - p.L4Off
		}
		if want := c.longest + header.UDPLen; got != want {
			t.Errorf("%v: the longest datagram's fragments carry %d bytes, want %d", c.dst, got, want)
		}
	}
}
