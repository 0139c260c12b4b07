//go:build linux

package fastgw

import (
	"fmt"
	"os"
	"sync"
	"syscall"

	"github.com/vishvananda/netlink"

	"github.com/wgpio/wgpio/internal/linkfollow"
)

// SetSharedUMEMProbe replaces the shared-UMEM probe until restore is
// called.
func SetSharedUMEMProbe(probe func() error) (restore func()) {
	old := haveSharedUMEM
	haveSharedUMEM = probe
	return func() { haveSharedUMEM = old }
}

// EndFirstLinkSubscriptions makes the first n link subscriptions (the
// MTU watchers') end at once, as one ends when its socket overflows,
// until restore is called.
func EndFirstLinkSubscriptions(n int) (restore func()) {
	old := linkfollow.Subscribe
	linkfollow.Subscribe = func(ch chan<- netlink.LinkUpdate, done <-chan struct{}, opts netlink.LinkSubscribeOptions) error {
		if n > 0 {
			n--
			close(ch)
			return nil
		}
		return old(ch, done, opts)
	}
	return func() { linkfollow.Subscribe = old }
}

// LockWAN takes g's WAN lock until unlock is called: the address follower
// stalls at its first update, so that a burst overflows its subscription.
func LockWAN(g *Gateway) (unlock func()) {
	g.wanMu.Lock()
	return g.wanMu.Unlock
}

// PauseLinkSubscriptions lets a test end every link subscription at once,
// as a socket overflow (ENOBUFS) ends one, and hold the subscriptions
// made after it until resume: pause ends them and holds the next ones,
// resume lets those through (call it before closing the gateway, whose
// followers wait for a held subscription). A subscription's socket stays
// open until the gateway ends the subscription, as after an overflow.
// subscribed is how many subscriptions were made since the last pause
// (or since the call). restore (after the gateway is closed) resumes and
// puts netlink's function back.
func PauseLinkSubscriptions() (pause, resume func(), subscribed func() int, restore func()) {
	old := linkfollow.Subscribe
	var mu sync.Mutex
	var stops []chan struct{}
	var gate chan struct{} // closed or nil: subscriptions go through
	linkfollow.Subscribe = func(ch chan<- netlink.LinkUpdate, done <-chan struct{}, opts netlink.LinkSubscribeOptions) error {
		mu.Lock()
		g := gate
		mu.Unlock()
		if g != nil {
			<-g // done is the subscription's own: not closed before it is made
		}
		inner := make(chan netlink.LinkUpdate, 16)
		if err := old(inner, done, opts); err != nil {
			return err
		}
		stop := make(chan struct{})
		mu.Lock()
		stops = append(stops, stop)
		mu.Unlock()
		go func() {
			defer close(ch)
			defer func() {
				go func() {
					for range inner { // until the gateway ends the subscription (done)
					}
				}()
			}()
			for {
				select {
				case u, ok := <-inner:
					if !ok {
						return
					}
					select {
					case ch <- u:
					case <-stop:
						return
					}
				case <-stop:
					return
				}
			}
		}()
		return nil
	}
	resume = func() {
		mu.Lock()
		defer mu.Unlock()
		if gate != nil {
			close(gate)
			gate = nil
		}
	}
	pause = func() {
		mu.Lock()
		defer mu.Unlock()
		if gate == nil {
			gate = make(chan struct{})
		}
		for _, s := range stops {
			close(s)
		}
		stops = nil
	}
	subscribed = func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(stops)
	}
	return pause, resume, subscribed, func() {
		resume()
		linkfollow.Subscribe = old
	}
}

// ExceptionFile returns the exception TUN's queue file (nil without one),
// for a test to set its send buffer (testenv.FillTUN).
func ExceptionFile(g *Gateway) *os.File {
	if g.exc == nil {
		return nil
	}
	return g.exc.File()
}

// FailReads makes readLink fail, until restore is called (after the
// gateway is closed), for the next n reads of interface name that arm(name,
// n) asks for, each with ENOBUFS; failed tells how many it failed since.
// Installed before the gateway starts, armed after.
func FailReads() (arm func(name string, n int32), failed func() int32, restore func()) {
	var (
		mu    sync.Mutex
		which string
		left  int32
		count int32
	)
	readLinkHook = func(name string) error {
		mu.Lock()
		defer mu.Unlock()
		if name != which || left == 0 {
			return nil
		}
		left--
		count++
		return fmt.Errorf("list addresses of %s: %w", name, syscall.ENOBUFS)
	}
	arm = func(name string, n int32) {
		mu.Lock()
		which, left = name, n
		mu.Unlock()
	}
	failed = func() int32 {
		mu.Lock()
		defer mu.Unlock()
		return count
	}
	return arm, failed, func() { readLinkHook = nil }
}

// WANRequests is how many ARP/NDP requests g's WAN neighbour table made
// (in shared mode, questions to the kernel, which then probes).
func WANRequests(g *Gateway) uint64 { return g.wanTable.Stats().Requests }
