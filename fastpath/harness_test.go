package fastpath

import (
	"crypto/rand"
	"encoding/binary"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/replay"
)

// staticResolver maps addresses to MACs; anything else resolves to def.
type staticResolver struct {
	mu    sync.Mutex
	m     map[netip.Addr][6]byte
	def   [6]byte
	calls int // Resolve calls
}

func (r *staticResolver) Resolve(a netip.Addr) ([6]byte, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if mac, ok := r.m[a]; ok {
		return mac, true
	}
	return r.def, r.def != [6]byte{}
}

// rig is two fast-path gateways on memport: hostA ⇄ gwA ⇄ gwB ⇄ hostB.
type rig struct {
	t              testing.TB
	hostA, hostB   *memport.Port // host ends of the LAN pairs
	lanA, lanB     *memport.Port
	wanA, wanB     *memport.Port
	a, b           *Engine
	peerAB, peerBA *Peer // peerAB: gwA's view of gwB
	clock          *fakeClock
}

var (
	wanAddrA  = netip.MustParseAddr("198.18.1.1")
	wanAddrB  = netip.MustParseAddr("198.18.1.2")
	hostAddrA = netip.MustParseAddr("198.19.1.10")
	hostAddrB = netip.MustParseAddr("198.19.2.10")
	lanAddrA  = netip.MustParseAddr("198.19.1.1")
	lanAddrB  = netip.MustParseAddr("198.19.2.1")
	host6A    = netip.MustParseAddr("2001:db8:1::10")
	host6B    = netip.MustParseAddr("2001:db8:2::10")
	lan6A     = netip.MustParseAddr("2001:db8:1::1")
	lan6B     = netip.MustParseAddr("2001:db8:2::1")
	wan6A     = netip.MustParseAddr("2001:db8:ff::1")
	wan6B     = netip.MustParseAddr("2001:db8:ff::2")
)

const portA, portB = 51820, 51821

type fakeClock struct {
	mu  sync.Mutex
	now int64
}

func (c *fakeClock) Now() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now += int64(d)
	c.mu.Unlock()
}

type rigConfig struct {
	queues   int
	srcPorts uint16
	noKeys   bool
	mtu      int
	mtuB     int // gateway B's tunnel MTU, if not 0 (else mtu)
	start    bool
	csum4    bool // IPv4UDPChecksum
	// ICMP rate limits and MSS clamp (Config fields of the same names).
	icmpRate, icmpBurst int
	icmpDest            time.Duration
	mssClamp            int
	lanMTUB             int // MTU of gateway B's LAN pair (default memport's, 1500)
	// onePool puts every port of the rig on one pool, so that no frame is
	// copied on the emulated wires either (benchmarks: the fast path's
	// own work alone).
	onePool bool
	// lanVLAN and wanVLAN put both gateways' LAN and WAN on those VLANs.
	lanVLAN, wanVLAN uint16
	// replayWindow is both engines' Config.ReplayWindow.
	replayWindow replay.Policy
	// share is both engines' Config.Share (shared workers).
	share bool
	// tunnelAddrs and exception are both engines' Config.TunnelAddrs and
	// Config.Exception.
	tunnelAddrs []netip.Addr
	exception   func(pkt []byte)
	// hostBatch, if not nil, is Config.Exception itself (exception is
	// then not called).
	hostBatch func(queue int, pkts [][]byte)
	// hostAddrsB is gateway B's Config.HostAddrs.
	hostAddrsB []netip.Addr
	// wan6 gives both gateways IPv6 WAN addresses (wan6A, wan6B) and
	// IPv6 endpoints for each other.
	wan6 bool
	// reassemble is both engines' Config.Reassemble.
	reassemble bool
}

func mac(b byte) net.HardwareAddr { return net.HardwareAddr{2, 0, 0, 0, 0, b} }

