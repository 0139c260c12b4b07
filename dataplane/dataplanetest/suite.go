package dataplanetest

import (
	"fmt"
	"net/netip"
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
	// late, when not nil, is per flow of the direction collected the
	// first sequence number collect waits for: frames below it were
	// sent before (a lossy port's flood, still in flight after drain
	// found the port quiet) and are freed uncounted.
	late []uint64
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
