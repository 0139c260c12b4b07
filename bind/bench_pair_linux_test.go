package bind_test

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// benchPayload makes 64-byte inner IPv4 packets (20 IP + 8 UDP + 36).
const benchPayload = 64 - 20 - 8

// BenchmarkGatewayPair64 pushes 64-byte UDP packets at saturation from
// hostA through a pair of stock wireguard-go gateways to hostB, with both
// gateways on (a) kernel TUN + kernel UDP sockets, (b) the multi-queue
// kernel TUN (2 queues) + kernel UDP sockets, (c) the multi-queue TUN +
// wgpio bind, (d) wgpio bind + tundev.PortDevice, one after another. The
// load is 4 inner flows from kernel UDP sockets (sendmmsg) on hostA; the
// sink counts with recvmmsg on hostB. It reports offered and delivered packets per second, loss, and
// CPU time per delivered packet. Each configuration runs for a fixed 3 s
// whatever b.N is, so run it with -benchtime=1x:
//
//	go test ./bind/ -run '^$' -bench GatewayPair64 -benchtime=1x -count=3
//
// Unlike the bench rig (bench/), the gateways, the generator and the sink
// all run in this one process, on the same CPUs and GOMAXPROCS: CPU time
// is getrusage(RUSAGE_SELF) and includes the generator and the sink (the
// same load in every configuration) and the kernel work charged to this
// process's threads, but not softirq work charged elsewhere.
func BenchmarkGatewayPair64(b *testing.B) {
	for _, c := range []struct {
		name string
		v    variant
	}{
		{"stock-tun-udp", variant{stockA: true, modeB: modeStock}},
		{"mqtun-std-bind", variant{mqStdA: true, modeB: modeMQStd}},
		{"mqtun-wgpio-bind", variant{mqtun: true, modeB: modeMQTUN}},
		{"wgpio-bind-tundev", variant{modeB: modeWgpio}},
	} {
		b.Run(c.name, func(b *testing.B) { benchPair(b, c.v, 3*time.Second) })
	}
}

func benchPair(b *testing.B, v variant, d time.Duration) {
	p := buildPair(b, v)
	startServers(b, p.hB)
	echo(b, p.hA, hostB4, 15*time.Second)

	const sinkPort = 9000
	var sink *net.UDPConn
	var gens []*net.UDPConn
	const flows = 4
	must(b, p.hB.Do(func() error {
		var err error
		sink, err = net.ListenUDP("udp4", &net.UDPAddr{Port: sinkPort})
		if err == nil {
			err = sink.SetReadBuffer(8 << 20)
		}
		return err
	}))
	defer sink.Close()
	must(b, p.hA.Do(func() error {
		for range flows {
			c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(hostB4, sinkPort)))
			if err != nil {
				return err
			}
			gens = append(gens, c)
		}
		return nil
	}))
	var delivered atomic.Uint64
	go func() {
		pc := ipv4.NewPacketConn(sink)
		msgs := make([]ipv4.Message, 64)
		for i := range msgs {
			msgs[i].Buffers = [][]byte{make([]byte, 128)}
		}
		for {
			n, err := pc.ReadBatch(msgs, 0)
			if err != nil {
				return
			}
			delivered.Add(uint64(n))
		}
	}()
	var sent atomic.Uint64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for _, c := range gens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			pc := ipv4.NewPacketConn(c)
			msgs := make([]ipv4.Message, 64)
			for i := range msgs {
				msgs[i].Buffers = [][]byte{make([]byte, benchPayload)}
			}
			for !stop.Load() {
				n, err := pc.WriteBatch(msgs, 0)
				if err != nil {
					// ENOBUFS and the like: the offered load is
					// above what the path takes; go on.
					continue
				}
				sent.Add(uint64(n))
			}
		}()
	}
	// Warm up, then measure.
	time.Sleep(300 * time.Millisecond)
	s0, d0, c0, t0 := sent.Load(), delivered.Load(), cpuTime(), time.Now()
	b.ResetTimer()
	time.Sleep(d)
	s1, d1, c1, t1 := sent.Load(), delivered.Load(), cpuTime(), time.Now()
	stop.Store(true)
	wg.Wait()
	b.StopTimer()
	secs := t1.Sub(t0).Seconds()
	offered, got := float64(s1-s0), float64(d1-d0)
	b.ReportMetric(offered/secs, "offered-pps")
	b.ReportMetric(got/secs, "pps")
	if offered > 0 {
		b.ReportMetric(100*(1-got/offered), "loss-%")
	}
	if got > 0 {
		b.ReportMetric(float64(c1-c0)/got, "cpu-ns/pkt")
	}
	if p.bindA != nil {
		bs := p.bindA.Stats()
		b.Logf("gwA bind: rx %d tx %d drops %v; WAN port %v", bs.RXPackets, bs.TXPackets, bs.Drops, p.wanPort.Stats().Backend)
	}
	if p.lanDev != nil {
		ls := p.lanDev.Stats()
		b.Logf("gwA tundev: rx %d tx %d drops %v", ls.RXPackets, ls.TXPackets, ls.Drops)
	}
	b.Logf("%s: offered %.0f pps, delivered %.0f pps, CPU %.2f s over %.2f s", p.nameA, offered/secs, got/secs, time.Duration(c1-c0).Seconds(), secs)
}

// cpuTime is this process's user + system CPU time in ns.
func cpuTime() int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
