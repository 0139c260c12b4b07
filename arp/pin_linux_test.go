package arp

import (
	"testing"

	"github.com/wgpio/wgpio/internal/testenv"
)

// TestKernelReadersKeepCallersNamespace starts both kernel readers with no
// Namespace from a thread moved into a test namespace: they must keep that
// namespace for the subscriptions they renew later from their own
// goroutine (on any thread), not fall back to "the current thread's".
func TestKernelReadersKeepCallersNamespace(t *testing.T) {
	tp := testenv.Topology(t, "arpn")
	ns := testenv.NS(t, tp, "a")
	want := ns.NsHandle().UniqueId()
	var routes *KernelRoutes
	var neigh *KernelNeighbours
	if err := ns.Do(func() error {
		var err error
		if routes, err = NewKernelRoutes(KernelOptions{}); err != nil {
			return err
		}
		neigh, err = NewKernelNeighbours(NewTable(Config{}), KernelOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer routes.Close()
	defer neigh.Close()
	if got := routes.opts.ns().UniqueId(); got != want {
		t.Errorf("KernelRoutes follows namespace %s, want the caller's %s", got, want)
	}
	if got := neigh.opts.ns().UniqueId(); got != want {
		t.Errorf("KernelNeighbours follows namespace %s, want the caller's %s", got, want)
	}
}
