package fastpath

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"net/netip"
	"runtime"
	"runtime/pprof"
	"slices"
	"testing"
	"time"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/protocol"
)

var (
	benchManyPeers  = flag.Int("manypeers", 100000, "BenchmarkManyPeers: peers with a session")
	benchManySpread = flag.Int("manyspread", 10000, "BenchmarkManyPeers: peers the traffic goes to, round-robin")
	benchManyEvict  = flag.Int("manyevict", 0, "BenchmarkManyPeers: MiB of memory touched between two rounds (untimed), as other threads and the kernel do between a worker's wake-ups")
	benchManyQueued = flag.Int("manyqueued", 0, "BenchmarkManyPeers: bursts kept waiting in each rig's LAN queue (a saturated gateway) besides the one each batch sends")
)

// manyAddr is the inner address routed to peer i of a many-peers rig (a
// /32 each, and a /128 beside it, as bench/scale's peers have).
func manyAddr(i int) netip.Addr {
	x := uint32(10)<<24 + uint32(i)
	return netip.AddrFrom4([4]byte{byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)})
}

func manyAddr6(i int) netip.Addr {
	var b [16]byte
	b[0], b[1] = 0xfd, 0x5c
	b[12], b[13], b[14], b[15] = byte(i>>24), byte(i>>16), byte(i>>8), byte(i)
	return netip.AddrFrom16(b)
}

// manyEndpoint is peer i's endpoint in a many-peers rig.
func manyEndpoint(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, byte(8 + i/60000), byte(i)}), uint16(1024+i%60000))
}

// newManyPeersRig is a rig whose gateway A has npeers peers, each with
// its own keypair (keys and replay window of a live session), endpoint
// and allowed IPs, made in the order a control plane makes them (other
// objects between them on the heap), and one inner frame for each of the
// first spread peers.
func newManyPeersRig(b testing.TB, npeers, spread int) *peersRig {
	r := newRig(b, rigConfig{onePool: true})
	peers := make([]*Peer, npeers)
	allowed := make([][]netip.Prefix, npeers)
	ep0 := r.peerAB.Endpoint.Load()
	var junk [][]byte // what a control plane allocates beside (handshake state)
	for i := range peers {
		p := &Peer{SrcPorts: 1, SrcPortBase: portA}
		peers[i] = p
		allowed[i] = []netip.Prefix{netip.PrefixFrom(manyAddr(i), 32), netip.PrefixFrom(manyAddr6(i), 128)}
		junk = append(junk, make([]byte, 512))
	}
	if err := r.a.SetPeers(peers, allowed); err != nil {
		b.Fatal(err)
	}
	for i, p := range peers {
		ep := *ep0
		ep.Dst = manyEndpoint(i)
		p.Endpoint.Store(&ep)
		k1, k2 := manyKey(i), [32]byte{3: 1}
		kp, _ := NewKeypair(&k1, &k2, uint32(i+100), uint32(i+1), true, r.clock.Now(), p)
		kp.window(r.a.cfg.ReplayWindow)
		p.Current.Store(kp)
		junk = append(junk, make([]byte, 256))
	}
	runtime.KeepAlive(junk)
	tmpls := make([][]byte, spread)
	tx := r.hostA.Queue(0).TX()
	for i := range tmpls {
		f := udpFrame(b, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, manyAddr(i), 1000, 2000, make([]byte, 22))
		tmpls[i] = append([]byte(nil), f.Data()...)
		tx.Free([]dataplane.Frame{f})
	}
	runtime.GC() // the set-up's garbage collected before the clock starts
	return &peersRig{r: r, tmpls: tmpls, peers: peers, gen: mustUDPFrames(b, tmpls)}
}

