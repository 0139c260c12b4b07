//go:build linux

package inproc

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"

	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/tun"
)

// batchSize is what the doubles report as BatchSize: wireguard-go's own
// ideal batch (conn.IdealBatchSize), so that it moves the batches it
// would move over its Linux UDP sockets with GSO/GRO.
const batchSize = conn.IdealBatchSize

// memEndpoint is the only endpoint of a memBind: its peer's address.
// Received packets all carry it, so receiving allocates nothing.
type memEndpoint struct {
	dst   netip.AddrPort
	bytes []byte
}

func newEndpoint(ap netip.AddrPort) *memEndpoint {
	b, _ := ap.MarshalBinary()
	return &memEndpoint{dst: ap, bytes: b}
}

func (e *memEndpoint) ClearSrc()           {}
func (e *memEndpoint) SrcToString() string { return "" }
func (e *memEndpoint) DstToString() string { return e.dst.String() }
func (e *memEndpoint) DstToBytes() []byte  { return e.bytes }
func (e *memEndpoint) DstIP() netip.Addr   { return e.dst.Addr() }
func (e *memEndpoint) SrcIP() netip.Addr   { return netip.Addr{} }

// memBind is one end of an in-memory UDP wire between two wireguard-go
// devices: a conn.Bind whose Send copies the datagrams into the peer's
// receive ring (dropping what does not fit, as a full socket buffer
// does) and whose one ReceiveFunc copies them out of its own. Batched
// (BatchSize conn.IdealBatchSize), lock-free, no allocation per packet.
type memBind struct {
	self  netip.AddrPort // our address, what the peer's endpoint names
	rx    *ring          // what we receive
	peer  *memBind
	ep    *memEndpoint // the peer, as every received packet's source
	mu    sync.Mutex   // guards open (Open/Close only)
	open  bool
	fresh chan struct{} // closed by Close: the current generation's end
}

// newBindPair returns two binds wired to each other, at addresses a and b.
func newBindPair(a, b netip.AddrPort) (*memBind, *memBind) {
	x := &memBind{self: a, rx: newRing(), ep: newEndpoint(b)}
	y := &memBind{self: b, rx: newRing(), ep: newEndpoint(a), peer: x}
	x.peer = y
	return x, y
}

// Open returns the one receive function. The port is fixed (the bind's
// address); another nonzero port is refused.
func (b *memBind) Open(port uint16) ([]conn.ReceiveFunc, uint16, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open {
		return nil, 0, conn.ErrBindAlreadyOpen
	}
	if port != 0 && port != b.self.Port() {
		return nil, 0, errors.New("membind: port is fixed")
	}
	b.open = true
	b.fresh = make(chan struct{})
	done := b.fresh
	recv := func(packets [][]byte, sizes []int, eps []conn.Endpoint) (int, error) {
		select {
		case <-done:
			return 0, net.ErrClosed
		default:
		}
		n, ok := b.rx.get(packets, sizes, 0, done)
		if !ok {
			return 0, net.ErrClosed
		}
		for i := range n {
			eps[i] = b.ep
		}
		return n, nil
	}
	return []conn.ReceiveFunc{recv}, b.self.Port(), nil
}

// Close ends the current generation: its receive function returns
// net.ErrClosed. wireguard-go closes and reopens a bind on every
// listen-port change, so the ring stays usable.
func (b *memBind) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open {
		close(b.fresh)
		b.open = false
	}
	return nil
}

// shutdown closes the ring for good (after the device is closed).
func (b *memBind) shutdown() { b.rx.close() }

func (b *memBind) SetMark(uint32) error { return nil }
func (b *memBind) BatchSize() int       { return batchSize }

// ParseEndpoint accepts only the peer's address.
func (b *memBind) ParseEndpoint(s string) (conn.Endpoint, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return nil, err
	}
	if ap != b.peer.self {
		return nil, errors.New("membind: unknown endpoint " + s)
	}
	return b.ep, nil
}

// Send copies bufs into the peer's ring; what does not fit is dropped
// (and counted in the ring), as a full socket buffer drops.
func (b *memBind) Send(bufs [][]byte, _ conn.Endpoint) error {
	b.peer.rx.put(bufs, 0)
	return nil
}

// memTUN is a tun.Device whose host side is two rings: Read takes what
// the generator placed in in, Write places packets into out for the sink
// (dropping what does not fit, as a TUN's full queue drops). Batched
// (BatchSize conn.IdealBatchSize), lock-free, no allocation per packet.
type memTUN struct {
	in, out *ring
	events  chan tun.Event
	shut    sync.Once
}

func newTUN() *memTUN {
	t := &memTUN{in: newRing(), out: newRing(), events: make(chan tun.Event, 1)}
	t.events <- tun.EventUp
	return t
}

func (t *memTUN) File() *os.File { return nil }

// Read blocks until the generator placed packets, and copies up to
// len(bufs) of them at offset.
func (t *memTUN) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	n, ok := t.in.get(bufs, sizes, offset, nil)
	if !ok {
		return 0, os.ErrClosed
	}
	return n, nil
}

// Write copies the packets at offset toward the sink; it never blocks.
func (t *memTUN) Write(bufs [][]byte, offset int) (int, error) {
	t.out.put(bufs, offset)
	return len(bufs), nil
}

func (t *memTUN) MTU() (int, error)        { return tunnelMTU, nil }
func (t *memTUN) Name() (string, error)    { return "memtun", nil }
func (t *memTUN) Events() <-chan tun.Event { return t.events }
func (t *memTUN) BatchSize() int           { return batchSize }

// Close wakes the reader for good and closes Events.
func (t *memTUN) Close() error {
	t.shut.Do(func() {
		t.in.close()
		t.out.close()
		close(t.events)
	})
	return nil
}

var (
	_ conn.Bind  = (*memBind)(nil)
	_ tun.Device = (*memTUN)(nil)
)
