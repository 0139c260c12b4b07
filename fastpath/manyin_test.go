package fastpath

import (
	"encoding/binary"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/wgpio/wgpio/chachapoly"
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/protocol"
)

// manyInRig is a rig whose gateway B has npeers peers, each with a live
// session (keypair published in B's index table, replay window made),
// endpoint and allowed IPs, made in the order a control plane makes them,
// and the transport frames the first spread of them send B: per frame the
// outer IPv4/UDP headers from the peer's endpoint, the transport header
// and a 50-byte inner IPv4/UDP packet from the peer's tunnel address to
// hostAddrB, padded to 64 and sealed with the peer's key.
type manyInRig struct {
	r     *rig
	peers []*Peer
	tmpls [][]byte   // per sending peer: the WAN frame, counter and ciphertext to fill
	send  []*Keypair // per sending peer: its side of the session
	next  []uint64   // per sending peer: the next counter it sends
	k     int
	q     []chachapoly.Packet
}

// manyInMsgOff is where the transport message starts in a manyInRig frame.
const manyInMsgOff = header.EthernetLen + header.IPv4MinLen + header.UDPLen

func newManyInRig(tb testing.TB, npeers, spread int) *manyInRig {
	r := newRig(tb, rigConfig{onePool: true, noKeys: true})
	peers := make([]*Peer, npeers)
	allowed := make([][]netip.Prefix, npeers)
	var junk [][]byte // what a control plane allocates beside (handshake state)
	for i := range peers {
		peers[i] = &Peer{SrcPorts: 1, SrcPortBase: portB}
		allowed[i] = []netip.Prefix{netip.PrefixFrom(manyAddr(i), 32), netip.PrefixFrom(manyAddr6(i), 128)}
		junk = append(junk, make([]byte, 512))
	}
	if err := r.b.SetPeers(peers, allowed); err != nil {
		tb.Fatal(err)
	}
	ep0 := r.peerBA.Endpoint.Load()
	mr := &manyInRig{r: r, peers: peers, q: make([]chachapoly.Packet, 64)}
	wtx := r.wanA.Queue(0).TX()
	now := r.clock.Now()
	for i, p := range peers {
		ep := *ep0
		ep.Dst = manyEndpoint(i)
		p.Endpoint.Store(&ep)
		idx, err := r.b.Indexes().Allocate()
		if err != nil {
			tb.Fatal(err)
		}
		k1, k2 := manyKey(i), [32]byte{3: 1}
		kp, _ := NewKeypair(&k2, &k1, idx, uint32(i+100), true, now, p)
		kp.window(r.b.cfg.ReplayWindow)
		r.b.Indexes().Publish(idx, kp)
		p.Current.Store(kp)
		junk = append(junk, make([]byte, 256))
		if i >= spread {
			continue
		}
		sk, _ := NewKeypair(&k1, &k2, uint32(i+100), idx, true, now, nil)
		mr.send = append(mr.send, sk)
		mr.next = append(mr.next, 0)
		// The message: header, the padded inner packet, room for the tag.
		msg := make([]byte, protocol.TransportHeaderSize+64+protocol.TagSize)
		msg[0] = protocol.TypeTransport
		binary.LittleEndian.PutUint32(msg[4:], idx)
		in := msg[protocol.TransportHeaderSize:]
		const pl = 22
		fl := header.IPv4Fields{Protocol: header.ProtoUDP, Src: manyAddr(i).As4(), Dst: hostAddrB.As4(), TTL: 64}
		header.PutIPv4(in, &fl, header.UDPLen+pl)
		header.PutUDP(in[header.IPv4MinLen:], 1000, 2000, pl)
		f := udpFrame(tb, wtx, r.wanB.MAC(), r.wanA.MAC(), ep.Dst.Addr(), wanAddrB, ep.Dst.Port(), portB, msg)
		mr.tmpls = append(mr.tmpls, append([]byte(nil), f.Data()...))
		wtx.Free([]dataplane.Frame{f})
	}
	runtime.KeepAlive(junk)
	runtime.GC() // the set-up's garbage collected before the clock starts
	return mr
}

// fill puts the next len(frames) messages of the sending peers, round-robin,
// into frames (allocated on gateway A's WAN TX) and seals them in one call;
// it returns the sending peer of each in who.
func (mr *manyInRig) fill(frames []dataplane.Frame, who []int) {
	for i := range frames {
		j := mr.k % len(mr.tmpls)
		mr.k++
		who[i] = j
		mr.put(&frames[i], i, j, mr.next[j])
		mr.next[j]++
	}
	mr.seal(len(frames))
}

