package tundev

import (
	"net/netip"
	"testing"

	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/testenv"
)

// udp4 returns an IPv4 UDP packet from src to dst with a 32-byte payload.
func udp4(src, dst netip.Addr) []byte {
	const payload = 32
	p := make([]byte, header.IPv4MinLen+header.UDPLen+payload)
	header.PutIPv4(p, &header.IPv4Fields{Protocol: header.ProtoUDP, Src: src.As4(), Dst: dst.As4()}, header.UDPLen+payload)
	u := header.UDP(p[header.IPv4MinLen:])
	header.PutUDP(u, 4000, 9, payload)
	u.SetChecksum(header.PseudoHeaderChecksum(header.ProtoUDP, src, dst, u.Length()))
	return p
}

// BenchmarkMultiQueueTUNWrite: Write of batches of 64 UDP packets of 32
// bytes into a 1-queue TUN whose kernel takes them (delivered to its own
// address, no socket: dropped there by the kernel); one packet's cost per
// op, the kernel's receive path included.
func BenchmarkMultiQueueTUNWrite(b *testing.B) {
	tp := testenv.Topology(b, "mb")
	ns := testenv.NS(b, tp, "a")
	var dev *MultiQueueTUN
	if err := ns.Do(func() error {
		var err error
		dev, err = OpenMultiQueueTUN("wgpmb0", 1, 1420)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	defer dev.Close()
	if err := ns.AddAddr("wgpmb0", "198.18.80.1/24"); err != nil {
		b.Fatal(err)
	}
	const batch = 64
	bufs := make([][]byte, batch)
	for i := range bufs {
		bufs[i] = udp4(netip.AddrFrom4([4]byte{198, 18, 80, byte(10 + i)}), netip.MustParseAddr("198.18.80.1"))
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(bufs[0])))
	b.ResetTimer()
	for i := 0; i < b.N; i += batch {
		if n, err := dev.Write(bufs, 0); n != batch || err != nil {
			b.Fatalf("Write = %d, %v", n, err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pps")
}

// BenchmarkMultiQueueTUNRead: Read of batches of 64 packets of 60 bytes
// handed over by a queue's reader (plain memory, no kernel), one packet's
// cost per op: without SetAllowed ("off") and with 100 allowed-IPs
// prefixes every packet is looked up in ("allowed").
func BenchmarkMultiQueueTUNRead(b *testing.B) {
	for _, allowed := range []bool{false, true} {
		name := "off"
		if allowed {
			name = "allowed"
		}
		b.Run(name, func(b *testing.B) {
			d := memTUN()
			if allowed {
				var ps []netip.Prefix
				for i := range 100 {
					ps = append(ps, netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 19, byte(i), 0}), 24))
				}
				d.SetAllowed(ps)
			}
			pkts := make([][]byte, tunBatchSize)
			for i := range pkts {
				pkts[i] = udp4(netip.MustParseAddr("198.18.9.1"), netip.AddrFrom4([4]byte{198, 19, byte(i), 7}))
			}
			d.free <- batchOf(pkts...)
			bufs, sizes := make([][]byte, tunBatchSize), make([]int, tunBatchSize)
			for i := range bufs {
				bufs[i] = make([]byte, 2000)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += tunBatchSize {
				bt := <-d.free
				bt.next = 0
				d.batches <- bt
				if n, err := d.Read(bufs, sizes, 16); n != tunBatchSize || err != nil {
					b.Fatalf("Read = %d, %v", n, err)
				}
			}
		})
	}
}
