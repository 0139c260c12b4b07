//go:build linux

package afxdp

import (
	"errors"
	"net"
	"testing"

	"github.com/wgpio/wgpio/dataplane"
	"golang.org/x/sys/unix"
)

// fakeQueue builds a queue whose rings live in plain memory and whose
// socket fd is -1 (kicks fail with EBADF and are ignored): the kernel's
// side is played by the test.
func fakeQueue(t testing.TB, frames int) *queue {
	t.Helper()
	u, err := NewUMEM(UMEMConfig{NumFrames: frames, Mode: ModeCopy})
	if err != nil {
		t.Fatal(err)
	}
	const n = 64
	mk := func() (*uint32, *uint32, *uint32) { return new(uint32), new(uint32), new(uint32) }
	s := &socket{fd: -1, txBudget: copyModeTXBudget}
	p, c, f := mk()
	s.fill = newRing(p, c, f, make([]uint64, n))
	p, c, f = mk()
	s.comp = newRing(p, c, f, make([]uint64, n))
	p, c, f = mk()
	s.rx = newRing(p, c, f, make([]unix.XDPDesc, n))
	p, c, f = mk()
	s.tx = newRing(p, c, f, make([]unix.XDPDesc, n))
	port := &Port{name: "fake", mtu: 1500, umem: u}
	q := newQueue(port, 0, s)
	port.queues = []*queue{q}
	return q
}

// kernelRX plays the kernel: it takes chunks off the fill ring and
// produces RX descriptors, one per (offset into the chunk, length) given;
// addr overrides the chunk when not zero.
func kernelRX(q *queue, descs ...unix.XDPDesc) {
	s := q.sock
	fillCons := *s.fill.cons
	for i, d := range descs {
		chunk := s.fill.descs[fillCons&s.fill.mask]
		fillCons++
		if d.Addr < uint64(q.port.umem.pool.FrameSize()) {
			d.Addr += chunk
		}
		s.rx.descs[(*s.rx.prod+uint32(i))&s.rx.mask] = d
	}
	*s.fill.cons = fillCons
	*s.rx.prod += uint32(len(descs))
}

func TestReceiveBadDescriptors(t *testing.T) {
	q := fakeQueue(t, 2048)
	memLen := uint64(len(q.port.umem.mem))
	kernelRX(q,
		unix.XDPDesc{Addr: xdpPacketHeadroom, Len: 60},          // good
		unix.XDPDesc{Addr: xdpPacketHeadroom, Len: 10},          // runt
		unix.XDPDesc{Addr: xdpPacketHeadroom, Len: 4000},        // past the chunk
		unix.XDPDesc{Addr: memLen + xdpPacketHeadroom, Len: 60}, // outside the UMEM
		unix.XDPDesc{Addr: 1 << 62, Len: 60},                    // far outside
		unix.XDPDesc{Addr: xdpPacketHeadroom, Len: 1 << 31},     // absurd length
		unix.XDPDesc{Addr: xdpPacketHeadroom + 100, Len: 1500},  // good, other offset
	)
	frames := make([]dataplane.Frame, 16)
	n := q.rx.Receive(frames)
	if n != 2 {
		t.Fatalf("Receive = %d, want 2", n)
	}
	if frames[0].Len() != 60 || frames[0].Headroom() != xdpPacketHeadroom {
		t.Errorf("frame 0: len %d headroom %d, want 60 %d", frames[0].Len(), frames[0].Headroom(), xdpPacketHeadroom)
	}
	if frames[1].Len() != 1500 || frames[1].Headroom() != xdpPacketHeadroom+100 {
		t.Errorf("frame 1: len %d headroom %d, want 1500 %d", frames[1].Len(), frames[1].Headroom(), xdpPacketHeadroom+100)
	}
	st := q.Stats()
	want := map[dataplane.DropReason]uint64{dataplane.DropRunt: 1, dataplane.DropTooLong: 2, dataplane.DropBadDescriptor: 2}
	for r, w := range want {
		if st.Drops[r] != w {
			t.Errorf("Drops[%v] = %d, want %d", r, st.Drops[r], w)
		}
	}
	if st.RXPackets != 2 || st.RXBytes != 1560 {
		t.Errorf("RX packets/bytes = %d/%d, want 2/1560", st.RXPackets, st.RXBytes)
	}
	q.rx.Free(frames[:n])
}

