package arp

import (
	"sync"
	"testing"

	"github.com/wgpio/wgpio/internal/testenv"
)

// TestKernelCloseTwice: Close of KernelRoutes and KernelNeighbours may be
// called twice, and concurrently (a deferred Close after an explicit one):
// it panicked with "close of closed channel".
func TestKernelCloseTwice(t *testing.T) {
	tp := testenv.Topology(t, "ac")
	ns := testenv.NS(t, tp, "a")
	kr, err := NewKernelRoutes(KernelOptions{Namespace: ns.NsHandle()})
	must(t, err)
	kn, err := NewKernelNeighbours(NewTable(Config{}), KernelOptions{Namespace: ns.NsHandle()})
	must(t, err)
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(2)
		go func() { defer wg.Done(); errorIf(t, kr.Close()) }()
		go func() { defer wg.Done(); errorIf(t, kn.Close()) }()
	}
	wg.Wait()
	must(t, kr.Close())
	must(t, kn.Close())
}

func errorIf(t *testing.T, err error) {
	if err != nil {
		t.Error(err)
	}
}
