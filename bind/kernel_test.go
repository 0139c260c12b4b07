package bind

import (
	"bytes"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wgpio/wgpio/protocol"
)

// transport is a WireGuard transport data message of n bytes (n ≥ 32,
// so that Config.Screen takes it) whose counter field holds seq.
func transport(n int, seq byte) []byte {
	m := wgMsg(protocol.TypeTransport, n)
	m[8] = seq
	return m
}

// TestReceiveKernel: datagrams handed to ReceiveKernel (a kernel socket's:
// reassembled from fragments) come out of the ReceiveFunc, with a blocked
// one woken, their source as the endpoint and the address they were sent
// to as its source, counted in RXPackets and FromKernel; ones to another
// port or address or that Screen refuses are dropped and counted.
func TestReceiveKernel(t *testing.T) {
	r := newRig(t, 2, func(c *Config) { c.Screen = true })
	from4 := netip.AddrPortFrom(peerIP4, 40000)
	from6 := netip.AddrPortFrom(peerIP6, 40001)
	big := transport(1500, 1) // longer than one frame's MTU: reassembled
	// A reader blocked before the datagram comes is woken by it.
	type batch struct {
		msgs []string
		eps  []*Endpoint
	}
	got := make(chan batch, 16)
	var readers sync.WaitGroup
	for _, fn := range r.fns {
		readers.Add(1)
		go func() {
			defer readers.Done()
			bufs, sizes, eps := recvBufs()
			for {
				n, err := fn(bufs, sizes, eps)
				if err != nil {
					return
				}
				var b batch
				for i := range n {
					b.msgs = append(b.msgs, string(bufs[i][:sizes[i]]))
					b.eps = append(b.eps, eps[i].(*Endpoint))
				}
				got <- b
			}
		}()
	}
	defer func() { r.bind.Close(); readers.Wait() }()
	time.Sleep(20 * time.Millisecond) // the readers block in their waiters
	if !r.bind.ReceiveKernel(from4, netip.AddrPortFrom(ourIP4, ourPort), big) {
		t.Fatal("ReceiveKernel(IPv4) = false")
	}
	if !r.bind.ReceiveKernel(netip.AddrPortFrom(netip.AddrFrom16(peerIP6.As16()), from6.Port()), netip.AddrPortFrom(ourIP6, ourPort), transport(40, 2)) {
		t.Fatal("ReceiveKernel(IPv6) = false")
	}
	drops := []struct {
		name string
		dst  netip.AddrPort
		msg  []byte
	}{
		{"another port", netip.AddrPortFrom(ourIP4, ourPort+1), transport(40, 3)},
		{"another address", netip.AddrPortFrom(peerIP4, ourPort), transport(40, 4)},
		{"no WireGuard message", netip.AddrPortFrom(ourIP4, ourPort), []byte("hello")},
	}
	for _, d := range drops {
		if r.bind.ReceiveKernel(from4, d.dst, d.msg) {
			t.Errorf("ReceiveKernel(%s) = true, want false", d.name)
		}
	}
	var msgs []string
	var eps []*Endpoint
	for deadline := time.After(10 * time.Second); len(msgs) < 2; {
		select {
		case b := <-got:
			msgs, eps = append(msgs, b.msgs...), append(eps, b.eps...)
		case <-deadline:
			t.Fatalf("received %d datagrams, want 2", len(msgs))
		}
	}
	for i, m := range msgs {
		switch {
		case m == string(big):
			if eps[i].AddrPort() != from4 || eps[i].SrcIP() != ourIP4 {
				t.Errorf("IPv4 datagram's endpoint %v from %v, want %v from %v", eps[i].AddrPort(), eps[i].SrcIP(), from4, ourIP4)
			}
		case bytes.Equal([]byte(m), transport(40, 2)):
			if eps[i].AddrPort() != from6 || eps[i].SrcIP() != ourIP6 {
				t.Errorf("IPv6 datagram's endpoint %v from %v, want %v from %v", eps[i].AddrPort(), eps[i].SrcIP(), from6, ourIP6)
			}
		default:
			t.Errorf("received a datagram of %d bytes not sent", len(m))
		}
	}
	s := r.bind.Stats()
	if s.RXPackets != 2 || s.FromKernel != 2 {
		t.Errorf("Stats() RXPackets %d, FromKernel %d; want 2, 2", s.RXPackets, s.FromKernel)
	}
	if s.Drops[DropNotOurs] != 2 || s.Drops[DropBadType] != 1 {
		t.Errorf("Stats() drops %v, want not_ours=2 bad_type=1", s.Drops.List())
	}
}

