//go:build linux

package inproc

import (
	"bytes"
	"context"
	"encoding/binary"
	"net/netip"
	"runtime"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/conn"

	"github.com/wgpio/wgpio/header"
)

// TestRingProducers has three producers put numbered batches into one
// ring and checks that the consumer gets every packet once, each
// producer's in order.
func TestRingProducers(t *testing.T) {
	r := newRing()
	const producers, per = 3, 20000
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bufs := make([][]byte, 7)
			for i := range bufs {
				bufs[i] = make([]byte, 8)
			}
			for next := 0; next < per; {
				n := min(len(bufs), per-next)
				for i := range n {
					binary.BigEndian.PutUint32(bufs[i], uint32(p))
					binary.BigEndian.PutUint32(bufs[i][4:], uint32(next+i))
				}
				first, k := r.reserve(n)
				for i := range k {
					s := r.at(first + uint64(i))
					s.n = copy(s.buf[:], bufs[i])
				}
				if k > 0 {
					r.commit(first, k)
				}
				next += k
				if k == 0 {
					runtime.Gosched()
				}
			}
		}()
	}
	next := make([]int, producers)
	bufs := make([][]byte, 64)
	for i := range bufs {
		bufs[i] = make([]byte, slotSize)
	}
	sizes := make([]int, 64)
	for got := 0; got < producers*per; {
		n, ok := r.get(bufs, sizes, 0, nil)
		if !ok {
			t.Fatal("get: ring closed")
		}
		for i := range n {
			if sizes[i] != 8 {
				t.Fatalf("packet size %d, want 8", sizes[i])
			}
			p, seq := binary.BigEndian.Uint32(bufs[i]), int(binary.BigEndian.Uint32(bufs[i][4:]))
			if seq != next[p] {
				t.Fatalf("producer %d: got packet %d, want %d", p, seq, next[p])
			}
			next[p]++
		}
		got += n
	}
	wg.Wait()
	if d := r.dropped.Load(); d != 0 {
		t.Errorf("dropped = %d, want 0", d)
	}
}

// TestRingFullDrops checks that put drops what does not fit, and counts it.
func TestRingFullDrops(t *testing.T) {
	r := newRing()
	pkts := make([][]byte, ringSize+5)
	for i := range pkts {
		pkts[i] = []byte{byte(i)}
	}
	if n := r.put(pkts, 0); n != ringSize {
		t.Errorf("put = %d, want %d", n, ringSize)
	}
	if d := r.dropped.Load(); d != 5 {
		t.Errorf("dropped = %d, want 5", d)
	}
}

// TestDoublesRoundTrip moves a batch TUN → bind → bind → TUN and checks
// contents, then that a round trip allocates nothing.
func TestDoublesRoundTrip(t *testing.T) {
	tunA, tunB := newTUN(), newTUN()
	defer tunA.Close()
	defer tunB.Close()
	a, b := newBindPair(netip.MustParseAddrPort("198.18.0.1:51820"), netip.MustParseAddrPort("198.18.0.2:51820"))
	defer a.shutdown()
	defer b.shutdown()
	fns, port, err := b.Open(0)
	if err != nil || port != 51820 || len(fns) != 1 {
		t.Fatalf("Open(0) = %d fns, %d, %v; want 1, 51820, nil", len(fns), port, err)
	}
	defer b.Close()
	if _, err := b.ParseEndpoint("198.18.0.9:1"); err == nil {
		t.Error("ParseEndpoint(unknown) = nil error, want one")
	}
	ep, err := a.ParseEndpoint("198.18.0.2:51820")
	if err != nil {
		t.Fatal(err)
	}
	const n, offset = 5, 16
	in := make([][]byte, n)
	for i := range in {
		in[i] = bytes.Repeat([]byte{byte(i + 1)}, 40+i)
	}
	bufs := make([][]byte, batchSize)
	for i := range bufs {
		bufs[i] = make([]byte, slotSize)
	}
	sizes := make([]int, batchSize)
	eps := make([]conn.Endpoint, batchSize)
	out := make([][]byte, batchSize)
	trip := func() {
		first, k := tunA.in.reserve(n)
		for i := range k {
			s := tunA.in.at(first + uint64(i))
			s.n = copy(s.buf[:], in[i])
		}
		tunA.in.commit(first, k)
		m, err := tunA.Read(bufs, sizes, offset)
		if err != nil || m != n {
			t.Fatalf("TUN Read = %d, %v; want %d", m, err, n)
		}
		for i := range m {
			out[i] = bufs[i][offset : offset+sizes[i]]
		}
		a.Send(out[:m], ep)
		m, err = fns[0](bufs, sizes, eps)
		if err != nil || m != n {
			t.Fatalf("receive = %d, %v; want %d", m, err, n)
		}
		for i := range m {
			out[i] = bufs[i][:sizes[i]]
		}
		tunB.Write(out[:m], 0)
		f, k := tunB.out.avail(batchSize)
		if k != n {
			t.Fatalf("TUN B out has %d packets, want %d", k, n)
		}
		for i := range k {
			s := tunB.out.at(f + uint64(i))
			if !bytes.Equal(s.buf[:s.n], in[i]) {
				t.Fatalf("packet %d = % x, want % x", i, s.buf[:s.n], in[i])
			}
		}
		tunB.out.release(k)
	}
	trip()
	if eps[0].DstToString() != "198.18.0.1:51820" {
		t.Fatalf("source endpoint = %s, want 198.18.0.1:51820", eps[0].DstToString())
	}
	if allocs := testing.AllocsPerRun(100, trip); allocs != 0 {
		t.Errorf("round trip through the doubles: %.1f allocations, want 0", allocs)
	}
}