func TestTransmitBadFrames(t *testing.T) {
	q := fakeQueue(t, 2048)
	frames := make([]dataplane.Frame, 6)
	if n := q.tx.Alloc(frames); n != 6 {
		t.Fatalf("Alloc = %d, want 6", n)
	}
	for i, l := range []int{
		60,   // good
		13,   // runt
		1600, // past MTU + header + tag
		1514, // MTU + header: good
		1515, // one byte too long without a tag
		1518, // MTU + header + tag, tagged below: good
	} {
		frames[i].SetLen(l)
	}
	frames[5].Data()[12], frames[5].Data()[13] = 0x81, 0x00
	if n := q.tx.Transmit(frames); n != 6 {
		t.Fatalf("Transmit = %d, want 6 (drops are taken)", n)
	}
	s := q.sock
	if got := *s.tx.prod; got != 3 {
		t.Fatalf("TX ring producer = %d, want 3", got)
	}
	st := q.Stats()
	if st.Drops[dataplane.DropRunt] != 1 || st.Drops[dataplane.DropTooLong] != 2 {
		t.Errorf("Drops runt/too_long = %d/%d, want 1/2", st.Drops[dataplane.DropRunt], st.Drops[dataplane.DropTooLong])
	}
	// The kernel completes both, one with an address outside the UMEM.
	s.comp.descs[0], s.comp.descs[1] = s.tx.descs[0].Addr, 1<<60
	*s.tx.cons = 2
	*s.comp.prod = 2
	if n := q.tx.Reclaim(); n != 2 {
		t.Fatalf("Reclaim = %d, want 2", n)
	}
	if got := q.Stats().Drops[dataplane.DropBadDescriptor]; got != 1 {
		t.Errorf("Drops[bad_descriptor] = %d, want 1", got)
	}
}

func TestTransmitRingFull(t *testing.T) {
	q := fakeQueue(t, 2048)
	frames := make([]dataplane.Frame, 100)
	if n := q.tx.Alloc(frames); n != 100 {
		t.Fatalf("Alloc = %d, want 100", n)
	}
	for i := range frames {
		frames[i].SetLen(64)
	}
	n := q.tx.Transmit(frames)
	if n != 64 {
		t.Fatalf("Transmit(100) on a 64-entry ring = %d, want 64", n)
	}
	if got := q.Stats().RingFull; got != 1 {
		t.Errorf("RingFull = %d, want 1", got)
	}
	q.tx.Free(frames[n:])
}

func TestForeignPoolCopied(t *testing.T) {
	a, b := fakeQueue(t, 2048), fakeQueue(t, 2048)
	frames := make([]dataplane.Frame, 1)
	a.tx.Alloc(frames)
	frames[0].SetLen(64)
	copy(frames[0].Data(), "hello")
	before := a.port.umem.pool.FreeCount()
	if n := b.tx.Transmit(frames); n != 1 {
		t.Fatalf("Transmit = %d, want 1", n)
	}
	if got := b.Stats().Copies; got != 1 {
		t.Errorf("Copies = %d, want 1", got)
	}
	if got := a.port.umem.pool.FreeCount(); got != before+1 {
		t.Errorf("source pool free count = %d, want %d (original freed)", got, before+1)
	}
	d := b.sock.tx.descs[0]
	if got := string(b.port.umem.mem[d.Addr : d.Addr+5]); got != "hello" {
		t.Errorf("copied data = %q, want %q", got, "hello")
	}
}

// TestHotPathAllocs checks Receive, Transmit, Reclaim and Free allocate
// nothing.
func TestHotPathAllocs(t *testing.T) {
	q := fakeQueue(t, 2048)
	s := q.sock
	frames := make([]dataplane.Frame, 32)
	descs := make([]unix.XDPDesc, 32)
	for i := range descs {
		descs[i] = unix.XDPDesc{Addr: xdpPacketHeadroom, Len: 64}
	}
	allocs := testing.AllocsPerRun(1000, func() {
		kernelRX(q, descs...)
		n := q.rx.Receive(frames)
		m := q.tx.Transmit(frames[:n])
		// Kernel: send and complete everything.
		for i := *s.tx.cons; i != *s.tx.prod; i++ {
			s.comp.descs[*s.comp.prod&s.comp.mask] = s.tx.descs[i&s.tx.mask].Addr
			*s.comp.prod++
		}
		*s.tx.cons = *s.tx.prod
		q.tx.Reclaim()
		q.rx.Free(frames[m:n])
	})
	if allocs != 0 {
		t.Errorf("allocations per burst = %v, want 0", allocs)
	}
}

