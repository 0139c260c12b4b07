//go:build linux

package inproc

import (
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"time"

	"golang.zx2c4.com/wireguard/conn"

	"github.com/wgpio/wgpio/arp"
	"github.com/wgpio/wgpio/bind"
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/noise"
	"github.com/wgpio/wgpio/tundev"
)

// compatQueues is the queues of every port of compat (and ports): one, the
// shape of the stock doubles (one ring each way, one receive function),
// so that compat is compared on the same shape. With more, every hop's
// transmit hashes each frame to a queue (RSS) and tundev's Write each
// packet to a TX queue (FlowHash), work a single-queue TUN and socket do
// not do; the rig's compat runs on the veth's queues.
const compatQueues = 1

// memRingSize is the descriptor ring size of the memport wires (per TX
// queue and RX queue pair; see ringSize).
const memRingSize = 4096

// poolFrames and frameSize are the frame buffers of each pool (each
// gateway's, or compat's one for both): room for every ring of its wires
// full.
const (
	poolFrames = 65536
	frameSize  = 2048
)

func hw(b byte) net.HardwareAddr      { return net.HardwareAddr{2, 0, 0, 0, 0x19, b} }
func mac6(m net.HardwareAddr) [6]byte { var r [6]byte; copy(r[:], m); return r }

// memWires is the memport topology of the compat and fast-path
// configurations: host A ⇄ gateway A's LAN, gateway A's WAN ⇄ gateway B's
// WAN, gateway B's LAN ⇄ host B. Each gateway's ports and its host's port
// share one pool (as AF_XDP ports on one UMEM, and so that the generator
// and sink copy nothing). For the fast path the WAN wire copies each frame
// once, from A's pool into B's: the fast path encrypts in place, so that
// copy is its one copy per hop, as the stock doubles' Send is theirs. For
// compat (sharedWAN) both gateways share one pool and the wire copies
// nothing: wgpio's bind already copies each datagram from wireguard-go's
// buffer into a frame and out of it on receipt, the copies the doubles'
// Send and receive make into and out of the peer's ring, and another one
// on the wire would be memport's, not wgpio's.
type memWires struct {
	hostA, lanA, wanA, wanB, lanB, hostB *memport.Port
	sinkWait                             *dataplane.Waiter // the sink's (ends)
}

// newWires makes the topology with queues queues per port; sharedWAN gives
// both gateways one pool (see memWires).
func newWires(queues int, sharedWAN bool) (*memWires, error) {
	pool := func() (*dataplane.Pool, error) {
		mem := dataplane.AllocMemory(poolFrames * frameSize)
		prefault(mem)
		return dataplane.NewPool(mem, frameSize, dataplane.DefaultHeadroom)
	}
	pa, err := pool()
	if err != nil {
		return nil, err
	}
	pb := pa
	if !sharedWAN {
		if pb, err = pool(); err != nil {
			return nil, err
		}
	}
	w := &memWires{}
	pair := func(name string, ma, mb byte, x, y *dataplane.Pool) (*memport.Port, *memport.Port, error) {
		return memport.NewPair(memport.Config{Name: name, Queues: queues, RingSize: memRingSize, MACA: hw(ma), MACB: hw(mb), PoolA: x, PoolB: y})
	}
	if w.hostA, w.lanA, err = pair("ha", 1, 2, pa, pa); err != nil {
		return nil, err
	}
	if w.wanA, w.wanB, err = pair("w", 3, 4, pa, pb); err != nil {
		return nil, err
	}
	if w.lanB, w.hostB, err = pair("hb", 5, 6, pb, pb); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *memWires) close() {
	if w.sinkWait != nil {
		w.sinkWait.Close()
	}
	for _, p := range []*memport.Port{w.hostA, w.lanA, w.wanA, w.wanB, w.lanB, w.hostB} {
		p.Close()
	}
}

// sinkWait bounds how long the memport sink stays parked without
// looking at its stop channel.
const sinkWait = 10 * time.Millisecond

