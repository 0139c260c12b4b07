//go:build linux

package inproc

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/netip"
	"runtime/pprof"

	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun"

	"github.com/wgpio/wgpio/noise"
)

// Configuration names, in report order. The first is the doubles' own
// cost, the second the reference of every ratio.
const (
	Doubles    = "doubles"
	Ports      = "ports"
	Stock      = "stock"
	Compat     = "compat"
	FastPath1Q = "fastpath-1q"
	FastPath2Q = "fastpath-2q"
)

// Configs returns every configuration name, in report order.
func Configs() []string { return []string{Doubles, Ports, Stock, Compat, FastPath1Q, FastPath2Q} }

// Descriptions of the configurations, for the report.
var descs = map[string]string{
	Doubles:    "the in-memory conn.Bind and tun.Device doubles alone: one loop per side moves batches TUN → bind and bind → TUN, no wireguard-go",
	Ports:      "wgpio's bind and tundev over memport alone, as compat wires them: one loop per side moves batches tundev → bind and bind → tundev, no wireguard-go",
	Stock:      "unmodified wireguard-go, two devices back to back over the in-memory doubles",
	Compat:     "unmodified wireguard-go on wgpio's bind and tundev over memport (1 queue, one pool for both gateways: the copies per hop of stock's doubles)",
	FastPath1Q: "two wgpio fast-path engines (with the gateway control plane) back to back over memport, 1 queue",
	FastPath2Q: "the same, 2 queues",
}

// Addresses of the two gateways' WAN sides and the tunnel's port
// (198.18.0.0/15, RFC 2544).
var (
	wanA = netip.MustParseAddr("198.18.0.1")
	wanB = netip.MustParseAddr("198.18.0.2")
	lanA = netip.MustParsePrefix("198.19.1.0/24")
	lanB = netip.MustParsePrefix("198.19.2.0/24")
)

const listenPort = 51820

// Labels: every goroutine a side starts carries pprof label side=<value>
// (goroutines inherit their creator's labels), so that the CPU profile of
// a step splits CPU time between the sides.
const (
	labelKey  = "side"
	labelA    = "gw-a" // encrypts: host A's traffic into the tunnel
	labelB    = "gw-b" // decrypts: out of the tunnel toward host B
	labelGen  = "generator"
	labelSink = "sink"
)

// setup is one configuration, built and running: a generator's push (one
// call per batch), a sink loop, and the counters of where packets were
// dropped.
type setup struct {
	// push offers up to n packets of tr (at most maxBurst) and returns how
	// many the first gateway's input took; the rest are lost.
	push func(tr *traffic, n int) int
	// sink runs the sink until stop is closed.
	sink func(s *sink, stop <-chan struct{})
	// drops returns cumulative drop counts by place and reason.
	drops func() map[string]uint64
	close func()
}

// maxBurst is the most packets the generator offers at once.
const maxBurst = 256

// configKey is the pprof label naming the configuration a goroutine
// belongs to: every configuration is built at once, and the idle ones'
// goroutines (timers, ticks) must not count as the measured one's.
const configKey = "config"

// building is the configuration build is making (build runs on one
// goroutine at a time).
var building string

// labelled runs f with the labels of the configuration being built and of
// side set, so that goroutines f starts inherit them.
func labelled(side string, f func()) { labelledIn(building, side, f) }

// labelledIn runs f with the labels of config and side set.
func labelledIn(config, side string, f func()) {
	pprof.Do(context.Background(), pprof.Labels(configKey, config, labelKey, side), func(context.Context) { f() })
}

// build makes configuration name with the given CPUs (for pinning the
// fast path's workers).
func build(name string, cpus []int) (*setup, error) {
	building = name
	defer func() { building = "" }()
	switch name {
	case Doubles:
		return buildDoubles(), nil
	case Ports:
		return buildPorts()
	case Stock:
		return buildStock()
	case Compat:
		return buildCompat()
	case FastPath1Q:
		return buildFastPath(1, cpus)
	case FastPath2Q:
		return buildFastPath(2, cpus)
	}
	return nil, fmt.Errorf("inproc: unknown configuration %q (want one of %v)", name, Configs())
}

// ringEnds are the generator and sink of the doubles: the generator fills
// slots of TUN A's input ring in place, the sink checks TUN B's output
// ring in place.
func ringEnds(tunA, tunB *memTUN, st *setup) {
	st.push = func(tr *traffic, n int) int {
		first, k := tunA.in.reserve(n)
		for i := range k {
			s := tunA.in.at(first + uint64(i))
			s.n = tr.fill(s.buf[:])
		}
		if k > 0 {
			tunA.in.commit(first, k)
		}
		return k
	}
	st.sink = func(s *sink, stop <-chan struct{}) {
		out := tunB.out
		for {
			first, k, ok := out.wait(maxBurst, stop)
			if !ok {
				return
			}
			tag := s.tag.Load()
			for i := range k {
				sl := out.at(first + uint64(i))
				s.check(sl.buf[:sl.n], tag)
			}
			out.release(k)
			s.publish()
		}
	}
}