// FuzzReceive feeds arbitrary RX descriptors: Receive must never panic and
// every frame it returns must lie inside the UMEM.
func FuzzReceive(f *testing.F) {
	f.Add(uint64(xdpPacketHeadroom), uint32(60))      // a normal frame
	f.Add(uint64(0), uint32(0))                       // empty at chunk start
	f.Add(uint64(4095), uint32(2))                    // crossing a chunk edge
	f.Add(uint64(1<<63), uint32(64))                  // far outside the UMEM
	f.Add(uint64(64*4096-1), uint32(1))               // last byte of the UMEM
	f.Add(uint64(xdpPacketHeadroom), uint32(1<<32-1)) // absurd length
	q := fakeQueue(f, 64)
	frames := make([]dataplane.Frame, 4)
	f.Fuzz(func(t *testing.T, addr uint64, l uint32) {
		s := q.sock
		*s.fill.cons = *s.fill.prod // the kernel took every fill entry
		s.rx.descs[*s.rx.prod&s.rx.mask] = unix.XDPDesc{Addr: addr, Len: l}
		*s.rx.prod++
		n := q.rx.Receive(frames)
		for i := range n {
			d := frames[i].Data()
			if len(d) != int(l) || frames[i].Addr() != addr {
				t.Fatalf("frame %d: addr %d len %d, want %d %d", i, frames[i].Addr(), len(d), addr, l)
			}
		}
		// Don't free: the fuzzed address may alias a chunk the fill ring
		// holds; the UMEM is large enough for the run's refills to fail
		// harmlessly.
	})
}

// TestSetMTU: SetMTU moves Transmit's bound with the interface's MTU, up
// to what a frame holds (MaxMTU, 3,822 with the default frame size), and
// refuses an MTU below 68 or past that, changing nothing. Before, the
// bound was the MTU at Open for good: after a raise of the interface's
// MTU (ip link set dev eth1 mtu 2000) every longer frame was dropped as
// too_long until the port was opened again.
func TestSetMTU(t *testing.T) {
	q := fakeQueue(t, 2048)
	p := q.port
	if got := p.MaxMTU(); got != dataplane.DefaultFrameSize-xdpPacketHeadroom-vlanTagLen-ethHeaderLen {
		t.Errorf("MaxMTU() = %d, want %d", got, dataplane.DefaultFrameSize-xdpPacketHeadroom-vlanTagLen-ethHeaderLen)
	}
	for _, bad := range []int{0, 67, p.MaxMTU() + 1, 9000} {
		if err := p.SetMTU(bad); err == nil || p.MTU() != 1500 {
			t.Errorf("SetMTU(%d) = %v, MTU() = %d; want an error and 1500", bad, err, p.MTU())
		}
	}
	// transmit transmits one frame of l bytes and reports whether it
	// went onto the TX ring (else it was dropped as too_long).
	sent := uint32(0)
	transmit := func(l int) bool {
		t.Helper()
		f := make([]dataplane.Frame, 1)
		if q.tx.Alloc(f) != 1 || !f[0].SetLen(l) {
			t.Fatalf("a frame of %d bytes: no frame or no room", l)
		}
		before := q.Stats().Drops[dataplane.DropTooLong]
		if n := q.tx.Transmit(f); n != 1 {
			t.Fatalf("Transmit = %d, want 1 (drops are taken)", n)
		}
		if *q.sock.tx.prod != sent {
			sent++
			return true
		}
		if q.Stats().Drops[dataplane.DropTooLong] != before+1 {
			t.Fatalf("a frame of %d bytes neither sent nor too_long (drops %v)", l, q.Stats().Drops.List())
		}
		return false
	}
	for _, c := range []struct {
		mtu  int // 0: leave it
		len  int
		sent bool
	}{
		{0, 1514, true}, {0, 2014, false},
		{2000, 2014, true}, {0, 2015, false},
		{p.MaxMTU(), p.MaxMTU() + ethHeaderLen, true},
		{1400, 1415, false}, {0, 1414, true},
	} {
		if c.mtu != 0 {
			if err := p.SetMTU(c.mtu); err != nil || p.MTU() != c.mtu {
				t.Fatalf("SetMTU(%d) = %v, MTU() = %d", c.mtu, err, p.MTU())
			}
		}
		if got := transmit(c.len); got != c.sent {
			t.Errorf("MTU %d: a frame of %d bytes sent %v, want %v", p.MTU(), c.len, got, c.sent)
		}
	}
}

