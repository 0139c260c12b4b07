//go:build linux

package afxdp

import (
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// pin locks the goroutine to its thread and the thread to cpu (when the
// machine has it).
func pin(cpu int) {
	runtime.LockOSThread()
	if runtime.NumCPU() <= cpu {
		return
	}
	var set unix.CPUSet
	set.Set(cpu)
	_ = unix.SchedSetaffinity(0, &set)
}

// threadCPU is the calling thread's user+system time.
func threadCPU() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_THREAD, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func processCPU() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReflector measures an L2 reflector on B between two namespaces:
// an AF_XDP port that swaps MACs, addresses and ports, against the
// reference, kernel UDP sockets echoing with recvmmsg/sendmmsg (x/net ipv4
// ReadBatch/WriteBatch). The sender is the same in both: an AF_XDP port on
// A that transmits 64-byte Ethernet/IPv4/UDP frames (FCS not counted) as
// fast as it can, pinned to CPU 0, and counts the echoes;
// the reflector is pinned to CPU 1. One op is one echoed packet; pps is
// echoes per second; reflector-ns/pkt is the reflector thread's CPU time
// per echo, process-ns/pkt the whole process's (both exclude softirq work
// the kernel does outside these threads). afxdp-generic attaches the XDP
// programs in generic mode instead of veth's native mode.
//
//	go test ./dataplane/afxdp/ -run '^$' -bench Reflector -benchtime 2000000x
func BenchmarkReflector(b *testing.B) {
	b.Run("size=64/afxdp", func(b *testing.B) { benchReflector(b, false, AttachAuto) })
	b.Run("size=64/afxdp-generic", func(b *testing.B) { benchReflector(b, false, AttachGeneric) })
	b.Run("size=64/kernel-udp", func(b *testing.B) { benchReflector(b, true, AttachAuto) })
}

func benchReflector(b *testing.B, kernel bool, attach AttachMode) {
	p := newVethPair(b, 1)
	const port = 9000
	sender := openIn(b, p.a, p.v.A, Config{Attach: attach, Filter: Filter{UDP: []UDPMatch{{Addr: p.ipA, PortLo: 40000, PortHi: 40000}}}})
	stop := make(chan struct{})
	var reflCPU atomic.Int64
	var wg sync.WaitGroup
	if kernel {
		var c *net.UDPConn
		if err := p.b.Do(func() error {
			var err error
			c, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(p.ipB, port)))
			return err
		}); err != nil {
			b.Fatal(err)
		}
		c.SetReadBuffer(4 << 20)
		c.SetWriteBuffer(4 << 20)
		wg.Add(1)
		go func() {
			defer wg.Done()
			pin(1)
			defer runtime.UnlockOSThread()
			start := threadCPU()
			defer func() { reflCPU.Store(int64(threadCPU() - start)) }()
			pc := ipv4.NewPacketConn(c)
			in, out := make([]ipv4.Message, 64), make([]ipv4.Message, 64)
			for i := range in {
				in[i].Buffers = [][]byte{make([]byte, 2048)}
				out[i].Buffers = [][]byte{nil}
			}
			for {
				select {
				case <-stop:
					return
				default:
				}
				c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
				n, err := pc.ReadBatch(in, 0)
				if err != nil {
					continue
				}
				for i := range n {
					out[i].Buffers[0] = in[i].Buffers[0][:in[i].N]
					out[i].Addr = in[i].Addr
				}
				for off := 0; off < n; {
					m, err := pc.WriteBatch(out[off:n], 0)
					if err != nil {
						break
					}
					off += m
				}
			}
		}()
		defer c.Close()
	} else {
		refl := openIn(b, p.b, p.v.B, Config{Attach: attach, Filter: Filter{UDP: []UDPMatch{{Addr: p.ipB, PortLo: port, PortHi: port}}}})
		wg.Add(1)
		go func() {
			defer wg.Done()
			pin(1)
			defer runtime.UnlockOSThread()
			start := threadCPU()
			defer func() { reflCPU.Store(int64(threadCPU() - start)) }()
			q := refl.Queue(0)
			rx, tx := q.RX(), q.TX()
			w, _ := dataplane.NewWaiter()
			defer w.Close()
			w.Add(rx)
			frames := make([]dataplane.Frame, 64)
			idle := 0
			for {
				n := rx.Receive(frames)
				if n == 0 {
					select {
					case <-stop:
						return
					default:
					}
					if idle++; idle > 64 {
						tx.Reclaim()
						w.Wait(time.Millisecond)
						idle = 0
					}
					continue
				}
				idle = 0
				for i := range n {
					reflectIPv4UDP(frames[i].Data())
				}
				m := tx.Transmit(frames[:n])
				rx.Free(frames[m:n])
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()

	// Make sure the path works (ARP resolved for the kernel's echoes).
	var tmpl [64]byte
	l := udpFrame(tmpl[:], p.macA, p.macB, netip.AddrPortFrom(p.ipA, 40000), netip.AddrPortFrom(p.ipB, port), make([]byte, 64-42))
	q := sender.Queue(0)
	rx, tx := q.RX(), q.TX()
	frames := make([]dataplane.Frame, 64)
	send := func(k int) int {
		n := tx.Alloc(frames[:k])
		for i := range n {
			frames[i].SetLen(l)
			copy(frames[i].Data(), tmpl[:l])
		}
		m := tx.Transmit(frames[:n])
		tx.Free(frames[m:n])
		return m
	}
	recv := func() int {
		n := rx.Receive(frames)
		rx.Free(frames[:n])
		return n
	}
	warm := time.Now().Add(5 * time.Second)
	for got := 0; got < 10; {
		if time.Now().After(warm) {
			b.Fatalf("reflector path not working: %d echoes in 5 s", got)
		}
		send(1)
		time.Sleep(10 * time.Millisecond)
		got += recv()
	}

	pin(0)
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	b.SetBytes(int64(l))
	b.ResetTimer()
	startCPU, start := processCPU(), time.Now()
	echoed := 0
	deadline := start.Add(30 * time.Second)
	for echoed < b.N {
		send(64)
		echoed += recv()
		if echoed&0xff == 0 && time.Now().After(deadline) {
			break
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cpu := processCPU() - startCPU
	close(stop)
	wg.Wait()
	stop = make(chan struct{})
	b.ReportMetric(float64(echoed)/elapsed.Seconds(), "pps")
	b.ReportMetric(float64(reflCPU.Load())/float64(max(echoed, 1)), "reflector-ns/pkt")
	b.ReportMetric(float64(cpu)/float64(max(echoed, 1)), "process-ns/pkt")
	if echoed < b.N {
		b.Logf("only %d of %d echoes in 30 s", echoed, b.N)
	}
}