func doublesDrops(bindA, bindB *memBind, tunB *memTUN) func() map[string]uint64 {
	return func() map[string]uint64 {
		return map[string]uint64{
			"wire_a_to_b_full": bindB.rx.dropped.Load(),
			"wire_b_to_a_full": bindA.rx.dropped.Load(),
			"tun_b_out_full":   tunB.out.dropped.Load(),
		}
	}
}

// buildDoubles wires TUN A → bind A ⇄ bind B → TUN B with a plain loop
// per side in place of wireguard-go.
func buildDoubles() *setup {
	tunA, tunB := newTUN(), newTUN()
	bindA, bindB := newBindPair(netip.AddrPortFrom(wanA, listenPort), netip.AddrPortFrom(wanB, listenPort))
	st := &setup{drops: doublesDrops(bindA, bindB, tunB)}
	ringEnds(tunA, tunB, st)
	stop := make(chan struct{})
	done := make(chan struct{}, 2)
	bufs := func() ([][]byte, []int) {
		b := make([][]byte, batchSize)
		for i := range b {
			b[i] = make([]byte, slotSize)
		}
		return b, make([]int, batchSize)
	}
	labelled(labelA, func() {
		go func() {
			defer func() { done <- struct{}{} }()
			b, sizes := bufs()
			out := make([][]byte, batchSize)
			for {
				n, err := tunA.Read(b, sizes, 0)
				if err != nil {
					return
				}
				for i := range n {
					out[i] = b[i][:sizes[i]]
				}
				bindA.Send(out[:n], bindA.ep)
			}
		}()
	})
	fns, _, _ := bindB.Open(listenPort)
	labelled(labelB, func() {
		go func() {
			defer func() { done <- struct{}{} }()
			b, sizes := bufs()
			eps := make([]conn.Endpoint, batchSize)
			out := make([][]byte, batchSize)
			for {
				n, err := fns[0](b, sizes, eps)
				if err != nil {
					return
				}
				for i := range n {
					out[i] = b[i][:sizes[i]]
				}
				tunB.Write(out[:n], 0)
			}
		}()
	})
	st.close = func() {
		close(stop)
		tunA.Close()
		bindB.Close()
		<-done
		<-done
		tunB.Close()
		bindA.shutdown()
		bindB.shutdown()
	}
	return st
}

// keys returns two fresh static key pairs.
func keys() (a, b noise.PrivateKey, err error) {
	if a, err = noise.NewPrivateKey(); err != nil {
		return
	}
	b, err = noise.NewPrivateKey()
	return
}

// uapi is a wireguard-go configuration (set=1 body): our key and port,
// one peer with its endpoint and allowed IPs.
func uapi(priv noise.PrivateKey, peer noise.PublicKey, endpoint netip.Addr, allowed netip.Prefix) string {
	return fmt.Sprintf("private_key=%s\nlisten_port=%d\npublic_key=%s\nendpoint=%s\nallowed_ip=%s\n",
		hex.EncodeToString(priv[:]), listenPort, hex.EncodeToString(peer[:]), netip.AddrPortFrom(endpoint, listenPort), allowed)
}

// wgDevice starts an unmodified wireguard-go device with the side's label.
func wgDevice(side string, t tun.Device, b conn.Bind, conf string) (*device.Device, error) {
	var dev *device.Device
	var err error
	labelled(side, func() {
		dev = device.NewDevice(t, b, device.NewLogger(device.LogLevelSilent, ""))
		if err = dev.IpcSet(conf); err == nil {
			err = dev.Up()
		}
	})
	if err != nil {
		dev.Close()
		return nil, fmt.Errorf("inproc: wireguard-go %s: %w", side, err)
	}
	return dev, nil
}

// buildStock runs two wireguard-go devices over the doubles.
func buildStock() (*setup, error) {
	tunA, tunB := newTUN(), newTUN()
	bindA, bindB := newBindPair(netip.AddrPortFrom(wanA, listenPort), netip.AddrPortFrom(wanB, listenPort))
	st := &setup{drops: doublesDrops(bindA, bindB, tunB)}
	ringEnds(tunA, tunB, st)
	pa, pb, err := keys()
	if err != nil {
		return nil, err
	}
	devA, err := wgDevice(labelA, tunA, bindA, uapi(pa, pb.PublicKey(), wanB, lanB))
	if err != nil {
		return nil, err
	}
	devB, err := wgDevice(labelB, tunB, bindB, uapi(pb, pa.PublicKey(), wanA, lanA))
	if err != nil {
		devA.Close()
		return nil, err
	}
	st.close = func() {
		devA.Close()
		devB.Close()
		bindA.shutdown()
		bindB.shutdown()
	}
	return st, nil
}