// BenchmarkManyPeers is bench/scale's fastpath_100k_vs_1 on the worker's
// outbound path alone: 64-byte packets in batches of 64, 1 peer against
// -manypeers peers (default 100,000) with the traffic round-robin over
// -manyspread of them (default 10,000: 64 distinct peers per batch, none
// seen again for 156 batches), the two rigs taking turns batch by batch.
// "many/1" is the ratio of the rates (bench/scale's target: ≥ 0.85).
// Like bench/scale's pump, each batch is one burst in flight (fed, then
// the worker's outbound, then the WAN drained); with -manyqueued k, k
// more bursts wait in each rig's LAN queue behind it all along, as on a
// gateway at line rate (docs/performance.md, receive-ahead, 3 December).
// Each rig's batches carry the profiler label gw=one or gw=many, as
// bench/scale's gateways do: with -test.cpuprofile, `go tool pprof
// -tagfocus gw=many` against gw=one shows where the extra goes.
func BenchmarkManyPeers(b *testing.B) {
	one := newPeersRig(b, 1)
	many := newManyPeersRig(b, *benchManyPeers, *benchManySpread)
	frames := make([]dataplane.Frame, 64)
	for range 2 * *benchManySpread / 64 { // warm-up: every peer met once
		one.batch(frames)
		many.batch(frames)
	}
	for range *benchManyQueued {
		one.queue(frames)
		many.queue(frames)
	}
	var tOne, tMany time.Duration
	rounds := make([]time.Duration, 0, b.N/128+1)
	oneR := make([]time.Duration, 0, b.N/128+1)
	b.ReportAllocs()
	b.ResetTimer()
	packets := 0
	evict := make([]byte, *benchManyEvict<<20)
	var sink byte
	for done := 0; done < b.N; done += 128 {
		evictCaches(b, evict)
		pprof.SetGoroutineLabels(labelOne)
		t1 := one.batch(frames)
		pprof.SetGoroutineLabels(labelMany)
		tm := many.batch(frames)
		pprof.SetGoroutineLabels(context.Background())
		tOne += t1
		tMany += tm
		oneR, rounds = append(oneR, t1), append(rounds, tm)
		packets += 64
	}
	if len(evict) > 0 {
		sink = evict[len(evict)-1]
	}
	_ = sink
	b.ReportMetric(float64(packets)/tOne.Seconds(), "pps-1")
	b.ReportMetric(float64(packets)/tMany.Seconds(), "pps-many")
	b.ReportMetric(float64(tMany.Nanoseconds()-tOne.Nanoseconds())/float64(packets), "extra-ns/pkt")
	b.ReportMetric(tOne.Seconds()/tMany.Seconds(), "many/1")
	// The medians, which load from elsewhere on a shared machine
	// disturbs least.
	m1, mm := median(oneR), median(rounds)
	b.ReportMetric(float64(mm-m1)/64, "med-extra-ns/pkt")
	b.ReportMetric(float64(m1)/float64(mm), "med-many/1")
	// And of the fastest tenth: what a busy neighbour leaves of the
	// spread of the medians (docs/performance.md, 6 December).
	b.ReportMetric(float64(quantile(oneR, 0.1))/float64(quantile(rounds, 0.1)), "p10-many/1")
}

// The profiler labels of BenchmarkManyPeers' batches (set per batch:
// one pointer store each, outside the batches' timing).
var (
	labelOne  = pprof.WithLabels(context.Background(), pprof.Labels("gw", "one"))
	labelMany = pprof.WithLabels(context.Background(), pprof.Labels("gw", "many"))
)

func median(d []time.Duration) time.Duration { return quantile(d, 0.5) }

// quantile is the q-quantile (0 ≤ q < 1) of d, by rank.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(q*float64(len(s)))]
}

// manyKey is the send key newManyPeersRig gives peer i.
func manyKey(i int) [32]byte {
	var k [32]byte
	k[0], k[1], k[2], k[3] = byte(i), byte(i>>8), byte(i>>16), 1 // never all zeros (chachapoly refuses that key)
	return k
}

// TestManyPeersBurst: bursts of 64 frames for 64 distinct peers (out of
// 3,000, each with its own keypair and endpoint), or 2 frames for each of
// 32, are sealed in one call,
// each with its own peer's key, receiver index and endpoint, and counters
// from 0 up per keypair with none reused; once every peer was met, a
// burst allocates nothing (testing.AllocsPerRun). The same with 5,000
// peers, whose 10,000 prefixes turn the look-ahead on (routeAhead).
func TestManyPeersBurst(t *testing.T) {
	for _, npeers := range []int{3000, 5000} {
		t.Run(fmt.Sprint(npeers), func(t *testing.T) {
			pr := newManyPeersRig(t, npeers, npeers)
			if ahead := pr.r.a.routes.Load().t.Size() >= aheadMinPrefixes; ahead != (npeers == 5000) {
				t.Fatalf("%d peers: look-ahead %v", npeers, ahead)
			}
			manyPeersBurst(t, pr, npeers)
		})
	}
}