// TestBindCloseWakesReceiver checks that Close makes a blocked receive
// return net.ErrClosed, and that the bind opens again (wireguard-go
// reopens it on every port change).
func TestBindCloseWakesReceiver(t *testing.T) {
	a, b := newBindPair(netip.MustParseAddrPort("198.18.0.1:51820"), netip.MustParseAddrPort("198.18.0.2:51820"))
	defer a.shutdown()
	defer b.shutdown()
	for range 2 {
		fns, _, err := b.Open(51820)
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() {
			_, err := fns[0]([][]byte{make([]byte, 64)}, []int{0}, []conn.Endpoint{nil})
			errc <- err
		}()
		time.Sleep(10 * time.Millisecond)
		b.Close()
		select {
		case err := <-errc:
			if err == nil {
				t.Fatal("receive after Close = nil error, want net.ErrClosed")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("receive still blocked 5 s after Close")
		}
	}
}

// TestSinkCheck feeds the sink good, stale, reordered, foreign and
// corrupt packets.
func TestSinkCheck(t *testing.T) {
	tr, err := newTraffic(100)
	if err != nil {
		t.Fatal(err)
	}
	tr.setTag(7)
	pkts := make([][]byte, 3)
	for i := range pkts {
		pkts[i] = make([]byte, 100)
		tr.fill(pkts[i])
	}
	// A fourth packet of flow 0 (seq 1) after flows 1 and 2.
	for range flows - 3 {
		tr.fill(make([]byte, 100))
	}
	late := make([]byte, 100)
	tr.fill(late)
	s := newSink(tr)
	s.check(pkts[0], 7)
	s.check(late, 7)
	s.check(pkts[1], 7)
	// A router's TTL decrement, checksum fixed: still good.
	dec := bytes.Clone(pkts[2])
	dec[8]--
	binary.BigEndian.PutUint16(dec[10:], 0)
	binary.BigEndian.PutUint16(dec[10:], ^header.FoldChecksum(header.Checksum(dec[:20], 0)))
	s.check(dec, 7)
	s.check(pkts[0], 7)        // flow 0, seq 0 again after seq 1: reordered
	s.check(pkts[1], 8)        // a packet of tag 7 during step 8: stale
	other, _ := newTraffic(80) // a late packet of an earlier size: stale
	other.setTag(3)
	op := make([]byte, 80)
	other.fill(op)
	s.check(op, 7)
	s.check(pkts[1], 6) // a tag from the future: corrupt
	bad := bytes.Clone(pkts[1])
	bad[99] ^= 1
	s.check(bad, 7)
	short := bytes.Clone(pkts[1][:99])
	short[3] = 99
	s.check(short, 7)
	s.check([]byte{0x60, 0, 0, 0}, 7)
	s.publish()
	want := sinkCounts{Delivered: 5, Reordered: 1, Stale: 2, Corrupt: 3, Foreign: 1}
	if got := s.counts(); got != want {
		t.Errorf("counts = %+v, want %+v", got, want)
	}
	if s.firstBad.Load() == nil {
		t.Error("no description of the first corrupt packet")
	}
}

// TestLabelCPU profiles a busy goroutine with a label and checks that the
// parsed profile charges it to the label.
func TestLabelCPU(t *testing.T) {
	var prof bytes.Buffer
	if err := pprof.StartCPUProfile(&prof); err != nil {
		t.Skipf("CPU profile unavailable: %v", err)
	}
	start, _ := processCPU()
	done := make(chan struct{})
	pprof.Do(context.Background(), pprof.Labels(configKey, "c", labelKey, "busy"), func(context.Context) {
		go func() {
			defer close(done)
			x := 0
			for {
				for i := range 1 << 16 {
					x += i
				}
				if now, _ := processCPU(); now-start > int64(300*time.Millisecond) || x == 42 {
					return
				}
			}
		}()
	})
	<-done
	pprof.StopCPUProfile()
	m, err := labelCPU(prof.Bytes(), configKey, labelKey)
	if err != nil {
		t.Fatal(err)
	}
	if m["c/busy"] <= 0 {
		t.Errorf("labelCPU = %v, want CPU time for side=busy", m)
	}
}

// TestKey checks the ratio names scripts read.
func TestKey(t *testing.T) {
	if got, want := Key(0, 64, FastPath2Q, "vs_stock"), "size_64.fastpath_2q.vs_stock"; got != want {
		t.Errorf("Key = %q, want %q", got, want)
	}
	if got, want := Key(1, 1420, Compat, "cpu_vs_stock"), "cpus_1.size_1420.compat.cpu_vs_stock"; got != want {
		t.Errorf("Key = %q, want %q", got, want)
	}
}

// TestPairedVsStock checks that each round's ratio is taken against
// stock's step of the same round, and that rounds missing a figure are
// left out.
func TestPairedVsStock(t *testing.T) {
	st := func(ns ...float64) []Step {
		var s []Step
		for _, v := range ns {
			s = append(s, Step{ClosedLoop: true, GatewaysNsPerPkt: v})
		}
		return s
	}
	got := pairedVsStock(st(110, 300, 0, 120), st(100, 200, 100, 100, 100))
	want := []float64{1.1, 1.5, 1.2}
	if len(got) != len(want) {
		t.Fatalf("pairedVsStock = %v, want %v", got, want)
	}
	for i := range want {
		if d := got[i] - want[i]; d > 1e-9 || d < -1e-9 {
			t.Fatalf("pairedVsStock = %v, want %v", got, want)
		}
	}
}