// ends sets the generator (host A transmits on its queue 0; the wire
// spreads frames over gateway A's queues by RSS) and the sink (host B
// receives on every queue, parking when idle).
func (w *memWires) ends(st *setup) error {
	eth := make([]byte, header.EthernetLen)
	header.PutEthernet(eth, header.MAC(mac6(w.lanA.MAC())), header.MAC(mac6(w.hostA.MAC())), header.EtherTypeIPv4)
	tx := w.hostA.Queue(0).TX()
	frames := make([]dataplane.Frame, maxBurst)
	st.push = func(tr *traffic, n int) int {
		a := tx.Alloc(frames[:min(n, maxBurst)])
		for i := range a {
			f := &frames[i]
			f.SetLen(header.EthernetLen + tr.size)
			b := f.Data()
			copy(b, eth)
			tr.fill(b[header.EthernetLen:])
		}
		k := tx.Transmit(frames[:a])
		if k < a {
			tx.Free(frames[k:a])
		}
		return k
	}
	var rxs []dataplane.RX
	for q := range w.hostB.NumQueues() {
		rxs = append(rxs, w.hostB.Queue(q).RX())
	}
	// The sink blocks as the doubles' sink does: it yields once when it
	// finds nothing, then parks in a Waiter, which on memport is a Go
	// channel that gateway B's transmit sends on when the sink armed (no
	// system call), so that the woken sink runs next on gateway B's P,
	// as the doubles' does. The timeout only bounds how late it sees
	// stop. One sink runs at a time (one runner per size).
	wt, err := dataplane.NewWaiter()
	if err != nil {
		return fmt.Errorf("inproc: sink waiter: %w", err)
	}
	w.sinkWait = wt
	for _, rx := range rxs {
		wt.Add(rx)
	}
	st.sink = func(s *sink, stop <-chan struct{}) {
		in := make([]dataplane.Frame, maxBurst)
		idle := 0
		for {
			got := 0
			tag := s.tag.Load()
			for _, rx := range rxs {
				n := rx.Receive(in)
				for i := range n {
					d := in[i].Data()
					if len(d) > header.EthernetLen && d[12] == 0x08 && d[13] == 0x00 {
						s.check(d[header.EthernetLen:], tag)
					} else {
						s.local.Foreign++
					}
				}
				rx.Free(in[:n])
				got += n
			}
			if got > 0 {
				s.publish()
				idle = 0
				continue
			}
			select {
			case <-stop:
				return
			default:
			}
			if idle++; idle == 1 {
				runtime.Gosched()
				continue
			}
			if _, err := wt.Wait(sinkWait); err != nil {
				return
			}
		}
	}
	return nil
}

// portDrops adds the memport ports' drop counters to m.
func (w *memWires) portDrops(m map[string]uint64) {
	for _, p := range []*memport.Port{w.hostA, w.lanA, w.wanA, w.wanB, w.lanB, w.hostB} {
		for r, n := range p.Stats().Drops {
			if n > 0 {
				m["port_"+p.Name()+"_"+dataplane.DropReason(r).String()] += n
			}
		}
	}
}

// static returns a route table and a neighbour table that send prefix
// on-link and know addr at mac.
func static(prefix netip.Prefix, addr netip.Addr, mac net.HardwareAddr) (*arp.StaticRoutes, *arp.Table, error) {
	routes, err := arp.NewStaticRoutes([]arp.Route{{Prefix: prefix}})
	if err != nil {
		return nil, nil, err
	}
	tbl := arp.NewTable(arp.Config{})
	tbl.Set(addr, arp.MAC(mac), arp.StateReachable)
	return routes, tbl, nil
}

// closers are what a setup closes, newest first.
type closers []func()

func (c *closers) add(f func()) { *c = append(*c, f) }

func (c *closers) run() {
	for i := len(*c) - 1; i >= 0; i-- {
		(*c)[i]()
	}
	*c = nil
}

// startMem begins a setup on memport wires of queues queues (sharedWAN:
// one pool for both gateways, see memWires): the wires and the
// generator's and sink's ends on them, and both gateways' keys.
// On an error it has closed what it opened; otherwise the caller closes
// through c (the wires are its first entry).
func startMem(queues int, sharedWAN bool) (st *setup, w *memWires, c *closers, pa, pb noise.PrivateKey, err error) {
	if w, err = newWires(queues, sharedWAN); err != nil {
		return nil, nil, nil, pa, pb, err
	}
	st, c = &setup{}, &closers{w.close}
	if err = w.ends(st); err == nil {
		pa, pb, err = keys()
	}
	if err != nil {
		c.run()
		return nil, nil, nil, pa, pb, err
	}
	return st, w, c, pa, pb, nil
}

