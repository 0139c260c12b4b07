package dataplanetest

import (
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
)

// NewPairFunc opens two ports with queues queues each, joined so that what
// one transmits the other receives. The suite closes both ports itself
// (exactly once each) before the subtest ends; the factory registers with
// t.Cleanup whatever else it made (namespaces, veth pairs).
//
// The factory is called several times, also with the same queue count; for a
// kernel-bridged backend every call after the first may reopen ports on the
// same interfaces (CloseReopen relies on that), and resources the factory
// keeps from one call to the next must be made in the first call (Leaks
// measures file descriptors and goroutines around a second call).
type NewPairFunc func(t *testing.T, queues int) (a, b dataplane.Port)

// Options tune the suite to a backend. The zero value suits memport.
type Options struct {
	// Queues lists the queue counts to test; default {1, 2}.
	Queues []int

	// Frames is the number of frames the descriptor accounting test sends
	// from a to b and back; default 1,000,000. A backend on a slow kernel
	// path (AF_XDP in copy mode over veth) may use fewer, e.g. 100,000.
	Frames int

	// Lossy says the ports are bridged through something that drops
	// frames when the receiver lags instead of pushing back (a kernel
	// path: AF_XDP drops what finds its RX ring full, so its Transmit may
	// never come up short). The suite then paces its senders, waits for
	// frames with a timeout instead of counting on every one, and checks
	// order, integrity and accounting rather than exact delivery. Without
	// Lossy every frame Transmit accepts must arrive, and a full ring must
	// make Transmit return short and count RingFull.
	Lossy bool

	// AddrA and AddrB are the IPv4 addresses of the suite's flows (default
	// 198.18.0.1 and 198.18.0.2). PortA and PortB are the first UDP ports
	// of the two ends (default 40000 and 50000); flow f runs between
	// AddrA:PortA+f and AddrB:PortB+f, f < Flows (default 16, at least
	// the largest queue count). A kernel-bridged backend redirects UDP to
	// AddrB, ports [PortB, PortB+Flows), on b, and to AddrA, ports [PortA,
	// PortA+Flows), on a.
	AddrA, AddrB netip.Addr
	PortA, PortB uint16
	Flows        int

	// Timeout bounds each wait for frames; default 10 s.
	Timeout time.Duration
}