// put makes frame f, the i-th of a burst, sending peer j's message with
// counter c, to be sealed by seal.
func (mr *manyInRig) put(f *dataplane.Frame, i, j int, c uint64) {
	t := mr.tmpls[j]
	f.SetLen(len(t))
	d := f.Data()
	copy(d, t)
	binary.LittleEndian.PutUint64(d[manyInMsgOff+8:], c)
	mr.q[i] = chachapoly.Packet{Key: &mr.send[j].send, Counter: c, Data: d[manyInMsgOff+protocol.TransportHeaderSize:]}
}

// seal seals the first n frames put.
func (mr *manyInRig) seal(n int) {
	chachapoly.Seal(mr.q[:n])
	clear(mr.q)
}

// batch sends one burst of 64 messages into gateway B's WAN (the frames
// made and sealed before the clock starts), runs B's inbound path, and
// drains B's LAN; it returns the time of the inbound call and the number
// of packets delivered.
func (mr *manyInRig) batch(frames []dataplane.Frame, who []int) (time.Duration, int) {
	tx := mr.r.wanA.Queue(0).TX()
	n := tx.Alloc(frames)
	mr.fill(frames[:n], who[:n])
	tx.Transmit(frames[:n])
	now := mr.r.clock.Now()
	w := mr.r.b.workers[0]
	t0 := time.Now()
	w.inbound(now)
	dt := time.Since(t0)
	rx := mr.r.hostB.Queue(0).RX()
	m := rx.Receive(frames)
	rx.Free(frames[:m])
	return dt, m
}

// BenchmarkManyPeersInbound is BenchmarkManyPeers on the worker's inbound
// path (WAN RX, authenticate, replay check, deliver, LAN TX): 64-byte
// inner packets in batches of 64, from 1 peer against from -manyspread
// peers round-robin (64 distinct peers per batch) of -manypeers, the two
// rigs taking turns batch by batch. The time is that of the worker's
// inbound call alone (sealing the batch is not timed); with -manyevict,
// that many MiB are touched between two rounds (untimed).
func BenchmarkManyPeersInbound(b *testing.B) {
	one := newManyInRig(b, 1, 1)
	many := newManyInRig(b, *benchManyPeers, *benchManySpread)
	frames := make([]dataplane.Frame, 64)
	who := make([]int, 64)
	for range 2 * *benchManySpread / 64 { // warm-up: every peer met once
		one.batch(frames, who)
		many.batch(frames, who)
	}
	var tOne, tMany time.Duration
	oneR := make([]time.Duration, 0, b.N/128+1)
	manyR := make([]time.Duration, 0, b.N/128+1)
	evict := make([]byte, *benchManyEvict<<20)
	b.ReportAllocs()
	b.ResetTimer()
	packets := 0
	for done := 0; done < b.N; done += 128 {
		evictCaches(b, evict)
		t1, n1 := one.batch(frames, who)
		tm, nm := many.batch(frames, who)
		if n1 != 64 || nm != 64 {
			b.Fatalf("delivered %d and %d of 64 (drops: 1 peer %v, many %v)", n1, nm,
				TotalDrops(one.r.b.Stats()).List(), TotalDrops(many.r.b.Stats()).List())
		}
		tOne += t1
		tMany += tm
		oneR, manyR = append(oneR, t1), append(manyR, tm)
		packets += 64
	}
	b.ReportMetric(float64(packets)/tOne.Seconds(), "pps-1")
	b.ReportMetric(float64(packets)/tMany.Seconds(), "pps-many")
	b.ReportMetric(float64(tMany.Nanoseconds()-tOne.Nanoseconds())/float64(packets), "extra-ns/pkt")
	b.ReportMetric(tOne.Seconds()/tMany.Seconds(), "many/1")
	m1, mm := median(oneR), median(manyR)
	b.ReportMetric(float64(mm-m1)/64, "med-extra-ns/pkt")
	b.ReportMetric(float64(m1)/float64(mm), "med-many/1")
}

