//go:build linux

package linkfollow

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// seen is what OnLink was called with.
type seen struct {
	mtu    int
	reread bool
}

// next returns OnLink's next call, failing the test after 10 s without one.
func next(t *testing.T, ch <-chan seen) seen {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("OnLink not called within 10 s")
	}
	return seen{}
}

// TestFollow: Follow hands OnLink the followed veth's attributes read after
// subscribing (reread), then at each change (ip link set mtu), and, after
// its subscription ended (as one ends when its socket overflows), reads
// the link anew once subscribed again, logs the renewal and goes on
// following; it stops when done is closed (wg). The first subscription
// ends at once.
func TestFollow(t *testing.T) {
	testenv.Root(t)
	tp := testenv.Topology(t, "lf")
	a, b := testenv.NS(t, tp, "a"), testenv.NS(t, tp, "b")
	v, err := tp.NewVeth(a, b, topo.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ends := 1
	var mu sync.Mutex
	old := Subscribe
	Subscribe = func(ch chan<- netlink.LinkUpdate, done <-chan struct{}, opts netlink.LinkSubscribeOptions) error {
		mu.Lock()
		defer mu.Unlock()
		if ends > 0 {
			ends--
			close(ch)
			return nil
		}
		return old(ch, done, opts)
	}
	t.Cleanup(func() { Subscribe = old })

	var logs testenv.LogBuffer
	ch := make(chan seen, 16)
	done := make(chan struct{})
	var wg sync.WaitGroup
	var h *netlink.Handle
	if err := a.Do(func() error {
		if h, err = netlink.NewHandle(); err != nil {
			return err
		}
		l, err := h.LinkByName(v.A)
		if err != nil {
			return err
		}
		return Follow(Config{Namespace: a.NsHandle(), Links: h, Log: slog.New(slog.NewTextHandler(&logs, nil)), What: "LAN", Indexes: []int{l.Attrs().Index},
			OnLink: func(a netlink.LinkAttrs, reread bool) { ch <- seen{a.MTU, reread} }}, done, &wg)
	}); err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	defer wg.Wait()
	defer close(done)
	for i, want := range []seen{{1500, true}, {1500, true}} { // the ended subscription's read, the next's
		if got := next(t, ch); got != want {
			t.Fatalf("OnLink call %d: %+v, want %+v", i, got, want)
		}
	}
	if out, err := a.Run("ip", "link", "set", "dev", v.A, "mtu", "1300"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for {
		got := next(t, ch)
		if got.mtu == 1300 && !got.reread {
			break
		}
		if got.mtu != 1500 || got.reread {
			t.Fatalf("OnLink after the MTU went to 1300: %+v, want {1300 false}", got)
		}
	}
	if l := logs.String(); !strings.Contains(l, "following the LAN link again after its subscription ended") {
		t.Errorf("log:\n%s\nwant the renewal", l)
	}
}