// compatPorts makes each gateway's bind (WAN) and tundev.PortDevice (LAN)
// over memport, as compat and ports use them, and sets st.drops.
func compatPorts(st *setup, w *memWires) (binds []*bind.Bind, lans []*tundev.PortDevice, err error) {
	for _, g := range []struct {
		wan, lan, peerWAN *memport.Port
		host              *memport.Port
		addr, peer        netip.Addr
		own               netip.Prefix
		hostAddr          netip.Addr
		side              string
	}{
		{w.wanA, w.lanA, w.wanB, w.hostA, wanA, wanB, lanA, hostA, labelA},
		{w.wanB, w.lanB, w.wanA, w.hostB, wanB, wanA, lanB, hostB, labelB},
	} {
		routes, tbl, err := static(netip.PrefixFrom(g.addr, 24), g.peer, g.peerWAN.MAC())
		if err != nil {
			return nil, nil, err
		}
		bd, err := bind.New(bind.Config{Port: g.wan, Addr4: g.addr, ListenPort: listenPort, Routes: routes, Neighbours: tbl})
		if err != nil {
			return nil, nil, err
		}
		lroutes, ltbl, err := static(g.own, g.hostAddr, g.host.MAC())
		if err != nil {
			return nil, nil, err
		}
		lan, err := tundev.NewPortDevice(tundev.PortConfig{Port: g.lan, Name: "lan-" + g.side, MTU: tunnelMTU, Routes: lroutes, Neighbours: ltbl})
		if err != nil {
			return nil, nil, err
		}
		binds = append(binds, bd)
		lans = append(lans, lan)
	}
	st.drops = func() map[string]uint64 {
		m := map[string]uint64{}
		for i, bd := range binds {
			for r, n := range bd.Stats().Drops {
				if n > 0 {
					m[[]string{"a", "b"}[i]+"_bind_"+bind.DropReason(r).String()] += n
				}
			}
			for r, n := range lans[i].Stats().Drops {
				if n > 0 {
					m[[]string{"a", "b"}[i]+"_tundev_"+tundev.PortDropReason(r).String()] += n
				}
			}
		}
		w.portDrops(m)
		return m
	}
	return binds, lans, nil
}

// buildPorts wires host A → tundev A → bind A ⇄ bind B → tundev B → host B
// over memport, as compat does, with a plain loop per side in place of
// wireguard-go (as buildDoubles for the doubles): what wgpio's bind and
// tundev cost by themselves.
func buildPorts() (st *setup, err error) {
	st, w, cl, _, _, err := startMem(compatQueues, true)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			cl.run()
		}
	}()
	binds, lans, err := compatPorts(st, w)
	if err != nil {
		return nil, err
	}
	ep, err := binds[0].ParseEndpoint(netip.AddrPortFrom(wanB, listenPort).String())
	if err != nil {
		return nil, err
	}
	if _, _, err := binds[0].Open(listenPort); err != nil {
		return nil, err
	}
	fns, _, err := binds[1].Open(listenPort)
	if err != nil {
		binds[0].Close()
		return nil, err
	}
	bufs := func() ([][]byte, []int) {
		b := make([][]byte, batchSize)
		for i := range b {
			b[i] = make([]byte, slotSize)
		}
		return b, make([]int, batchSize)
	}
	done := make(chan struct{}, 1+len(fns))
	labelled(labelA, func() {
		go func() {
			defer func() { done <- struct{}{} }()
			b, sizes := bufs()
			out := make([][]byte, batchSize)
			for {
				n, err := lans[0].Read(b, sizes, 0)
				if err != nil {
					return
				}
				for i := range n {
					out[i] = b[i][:sizes[i]]
				}
				binds[0].Send(out[:n], ep)
			}
		}()
	})
	labelled(labelB, func() {
		for _, fn := range fns {
			go func() {
				defer func() { done <- struct{}{} }()
				b, sizes := bufs()
				eps := make([]conn.Endpoint, batchSize)
				out := make([][]byte, batchSize)
				for {
					n, err := fn(b, sizes, eps)
					if err != nil {
						return
					}
					for i := range n {
						out[i] = b[i][:sizes[i]]
					}
					lans[1].Write(out[:n], 0)
				}
			}()
		}
	})
	st.close = func() {
		lans[0].Close()
		binds[1].Close()
		for range 1 + len(fns) {
			<-done
		}
		binds[0].Close()
		lans[1].Close()
		cl.run()
	}
	return st, nil
}

