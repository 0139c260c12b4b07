package fastpath

import (
	"sync/atomic"
	"testing"
)

// TestCountKernelSocketDrops: the count the sockets' owner reports is
// queue 0's kernel_socket_full at each Stats (cumulative: read, not
// added up), and part of the drops' total; nil counts none. Before,
// the datagrams the kernel dropped at the sockets feeding ReceiveWAN
// were in no counter of the engine's.
func TestCountKernelSocketDrops(t *testing.T) {
	r := newRig(t, rigConfig{queues: 2})
	e := r.a
	var kernel atomic.Uint64
	e.CountKernelSocketDrops(kernel.Load)
	if n := TotalDrops(e.Stats())[DropKernelSocketFull]; n != 0 {
		t.Fatalf("kernel_socket_full %d before any drop, want 0", n)
	}
	kernel.Store(7)
	qs := e.Stats()
	if qs[0].Drops[DropKernelSocketFull] != 7 || TotalDrops(qs)[DropKernelSocketFull] != 7 || TotalDrops(qs).Total() != 7 {
		t.Errorf("queue 0 kernel_socket_full %d, total %d, all drops %d; want 7, 7, 7", qs[0].Drops[DropKernelSocketFull], TotalDrops(qs)[DropKernelSocketFull], TotalDrops(qs).Total())
	}
	kernel.Store(9)
	if n := e.Stats()[0].Drops[DropKernelSocketFull]; n != 9 {
		t.Errorf("kernel_socket_full %d after the count grew to 9, want 9", n)
	}
	e.CountKernelSocketDrops(nil)
	if n := e.Stats()[0].Drops[DropKernelSocketFull]; n != 0 {
		t.Errorf("kernel_socket_full %d with no count, want 0", n)
	}
}
