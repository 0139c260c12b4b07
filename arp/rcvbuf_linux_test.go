package arp

import (
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/internal/testenv"
)

// withoutNetAdmin runs fn on a locked OS thread whose effective
// capabilities lack CAP_NET_ADMIN (kept permitted, and effective again
// before the thread is unlocked): Linux checks a socket option against the
// calling thread's credentials.
func withoutNetAdmin(t *testing.T, fn func()) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var caps [2]unix.CapUserData
	if err := unix.Capget(&hdr, &caps[0]); err != nil {
		t.Fatalf("capget: %v", err)
	}
	if caps[0].Effective&(1<<unix.CAP_NET_ADMIN) == 0 {
		t.Skip("CAP_NET_ADMIN is not effective: nothing to drop")
	}
	dropped := caps
	dropped[0].Effective &^= 1 << unix.CAP_NET_ADMIN
	if err := unix.Capset(&hdr, &dropped[0]); err != nil {
		t.Fatalf("capset: %v", err)
	}
	defer func() {
		if err := unix.Capset(&hdr, &caps[0]); err != nil {
			panic("restore CAP_NET_ADMIN: " + err.Error()) // the thread must not go back to the pool without it
		}
	}()
	fn()
}

// openFDs is the number of the process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestKernelSubscriptionsWithoutNetAdmin: without CAP_NET_ADMIN the
// neighbour and route followers cannot force their notification sockets'
// receive buffer (SO_RCVBUFFORCE); they work with the default one and
// leave no socket open behind. Before, netlink v1.3.1 left open the
// subscription socket whose forced size the kernel refused: one per
// neighbour subscription (each start, and each renewal after an overrun),
// one per process for routes.
func TestKernelSubscriptionsWithoutNetAdmin(t *testing.T) {
	testenv.Root(t)
	tp := testenv.Topology(t, "rb")
	ns := testenv.NS(t, tp, "a")
	before := openFDs(t)
	withoutNetAdmin(t, func() {
		for range 5 {
			k, err := NewKernelNeighbours(NewTable(Config{}), KernelOptions{Namespace: ns.NsHandle()})
			if err != nil {
				t.Fatalf("NewKernelNeighbours without CAP_NET_ADMIN: %v", err)
			}
			k.Close()
			r, err := NewKernelRoutes(KernelOptions{Namespace: ns.NsHandle()})
			if err != nil {
				t.Fatalf("NewKernelRoutes without CAP_NET_ADMIN: %v", err)
			}
			r.Close()
		}
	})
	// A subscription's socket closes on its own goroutine after Close,
	// which on a busy machine can take seconds; a leak never closes.
	after := openFDs(t)
	for deadline := time.Now().Add(10 * time.Second); after > before && time.Now().Before(deadline); after = openFDs(t) {
		time.Sleep(10 * time.Millisecond)
	}
	if after > before {
		t.Errorf("open file descriptors %d → %d after 5 neighbour and route followers opened and closed without CAP_NET_ADMIN, want none left", before, after)
	}
}