func newRig(t testing.TB, rc rigConfig) *rig {
	t.Helper()
	if rc.queues == 0 {
		rc.queues = 1
	}
	r := &rig{t: t, clock: &fakeClock{now: int64(time.Hour)}}
	// Each gateway's LAN and WAN ports share one pool, as two AF_XDP ports
	// share one UMEM: frames go from LAN RX to WAN TX without a copy.
	newPool := func() *dataplane.Pool {
		p, err := dataplane.NewPool(make([]byte, 16384*dataplane.DefaultFrameSize), dataplane.DefaultFrameSize, dataplane.DefaultHeadroom)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	poolA, poolB := newPool(), newPool()
	pools := map[string][2]*dataplane.Pool{"la": {nil, poolA}, "w": {poolA, poolB}, "lb": {nil, poolB}}
	if rc.onePool {
		pools = map[string][2]*dataplane.Pool{"la": {poolA, poolA}, "w": {poolA, poolA}, "lb": {poolA, poolA}}
	}
	pair := func(name string, ma, mb byte) (*memport.Port, *memport.Port) {
		mtu := 0
		if name == "lb" {
			mtu = rc.lanMTUB
		}
		a, b, err := memport.NewPair(memport.Config{Name: name, Queues: rc.queues, MACA: mac(ma), MACB: mac(mb),
			PoolA: pools[name][0], PoolB: pools[name][1], MTU: mtu})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close(); b.Close() })
		return a, b
	}
	r.hostA, r.lanA = pair("la", 0x0a, 0x1a)
	r.wanA, r.wanB = pair("w", 0x2a, 0x2b)
	r.hostB, r.lanB = pair("lb", 0x0b, 0x1b)

	mk := func(lan, wan *memport.Port, wanAddr, lan4, lan6 netip.Addr, port uint16, hostMAC byte, hostAddrs []netip.Addr) *Engine {
		var hm [6]byte
		copy(hm[:], mac(hostMAC))
		var wanAddr6 netip.Addr
		mtu := rc.mtu
		if wanAddr == wanAddrB && rc.mtuB != 0 {
			mtu = rc.mtuB
		}
		if rc.wan6 {
			wanAddr6 = wan6A
			if wanAddr == wanAddrB {
				wanAddr6 = wan6B
			}
		}
		e, err := New(Config{
			LAN: lan, WAN: wan, ListenPort: port, WANAddr4: wanAddr, WANAddr6: wanAddr6,
			LANAddr4: lan4, LANAddr6: lan6, MTU: mtu,
			WANResolver: &staticResolver{}, LANResolver: &staticResolver{def: hm},
			Now: r.clock.Now, IPv4UDPChecksum: rc.csum4, LANVLAN: rc.lanVLAN, WANVLAN: rc.wanVLAN,
			ICMPRate: rc.icmpRate, ICMPBurst: rc.icmpBurst, ICMPDestInterval: rc.icmpDest, MSSClamp: rc.mssClamp,
			ReplayWindow: rc.replayWindow, Share: rc.share,
			TunnelAddrs: rc.tunnelAddrs, Exception: rc.exceptionBatch(), HostAddrs: hostAddrs, Reassemble: rc.reassemble,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	r.a = mk(r.lanA, r.wanA, wanAddrA, lanAddrA, lan6A, portA, 0x0a, nil)
	r.b = mk(r.lanB, r.wanB, wanAddrB, lanAddrB, lan6B, portB, 0x0b, rc.hostAddrsB)

	r.peerAB = &Peer{SrcPorts: max(rc.srcPorts, 1), SrcPortBase: portA}
	r.peerBA = &Peer{SrcPorts: max(rc.srcPorts, 1), SrcPortBase: portB}
	if err := r.a.SetPeers([]*Peer{r.peerAB}, [][]netip.Prefix{{netip.MustParsePrefix("198.19.2.0/24"), netip.MustParsePrefix("2001:db8:2::/48")}}); err != nil {
		t.Fatal(err)
	}
	if err := r.b.SetPeers([]*Peer{r.peerBA}, [][]netip.Prefix{{netip.MustParsePrefix("198.19.1.0/24"), netip.MustParsePrefix("2001:db8:1::/48")}}); err != nil {
		t.Fatal(err)
	}
	var mA, mB [6]byte
	copy(mA[:], r.wanA.MAC())
	copy(mB[:], r.wanB.MAC())
	r.peerAB.Endpoint.Store(&Endpoint{Dst: netip.AddrPortFrom(wanAddrB, portB), Src: wanAddrA, DstMAC: mB, SrcMAC: mA})
	r.peerBA.Endpoint.Store(&Endpoint{Dst: netip.AddrPortFrom(wanAddrA, portA), Src: wanAddrB, DstMAC: mA, SrcMAC: mB})
	if rc.wan6 {
		r.peerAB.Endpoint.Store(&Endpoint{Dst: netip.AddrPortFrom(wan6B, portB), Src: wan6A, DstMAC: mB, SrcMAC: mA})
		r.peerBA.Endpoint.Store(&Endpoint{Dst: netip.AddrPortFrom(wan6A, portA), Src: wan6B, DstMAC: mA, SrcMAC: mB})
	}
	if !rc.noKeys {
		r.installKeys()
	}
	if rc.start {
		r.a.Start()
		r.b.Start()
	}
	return r
}

// installKeys derives a fresh session for both gateways as if a handshake
// had completed (A initiator, B responder), and publishes it.
func (r *rig) installKeys() (ka, kb *Keypair) {
	r.t.Helper()
	ka, kb, _ = r.newSession()
	return ka, kb
}

// newSession derives a fresh keypair pair for the rig (A initiator, B
// responder), publishes it and rotates it in, and returns what the
// rotations pushed out. B's keypair waits in Next until A's data arrives;
// the kicks let both workers see the new keys at once.
func (r *rig) newSession() (ka, kb *Keypair, dropped []*Keypair) {
	r.t.Helper()
	var k1, k2 [32]byte
	rand.Read(k1[:])
	rand.Read(k2[:])
	ia, err := r.a.Indexes().Allocate()
	if err != nil {
		r.t.Fatal(err)
	}
	ib, err := r.b.Indexes().Allocate()
	if err != nil {
		r.t.Fatal(err)
	}
	now := r.clock.Now()
	if ka, err = NewKeypair(&k1, &k2, ia, ib, true, now, r.peerAB); err != nil {
		r.t.Fatal(err)
	}
	if kb, err = NewKeypair(&k2, &k1, ib, ia, false, now, r.peerBA); err != nil {
		r.t.Fatal(err)
	}
	r.a.Indexes().Publish(ia, ka)
	r.b.Indexes().Publish(ib, kb)
	if d := r.peerAB.Rotate(ka); d != nil {
		dropped = append(dropped, d)
	}
	if d := r.peerBA.Rotate(kb); d != nil {
		dropped = append(dropped, d)
	}
	r.a.Kick()
	r.b.Kick()
	return ka, kb, dropped
}

// udpFrame builds an Ethernet/IP/UDP frame in a frame of tx's pool.
func udpFrame(t testing.TB, tx dataplane.TX, dstMAC, srcMAC net.HardwareAddr, src, dst netip.Addr, sport, dport uint16, payload []byte) dataplane.Frame {
	var fr [1]dataplane.Frame
	if tx.Alloc(fr[:]) != 1 {
		t.Fatal("Alloc: pool empty")
	}
	f := &fr[0]
	iphl := header.IPv4MinLen
	et := uint16(header.EtherTypeIPv4)
	if dst.Is6() {
		iphl = header.IPv6Len
		et = header.EtherTypeIPv6
	}
	n := header.EthernetLen + iphl + header.UDPLen + len(payload)
	if !f.SetLen(n) {
		t.Fatalf("frame of %d bytes does not fit", n)
	}
	b := f.Data()
	header.PutEthernet(b, header.MAC(dstMAC), header.MAC(srcMAC), et)
	l4 := header.EthernetLen + iphl
	if dst.Is4() {
		fl := header.IPv4Fields{Protocol: header.ProtoUDP, Src: src.As4(), Dst: dst.As4(), DontFragment: true}
		header.PutIPv4(b[header.EthernetLen:], &fl, header.UDPLen+len(payload))
	} else {
		fl := header.IPv6Fields{NextHeader: header.ProtoUDP, Src: src.As16(), Dst: dst.As16()}
		header.PutIPv6(b[header.EthernetLen:], &fl, header.UDPLen+len(payload))
	}
	header.PutUDP(b[l4:], sport, dport, len(payload))
	copy(b[l4+header.UDPLen:], payload)
	u := header.UDP(b[l4:])
	u.SetChecksum(header.PseudoHeaderChecksum(header.ProtoUDP, src, dst, u.Length()))
	return *f
}

// send transmits frames on all of port's TX queue q, failing on ring full.
func sendAll(t testing.TB, p *memport.Port, q int, frames []dataplane.Frame) {
	t.Helper()
	tx := p.Queue(q).TX()
	for len(frames) > 0 {
		n := tx.Transmit(frames)
		if n == 0 {
			t.Fatalf("Transmit on %s queue %d took nothing", p.Name(), q)
		}
		frames = frames[n:]
	}
}

// recvAll receives from every queue of p until want frames arrived or the
// deadline passed, calling fn on each frame's data, then frees them.
func recvAll(t testing.TB, p *memport.Port, want int, timeout time.Duration, fn func(q int, data []byte)) int {
	t.Helper()
	got := 0
	buf := make([]dataplane.Frame, 64)
	deadline := time.Now().Add(timeout)
	for got < want && time.Now().Before(deadline) {
		any := false
		for q := 0; q < p.NumQueues(); q++ {
			rx := p.Queue(q).RX()
			n := rx.Receive(buf)
			for i := 0; i < n; i++ {
				if fn != nil {
					fn(q, buf[i].Data())
				}
			}
			rx.Free(buf[:n])
			got += n
			any = any || n > 0
		}
		if !any {
			time.Sleep(100 * time.Microsecond)
		}
	}
	return got
}

func seqPayload(seq uint32, size int) []byte {
	p := make([]byte, size)
	binary.BigEndian.PutUint32(p, seq)
	for i := 4; i < size; i++ {
		p[i] = byte(seq) + byte(i)
	}
	return p
}

// shareCaches makes queue q of every port of the rig keep free frames of
// each pool in one cache per pool (the workers' own, where a worker has
// one): for benchmarks in which one goroutine drives queue q of every
// port, as one CPU per queue would, so that the harness's feeding and
// draining do not move frames between the queues' CPUs through the pools'
// shared free lists. Not for rigs whose workers run on their own.
func (r *rig) shareCaches() {
	for q := 0; q < r.lanA.NumQueues(); q++ {
		caches := map[*dataplane.Pool]*dataplane.Cache{}
		for _, p := range []*memport.Port{r.lanA, r.lanB} { // the workers' caches
			c := p.Queue(q).(dataplane.CacheSharer).Cache()
			caches[c.Pool()] = c
		}
		for _, p := range []*memport.Port{r.hostA, r.lanA, r.wanA, r.wanB, r.lanB, r.hostB} {
			for _, pl := range p.Pools() {
				c := caches[pl]
				if c == nil {
					c = dataplane.NewCache(pl)
					caches[pl] = c
				}
				p.Queue(q).(dataplane.CacheSharer).UseCache(c)
			}
		}
	}
}

// exceptionBatch is the rig's Config.Exception: hostBatch, or exception
// called for each packet of a batch (nil without either).
func (rc rigConfig) exceptionBatch() func(int, [][]byte) {
	if rc.hostBatch != nil {
		return rc.hostBatch
	}
	if rc.exception == nil {
		return nil
	}
	return func(_ int, pkts [][]byte) {
		for _, p := range pkts {
			rc.exception(p)
		}
	}
}