func (o *Options) setDefaults() {
	if len(o.Queues) == 0 {
		o.Queues = []int{1, 2}
	}
	if o.Frames == 0 {
		o.Frames = 1_000_000
	}
	if !o.AddrA.IsValid() {
		o.AddrA = netip.MustParseAddr("198.18.0.1")
	}
	if !o.AddrB.IsValid() {
		o.AddrB = netip.MustParseAddr("198.18.0.2")
	}
	if o.PortA == 0 {
		o.PortA = 40000
	}
	if o.PortB == 0 {
		o.PortB = 50000
	}
	if o.Flows == 0 {
		o.Flows = 16
	}
	for _, q := range o.Queues {
		o.Flows = max(o.Flows, q)
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
}

// Run runs the conformance suite as subtests of t:
//
//   - queues=N/Exchange: frames of several sizes (64 bytes to MTU + 14) from
//     every TX queue of a to b, reflected by b back to a (a transmit of
//     received frames, which copies and counts the copy when the pools
//     differ), then the same from b; payloads, headroom, tailroom, order
//     within a flow and counters checked.
//   - queues=N/RingFull: a transmits while b does not receive; Transmit
//     must come up short with RingFull counted (unless Lossy), the caller
//     keeps and frees the rest, and traffic flows again after b drains.
//   - queues=N/Halves: the RX and TX halves of every queue of both ports
//     driven by separate goroutines at once, both directions.
//   - queues=N/BadInput: a runt and a frame one byte longer than MTU + 14
//     are dropped and counted, never delivered; good frames still flow.
//   - queues=N/Accounting: Options.Frames frames from a to b and reflected
//     back, then a drain; every buffer of every pool must then be in exactly
//     one place (see CheckAccounting). Ports must implement
//     dataplane.Accounter.
//   - SharedCache (ports implementing dataplane.CacheSharer): b's queue 0
//     takes a's queue 0's cache (UseCache), and one goroutine drives both:
//     frames go from a to b, are reflected and come back, each buffer
//     passing through the shared cache; then every buffer must be in
//     exactly one place, the shared cache reported once, by a.
//   - CloseReopen: after Close the halves return 0 and held frames can
//     still be freed; a new pair (on the same interfaces) works.
//   - Leaks: no file descriptor or goroutine outlives a pair.
//
// Run does not call t.Parallel.
func Run(t *testing.T, newPair NewPairFunc, opts Options) {
	opts.setDefaults()
	s := &suite{newPair: newPair, opts: opts}
	for _, q := range opts.Queues {
		t.Run(fmt.Sprintf("queues=%d", q), func(t *testing.T) {
			t.Run("Exchange", func(t *testing.T) { s.testExchange(t, q) })
			t.Run("RingFull", func(t *testing.T) { s.testRingFull(t, q) })
			t.Run("Halves", func(t *testing.T) { s.testHalves(t, q) })
			t.Run("BadInput", func(t *testing.T) { s.testBadInput(t, q) })
			t.Run("Accounting", func(t *testing.T) { s.testAccounting(t, q) })
		})
	}
	t.Run("SharedCache", func(t *testing.T) { s.testSharedCache(t) })
	t.Run("CloseReopen", func(t *testing.T) { s.testCloseReopen(t, opts.Queues[len(opts.Queues)-1]) })
	t.Run("Leaks", func(t *testing.T) { s.testLeaks(t, opts.Queues[len(opts.Queues)-1]) })
}

type suite struct {
	newPair NewPairFunc
	opts    Options
}

// pair is an open pair of ports with the suite's endpoints.
type pair struct {
	t      *testing.T
	s      *suite
	a, b   dataplane.Port
	ea, eb endpoint
	queues int
	closed bool
	// next sequence number per direction and flow, for the senders
	seq [3][]uint64
}

func (s *suite) open(t *testing.T, queues int) *pair {
	t.Helper()
	a, b := s.newPair(t, queues)
	if a == nil || b == nil {
		t.Fatalf("newPair(%d) returned a nil port", queues)
	}
	if a.NumQueues() != queues || b.NumQueues() != queues {
		t.Fatalf("newPair(%d): NumQueues() = %d, %d; want %d", queues, a.NumQueues(), b.NumQueues(), queues)
	}
	p := &pair{
		t: t, s: s, a: a, b: b, queues: queues,
		ea: endpoint{mac: a.MAC(), ip: s.opts.AddrA, port: s.opts.PortA},
		eb: endpoint{mac: b.MAC(), ip: s.opts.AddrB, port: s.opts.PortB},
	}
	for d := range p.seq {
		p.seq[d] = make([]uint64, s.opts.Flows)
	}
	t.Cleanup(p.close)
	return p
}

func (p *pair) close() {
	if p.closed {
		return
	}
	p.closed = true
	if err := p.a.Close(); err != nil {
		p.t.Errorf("%s: Close() = %v", p.a.Name(), err)
	}
	if err := p.b.Close(); err != nil {
		p.t.Errorf("%s: Close() = %v", p.b.Name(), err)
	}
}

// ends returns the source and destination ports and endpoints of dir.
func (p *pair) ends(dir uint8) (src, dst dataplane.Port, se, de endpoint) {
	if dir == dirAB {
		return p.a, p.b, p.ea, p.eb
	}
	return p.b, p.a, p.eb, p.ea
}

// flowOf returns the flow of the j-th frame sent from TX queue qi: every TX
// queue has flows of its own, so a flow's frames stay in order.
func (p *pair) flowOf(qi, j int) uint16 {
	per := p.s.opts.Flows / p.queues
	return uint16(qi*per + j%per)
}

// send builds count frames of the given sizes (cycled) on TX queue qi of the
// direction's source and transmits them all, retrying while the ring is
// full, for up to the timeout. It returns how many were taken.
func (p *pair) send(dir uint8, qi, count int, sizes []int) int {
	p.t.Helper()
	src, _, se, de := p.ends(dir)
	tx := src.Queue(qi).TX()
	buf := make([]dataplane.Frame, 64)
	sent := 0
	deadline := time.Now().Add(p.s.opts.Timeout)
	for sent < count {
		n := tx.Alloc(buf[:min(len(buf), count-sent)])
		if n == 0 {
			tx.Reclaim()
			if time.Now().After(deadline) {
				p.t.Fatalf("%s q%d: Alloc returned 0 frames for %v", src.Name(), qi, p.s.opts.Timeout)
			}
			runtime.Gosched()
			continue
		}
		for i := range n {
			f := p.flowOf(qi, sent+i)
			tg := tag{dir: dir, flow: f, seq: p.seq[dir][f]}
			p.seq[dir][f]++
			if !build(&buf[i], sizes[(sent+i)%len(sizes)], se, de, tg) {
				p.t.Fatalf("%s q%d: frame of %d bytes does not fit (Len %d, Tailroom %d)", src.Name(), qi, sizes[(sent+i)%len(sizes)], buf[i].Len(), buf[i].Tailroom())
			}
		}
		sent += p.transmitAll(src, tx, buf[:n], deadline)
		if time.Now().After(deadline) {
			p.t.Fatalf("%s q%d: sent %d of %d frames in %v", src.Name(), qi, sent, count, p.s.opts.Timeout)
		}
	}
	return sent
}

// transmitAll transmits frames until all are taken or deadline passes; it
// frees what is left then and returns how many were taken.
func (p *pair) transmitAll(port dataplane.Port, tx dataplane.TX, frames []dataplane.Frame, deadline time.Time) int {
	taken := 0
	for taken < len(frames) {
		taken += tx.Transmit(frames[taken:])
		if taken < len(frames) {
			tx.Reclaim()
			if time.Now().After(deadline) {
				p.t.Errorf("%s: Transmit took %d of %d frames before the timeout", port.Name(), taken, len(frames))
				tx.Free(frames[taken:])
				break
			}
			runtime.Gosched()
		}
	}
	return taken
}

// received is a frame the suite received and still owns.
type received struct {
	f     dataplane.Frame
	queue int
	tag   tag
}

// collect receives on every queue of the direction's destination until want
// frames have come or the timeout passes (then, unless lossy is allowed, it
// fails), checking each frame; it keeps the frames when keep is set, and
// frees them otherwise. It then polls briefly for frames beyond want, which
// are an error.
func (p *pair) collect(dir uint8, want int, keep bool) []received {
	p.t.Helper()
	_, dst, _, de := p.ends(dir)
	buf := make([]dataplane.Frame, 64)
	var out []received
	last := make(map[uint16]uint64)
	got := 0
	deadline := time.Now().Add(p.s.opts.Timeout)
	extra := time.Time{}
	for {
		progress := false
		for qi := range dst.NumQueues() {
			rx := dst.Queue(qi).RX()
			n := rx.Receive(buf)
			for i := range n {
				f := &buf[i]
				tg, ok := p.checkFrame(dst, f, de)
				if ok {
					if tg.dir != dir {
						p.t.Errorf("%s q%d: frame of direction %d, want %d", dst.Name(), qi, tg.dir, dir)
					}
					if l, seen := last[tg.flow]; seen && tg.seq <= l {
						p.t.Errorf("%s q%d: flow %d seq %d after seq %d, want increasing", dst.Name(), qi, tg.flow, tg.seq, l)
					}
					last[tg.flow] = tg.seq
				}
				got++
				if keep && ok && got <= want {
					out = append(out, received{f: *f, queue: qi, tag: tg})
				} else {
					rx.Free(buf[i : i+1])
				}
			}
			progress = progress || n > 0
		}
		if got >= want && extra.IsZero() {
			extra = time.Now().Add(20 * time.Millisecond)
		}
		if !extra.IsZero() && time.Now().After(extra) {
			break
		}
		if got < want && time.Now().After(deadline) {
			// Fatal: the rest of the subtest would wait for frames too.
			p.t.Fatalf("%s: received %d frames in %v, want %d (even a lossy port must not lose frames in a quiet exchange)", dst.Name(), got, p.s.opts.Timeout, want)
		}
		if !progress {
			p.reclaimAll()
			runtime.Gosched()
		}
	}
	if got > want {
		p.t.Errorf("%s: received %d frames, want %d (duplicates or strays)", dst.Name(), got, want)
	}
	return out
}

// checkFrame checks a received frame's shape and contents.
func (p *pair) checkFrame(port dataplane.Port, f *dataplane.Frame, de endpoint) (tag, bool) {
	p.t.Helper()
	maxLen := port.MTU() + ethLen + 4
	if f.Len() < ethLen || f.Len() > maxLen {
		p.t.Errorf("%s: received a frame of %d bytes, want [%d, %d]", port.Name(), f.Len(), ethLen, maxLen)
		return tag{}, false
	}
	if f.Headroom() < dataplane.MinHeadroom {
		p.t.Errorf("%s: received frame Headroom() = %d, want >= %d", port.Name(), f.Headroom(), dataplane.MinHeadroom)
	}
	if room := f.Len() + f.Tailroom(); room < port.MTU()+ethLen+dataplane.MinTailroom {
		p.t.Errorf("%s: received frame Len()+Tailroom() = %d, want >= MTU+14+%d = %d", port.Name(), room, dataplane.MinTailroom, port.MTU()+ethLen+dataplane.MinTailroom)
	}
	if len(f.Data()) != f.Len() {
		p.t.Errorf("%s: len(Data()) = %d, Len() = %d", port.Name(), len(f.Data()), f.Len())
	}
	tg, ok := parse(f.Data(), de)
	if !ok {
		p.t.Errorf("%s: received a frame that is not the suite's or was corrupted: % x", port.Name(), f.Data()[:min(f.Len(), 64)])
	}
	return tg, ok
}

// reclaimAll lets completed transmissions flow back on both ports.
func (p *pair) reclaimAll() {
	for _, port := range []dataplane.Port{p.a, p.b} {
		for qi := range port.NumQueues() {
			port.Queue(qi).TX().Reclaim()
		}
	}
}

func anyLeft(byQueue [][]dataplane.Frame) bool {
	for _, fs := range byQueue {
		if len(fs) > 0 {
			return true
		}
	}
	return false
}

// poolOf returns the pool a TX half allocates from.
func poolOf(t *testing.T, tx dataplane.TX) *dataplane.Pool {
	var f [1]dataplane.Frame
	if tx.Alloc(f[:]) != 1 {
		t.Fatalf("Alloc of one frame failed on a fresh port")
	}
	defer tx.Free(f[:])
	return f[0].Pool()
}

func (s *suite) testExchange(t *testing.T, queues int) {
	p := s.open(t, queues)
	const perQueue = 36
	sizes := []int{64, 60, 128, 512, p.a.MTU() + ethLen, 1000}
	for _, dir := range []uint8{dirAB, dirBA} {
		src, dst, _, _ := p.ends(dir)
		before := [2]dataplane.Stats{src.Stats(), dst.Stats()}
		total := 0
		var bytes uint64
		var rs []received
		// Rounds of 6 frames (one of each size) per TX queue, so that
		// rings of 8 descriptors suffice without a concurrent receiver.
		for range perQueue / len(sizes) {
			round := 0
			for qi := range queues {
				round += p.send(dir, qi, len(sizes), sizes)
			}
			rs = append(rs, p.collect(dir, round, true)...)
			total += round
		}
		for _, size := range sizes {
			bytes += uint64(queues*perQueue/len(sizes)) * uint64(max(size, minFrame))
		}
		// Reflect what arrived, from the queue it arrived on.
		dstPool := poolOf(t, dst.Queue(0).TX())
		foreign := 0
		byQueue := make([][]dataplane.Frame, queues)
		for _, r := range rs {
			reflect(r.f.Data())
			byQueue[r.queue] = append(byQueue[r.queue], r.f)
			if r.f.Pool() != dstPool {
				foreign++
			}
		}
		copiesBefore := dst.Stats().Copies
		deadline := time.Now().Add(s.opts.Timeout)
		for anyLeft(byQueue) {
			round := 0
			for qi, fs := range byQueue {
				k := min(len(fs), 6)
				round += p.transmitAll(dst, dst.Queue(qi).TX(), fs[:k], deadline)
				byQueue[qi] = fs[k:]
			}
			p.collect(3-dir, round, false)
		}
		// Frames of another pool must be copied and counted. (A backend
		// may count copies of its own frames too, as memport does when
		// the wire crosses pools.)
		if copies := dst.Stats().Copies - copiesBefore; copies < uint64(foreign) {
			t.Errorf("%s: reflecting %d frames of another pool counted %d copies, want >= %d", dst.Name(), foreign, copies, foreign)
		}
		after := [2]dataplane.Stats{src.Stats(), dst.Stats()}
		if got := after[0].TXPackets - before[0].TXPackets; got < uint64(total) {
			t.Errorf("%s: TXPackets grew by %d, want >= %d", src.Name(), got, total)
		}
		if got := after[1].RXPackets - before[1].RXPackets; got < uint64(total) {
			t.Errorf("%s: RXPackets grew by %d, want >= %d", dst.Name(), got, total)
		}
		if got := after[1].RXBytes - before[1].RXBytes; got < bytes {
			t.Errorf("%s: RXBytes grew by %d, want >= %d", dst.Name(), got, bytes)
		}
		if !s.opts.Lossy {
			if got := after[0].TXBytes - before[0].TXBytes; got != bytes {
				t.Errorf("%s: TXBytes grew by %d, want %d", src.Name(), got, bytes)
			}
			if got := after[1].TXPackets - before[1].TXPackets; got != uint64(len(rs)) {
				t.Errorf("%s: TXPackets grew by %d after reflecting %d, want equal", dst.Name(), got, len(rs))
			}
		}
	}
}

func (s *suite) testRingFull(t *testing.T, queues int) {
	p := s.open(t, queues)
	tx := p.a.Queue(0).TX()
	buf := make([]dataplane.Frame, 64)
	limit := 1 << 16
	accepted, short := 0, false
	deadline := time.Now().Add(s.opts.Timeout)
	for accepted < limit && !short && time.Now().Before(deadline) {
		n := tx.Alloc(buf)
		if n == 0 {
			tx.Reclaim()
			if !s.opts.Lossy {
				// Lossless: the receiver's ring fills before our pool is
				// empty (frames in flight live in the receiver's pool
				// or are copied there).
				t.Fatalf("%s: Alloc = 0 after %d frames accepted, before Transmit came up short", p.a.Name(), accepted)
			}
			runtime.Gosched()
			continue
		}
		for i := range n {
			f := p.flowOf(0, accepted+i)
			build(&buf[i], 64, p.ea, p.eb, tag{dir: dirAB, flow: f, seq: p.seq[dirAB][f]})
			p.seq[dirAB][f]++
		}
		m := tx.Transmit(buf[:n])
		if m < 0 || m > n {
			t.Fatalf("%s: Transmit(%d frames) = %d", p.a.Name(), n, m)
		}
		if m < n {
			short = true
			// The caller keeps frames[m:]; it may free them.
			tx.Free(buf[m:n])
		}
		accepted += m
	}
	if !s.opts.Lossy {
		if !short {
			t.Fatalf("%s: Transmit never came up short after %d frames with nobody receiving", p.a.Name(), accepted)
		}
		if got := p.a.Stats().RingFull; got == 0 {
			t.Errorf("%s: Stats().RingFull = 0 after a short Transmit, want > 0", p.a.Name())
		}
	}
	// Sequence numbers of freed frames were skipped: the order check only
	// wants them increasing. Drain b, then traffic flows again.
	want := accepted
	if s.opts.Lossy {
		want = 0 // whatever survived; collect tolerates fewer below
	}
	p.drain(p.b, want)
	sent := p.send(dirAB, 0, 8, []int{64})
	p.collect(dirAB, sent, false)
}

// drain receives and frees on every queue of port until want frames came
// (and then no more for a short while) or, with want 0, until the port has
// been quiet for 100 ms. It returns how many frames came.
func (p *pair) drain(port dataplane.Port, want int) int {
	p.t.Helper()
	buf := make([]dataplane.Frame, 64)
	got := 0
	deadline := time.Now().Add(p.s.opts.Timeout)
	quietSince := time.Now()
	for time.Now().Before(deadline) {
		for qi := range port.NumQueues() {
			rx := port.Queue(qi).RX()
			if n := rx.Receive(buf); n > 0 {
				got += n
				rx.Free(buf[:n])
				quietSince = time.Now()
			}
		}
		p.reclaimAll()
		if (want == 0 || got >= want) && time.Since(quietSince) > 100*time.Millisecond {
			break
		}
		runtime.Gosched()
	}
	if want > 0 && got != want {
		p.t.Errorf("%s: drained %d frames, want %d", port.Name(), got, want)
	}
	return got
}

func (s *suite) testHalves(t *testing.T, queues int) {
	p := s.open(t, queues)
	const perQueue = 20000
	const window = 128 // frames in flight per sender queue
	var wg sync.WaitGroup
	var received [3]atomic.Int64 // by direction
	var sentTotal [3]atomic.Int64
	var sendersDone atomic.Int32
	errs := make(chan string, 16)
	report := func(format string, args ...any) {
		select {
		case errs <- fmt.Sprintf(format, args...):
		default:
		}
	}
	for _, dir := range []uint8{dirAB, dirBA} {
		src, dst, se, de := p.ends(dir)
		for qi := range queues {
			seqs := p.seq[dir] // each sender uses only its own flows
			// The TX half of queue qi of src.
			wg.Go(func() {
				defer sendersDone.Add(1)
				tx := src.Queue(qi).TX()
				buf := make([]dataplane.Frame, 32)
				sent := 0
				// The deadline moves with progress: a loaded machine
				// is slow, not stuck.
				deadline := time.Now().Add(s.opts.Timeout)
				for sent < perQueue && time.Now().Before(deadline) {
					// Pace: at most window frames of ours unanswered.
					for sentTotal[dir].Load()-received[dir].Load() > int64(window*queues) {
						if time.Now().After(deadline) {
							break
						}
						if s.opts.Lossy {
							time.Sleep(100 * time.Microsecond)
							break // a lossy path may never answer
						}
						runtime.Gosched()
					}
					n := tx.Alloc(buf[:min(len(buf), perQueue-sent)])
					if n == 0 {
						tx.Reclaim()
						runtime.Gosched()
						continue
					}
					for i := range n {
						f := p.flowOf(qi, sent+i)
						build(&buf[i], 64+(sent+i)%64, se, de, tag{dir: dir, flow: f, seq: seqs[f]})
						seqs[f]++
					}
					m := 0
					for m < n && time.Now().Before(deadline) {
						m += tx.Transmit(buf[m:n])
						if m < n {
							tx.Reclaim()
							runtime.Gosched()
						}
					}
					if m < n {
						tx.Free(buf[m:n])
					}
					sent += m
					sentTotal[dir].Add(int64(m))
					if m > 0 {
						deadline = time.Now().Add(s.opts.Timeout)
					}
				}
				if sent < perQueue {
					report("%s q%d: sent %d of %d frames before the timeout", src.Name(), qi, sent, perQueue)
				}
			})
			// The RX half of queue qi of dst.
			wg.Go(func() {
				rx := dst.Queue(qi).RX()
				buf := make([]dataplane.Frame, 64)
				last := make(map[uint16]uint64)
				deadline := time.Now().Add(2 * s.opts.Timeout)
				quiet := time.Now()
				for time.Now().Before(deadline) {
					n := rx.Receive(buf)
					for i := range n {
						tg, ok := parse(buf[i].Data(), de)
						if !ok || tg.dir != dir {
							report("%s q%d: bad frame % x", dst.Name(), qi, buf[i].Data()[:min(buf[i].Len(), 64)])
							continue
						}
						if l, seen := last[tg.flow]; seen && tg.seq <= l {
							report("%s q%d: flow %d seq %d after %d", dst.Name(), qi, tg.flow, tg.seq, l)
						}
						last[tg.flow] = tg.seq
					}
					rx.Free(buf[:n])
					if n > 0 {
						received[dir].Add(int64(n))
						quiet = time.Now()
						deadline = quiet.Add(2 * s.opts.Timeout)
						continue
					}
					if sendersDone.Load() == int32(2*queues) {
						if received[1].Load()+received[2].Load() == sentTotal[1].Load()+sentTotal[2].Load() ||
							time.Since(quiet) > 200*time.Millisecond {
							return
						}
					}
					runtime.Gosched()
				}
				report("%s q%d: receiver timed out", dst.Name(), qi)
			})
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	for _, dir := range []uint8{dirAB, dirBA} {
		src, _, _, _ := p.ends(dir)
		sent, got := sentTotal[dir].Load(), received[dir].Load()
		if !s.opts.Lossy && got != sent {
			t.Errorf("from %s: received %d of %d frames", src.Name(), got, sent)
		}
		if got > sent || got == 0 {
			t.Errorf("from %s: received %d of %d frames", src.Name(), got, sent)
		}
	}
}

func (s *suite) testBadInput(t *testing.T, queues int) {
	p := s.open(t, queues)
	tx := p.a.Queue(0).TX()
	before := [2]dataplane.Stats{p.a.Stats(), p.b.Stats()}
	buf := make([]dataplane.Frame, 3)
	if tx.Alloc(buf) != 3 {
		t.Fatal("Alloc of 3 frames failed")
	}
	f := p.flowOf(0, 0)
	build(&buf[0], 64, p.ea, p.eb, tag{dir: dirAB, flow: f, seq: p.seq[dirAB][f]})
	buf[0].SetLen(10) // a runt
	p.seq[dirAB][f]++
	build(&buf[1], p.a.MTU()+ethLen+1, p.ea, p.eb, tag{dir: dirAB, flow: f, seq: p.seq[dirAB][f]})
	p.seq[dirAB][f]++
	build(&buf[2], 64, p.ea, p.eb, tag{dir: dirAB, flow: f, seq: p.seq[dirAB][f]})
	p.seq[dirAB][f]++
	p.transmitAll(p.a, tx, buf, time.Now().Add(s.opts.Timeout))
	// Only the good frame arrives (collect fails on runts and long frames).
	p.collect(dirAB, 1, false)
	after := [2]dataplane.Stats{p.a.Stats(), p.b.Stats()}
	if got := after[0].Drops[dataplane.DropTooLong] - before[0].Drops[dataplane.DropTooLong]; got != 1 {
		t.Errorf("%s: Drops[too_long] grew by %d after transmitting a frame of MTU+15 bytes, want 1", p.a.Name(), got)
	}
	if !s.opts.Lossy {
		runts := after[0].Drops[dataplane.DropRunt] + after[1].Drops[dataplane.DropRunt] -
			before[0].Drops[dataplane.DropRunt] - before[1].Drops[dataplane.DropRunt]
		if runts != 1 {
			t.Errorf("Drops[runt] of both ports grew by %d after a 10-byte frame, want 1", runts)
		}
	}
	// A burst of zero-length and one-byte frames never panics.
	n := tx.Alloc(buf)
	for i := range n {
		buf[i].SetLen(i % 2)
	}
	p.transmitAll(p.a, tx, buf[:n], time.Now().Add(s.opts.Timeout))
	sent := p.send(dirAB, 0, 4, []int{64})
	p.collect(dirAB, sent, false)
}

func (s *suite) testAccounting(t *testing.T, queues int) {
	p := s.open(t, queues)
	if _, ok := p.a.(dataplane.Accounter); !ok {
		t.Fatalf("%T does not implement dataplane.Accounter", p.a)
	}
	total := s.opts.Frames
	var sent, returned, bDropped atomic.Int64
	var stopA, done atomic.Bool
	var wg sync.WaitGroup
	// Frames in flight: a lossless pair pushes back by itself (short
	// Transmit, short Alloc), a lossy one drops past its ring sizes.
	window := int64(512 * queues)
	if s.opts.Lossy {
		window = int64(256 * queues)
	}
	// a: send, and receive what b reflects.
	wg.Go(func() {
		buf := make([]dataplane.Frame, 64)
		var seq uint64
		for !done.Load() {
			for qi := range queues {
				rx := p.a.Queue(qi).RX()
				if n := rx.Receive(buf); n > 0 {
					returned.Add(int64(n))
					rx.Free(buf[:n])
				}
			}
			if stopA.Load() || sent.Load() >= int64(total) {
				continue
			}
			if sent.Load()-returned.Load()-bDropped.Load() > window {
				if s.opts.Lossy {
					time.Sleep(50 * time.Microsecond)
				} else {
					runtime.Gosched()
					continue
				}
			}
			for qi := range queues {
				rem := int64(total) - sent.Load()
				if rem <= 0 {
					break
				}
				tx := p.a.Queue(qi).TX()
				n := tx.Alloc(buf[:min(int64(len(buf)), rem)])
				for i := range n {
					f := p.flowOf(qi, int(seq))
					build(&buf[i], 64, p.ea, p.eb, tag{dir: dirAB, flow: f, seq: seq})
					seq++
				}
				m := tx.Transmit(buf[:n])
				tx.Free(buf[m:n])
				sent.Add(int64(m))
				if n == 0 {
					tx.Reclaim()
				}
			}
		}
	})
	// b: reflect what arrives back to a, from the queue it arrived on.
	wg.Go(func() {
		buf := make([]dataplane.Frame, 64)
		for !done.Load() {
			for qi := range queues {
				q := p.b.Queue(qi)
				n := q.RX().Receive(buf)
				for i := range n {
					reflect(buf[i].Data())
				}
				m := q.TX().Transmit(buf[:n])
				if m < n {
					q.TX().Free(buf[m:n])
					bDropped.Add(int64(n - m))
				}
				if n == 0 {
					q.TX().Reclaim()
				}
			}
		}
	})
	// Wait for the sender, then for the traffic to settle; give up only
	// when nothing moved for the timeout (a loaded machine is slow, not
	// stuck).
	last, progress := int64(-1), time.Now()
	for sent.Load() < int64(total) && time.Since(progress) < s.opts.Timeout {
		if n := sent.Load(); n != last {
			last, progress = n, time.Now()
		}
		time.Sleep(5 * time.Millisecond)
	}
	stopA.Store(true)
	settle := s.opts.Timeout // lossless: every frame must come back
	if s.opts.Lossy {
		settle = time.Second // lossy: the stragglers are lost by now
	}
	last, progress = -1, time.Now()
	for time.Since(progress) < settle {
		r := returned.Load() + bDropped.Load()
		if r != last {
			last, progress = r, time.Now()
		}
		if r == sent.Load() {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	done.Store(true)
	wg.Wait()
	p.reclaimAll()
	p.drain(p.a, 0)
	p.drain(p.b, 0)
	t.Logf("sent %d, returned %d, dropped by b's full TX %d", sent.Load(), returned.Load(), bDropped.Load())
	if sent.Load() < int64(total) {
		t.Errorf("sent %d of %d frames, then nothing for %v", sent.Load(), total, s.opts.Timeout)
	}
	if !s.opts.Lossy && returned.Load()+bDropped.Load() != sent.Load() {
		t.Errorf("returned %d + dropped %d frames, want the %d sent", returned.Load(), bDropped.Load(), sent.Load())
	}
	CheckAccounting(t, p.a, p.b)
}

func (s *suite) testSharedCache(t *testing.T) {
	p := s.open(t, 1)
	qa, qb := p.a.Queue(0), p.b.Queue(0)
	sa, ok := qa.(dataplane.CacheSharer)
	if !ok {
		t.Skipf("%T does not implement dataplane.CacheSharer", qa)
	}
	sb, ok := qb.(dataplane.CacheSharer)
	if !ok {
		t.Fatalf("%T implements dataplane.CacheSharer and %T does not", qa, qb)
	}
	shared := sa.Cache()
	if shared == nil || shared.Pool() == nil {
		t.Fatalf("Cache() = %v, want a cache of the queue's pool", shared)
	}
	used := sb.UseCache(shared)
	t.Logf("b's queue took a's cache: %v", used)
	if !sa.UseCache(shared) {
		t.Errorf("UseCache(its own cache) = false, want true")
	}
	total := min(s.opts.Frames, 4096)
	buf := make([]dataplane.Frame, 32)
	var seq uint64
	sent, returned, dropped := 0, 0, 0
	progress := time.Now()
	for returned+dropped < total && time.Since(progress) < s.opts.Timeout {
		moved := false
		if sent < total && sent-returned-dropped < 256 {
			tx := qa.TX()
			n := tx.Alloc(buf[:min(len(buf), total-sent)])
			for i := range n {
				build(&buf[i], 64, p.ea, p.eb, tag{dir: dirAB, flow: p.flowOf(0, int(seq)), seq: seq})
				seq++
			}
			m := tx.Transmit(buf[:n])
			tx.Free(buf[m:n])
			sent += m
			moved = moved || m > 0
			if n == 0 {
				tx.Reclaim()
			}
		}
		if n := qb.RX().Receive(buf); n > 0 {
			for i := range n {
				reflect(buf[i].Data())
			}
			m := qb.TX().Transmit(buf[:n])
			qb.TX().Free(buf[m:n])
			dropped += n - m
			moved = true
		} else {
			qb.TX().Reclaim()
		}
		if n := qa.RX().Receive(buf); n > 0 {
			qa.RX().Free(buf[:n])
			returned += n
			moved = true
		}
		if moved {
			progress = time.Now()
		} else {
			time.Sleep(50 * time.Microsecond)
		}
	}
	p.reclaimAll()
	p.drain(p.a, 0)
	p.drain(p.b, 0)
	t.Logf("sent %d, returned %d, dropped by b's full TX %d", sent, returned, dropped)
	if sent < total {
		t.Errorf("sent %d of %d frames", sent, total)
	}
	if !s.opts.Lossy && returned+dropped != sent {
		t.Errorf("returned %d + dropped %d frames, want the %d sent", returned, dropped, sent)
	}
	CheckAccounting(t, p.a, p.b)
}

// CheckAccounting checks that every buffer of every pool of the ports is in
// exactly one place: on its pool's shared free list or reported once by one
// port's AccountBuffers. Call it after traffic stopped and every frame the
// test held was freed, with no goroutine using the ports. Ports must
// implement dataplane.Accounter.
func CheckAccounting(t testing.TB, ports ...dataplane.Port) {
	t.Helper()
	seen := make(map[*dataplane.Pool][]int) // chunk index -> count
	where := make(map[*dataplane.Pool]map[int][]string)
	addPool := func(pl *dataplane.Pool) {
		if _, ok := seen[pl]; !ok {
			seen[pl] = make([]int, pl.NumFrames())
			where[pl] = make(map[int][]string)
		}
	}
	note := func(pl *dataplane.Pool, chunk uint64, place string) {
		addPool(pl)
		i := int(chunk / uint64(pl.FrameSize()))
		if chunk%uint64(pl.FrameSize()) != 0 || i >= pl.NumFrames() {
			t.Errorf("%s: chunk %#x is not a chunk of the pool", place, chunk)
			return
		}
		seen[pl][i]++
		if len(where[pl][i]) < 4 {
			where[pl][i] = append(where[pl][i], place)
		}
	}
	for _, port := range ports {
		acc, ok := port.(dataplane.Accounter)
		if !ok {
			t.Fatalf("%T does not implement dataplane.Accounter", port)
		}
		for _, pl := range acc.Pools() {
			addPool(pl)
		}
		acc.AccountBuffers(note)
	}
	for pl := range seen {
		for _, ch := range pl.AppendFree(nil) {
			note(pl, ch, "pool free list")
		}
	}
	for pl, counts := range seen {
		missing, dup := 0, 0
		for i, c := range counts {
			switch {
			case c == 0:
				if missing++; missing <= 4 {
					t.Errorf("pool %p: chunk %#x is nowhere", pl, uint64(i)*uint64(pl.FrameSize()))
				}
			case c > 1:
				if dup++; dup <= 4 {
					t.Errorf("pool %p: chunk %#x is in %d places: %v", pl, uint64(i)*uint64(pl.FrameSize()), c, where[pl][i])
				}
			}
		}
		if missing+dup > 0 {
			t.Errorf("pool %p of %d buffers: %d lost, %d in two places or more", pl, pl.NumFrames(), missing, dup)
		}
	}
}

func (s *suite) testCloseReopen(t *testing.T, queues int) {
	p := s.open(t, queues)
	sent := p.send(dirAB, 0, 8, []int{64})
	p.collect(dirAB, sent, false)
	// Hold a frame across Close.
	var held [1]dataplane.Frame
	tx := p.a.Queue(0).TX()
	if tx.Alloc(held[:]) != 1 {
		t.Fatal("Alloc of one frame failed")
	}
	p.close()
	buf := make([]dataplane.Frame, 8)
	for _, port := range []dataplane.Port{p.a, p.b} {
		for qi := range port.NumQueues() {
			q := port.Queue(qi)
			if n := q.RX().Receive(buf); n != 0 {
				t.Errorf("%s q%d: Receive after Close = %d, want 0", port.Name(), qi, n)
			}
			if n := q.TX().Alloc(buf); n != 0 {
				t.Errorf("%s q%d: Alloc after Close = %d, want 0", port.Name(), qi, n)
				q.TX().Free(buf[:n])
			}
		}
	}
	if n := tx.Transmit(held[:]); n != 0 {
		t.Errorf("%s: Transmit after Close = %d, want 0", p.a.Name(), n)
	} else {
		tx.Free(held[:]) // allowed after Close
	}
	// And again.
	p2 := s.open(t, queues)
	sent = p2.send(dirAB, 0, 8, []int{64})
	p2.collect(dirAB, sent, false)
	sent = p2.send(dirBA, 0, 8, []int{64})
	p2.collect(dirBA, sent, false)
}

func (s *suite) testLeaks(t *testing.T, queues int) {
	// A first pair may make lasting resources (namespaces, the factory's
	// own state); measure around the second.
	warm := s.open(t, queues)
	warm.close()
	runtime.GC()
	fds, goroutines := countFDs(t), runtime.NumGoroutine()

	p := s.open(t, queues)
	sent := p.send(dirAB, 0, 8, []int{64})
	p.collect(dirAB, sent, false)
	sent = p.send(dirBA, 0, 8, []int{64})
	p.collect(dirBA, sent, false)
	w, err := dataplane.NewWaiter()
	if err != nil {
		t.Fatal(err)
	}
	w.Add(p.a.Queue(0).RX())
	w.Add(p.b.Queue(0).RX())
	if _, err := w.Wait(0); err != nil {
		t.Errorf("Wait(0) = %v", err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("Waiter.Close() = %v", err)
	}
	p.close()

	deadline := time.Now().Add(2 * time.Second)
	for {
		runtime.GC()
		f, g := countFDs(t), runtime.NumGoroutine()
		if f <= fds && g <= goroutines {
			return
		}
		if time.Now().After(deadline) {
			if f > fds {
				t.Errorf("open file descriptors: %d after Close, %d before the pair", f, fds)
			}
			if g > goroutines {
				buf := make([]byte, 1<<16)
				t.Errorf("goroutines: %d after Close, %d before the pair:\n%s", g, goroutines, buf[:runtime.Stack(buf, true)])
			}
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func countFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("count file descriptors: %v", err)
	}
	return len(ents)
}
