package memport_test

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/dataplanetest"
	"github.com/wgpio/wgpio/dataplane/memport"
)

func newPair(t testing.TB, cfg memport.Config) (a, b *memport.Port) {
	t.Helper()
	a, b, err := memport.NewPair(cfg)
	if err != nil {
		t.Fatalf("NewPair(%+v) = %v", cfg, err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// udpFrame writes a 64-byte Ethernet/IPv4/UDP frame with the given source
// port into f.
func udpFrame(f *dataplane.Frame, sport uint16, size int) {
	f.SetLen(size)
	b := f.Data()
	clear(b)
	copy(b[0:6], []byte{0x02, 0, 0, 0, 0, 0x0b})
	copy(b[6:12], []byte{0x02, 0, 0, 0, 0, 0x0a})
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	if size < 14+20+8 {
		return
	}
	ip := b[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(size-14))
	ip[8], ip[9] = 64, 17
	copy(ip[12:], []byte{198, 18, 0, 1, 198, 18, 0, 2})
	binary.BigEndian.PutUint16(ip[20:], sport)
	binary.BigEndian.PutUint16(ip[22:], 51820)
	binary.BigEndian.PutUint16(ip[24:], uint16(size-34))
}

// alloc returns n frames of tx built as UDP frames with source ports from
// sport on.
func alloc(t testing.TB, tx dataplane.TX, n int, sport uint16, size int) []dataplane.Frame {
	t.Helper()
	fs := make([]dataplane.Frame, n)
	if got := tx.Alloc(fs); got != n {
		t.Fatalf("Alloc(%d) = %d", n, got)
	}
	for i := range fs {
		udpFrame(&fs[i], sport+uint16(i), size)
	}
	return fs
}

func receiveAll(port dataplane.Port, buf []dataplane.Frame) (n int, perQueue []int) {
	perQueue = make([]int, port.NumQueues())
	for q := range port.NumQueues() {
		for {
			m := port.Queue(q).RX().Receive(buf)
			if m == 0 {
				break
			}
			port.Queue(q).RX().Free(buf[:m])
			n += m
			perQueue[q] += m
		}
	}
	return n, perQueue
}

func TestConfigRejects(t *testing.T) {
	tests := []struct {
		name string
		cfg  memport.Config
	}{
		{"ring size not a power of 2", memport.Config{RingSize: 100}},
		{"too many queues", memport.Config{Queues: 65}},
		{"negative queues", memport.Config{Queues: -1}},
		{"MTU too small", memport.Config{MTU: 60}},
		{"MTU past the frame", memport.Config{MTU: 9000}},
		{"short MAC", memport.Config{MACA: []byte{1, 2, 3}}},
		{"frame size not a power of 2", memport.Config{FrameSize: 3000}},
		{"negative pool", memport.Config{PoolFrames: -1}}, // panicked
	}
	for _, tt := range tests {
		if _, _, err := memport.NewPair(tt.cfg); err == nil {
			t.Errorf("NewPair(%s) = nil error, want an error", tt.name)
		}
	}
	// Refused with the field named: a pool past what the process could
	// allocate was a fatal error (out of memory) of the runtime, a bad
	// frame size or headroom an MTU error with a negative fix.
	for _, tt := range []struct {
		cfg  memport.Config
		want string
	}{
		{memport.Config{Queues: 64, RingSize: 1 << 16}, "a pool of 536903680 frames of 4096 bytes is more than 16 GiB"},
		{memport.Config{RingSize: 1 << 24}, "more than 16 GiB (PoolFrames, by default from Queues 1 and RingSize 16777216)"},
		{memport.Config{PoolFrames: 1 << 23, FrameSize: 4096}, "more than 16 GiB"},
		{memport.Config{FrameSize: -4096}, "FrameSize -4096 is not a power of 2"},
		{memport.Config{Headroom: 100000}, "Headroom 100000 not in"},
	} {
		if _, _, err := memport.NewPair(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewPair(%+v) = %v, want an error with %q", tt.cfg, err, tt.want)
		}
	}
}

// TestMTUErrorSaysTheFix: an MTU a frame cannot hold is refused with the
// bytes counted, the Ethernet header and tag among them (a 3760-byte MTU
// looked as if it fit 4096 - 256 - 64), and the FrameSize or MTU that fits.
func TestMTUErrorSaysTheFix(t *testing.T) {
	for _, tt := range []struct {
		mtu  int
		want string
	}{
		{3760, "(4098 bytes): set FrameSize to 8192, or the MTU to at most 3758"},
		{9000, "(9338 bytes): set FrameSize to 16384, or the MTU to at most 3758"},
	} {
		_, _, err := memport.NewPair(memport.Config{MTU: tt.mtu})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewPair(MTU %d) = %v, want an error ending %q", tt.mtu, err, tt.want)
		}
	}
	a, b, err := memport.NewPair(memport.Config{MTU: 3760, FrameSize: 8192})
	if err != nil {
		t.Fatalf("NewPair(MTU 3760, FrameSize 8192), the fix the error gave: %v", err)
	}
	a.Close()
	b.Close()
}

func TestPortShape(t *testing.T) {
	a, b := newPair(t, memport.Config{Name: "x", Queues: 3, MTU: 2000, MACA: []byte{2, 1, 1, 1, 1, 1}})
	if a.Name() != "xa" || b.Name() != "xb" {
		t.Errorf("Name() = %q, %q; want xa, xb", a.Name(), b.Name())
	}
	if a.MAC().String() != "02:01:01:01:01:01" || b.MAC().String() != "02:00:00:00:00:0b" {
		t.Errorf("MAC() = %v, %v", a.MAC(), b.MAC())
	}
	if a.MTU() != 2000 || a.NumQueues() != 3 || a.Queue(2).Index() != 2 || a.Queue(1).Port() != dataplane.Port(a) {
		t.Errorf("MTU() = %d, NumQueues() = %d, want 2000, 3", a.MTU(), a.NumQueues())
	}
	if a.Peer() != b || b.Peer() != a || a.Pool() == b.Pool() {
		t.Errorf("Peer()/Pool() wrong for separate pools")
	}
	if err := a.CorruptNextDescriptor(3, 0, 0); !errors.Is(err, dataplane.ErrNoSuchQueue) {
		t.Errorf("CorruptNextDescriptor(3, ...) = %v, want ErrNoSuchQueue", err)
	}
}

// TestRSSAcrossQueues: frames of many flows sent on one TX queue spread over
// the peer's RX queues, each landing where RSSQueue says.
func TestRSSAcrossQueues(t *testing.T) {
	a, b := newPair(t, memport.Config{Queues: 4})
	fs := alloc(t, a.Queue(0).TX(), 256, 40000, 64)
	want := make([]int, 4)
	for i := range fs {
		want[memport.RSSQueue(fs[i].Data(), 4)]++
	}
	if n := a.Queue(0).TX().Transmit(fs); n != len(fs) {
		t.Fatalf("Transmit = %d, want %d", n, len(fs))
	}
	buf := make([]dataplane.Frame, 64)
	n, per := receiveAll(b, buf)
	if n != 256 {
		t.Fatalf("received %d frames, want 256", n)
	}
	for q := range per {
		if per[q] != want[q] || per[q] == 0 {
			t.Errorf("queue %d received %d frames, want %d (> 0)", q, per[q], want[q])
		}
	}
	// Non-IP frames go to queue 0.
	fs = alloc(t, a.Queue(1).TX(), 8, 0, 64)
	for i := range fs {
		binary.BigEndian.PutUint16(fs[i].Data()[12:], 0x0806)
	}
	a.Queue(1).TX().Transmit(fs)
	if _, per := receiveAll(b, buf); per[0] != 8 {
		t.Errorf("non-IP frames per queue = %v, want all 8 on queue 0", per)
	}
}

func TestCopies(t *testing.T) {
	for _, shared := range []bool{false, true} {
		a, b := newPair(t, memport.Config{SharedPool: shared})
		fs := alloc(t, a.Queue(0).TX(), 10, 1, 64)
		a.Queue(0).TX().Transmit(fs)
		buf := make([]dataplane.Frame, 16)
		n := b.Queue(0).RX().Receive(buf)
		if n != 10 {
			t.Fatalf("shared %v: received %d, want 10", shared, n)
		}
		for i := range n {
			if buf[i].Pool() != b.Pool() {
				t.Errorf("shared %v: received frame of pool %p, want b's %p", shared, buf[i].Pool(), b.Pool())
			}
		}
		wantCopies := uint64(10)
		if shared {
			wantCopies = 0
		}
		if got := a.Stats().Copies; got != wantCopies {
			t.Errorf("shared %v: Copies = %d, want %d", shared, got, wantCopies)
		}
		// Forward b's frames back: copied again unless shared.
		b.Queue(0).TX().Transmit(buf[:n])
		if got := b.Stats().Copies; got != wantCopies {
			t.Errorf("shared %v: b Copies = %d, want %d", shared, got, wantCopies)
		}
		if got, _ := receiveAll(a, buf); got != 10 {
			t.Errorf("shared %v: a received %d, want 10", shared, got)
		}
		dataplanetest.CheckAccounting(t, a, b)
	}
}

// TestForeignPool transmits frames of a third pool (another pair's) on a:
// they are copied into b's pool and freed to their own.
func TestForeignPool(t *testing.T) {
	a, b := newPair(t, memport.Config{SharedPool: true})
	c, d := newPair(t, memport.Config{})
	fs := alloc(t, c.Queue(0).TX(), 40, 1, 100)
	cFree := c.Pool().FreeCount()
	if n := a.Queue(0).TX().Transmit(fs); n != 40 {
		t.Fatalf("Transmit = %d, want 40", n)
	}
	if got := a.Stats().Copies; got != 40 {
		t.Errorf("Copies = %d, want 40", got)
	}
	if got := c.Pool().FreeCount(); got != cFree+40 {
		t.Errorf("foreign pool FreeCount() = %d, want %d (originals freed)", got, cFree+40)
	}
	buf := make([]dataplane.Frame, 64)
	if got, _ := receiveAll(b, buf); got != 40 {
		t.Errorf("received %d, want 40", got)
	}
	dataplanetest.CheckAccounting(t, a, b)
	dataplanetest.CheckAccounting(t, c, d)
}

func TestRingFullPrefix(t *testing.T) {
	a, b := newPair(t, memport.Config{RingSize: 16})
	tx := a.Queue(0).TX()
	fs := alloc(t, tx, 40, 1, 64)
	n := tx.Transmit(fs)
	if n != 16 {
		t.Fatalf("Transmit(40) into a ring of 16 = %d, want 16", n)
	}
	if got := a.Stats().RingFull; got != 1 {
		t.Errorf("RingFull = %d, want 1", got)
	}
	if got := tx.Transmit(fs[n:]); got != 0 {
		t.Errorf("Transmit into a full ring = %d, want 0", got)
	}
	buf := make([]dataplane.Frame, 64)
	if got, _ := receiveAll(b, buf); got != 16 {
		t.Errorf("received %d, want 16", got)
	}
	if got := tx.Transmit(fs[n:]); got != 16 {
		t.Errorf("Transmit after a drain = %d, want 16", got)
	}
	tx.Free(fs[32:])
	receiveAll(b, buf)
	if s := a.Stats(); s.TXPackets != 32 || s.RingFull != 3 || s.TXBytes != 32*64 {
		t.Errorf("Stats = %+v, want 32 packets, 2048 bytes, RingFull 3", s)
	}
	dataplanetest.CheckAccounting(t, a, b)
}

func TestBadDescriptors(t *testing.T) {
	a, b := newPair(t, memport.Config{})
	fs := b.Pool().FrameSize()
	mem := uint64(len(b.Pool().Mem()))
	tests := []struct {
		name   string
		addr   uint64
		length uint32
		reason dataplane.DropReason
	}{
		{"address past the pool", mem + 256, 64, dataplane.DropBadDescriptor},
		{"address far out", 1 << 62, 64, dataplane.DropBadDescriptor},
		{"length past the chunk", memport.SameAddr, uint32(fs), dataplane.DropBadDescriptor},
		{"length 2^32-1", memport.SameAddr, ^uint32(0), dataplane.DropBadDescriptor},
		{"no headroom", 0, 64, dataplane.DropBadDescriptor},
		{"zero length", memport.SameAddr, 0, dataplane.DropRunt},
		{"runt", memport.SameAddr, 13, dataplane.DropRunt},
		{"too long for the MTU", memport.SameAddr, 1500 + 14 + 1, dataplane.DropTooLong},
	}
	buf := make([]dataplane.Frame, 64)
	for _, tt := range tests {
		before := b.Stats().Drops[tt.reason]
		if err := a.CorruptNextDescriptor(0, tt.addr, tt.length); err != nil {
			t.Fatal(err)
		}
		fr := alloc(t, a.Queue(0).TX(), 3, 1, 64)
		if n := a.Queue(0).TX().Transmit(fr); n != 3 {
			t.Fatalf("%s: Transmit = %d, want 3", tt.name, n)
		}
		got, _ := receiveAll(b, buf)
		if got != 2 {
			t.Errorf("%s: received %d frames, want the 2 good ones", tt.name, got)
		}
		if d := b.Stats().Drops[tt.reason] - before; d != 1 {
			t.Errorf("%s: Drops[%v] grew by %d, want 1", tt.name, tt.reason, d)
		}
	}
	dataplanetest.CheckAccounting(t, a, b)
}

// TestOffsetNormalized: a frame whose data starts in the first bytes of its
// buffer (headers prepended into all the headroom) reaches the peer with
// MinHeadroom again.
func TestOffsetNormalized(t *testing.T) {
	a, b := newPair(t, memport.Config{SharedPool: true})
	fr := alloc(t, a.Queue(0).TX(), 1, 1, 64)
	want := append([]byte(nil), fr[0].Data()...)
	hr := fr[0].Headroom()
	fr[0].TrimFront(0)
	fr[0].Reset(0)
	fr[0].SetLen(64)
	copy(fr[0].Data(), want)
	_ = hr
	a.Queue(0).TX().Transmit(fr)
	buf := make([]dataplane.Frame, 1)
	if n := b.Queue(0).RX().Receive(buf); n != 1 {
		t.Fatalf("Receive = %d, want 1", n)
	}
	if buf[0].Headroom() < dataplane.MinHeadroom || string(buf[0].Data()) != string(want) {
		t.Errorf("received Headroom() = %d, data equal %v; want >= %d, true", buf[0].Headroom(), string(buf[0].Data()) == string(want), dataplane.MinHeadroom)
	}
	b.Queue(0).RX().Free(buf)
}

// TestJumbo: with a 9000-byte MTU, a 9014-byte frame crosses and a 9015-byte
// one is dropped at the transmitter.
func TestJumbo(t *testing.T) {
	a, b := newPair(t, memport.Config{MTU: 9000, FrameSize: 16384, PoolFrames: 600})
	fs := alloc(t, a.Queue(0).TX(), 2, 1, 9014)
	fs[1].SetLen(9015)
	if n := a.Queue(0).TX().Transmit(fs); n != 2 {
		t.Fatalf("Transmit = %d, want 2", n)
	}
	buf := make([]dataplane.Frame, 4)
	n := b.Queue(0).RX().Receive(buf)
	if n != 1 || buf[0].Len() != 9014 {
		t.Errorf("received %d frames (first %d bytes), want 1 of 9014", n, buf[0].Len())
	}
	b.Queue(0).RX().Free(buf[:n])
	if got := a.Stats().Drops[dataplane.DropTooLong]; got != 1 {
		t.Errorf("Drops[too_long] = %d, want 1", got)
	}
	dataplanetest.CheckAccounting(t, a, b)
}

func TestPeerClosed(t *testing.T) {
	a, b := newPair(t, memport.Config{})
	fr := alloc(t, a.Queue(0).TX(), 5, 1, 64)
	b.Close()
	if n := a.Queue(0).TX().Transmit(fr); n != 5 {
		t.Errorf("Transmit to a closed peer = %d, want 5 (taken and dropped)", n)
	}
	if got := a.Stats().Drops[dataplane.DropClosed]; got != 5 {
		t.Errorf("Drops[closed] = %d, want 5", got)
	}
	if fd := b.Queue(0).RX().WaitFD(); fd != -1 {
		t.Errorf("WaitFD after Close = %d, want -1", fd)
	}
	if b.Queue(0).RX().Arm() {
		t.Errorf("Arm after Close = true, want false")
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
}

func readable(t *testing.T, fd int) bool {
	t.Helper()
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(pfd, 0)
	if err != nil {
		t.Fatalf("poll: %v", err)
	}
	return n > 0
}

// TestNeedWakeup: the eventfd is written only after Arm, once per arming.
func TestNeedWakeup(t *testing.T) {
	a, b := newPair(t, memport.Config{})
	rx := b.Queue(0).RX()
	tx := a.Queue(0).TX()
	buf := make([]dataplane.Frame, 64)
	fd := rx.WaitFD()

	tx.Transmit(alloc(t, tx, 4, 1, 64))
	if readable(t, fd) {
		t.Errorf("WaitFD readable after a transmit to an unarmed receiver")
	}
	if rx.Arm() {
		t.Errorf("Arm() with frames waiting = true, want false")
	}
	receiveAll(b, buf)
	if !rx.Arm() {
		t.Fatalf("Arm() on empty rings = false, want true")
	}
	if readable(t, fd) {
		t.Errorf("WaitFD readable right after Arm")
	}
	tx.Transmit(alloc(t, tx, 4, 1, 64))
	if !readable(t, fd) {
		t.Errorf("WaitFD not readable after a transmit to an armed receiver")
	}
	receiveAll(b, buf)
	// Arm drains the wake; another transmit wakes again.
	if !rx.Arm() {
		t.Fatalf("second Arm() = false, want true")
	}
	if readable(t, fd) {
		t.Errorf("WaitFD still readable after Arm drained it")
	}
	tx.Transmit(alloc(t, tx, 1, 1, 64))
	if !readable(t, fd) {
		t.Errorf("WaitFD not readable after the second armed transmit")
	}
	receiveAll(b, buf)
}

// TestWaiterWithMemport: a Waiter over both ports' RX wakes when a frame
// comes from another goroutine.
func TestWaiterWithMemport(t *testing.T) {
	a, b := newPair(t, memport.Config{Queues: 2})
	w, err := dataplane.NewWaiter()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for q := range 2 {
		w.Add(a.Queue(q).RX())
		w.Add(b.Queue(q).RX())
	}
	buf := make([]dataplane.Frame, 64)
	for round := range 20 {
		done := make(chan struct{})
		fr := alloc(t, a.Queue(1).TX(), 1, uint16(round), 64)
		go func() {
			defer close(done)
			time.Sleep(time.Millisecond)
			a.Queue(1).TX().Transmit(fr)
		}()
		got := 0
		deadline := time.Now().Add(10 * time.Second)
		for got == 0 && time.Now().Before(deadline) {
			if _, err := w.Wait(5 * time.Second); err != nil {
				t.Fatal(err)
			}
			got, _ = receiveAll(b, buf)
		}
		<-done
		if got != 1 {
			t.Fatalf("round %d: received %d after Wait, want 1", round, got)
		}
	}
}

// TestZeroAllocs: a forwarding burst allocates nothing, with shared and
// separate pools, 1 and 2 queues.
func TestZeroAllocs(t *testing.T) {
	for _, cfg := range []memport.Config{{}, {SharedPool: true}, {Queues: 2}, {Queues: 2, SharedPool: true}} {
		a, b := newPair(t, cfg)
		fw := newForwarder(t, a, b, 64)
		allocs := testing.AllocsPerRun(200, fw.step)
		if allocs != 0 {
			t.Errorf("%+v: %v allocs per forwarding burst, want 0", cfg, allocs)
		}
		fw.drain()
		dataplanetest.CheckAccounting(t, a, b)
	}
}

// forwarder bounces a burst between a and b: b receives and transmits back,
// a receives and transmits forward, on every queue.
type forwarder struct {
	a, b    dataplane.Port
	buf     []dataplane.Frame
	forward uint64
}

func newForwarder(t testing.TB, a, b *memport.Port, batch int) *forwarder {
	fw := &forwarder{a: a, b: b, buf: make([]dataplane.Frame, batch)}
	for q := range a.NumQueues() {
		fs := alloc(t, a.Queue(q).TX(), batch, uint16(q*batch), 64)
		if n := a.Queue(q).TX().Transmit(fs); n != batch {
			t.Fatalf("priming Transmit = %d, want %d", n, batch)
		}
	}
	return fw
}

func (fw *forwarder) step() {
	for _, p := range []dataplane.Port{fw.b, fw.a} {
		for q := range p.NumQueues() {
			qu := p.Queue(q)
			n := qu.RX().Receive(fw.buf)
			m := qu.TX().Transmit(fw.buf[:n])
			qu.TX().Free(fw.buf[m:n])
			fw.forward += uint64(m)
		}
	}
}

func (fw *forwarder) drain() {
	for _, p := range []dataplane.Port{fw.a, fw.b} {
		receiveAll(p, fw.buf)
	}
}

// BenchmarkForward: per-queue forwarding of 64-byte frames through memport
// (receive a burst on one port, transmit it back), batch sizes 1, 16, 64,
// shared pool (zero-copy) and separate pools (a copy per frame); pps counts
// frames forwarded, per queue. BenchmarkChannelReference is the naive
// reference: frames handed over a buffered Go channel one by one.
func BenchmarkForward(b *testing.B) {
	for _, cfg := range []memport.Config{{SharedPool: true}, {}, {SharedPool: true, Queues: 2}} {
		for _, batch := range []int{1, 16, 64} {
			name := "shared"
			if !cfg.SharedPool {
				name = "copy"
			}
			if cfg.Queues == 2 {
				name += "/rss2"
			}
			b.Run(name+"/batch="+itoa(batch), func(b *testing.B) {
				pa, pb := newPair(b, cfg)
				fw := newForwarder(b, pa, pb, batch)
				b.SetBytes(int64(64 * 2 * batch)) // two bursts per op
				b.ReportAllocs()
				cpu0 := cpuTime(b)
				for b.Loop() {
					fw.step()
				}
				// CPU time is steadier than wall time on a shared machine.
				b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(fw.forward), "cpu-ns/frame")
				// Per queue: every queue forwards its share.
				b.ReportMetric(float64(fw.forward)/b.Elapsed().Seconds()/float64(pa.NumQueues()), "pps")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(fw.forward), "ns/frame")
				fw.drain()
			})
		}
	}
}

func BenchmarkChannelReference(b *testing.B) {
	for _, batch := range []int{1, 16, 64} {
		b.Run("batch="+itoa(batch), func(b *testing.B) {
			pa, _ := newPair(b, memport.Config{})
			ab := make(chan dataplane.Frame, 512)
			ba := make(chan dataplane.Frame, 512)
			for _, f := range alloc(b, pa.Queue(0).TX(), batch, 1, 64) {
				ab <- f
			}
			var forward uint64
			b.SetBytes(int64(64 * 2 * batch))
			b.ReportAllocs()
			for b.Loop() {
				for range batch {
					ba <- <-ab
				}
				for range batch {
					ab <- <-ba
				}
				forward += 2 * uint64(batch)
			}
			b.ReportMetric(float64(forward)/b.Elapsed().Seconds(), "pps")
		})
	}
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// cpuTime is the process's user and system CPU time.
func cpuTime(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestGivenPoolTooSmallForMTU: a pool given in Config.PoolA or PoolB wins
// over FrameSize and Headroom, so NewPair checks the MTU against it; a pair
// it accepted copied a jumbo frame into a short buffer, which the peer
// dropped as a bad descriptor and lost.
func TestGivenPoolTooSmallForMTU(t *testing.T) {
	small, err := dataplane.NewPool(dataplane.AllocMemory(64*4096), 4096, 256)
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []memport.Config{
		{MTU: 9000, FrameSize: 16384, PoolB: small},
		{MTU: 9000, FrameSize: 16384, PoolA: small},
	} {
		a, b, err := memport.NewPair(cfg)
		if err == nil {
			a.Close()
			b.Close()
			t.Fatalf("NewPair accepted MTU 9000 with a pool of 4096-byte frames")
		}
		if !strings.Contains(err.Error(), "MTU 9000") || !strings.Contains(err.Error(), "4096-byte frames") {
			t.Errorf("error does not say what does not fit: %v", err)
		}
	}
	// A pool that holds the MTU is taken.
	a, b, err := memport.NewPair(memport.Config{PoolB: small})
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	b.Close()
}