// TestSetMTUAfterClose: SetMTU after Close returns an error wrapping
// net.ErrClosed, as the calls that change the port's maps, and changes
// nothing. Before, it returned nil: a gateway that followed an interface's
// MTU change as it stopped was told the MTU was set.
func TestSetMTUAfterClose(t *testing.T) {
	q := fakeQueue(t, 2048)
	p := q.port
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.SetMTU(1400); !errors.Is(err, net.ErrClosed) || p.MTU() != 1500 {
		t.Errorf("SetMTU(1400) after Close = %v, MTU() = %d; want an error wrapping net.ErrClosed and 1500", err, p.MTU())
	}
}

// TestTransmitCountedWhenTaken: a frame is counted as sent when the kernel
// takes it off the TX ring (its consumer index passes it), with its bytes,
// not when Transmit puts it there; one a kick counted as dropped is not
// counted as sent when the index passes it, nor as link_down at unbind if
// the kernel had not published the index past it: each frame once.
func TestTransmitCountedWhenTaken(t *testing.T) {
	q := fakeQueue(t, 2048)
	transmit := func(sizes ...int) {
		t.Helper()
		frames := make([]dataplane.Frame, len(sizes))
		if n := q.tx.Alloc(frames); n != len(sizes) {
			t.Fatalf("Alloc = %d, want %d", n, len(sizes))
		}
		for i, l := range sizes {
			frames[i].SetLen(l)
		}
		if n := q.tx.Transmit(frames); n != len(sizes) {
			t.Fatalf("Transmit = %d, want %d", n, len(sizes))
		}
	}
	// kernel plays the kernel: it takes n frames off the TX ring and
	// drops lost of them (a kick counts them: dropped).
	kernel := func(n, lost uint32, r dataplane.DropReason) {
		*q.sock.tx.cons += n
		q.tx.lost += lost
		q.tx.ctr.drops[r].Add(uint64(lost))
	}
	check := func(when string, packets, bytes, driver, linkDown uint64) {
		t.Helper()
		s := q.Stats()
		if s.TXPackets != packets || s.TXBytes != bytes || s.Drops[dataplane.DropDriver] != driver || s.Drops[dataplane.DropLinkDown] != linkDown {
			t.Errorf("%s: tx packets %d, bytes %d, driver_drop %d, link_down %d; want %d %d %d %d",
				when, s.TXPackets, s.TXBytes, s.Drops[dataplane.DropDriver], s.Drops[dataplane.DropLinkDown], packets, bytes, driver, linkDown)
		}
	}
	transmit(60, 70, 80, 90, 100)
	check("5 frames on the ring", 0, 0, 0, 0)
	kernel(2, 0, 0)
	q.tx.Reclaim()
	check("2 taken", 2, 130, 0, 0)
	kernel(2, 1, dataplane.DropDriver)
	q.tx.Reclaim()
	check("2 more taken, the second dropped", 3, 210, 1, 0)
	// The last frame dropped for a link down, the consumer index not yet
	// past it (the kernel publishes it with a later frame's).
	kernel(0, 1, dataplane.DropLinkDown)
	q.tx.Reclaim()
	check("the 5th dropped", 3, 210, 1, 1)
	transmit(110, 120)
	check("2 more on the ring", 3, 210, 1, 1)
	q.tx.unbind()
	check("the interface gone", 3, 210, 1, 3)
	kernel(3, 0, 0)
	q.tx.Reclaim()
	check("after unbind", 3, 210, 1, 3)
}