func manyPeersBurst(t *testing.T, pr *peersRig, npeers int) {
	frames := make([]dataplane.Frame, 64)
	tx, wrx := pr.r.hostA.Queue(0).TX(), pr.r.wanB.Queue(0).RX()
	next := make([]uint64, npeers) // the counter each peer's next message must carry
	var bad error
	// burst sends 64 frames (the next peers round-robin; with pairs, two
	// frames for each of 32 peers), runs A's outbound path and checks
	// what left on the WAN (when check is set).
	pairs := false
	burst := func(check bool) int {
		n := tx.Alloc(frames)
		for i := range frames[:n] {
			tm := pr.tmpls[pr.k%len(pr.tmpls)]
			if !pairs || i%2 == 1 {
				pr.k++
			}
			frames[i].SetLen(len(tm))
			copy(frames[i].Data(), tm)
		}
		tx.Transmit(frames[:n])
		pr.r.a.workers[0].outbound(0)
		m := wrx.Receive(frames)
		if check {
			for _, f := range frames[:m] {
				if err := checkManySealed(f.Data(), next); err != nil && bad == nil {
					bad = err
				}
			}
		}
		wrx.Free(frames[:m])
		return m
	}
	for range npeers/64 + 1 { // every peer met once, checked
		if got := burst(true); got != 64 {
			t.Fatalf("burst delivered %d of 64 (drops %v)", got, TotalDrops(pr.r.a.Stats()).List())
		}
	}
	if bad != nil {
		t.Fatal(bad)
	}
	allocs := testing.AllocsPerRun(200, func() {
		if got := burst(false); got != 64 {
			t.Fatalf("burst delivered %d of 64", got)
		}
	})
	if allocs != 0 {
		t.Errorf("AllocsPerRun(burst of 64 for 64 distinct peers of %d) = %v, want 0", npeers, allocs)
	}
	// The counters go on where they were after the unchecked bursts: the
	// next of the worker's lease (outbound.go) while it holds one,
	// otherwise the next the keypair reserves.
	w := pr.r.a.workers[0]
	for i, p := range pr.peers {
		kp := p.Current.Load()
		next[i] = kp.SendCounter()
		if pl := w.met(p); pl != nil && pl.leaseOf == kp.serial && pl.granted > 0 {
			next[i] = pl.nonce
		}
	}
	for range 3 {
		burst(true)
	}
	pairs = true // two messages of one keypair in a burst: consecutive counters
	for range 3 {
		burst(true)
	}
	if bad != nil {
		t.Fatal(bad)
	}
}

// checkManySealed opens the transport message in the WAN frame d (outer
// IPv4/UDP, untagged) sent by a many-peers rig: its receiver index names
// the peer (RemoteIndex i+1), its endpoint is the peer's, its counter is
// next[i] (then advanced), and it opens with the peer's key.
func checkManySealed(d []byte, next []uint64) error {
	const off = header.EthernetLen + header.IPv4MinLen + header.UDPLen
	if len(d) < off+protocol.TransportHeaderSize+16 || d[off] != protocol.TypeTransport {
		return fmt.Errorf("not a transport message: % x", d[:min(len(d), off+16)])
	}
	i := int(binary.LittleEndian.Uint32(d[off+4:])) - 1
	if i < 0 || i >= len(next) {
		return fmt.Errorf("receiver index %d: no such peer", i+1)
	}
	dst := netip.AddrFrom4([4]byte(d[header.EthernetLen+16 : header.EthernetLen+20]))
	port := binary.BigEndian.Uint16(d[header.EthernetLen+header.IPv4MinLen+2:])
	if want := manyEndpoint(i); dst != want.Addr() || port != want.Port() {
		return fmt.Errorf("peer %d: sent to %v:%d, its endpoint is %v", i, dst, port, want)
	}
	c := binary.LittleEndian.Uint64(d[off+8:])
	if c != next[i] {
		return fmt.Errorf("peer %d: counter %d, want %d (no gap, no reuse)", i, c, next[i])
	}
	next[i]++
	k := manyKey(i)
	aead, _ := chacha20poly1305.New(k[:])
	var nonce [12]byte
	binary.LittleEndian.PutUint64(nonce[4:], c)
	p, err := aead.Open(nil, nonce[:], d[off+protocol.TransportHeaderSize:], nil)
	if err != nil {
		return fmt.Errorf("peer %d, counter %d: does not open with the peer's key: %v", i, c, err)
	}
	if dstIn := netip.AddrFrom4([4]byte(p[16:20])); dstIn != manyAddr(i) {
		return fmt.Errorf("peer %d: inner destination %v, want %v", i, dstIn, manyAddr(i))
	}
	return nil
}

