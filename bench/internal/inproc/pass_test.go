//go:build linux

package inproc

import (
	"net/netip"
	"testing"

	"golang.zx2c4.com/wireguard/conn"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/header"
)

// passBatch is the packets BenchmarkPass moves per iteration.
const passBatch = 64

// BenchmarkPass moves batches of 64-byte packets generator → TUN A →
// bind A → bind B → TUN B → sink on one goroutine, through the doubles
// (what stock runs on) and through the ports (wgpio's bind and
// tundev.PortDevice over memport, wired as compat wires them), with the
// rounds' generator and sink. On one goroutine nothing crosses a CPU, so
// ns/pkt is the plumbing's own instructions and cache footprint, steady
// enough on a busy machine to compare changes to bind, tundev and memport
// (the 2-CPU rows of -inprocess add what crossing CPUs costs):
//
//	go test ./bench/internal/inproc -run '^$' -bench Pass -count 5
func BenchmarkPass(b *testing.B) {
	bufs := func() ([][]byte, []int, [][]byte, []conn.Endpoint) {
		x := make([][]byte, batchSize)
		for i := range x {
			x[i] = make([]byte, slotSize)
		}
		return x, make([]int, batchSize), make([][]byte, batchSize), make([]conn.Endpoint, batchSize)
	}
	perPkt := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*passBatch), "ns/pkt")
	}
	b.Run("doubles", func(b *testing.B) {
		tunA, tunB := newTUN(), newTUN()
		defer tunA.Close()
		defer tunB.Close()
		bindA, bindB := newBindPair(netip.AddrPortFrom(wanA, listenPort), netip.AddrPortFrom(wanB, listenPort))
		defer bindA.shutdown()
		defer bindB.shutdown()
		st := &setup{}
		ringEnds(tunA, tunB, st)
		tr, err := newTraffic(64)
		if err != nil {
			b.Fatal(err)
		}
		sk := newSink(tr)
		fns, _, err := bindB.Open(listenPort)
		if err != nil {
			b.Fatal(err)
		}
		defer bindB.Close()
		bb, sizes, out, eps := bufs()
		b.ResetTimer()
		for range b.N {
			st.push(tr, passBatch)
			n, _ := tunA.Read(bb[:passBatch], sizes, 0)
			for i := range n {
				out[i] = bb[i][:sizes[i]]
			}
			bindA.Send(out[:n], bindA.ep)
			n, _ = fns[0](bb[:passBatch], sizes, eps)
			for i := range n {
				out[i] = bb[i][:sizes[i]]
			}
			tunB.Write(out[:n], 0)
			first, k := tunB.out.avail(passBatch)
			for i := range k {
				sl := tunB.out.at(first + uint64(i))
				sk.check(sl.buf[:sl.n], 0)
			}
			tunB.out.release(k)
		}
		perPkt(b)
		if c := sk.local; c.Delivered != uint64(b.N*passBatch) || c.Corrupt != 0 {
			b.Fatalf("sink: %+v, want %d delivered", c, b.N*passBatch)
		}
	})
	b.Run("ports", func(b *testing.B) {
		st, w, cl, _, _, err := startMem(compatQueues, true)
		if err != nil {
			b.Fatal(err)
		}
		defer cl.run()
		binds, lans, err := compatPorts(st, w)
		if err != nil {
			b.Fatal(err)
		}
		ep, err := binds[0].ParseEndpoint(netip.AddrPortFrom(wanB, listenPort).String())
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := binds[0].Open(listenPort); err != nil {
			b.Fatal(err)
		}
		defer binds[0].Close()
		fns, _, err := binds[1].Open(listenPort)
		if err != nil {
			b.Fatal(err)
		}
		defer binds[1].Close()
		// The WAN carries one outer flow: its packets reach one of bind
		// B's queues, the one RSS picks for A → B (a receive function
		// blocks while its queue is empty).
		probe := make([]byte, header.EthernetLen+header.IPv4MinLen+header.UDPLen)
		header.PutEthernet(probe, header.MAC(mac6(w.wanB.MAC())), header.MAC(mac6(w.wanA.MAC())), header.EtherTypeIPv4)
		header.PutIPv4(probe[header.EthernetLen:], &header.IPv4Fields{Protocol: header.ProtoUDP, Src: wanA.As4(), Dst: wanB.As4()}, header.UDPLen)
		header.PutUDP(probe[header.EthernetLen+header.IPv4MinLen:], listenPort, listenPort, 0)
		recvB := fns[memport.RSSQueue(probe, len(fns))]
		tr, err := newTraffic(64)
		if err != nil {
			b.Fatal(err)
		}
		sk := newSink(tr)
		var rxs []dataplane.RX
		for q := range w.hostB.NumQueues() {
			rxs = append(rxs, w.hostB.Queue(q).RX())
		}
		in := make([]dataplane.Frame, maxBurst)
		bb, sizes, out, eps := bufs()
		b.ResetTimer()
		for range b.N {
			st.push(tr, passBatch)
			for n := 0; n < passBatch; {
				k, _ := lans[0].Read(bb[:passBatch-n], sizes, 0)
				for i := range k {
					out[i] = bb[i][:sizes[i]]
				}
				binds[0].Send(out[:k], ep)
				n += k
			}
			for n := 0; n < passBatch; {
				k, _ := recvB(bb[:passBatch-n], sizes, eps)
				for i := range k {
					out[i] = bb[i][:sizes[i]]
				}
				lans[1].Write(out[:k], 0)
				n += k
			}
			for _, rx := range rxs {
				n := rx.Receive(in)
				for i := range n {
					sk.check(in[i].Data()[header.EthernetLen:], 0)
				}
				rx.Free(in[:n])
			}
		}
		perPkt(b)
		if c := sk.local; c.Delivered != uint64(b.N*passBatch) || c.Corrupt != 0 {
			b.Fatalf("sink: %+v, want %d delivered; drops %v", c, b.N*passBatch, st.drops())
		}
	})
}