// TestReceiveKernelFull: with no ReceiveFunc taking them, KernelQueueLen
// datagrams are queued and the next ones dropped and counted, without
// blocking; once the queue is read, they are delivered in order, and a
// datagram longer than wireguard-go's buffer is dropped when taken. The
// queue outlives a Close and Open: what waited is delivered after.
func TestReceiveKernelFull(t *testing.T) {
	r := newRig(t, 1, nil)
	from := netip.AddrPortFrom(peerIP4, 40000)
	dst := netip.AddrPortFrom(ourIP4, ourPort)
	long := make([]byte, 3000) // recvBufs' buffers hold 2048
	if !r.bind.ReceiveKernel(from, dst, long) {
		t.Fatal("ReceiveKernel(first) = false")
	}
	for i := 1; i < KernelQueueLen; i++ {
		if !r.bind.ReceiveKernel(from, dst, []byte{byte(i), byte(i >> 8)}) {
			t.Fatalf("ReceiveKernel(%d) = false, want queued (%d slots)", i, KernelQueueLen)
		}
	}
	for i := range 5 {
		if r.bind.ReceiveKernel(from, dst, []byte{0xff, byte(i)}) {
			t.Fatalf("ReceiveKernel on a full queue = true, want dropped")
		}
	}
	if s := r.bind.Stats(); s.Drops[DropKernelQueueFull] != 5 || s.FromKernel != 0 {
		t.Fatalf("Stats() kernel_queue_full %d, FromKernel %d; want 5, 0", s.Drops[DropKernelQueueFull], s.FromKernel)
	}
	// Reopened: the queue is the Bind's, not the generation's.
	if err := r.bind.Close(); err != nil {
		t.Fatal(err)
	}
	fns, _, err := r.bind.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	bufs, sizes, eps := recvBufs()
	next := 1
	for next < KernelQueueLen {
		n, err := fns[0](bufs, sizes, eps)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if want := []byte{byte(next), byte(next >> 8)}; !bytes.Equal(bufs[i][:sizes[i]], want) {
				t.Fatalf("datagram %d = %x, want %x (in order)", next, bufs[i][:sizes[i]], want)
			}
			next++
		}
	}
	s := r.bind.Stats()
	if s.FromKernel != KernelQueueLen-1 || s.RXPackets != KernelQueueLen-1 || s.Drops[DropTooBig] != 1 {
		t.Errorf("Stats() FromKernel %d, RXPackets %d, too_big %d; want %d, %d, 1", s.FromKernel, s.RXPackets, s.Drops[DropTooBig], KernelQueueLen-1, KernelQueueLen-1)
	}
	// The slots are free again.
	if !r.bind.ReceiveKernel(from, dst, []byte("again")) {
		t.Error("ReceiveKernel after the queue was read = false")
	}
}

// TestReceiveKernelNoAllocs: once a slot's buffer has grown, a datagram
// through ReceiveKernel and the ReceiveFunc allocates nothing.
func TestReceiveKernelNoAllocs(t *testing.T) {
	r := newRig(t, 1, nil)
	from := netip.AddrPortFrom(peerIP4, 40000)
	dst := netip.AddrPortFrom(ourIP4, ourPort)
	msg := transport(1400, 0)
	bufs, sizes, eps := recvBufs()
	step := func() {
		if !r.bind.ReceiveKernel(from, dst, msg) {
			t.Fatal("ReceiveKernel = false")
		}
		if n, err := r.fns[0](bufs, sizes, eps); n != 1 || err != nil {
			t.Fatalf("receive = %d, %v", n, err)
		}
	}
	for range KernelQueueLen {
		step() // every slot grown
	}
	if a := testing.AllocsPerRun(200, step); a != 0 {
		t.Errorf("allocs per ReceiveKernel + receive = %v, want 0", a)
	}
}

// TestCountKernelSocketDrops: the count the sockets' owner reports is
// Stats' kernel_socket_full, read at each Stats (cumulative) and after
// Close; nil counts none. Before, the datagrams the kernel dropped at the
// sockets feeding ReceiveKernel were in no counter of the Bind's.
func TestCountKernelSocketDrops(t *testing.T) {
	r := newRig(t, 1, nil)
	var kernel atomic.Uint64
	r.bind.CountKernelSocketDrops(kernel.Load)
	if n := r.bind.Stats().Drops[DropKernelSocketFull]; n != 0 {
		t.Fatalf("kernel_socket_full %d before any drop, want 0", n)
	}
	kernel.Store(5)
	if s := r.bind.Stats(); s.Drops[DropKernelSocketFull] != 5 || s.Drops.Total() != 5 {
		t.Errorf("Stats() drops %v, want kernel_socket_full=5 alone", s.Drops.List())
	}
	if err := r.bind.Close(); err != nil {
		t.Fatal(err)
	}
	kernel.Store(6)
	if n := r.bind.Stats().Drops[DropKernelSocketFull]; n != 6 {
		t.Errorf("after Close: kernel_socket_full %d, want 6", n)
	}
	r.bind.CountKernelSocketDrops(nil)
	if n := r.bind.Stats().Drops[DropKernelSocketFull]; n != 0 {
		t.Errorf("kernel_socket_full %d with no count, want 0", n)
	}
}
