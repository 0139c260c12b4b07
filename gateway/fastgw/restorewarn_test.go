//go:build linux

package fastgw

import (
	"log/slog"
	"net"
	"net/netip"
	"testing"

	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// TestRestoreMissingWarningsCapped: restoring the exception TUN's missing
// routes is an operation of its own for the capped warnings: its lines are
// counted and summed up when it ends, not carried into the next change
// (whose first lines they silenced, and whose count they swelled).
func TestRestoreMissingWarningsCapped(t *testing.T) {
	testenv.Root(t)
	tp := testenv.Topology(t, "rw")
	a, b := testenv.NS(t, tp, "a"), testenv.NS(t, tp, "b")
	v, err := tp.NewVeth(a, b, topo.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := a.Run("ip", "link", "set", v.A, "down"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	l, err := a.Handle().LinkByName(v.A)
	if err != nil {
		t.Fatal(err)
	}
	pa, pb, err := memport.NewPair(memport.Config{Name: "rw", MACA: net.HardwareAddr{2, 0, 0, 0, 9, 1}, MACB: net.HardwareAddr{2, 0, 0, 0, 9, 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer pa.Close()
	defer pb.Close()
	eng, err := fastpath.New(fastpath.Config{LAN: pa, WAN: pb, ListenPort: 51820, WANAddr4: netip.MustParseAddr("198.18.0.1"),
		WANResolver: anyMAC{}, LANResolver: anyMAC{}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	h := countHandler{n: map[string]int{}}
	d := newDataplane(eng, fakeMap{}, 1<<20, slog.New(h), a.Handle())
	d.excLink = l
	const n = 30
	var add fastpath.PeerChange
	for i := range n {
		p := &fastpath.Peer{}
		add.Add = append(add.Add, p)
		add.Routes = append(add.Routes, fastpath.Route{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 19, 1, byte(i)}), 32), Peer: p})
	}
	if err := d.UpdatePeers(add); err != nil {
		t.Fatal(err)
	}
	d.WaitApplied()
	const down = "route into the exception TUN: the interface is down; installed when it comes up"
	if h.n[down] != maxPrefixWarnings || h.n[down+" (more of the same, not logged one by one)"] != 1 {
		t.Fatalf("lines after the change: %v; the test does not test (the route into a down link must fail)", h.n)
	}
	if got, err := d.restoreMissingRoutes(); err != nil || got != n {
		t.Fatalf("restoreMissingRoutes = %d, %v; want %d", got, err, n)
	}
	if h.n[down] != 2*maxPrefixWarnings || h.n[down+" (more of the same, not logged one by one)"] != 2 {
		t.Errorf("lines after the restore: %v; want %d and 2 counts", h.n, 2*maxPrefixWarnings)
	}
}