// evictCaches writes a byte of every cache line of buf, untimed: what other
// threads and the kernel do to the caches between a worker's wake-ups
// (-manyevict). An empty buf does nothing.
func evictCaches(b *testing.B, buf []byte) {
	if len(buf) == 0 {
		return
	}
	b.StopTimer()
	for i := 0; i < len(buf); i += 64 {
		buf[i]++
	}
	b.StartTimer()
}

// TestRouteAheadKeypairHint: with the look-ahead on (10,000 prefixes),
// the route cache's IPv4 entry of a destination holds, after a burst to
// it, the address of the keypair its peer sent with, which the next
// burst's look-ahead prefetches with the peer's lines (aheadPeers); a new
// keypair replaces it at the peer's next burst; and a look-up of an entry
// holding a hint is a hit that keeps it (the hint is not part of an IPv4
// entry's key).
func TestRouteAheadKeypairHint(t *testing.T) {
	const npeers = 5000
	pr := newManyPeersRig(t, npeers, 64)
	w := pr.r.a.workers[0]
	frames := make([]dataplane.Frame, 64)
	tx, wrx := pr.r.hostA.Queue(0).TX(), pr.r.wanB.Queue(0).RX()
	// burst sends one frame to each of the first 64 peers.
	burst := func() {
		n := tx.Alloc(frames)
		for i := range frames[:n] {
			frames[i].SetLen(len(pr.tmpls[i]))
			copy(frames[i].Data(), pr.tmpls[i])
		}
		tx.Transmit(frames[:n])
		w.outbound(0)
		if m := wrx.Receive(frames); m != 64 {
			t.Fatalf("burst delivered %d of 64 (drops %v)", m, TotalDrops(pr.r.a.Stats()).List())
		} else {
			wrx.Free(frames[:m])
		}
	}
	entry := func(i int) *routeCacheEntry {
		set := w.dstRoutes.set(0, key4(manyAddr(i)), true)
		for k := range set {
			if set[k].lo == key4(manyAddr(i)) && set[k].tag == w.dstRoutes.tag4 {
				return &set[k]
			}
		}
		t.Fatalf("no route cache entry for %v", manyAddr(i))
		return nil
	}
	for range 3 { // the first look-ups fill the cache; then hits record hints
		burst()
	}
	if !(w.lastPeers >= aheadMinPeers && pr.r.a.routes.Load().t.Size() >= aheadMinPrefixes) {
		t.Fatal("the look-ahead is off")
	}
	for i := range 64 {
		if got, want := uintptr(entry(i).hi), addrOf(pr.peers[i].Current.Load()); got != want {
			t.Fatalf("peer %d: hint %#x, want its keypair %#x", i, got, want)
		}
	}
	// The look-ahead's last level lists the hint with the peer's lines.
	ahead := []routeAheadFrame{{peer: pr.peers[7], id: uint32(pr.peers[7].ID), set: 0, hint: uintptr(entry(7).hi)}}
	if lines := w.aheadPeers(ahead, make([]uintptr, 4)); !slices.Contains(lines, addrOf(pr.peers[7].Current.Load())) {
		t.Errorf("aheadPeers lines %#x: no keypair of the hint", lines)
	}
	// A new keypair for peer 5: its entry follows at the next burst.
	k1, k2 := manyKey(5), [32]byte{3: 2}
	kp, err := NewKeypair(&k1, &k2, 99999, 6, true, pr.r.clock.Now(), pr.peers[5])
	if err != nil {
		t.Fatal(err)
	}
	kp.window(pr.r.a.cfg.ReplayWindow)
	pr.peers[5].Current.Store(kp)
	burst()
	if got := uintptr(entry(5).hi); got != addrOf(kp) {
		t.Errorf("after a new keypair: hint %#x, want %#x", got, addrOf(kp))
	}
	// A look-up of a hinted entry hits and keeps the hint.
	before := *entry(9)
	if p, id, ok := w.dstRoutes.lookupID(pr.r.a.routes.Load(), manyAddr(9)); p != pr.peers[9] || id != uint32(pr.peers[9].ID) || !ok {
		t.Fatalf("lookupID(%v) = %v %d %v", manyAddr(9), p, id, ok)
	}
	if after := *entry(9); after != before || after.hi == 0 {
		t.Errorf("entry after a look-up %+v, before %+v: the hint must stay", after, before)
	}
}