// TestManyPeersInbound: bursts of 64 messages from 64 distinct peers (of
// 3,000, each with its own keypair, index, replay window and allowed
// IPs) are all authenticated and delivered, each inner packet from its
// own peer's address; the same messages again are all rejected as
// replays; and once every peer was met a burst allocates nothing
// (testing.AllocsPerRun).
func TestManyPeersInbound(t *testing.T) {
	const npeers = 3000
	mr := newManyInRig(t, npeers, npeers)
	frames := make([]dataplane.Frame, 64)
	who := make([]int, 64)
	saved := make([][]byte, 64)
	tx, rx := mr.r.wanA.Queue(0).TX(), mr.r.hostB.Queue(0).RX()
	w := mr.r.b.workers[0]
	for range npeers/64 + 1 {
		n := tx.Alloc(frames)
		mr.fill(frames[:n], who[:n])
		for i := range frames[:n] {
			saved[i] = append(saved[i][:0], frames[i].Data()...)
		}
		tx.Transmit(frames[:n])
		w.inbound(mr.r.clock.Now())
		m := rx.Receive(frames)
		if m != n {
			t.Fatalf("delivered %d of %d (drops %v)", m, n, TotalDrops(mr.r.b.Stats()).List())
		}
		for i, f := range frames[:m] {
			d := f.Data()
			src := netip.AddrFrom4([4]byte(d[header.EthernetLen+12 : header.EthernetLen+16]))
			if want := manyAddr(who[i]); src != want {
				t.Fatalf("packet %d: inner source %v, want %v (peer %d)", i, src, want, who[i])
			}
		}
		rx.Free(frames[:m])
		// The same burst again: every message a replay.
		before := TotalDrops(mr.r.b.Stats())[DropReplay]
		n = tx.Alloc(frames[:n])
		for i := range frames[:n] {
			frames[i].SetLen(len(saved[i]))
			copy(frames[i].Data(), saved[i])
		}
		tx.Transmit(frames[:n])
		w.inbound(mr.r.clock.Now())
		if m := rx.Receive(frames); m != 0 {
			t.Fatalf("%d replayed messages delivered", m)
		}
		if got := TotalDrops(mr.r.b.Stats())[DropReplay] - before; got != uint64(n) {
			t.Fatalf("replay drops %d, want %d", got, n)
		}
	}
	// Sessions interleaved in one burst, with replays inside it: peers
	// 0-3 take turns, each sending counters c, c+1, c (again), c+2, and a
	// counter from before this burst; only the fresh ones pass, each once.
	before := TotalDrops(mr.r.b.Stats())[DropReplay]
	n := tx.Alloc(frames[:40])
	fresh := 0
	for i := range frames[:n] {
		j, r := i%4, i/4
		base := mr.next[j]
		var c uint64
		switch r % 5 {
		case 0, 2:
			c = base
		case 1:
			c = base + 1
		case 3:
			c = base + 2
		case 4:
			c = base - 4 // sent in an earlier burst (base moved up 3 in this one)
		}
		if r%5 == 3 {
			mr.next[j] += 3
		}
		if r%5 != 2 && r%5 != 4 {
			fresh++
		}
		mr.put(&frames[i], i, j, c)
	}
	mr.seal(n)
	tx.Transmit(frames[:n])
	w.inbound(mr.r.clock.Now())
	if m := rx.Receive(frames); m != fresh {
		t.Fatalf("interleaved sessions: %d delivered, want %d", m, fresh)
	} else {
		rx.Free(frames[:m])
	}
	if got := TotalDrops(mr.r.b.Stats())[DropReplay] - before; got != uint64(n-fresh) {
		t.Fatalf("interleaved sessions: replay drops %d, want %d", got, n-fresh)
	}
	allocs := testing.AllocsPerRun(200, func() {
		n := tx.Alloc(frames)
		mr.fill(frames[:n], who[:n])
		tx.Transmit(frames[:n])
		w.inbound(mr.r.clock.Now())
		m := rx.Receive(frames)
		rx.Free(frames[:m])
		if m != n {
			t.Fatalf("delivered %d of %d", m, n)
		}
	})
	if allocs != 0 {
		t.Errorf("AllocsPerRun(burst of 64 from 64 distinct peers of %d) = %v, want 0", npeers, allocs)
	}
}

// TestInboundAheadGate: a burst from 64 sessions runs inbound's
// look-ahead (which leaves w.in.many set for sourcesAhead) on a gateway
// with inAheadMinIndexes receiver indexes or more, and not on a smaller
// one, where it would only cost; both deliver the whole burst.
func TestInboundAheadGate(t *testing.T) {
	for _, tc := range []struct {
		peers int
		many  bool
	}{{64, false}, {inAheadMinIndexes, true}} {
		mr := newManyInRig(t, tc.peers, 64)
		if n := mr.r.b.indexes.Len(); (n >= inAheadMinIndexes) != tc.many {
			t.Fatalf("%d peers: %d indexes in use", tc.peers, n)
		}
		frames, who := make([]dataplane.Frame, 64), make([]int, 64)
		for range 3 {
			if _, n := mr.batch(frames, who); n != 64 {
				t.Fatalf("%d peers: delivered %d of 64", tc.peers, n)
			}
			if got := mr.r.b.workers[0].in.many; got != tc.many {
				t.Fatalf("%d peers: look-ahead ran %v, want %v", tc.peers, got, tc.many)
			}
		}
	}
}
