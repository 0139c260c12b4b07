//go:build linux

package fastgw

import (
	"errors"
	"log/slog"
	"net/netip"
	"syscall"
	"testing"

	"github.com/wgpio/wgpio/fastpath"
)

// host32Routes is a change of n /32s from 10.0.0.0 up, to p.
func host32Routes(n int, p *fastpath.Peer) []fastpath.Route {
	rs := make([]fastpath.Route, n)
	for i := range rs {
		rs[i] = fastpath.Route{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), 32), Peer: p}
	}
	return rs
}

// TestUpdatePeersLater: a change of more than laterAbove routes is in the
// engine when UpdatePeersLater returns (its peer joined the set), its
// prefixes enter the LAN map only in its later part, and that part is
// done before any later change, by whoever comes first: a change that
// removes one of its prefixes finds it (the map ends without it), and
// later returns the part's error (ENOSPC: the map too small) whoever did
// it. Before, all of it was done under the control plane's lock
// (gateway.Device's), 0.3-0.5 s at 100,000 peers.
func TestUpdatePeersLater(t *testing.T) {
	const n = laterAbove + 100
	for _, tc := range []struct {
		name     string
		capacity int
		next     func(d *dataplane_, m fakeMap) // what comes before later
		wantErr  error
		wantMap  int // prefixes in the map at the end
	}{
		{name: "later first", capacity: 1 << 20, wantMap: n},
		{name: "WaitApplied first", capacity: 1 << 20, next: func(d *dataplane_, m fakeMap) {
			d.WaitApplied()
			if len(m) != n {
				t.Errorf("after WaitApplied the LAN map holds %d prefixes, want %d", len(m), n)
			}
		}, wantMap: n},
		{name: "a removal first", capacity: 1 << 20, next: func(d *dataplane_, m fakeMap) {
			first := host32Routes(1, nil)[0]
			if err := d.UpdatePeers(fastpath.PeerChange{Routes: []fastpath.Route{first}}); err != nil {
				t.Errorf("remove %v: %v", first.Prefix, err)
			}
			// Without an exception TUN it stays in the map, kept
			// (forget), out of the configuration.
			if _, kept := d.kept[first.Prefix]; d.entries[first.Prefix] != nil || !kept {
				t.Errorf("%v removed: entry %v, kept %v; want none, kept", first.Prefix, d.entries[first.Prefix], kept)
			}
		}, wantMap: n},
		{name: "map too small", capacity: n - 10, wantErr: syscall.ENOSPC, wantMap: n - 10},
		{name: "map too small, a change first", capacity: n - 10, next: func(d *dataplane_, m fakeMap) {
			d.UpdatePeers(fastpath.PeerChange{})
		}, wantErr: syscall.ENOSPC, wantMap: n - 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng := testEngine(t)
			m := fakeMap{}
			d := newDataplane(eng, m, tc.capacity, slog.New(slog.DiscardHandler), nil)
			pa := &fastpath.Peer{}
			later, err := d.UpdatePeersLater(fastpath.PeerChange{Add: []*fastpath.Peer{pa}, Routes: host32Routes(n, pa)})
			if err != nil || later == nil {
				t.Fatalf("UpdatePeersLater of %d routes = later %v, %v; want a later part, no error", n, later != nil, err)
			}
			if len(m) != 0 {
				t.Errorf("the LAN map holds %d prefixes before the later part, want none", len(m))
			}
			// The engine took the change: pa is in its set.
			if err := eng.UpdatePeers(fastpath.PeerChange{Add: []*fastpath.Peer{pa}}); err == nil {
				t.Errorf("the engine took pa again: it was not in its set after UpdatePeersLater")
			}
			if tc.next != nil {
				tc.next(d, m)
			}
			if err := later(); !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Errorf("later() = %v, want %v", err, tc.wantErr)
			}
			if len(m) != tc.wantMap {
				t.Errorf("the LAN map holds %d prefixes, want %d", len(m), tc.wantMap)
			}
		})
	}
}

// TestUpdatePeersLaterSmall: a change of up to laterAbove routes is done
// whole at once, as before: no later part.
func TestUpdatePeersLaterSmall(t *testing.T) {
	m := fakeMap{}
	d := newDataplane(testEngine(t), m, 1<<20, slog.New(slog.DiscardHandler), nil)
	pa := &fastpath.Peer{}
	later, err := d.UpdatePeersLater(fastpath.PeerChange{Add: []*fastpath.Peer{pa}, Routes: host32Routes(laterAbove, pa)})
	if err != nil || later != nil {
		t.Fatalf("UpdatePeersLater of %d routes = later %v, %v; want none, no error", laterAbove, later != nil, err)
	}
	if len(m) != laterAbove {
		t.Errorf("the LAN map holds %d prefixes, want %d", len(m), laterAbove)
	}
}

// TestUpdatePeersLaterRepeated: a large change that names a prefix more
// than once (fastpath.PeerChange allows it; gateway.Device's changes do
// not) leaves it to the owner of its last route, unmasked prefixes
// masked: cleared last, it leaves the configuration (it was in it
// before); cleared, then given, it stays.
func TestUpdatePeersLaterRepeated(t *testing.T) {
	m := fakeMap{}
	d := newDataplane(testEngine(t), m, 1<<20, slog.New(slog.DiscardHandler), nil)
	pa, pb := &fastpath.Peer{}, &fastpath.Peer{}
	gone := netip.MustParsePrefix("198.19.1.0/24")
	back := netip.MustParsePrefix("198.19.2.0/24")
	if err := d.UpdatePeers(fastpath.PeerChange{Add: []*fastpath.Peer{pa, pb}, Routes: []fastpath.Route{{Prefix: gone, Peer: pa}, {Prefix: back, Peer: pa}}}); err != nil {
		t.Fatal(err)
	}
	rs := append(host32Routes(laterAbove, pa),
		fastpath.Route{Prefix: netip.MustParsePrefix("198.19.1.7/24"), Peer: pb}, // gone, unmasked
		fastpath.Route{Prefix: back}, fastpath.Route{Prefix: back, Peer: pb},
		fastpath.Route{Prefix: gone})
	if err := d.UpdatePeers(fastpath.PeerChange{Routes: rs}); err != nil {
		t.Fatal(err)
	}
	// Without an exception TUN, gone stays in the map, kept (forget).
	if _, kept := d.kept[gone]; d.entries[gone] != nil || !kept {
		t.Errorf("%v cleared last: entry %v, kept %v; want none, kept", gone, d.entries[gone], kept)
	}
	if e := d.entries[back]; e == nil || e.peer != pb || !e.mapped {
		t.Errorf("%v's entry %+v, want pb's, in the map", back, e)
	}
	if len(m) != laterAbove+2 || len(d.entries) != laterAbove+1 {
		t.Errorf("the LAN map holds %d prefixes, the configuration %d; want %d and %d", len(m), len(d.entries), laterAbove+2, laterAbove+1)
	}
}
