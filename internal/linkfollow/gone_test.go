//go:build linux

package linkfollow

import (
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// goneCall is what OnGone was called with.
type goneCall struct {
	index int
	name  string
}

// followIn follows indexes in ns (the handle's namespace) until the test
// ends, handing OnLink's attributes to links and OnGone's calls to gone.
func followIn(t *testing.T, ns *topo.NS, indexes []int, links chan<- netlink.LinkAttrs, gone chan<- goneCall) {
	t.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	var h *netlink.Handle
	if err := ns.Do(func() (err error) {
		if h, err = netlink.NewHandle(); err != nil {
			return err
		}
		return Follow(Config{Namespace: ns.NsHandle(), Links: h, Log: slog.New(slog.DiscardHandler), What: "LAN", Indexes: indexes,
			OnLink: func(a netlink.LinkAttrs, _ bool) { links <- a },
			OnGone: func(index int, name string) { gone <- goneCall{index, name} }}, done, &wg)
	}); err != nil {
		if h != nil {
			h.Close()
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		close(done)
		wg.Wait()
		h.Close()
	})
}

// linkIndex is the index of dev in ns.
func linkIndex(t *testing.T, ns *topo.NS, dev string) int {
	t.Helper()
	l, err := ns.Handle().LinkByName(dev)
	if err != nil {
		t.Fatal(err)
	}
	return l.Attrs().Index
}

// run runs a command in ns, failing the test on an error.
func run(t *testing.T, ns *topo.NS, args ...string) {
	t.Helper()
	if out, err := ns.Run(args[0], args[1:]...); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
}

// waitMTU reads links until one of index with mtu comes, failing the test
// after 10 s without it.
func waitMTU(t *testing.T, links <-chan netlink.LinkAttrs, index, mtu int) {
	t.Helper()
	for {
		select {
		case a := <-links:
			if a.Index == index && a.MTU == mtu {
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no link update of index %d with MTU %d within 10 s", index, mtu)
		}
	}
}

// TestFollowGone: a followed veth deleted (ip link del) is reported to
// OnGone with its index and name, once: a later update of another
// followed interface, handed to OnLink, brings no second report. A
// followed veth leaving a bridge (whose RTM_DELLINK, of family
// AF_BRIDGE, names it though it stays) is not reported. Before OnGone,
// Follow skipped a deletion silently, and a gateway ran on, dead.
func TestFollowGone(t *testing.T) {
	testenv.Root(t)
	tp := testenv.Topology(t, "lg")
	a, b := testenv.NS(t, tp, "a"), testenv.NS(t, tp, "b")
	v, err := tp.NewVeth(a, b, topo.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := tp.NewVeth(a, b, topo.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	vi, wi := linkIndex(t, a, v.A), linkIndex(t, a, w.A)
	links, gone := make(chan netlink.LinkAttrs, 64), make(chan goneCall, 4)
	followIn(t, a, []int{vi, wi}, links, gone)
	waitMTU(t, links, vi, 1500)

	// In and out of a bridge: not gone.
	run(t, a, "ip", "link", "add", "lgbr", "type", "bridge")
	run(t, a, "ip", "link", "set", "dev", v.A, "master", "lgbr")
	run(t, a, "ip", "link", "set", "dev", v.A, "nomaster")
	run(t, a, "ip", "link", "set", "dev", v.A, "mtu", "1400")
	waitMTU(t, links, vi, 1400)
	select {
	case g := <-gone:
		t.Fatalf("OnGone%+v after %s left a bridge; it is still there", g, v.A)
	default:
	}

	run(t, a, "ip", "link", "del", "dev", v.A)
	select {
	case g := <-gone:
		if want := (goneCall{vi, v.A}); g != want {
			t.Fatalf("OnGone%+v, want %+v", g, want)
		}
	case <-time.After(time.Minute):
		t.Fatalf("OnGone not called within a minute of ip link del %s", v.A)
	}
	run(t, a, "ip", "link", "set", "dev", w.A, "mtu", "1300")
	waitMTU(t, links, wi, 1300)
	select {
	case g := <-gone:
		t.Fatalf("a second OnGone%+v", g)
	default:
	}
}

// TestFollowGoneBeforeRead: an interface deleted before Follow's first
// read (no update of its deletion ever reaches the subscription) is
// reported to OnGone when LinkByIndex finds no such interface, its name
// unknown.
func TestFollowGoneBeforeRead(t *testing.T) {
	testenv.Root(t)
	tp := testenv.Topology(t, "lh")
	a, b := testenv.NS(t, tp, "a"), testenv.NS(t, tp, "b")
	v, err := tp.NewVeth(a, b, topo.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	vi := linkIndex(t, a, v.A)
	run(t, a, "ip", "link", "del", "dev", v.A)
	links, gone := make(chan netlink.LinkAttrs, 64), make(chan goneCall, 4)
	followIn(t, a, []int{vi}, links, gone)
	select {
	case g := <-gone:
		if want := (goneCall{vi, ""}); g != want {
			t.Fatalf("OnGone%+v, want %+v", g, want)
		}
	case <-time.After(time.Minute):
		t.Fatal("OnGone not called within a minute for an index that no longer exists")
	}
}
