package fastpath

import (
	"flag"
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
)

var (
	benchManyPeers  = flag.Int("manypeers", 100000, "BenchmarkManyPeers: peers with a session")
	benchManySpread = flag.Int("manyspread", 10000, "BenchmarkManyPeers: peers the traffic goes to, round-robin")
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
		ep.Dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, byte(8 + i/60000), byte(i)}), uint16(1024+i%60000))
		p.Endpoint.Store(&ep)
		var k1, k2 [32]byte
		k1[0], k1[1], k1[2] = byte(i), byte(i>>8), byte(i>>16)
		k2[3] = 1
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
	return &peersRig{r: r, tmpls: tmpls}
}

// BenchmarkManyPeers is bench/scale's fastpath_100k_vs_1 on the worker's
// outbound path alone: 64-byte packets in batches of 64, 1 peer against
// -manypeers peers (default 100,000) with the traffic round-robin over
// -manyspread of them (default 10,000: 64 distinct peers per batch, none
// seen again for 156 batches), the two rigs taking turns batch by batch.
// "many/1" is the ratio of the rates (bench/scale's target: ≥ 0.85).
func BenchmarkManyPeers(b *testing.B) {
	one := newPeersRig(b, 1)
	many := newManyPeersRig(b, *benchManyPeers, *benchManySpread)
	frames := make([]dataplane.Frame, 64)
	for range 2 * *benchManySpread / 64 { // warm-up: every peer met once
		one.batch(frames)
		many.batch(frames)
	}
	var tOne, tMany time.Duration
	rounds := make([]time.Duration, 0, b.N/128+1)
	oneR := make([]time.Duration, 0, b.N/128+1)
	b.ReportAllocs()
	b.ResetTimer()
	packets := 0
	for done := 0; done < b.N; done += 128 {
		t1 := one.batch(frames)
		tm := many.batch(frames)
		tOne += t1
		tMany += tm
		oneR, rounds = append(oneR, t1), append(rounds, tm)
		packets += 64
	}
	b.ReportMetric(float64(packets)/tOne.Seconds(), "pps-1")
	b.ReportMetric(float64(packets)/tMany.Seconds(), "pps-many")
	b.ReportMetric(float64(tMany.Nanoseconds()-tOne.Nanoseconds())/float64(packets), "extra-ns/pkt")
	b.ReportMetric(tOne.Seconds()/tMany.Seconds(), "many/1")
	// The medians, which load from elsewhere on a shared machine
	// disturbs least.
	m1, mm := median(oneR), median(rounds)
	b.ReportMetric(float64(mm-m1)/64, "med-extra-ns/pkt")
	b.ReportMetric(float64(m1)/float64(mm), "med-many/1")
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