// buildCompat runs two unmodified wireguard-go devices, each on wgpio's
// bind (WAN) and tundev.PortDevice (LAN) over memport.
func buildCompat() (st *setup, err error) {
	st, w, cl, pa, pb, err := startMem(compatQueues, true)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			cl.run()
		}
	}()
	binds, lans, err := compatPorts(st, w)
	if err != nil {
		return nil, err
	}
	for i, g := range []struct {
		side           string
		peer           netip.Addr
		far            netip.Prefix
		priv, peerPriv noise.PrivateKey
	}{
		{labelA, wanB, lanB, pa, pb},
		{labelB, wanA, lanA, pb, pa},
	} {
		dev, err := wgDevice(g.side, lans[i], binds[i], uapi(g.priv, g.peerPriv.PublicKey(), g.peer, g.far))
		if err != nil {
			lans[i].Close()
			binds[i].Close()
			return nil, err
		}
		cl.add(dev.Close)
	}
	st.close = cl.run
	return st, nil
}

// resolver answers every address with one MAC.
type resolver [6]byte

func (r resolver) Resolve(netip.Addr) ([6]byte, bool) { return r, true }

// buildFastPath runs two fast-path engines, each with its control plane
// (package gateway), which handshake for real before data flows. Worker i
// of gateway A runs on cpus[i % len], of gateway B on cpus[(i+1) % len],
// so that with one queue the two gateways use two CPUs when there are two.
func buildFastPath(queues int, cpus []int) (st *setup, err error) {
	st, w, cl, pa, pb, err := startMem(queues, false)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			cl.run()
		}
	}()
	var engs []*fastpath.Engine
	for i, g := range []struct {
		side              string
		wan, lan, peerWAN *memport.Port
		host              *memport.Port
		addr, peer        netip.Addr
		far               netip.Prefix
		priv, peerPriv    noise.PrivateKey
	}{
		{labelA, w.wanA, w.lanA, w.wanB, w.hostA, wanA, wanB, lanB, pa, pb},
		{labelB, w.wanB, w.lanB, w.wanA, w.hostB, wanB, wanA, lanA, pb, pa},
	} {
		var pin []int
		for j := range cpus {
			pin = append(pin, cpus[(i+j)%len(cpus)])
		}
		eng, err := fastpath.New(fastpath.Config{
			LAN: g.lan, WAN: g.wan, ListenPort: listenPort, WANAddr4: g.addr,
			WANResolver: resolver(mac6(g.peerWAN.MAC())), LANResolver: resolver(mac6(g.host.MAC())),
			CPUs: pin,
		})
		if err != nil {
			return nil, err
		}
		cl.add(func() { eng.Close() })
		peerMAC := mac6(g.peerWAN.MAC())
		dev, err := gateway.New(gateway.Options{
			PrivateKey: g.priv, ListenPort: listenPort, FixedListenPort: true, Dataplane: eng,
			WANMAC: mac6(g.wan.MAC()), WANAddr4: g.addr,
			Resolve: func(netip.Addr) ([6]byte, bool) { return peerMAC, true },
		})
		if err != nil {
			return nil, err
		}
		cl.add(func() { dev.Close() })
		if err := dev.AddPeer(gateway.PeerConfig{PublicKey: g.peerPriv.PublicKey(), Endpoint: netip.AddrPortFrom(g.peer, listenPort),
			AllowedIPs: []netip.Prefix{g.far}}); err != nil {
			return nil, err
		}
		labelled(g.side, func() {
			eng.Start()
			err = dev.Start()
		})
		if err != nil {
			return nil, err
		}
		engs = append(engs, eng)
	}
	st.drops = func() map[string]uint64 {
		m := map[string]uint64{}
		for i, e := range engs {
			for r, n := range fastpath.TotalDrops(e.Stats()) {
				if n > 0 {
					m[[]string{"a", "b"}[i]+"_fastpath_"+fastpath.DropReason(r).String()] += n
				}
			}
		}
		w.portDrops(m)
		return m
	}
	st.close = cl.run
	return st, nil
}
