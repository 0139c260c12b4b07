package fastpath

import (
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
)

// newSnapshotEngine is an engine that is never started: its snapshot is
// read directly.
func newSnapshotEngine(t *testing.T) *Engine {
	r := newRig(t, rigConfig{noKeys: true})
	return r.a
}

// TestUpdatePeersMatchesModel applies random changes (peers joining and
// leaving, prefixes set, moved and cleared, in small changes and in large
// ones) and checks after each that the snapshot routes exactly as a plain
// map says, that every peer in the set has a distinct ID below the largest
// set's size, and that an older snapshot still routes as it did
// (successive snapshots share nodes but never change them).
func TestUpdatePeersMatchesModel(t *testing.T) {
	e := newSnapshotEngine(t)
	rng := rand.New(rand.NewPCG(7, 9))
	var peers []*Peer // in the set: the rig's, then ours
	for p := range e.members {
		peers = append(peers, p)
	}
	model := map[netip.Prefix]*Peer{}
	for q, p := range e.routes.Load().t.All() {
		model[q] = p
	}
	pfx := func() netip.Prefix {
		if rng.IntN(3) == 0 {
			var b [16]byte
			b[0], b[1], b[15] = 0xfd, byte(rng.IntN(4)), byte(rng.IntN(64))
			return netip.PrefixFrom(netip.AddrFrom16(b), 120+rng.IntN(9)).Masked()
		}
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(rng.IntN(8)), byte(rng.IntN(256))}), 24+rng.IntN(9)).Masked()
	}
	check := func(rt *routeTable, m map[netip.Prefix]*Peer) {
		t.Helper()
		if rt.t.Size() != len(m) {
			for q, v := range rt.t.All() {
				if m[q] != v {
					t.Errorf("snapshot has %v → %p, model %p", q, v, m[q])
				}
			}
			t.Fatalf("snapshot holds %d prefixes, model %d (peers %d)", rt.t.Size(), len(m), len(peers))
		}
		for p, want := range m {
			if got, ok := rt.t.Get(p); !ok || got != want {
				t.Fatalf("snapshot routes %v to %p, model to %p", p, got, want)
			}
		}
	}
	maxSet := len(peers)
	var oldRT *routeTable
	var oldModel map[netip.Prefix]*Peer
	for round := range 400 {
		var c PeerChange
		// Peers leave with their prefixes.
		for i := 0; i < len(peers) && rng.IntN(8) == 0; i++ {
			k := rng.IntN(len(peers))
			p := peers[k]
			peers = append(peers[:k], peers[k+1:]...)
			c.Remove = append(c.Remove, p)
			for q, o := range model {
				if o == p {
					delete(model, q)
					c.Routes = append(c.Routes, Route{Prefix: q})
				}
			}
		}
		for range rng.IntN(4) {
			p := &Peer{}
			peers = append(peers, p)
			c.Add = append(c.Add, p)
		}
		n := rng.IntN(6)
		if round%50 == 0 {
			n = 2000 // a large change: applied on a copy of the table
		}
		for range n {
			q := pfx()
			if len(peers) == 0 || rng.IntN(4) == 0 {
				delete(model, q)
				c.Routes = append(c.Routes, Route{Prefix: q})
				continue
			}
			p := peers[rng.IntN(len(peers))]
			model[q] = p
			c.Routes = append(c.Routes, Route{Prefix: q, Peer: p})
		}
		if err := e.UpdatePeers(c); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		rt := e.routes.Load()
		check(rt, model)
		maxSet = max(maxSet, len(peers))
		ids := map[int]bool{}
		for _, p := range peers {
			if ids[p.ID] || p.ID >= maxSet {
				t.Fatalf("round %d: peer ID %d given twice or not below %d", round, p.ID, maxSet)
			}
			ids[p.ID] = true
		}
		if oldRT != nil {
			check(oldRT, oldModel) // untouched by the changes after it
		}
		if round%10 == 0 {
			oldRT, oldModel = rt, make(map[netip.Prefix]*Peer, len(model))
			for k, v := range model {
				oldModel[k] = v
			}
		}
	}
}

// TestUpdatePeersRefusesBadChanges: a change that names a peer wrongly is
// refused whole.
func TestUpdatePeersRefusesBadChanges(t *testing.T) {
	e := newSnapshotEngine(t)
	a, b := &Peer{}, &Peer{}
	q := netip.MustParsePrefix("198.18.1.0/24")
	if err := e.UpdatePeers(PeerChange{Add: []*Peer{a}, Routes: []Route{{Prefix: q, Peer: a}}}); err != nil {
		t.Fatal(err)
	}
	before := e.routes.Load()
	for name, c := range map[string]PeerChange{
		"add twice":            {Add: []*Peer{a}},
		"remove a stranger":    {Remove: []*Peer{b}},
		"route to a stranger":  {Routes: []Route{{Prefix: q, Peer: b}}},
		"route to the removed": {Remove: []*Peer{a}, Routes: []Route{{Prefix: q, Peer: a}}},
		"invalid prefix":       {Add: []*Peer{b}, Routes: []Route{{Peer: b}}},
	} {
		if err := e.UpdatePeers(c); err == nil {
			t.Errorf("%s: UpdatePeers = nil, want an error", name)
		}
		if e.routes.Load() != before {
			t.Errorf("%s: the snapshot changed", name)
		}
	}
	if _, ok := e.members[b]; ok {
		t.Error("a refused change left a peer in the set")
	}
}

// TestUpdatePeersConsistentSnapshots: readers loading snapshots while a
// writer moves groups of prefixes between peers, one group per change,
// always find a group whole at one peer: never half moved, never missing.
// Run it with -race.
func TestUpdatePeersConsistentSnapshots(t *testing.T) {
	e := newSnapshotEngine(t)
	const groups, size = 16, 64
	ps := make([]*Peer, 4)
	for i := range ps {
		ps[i] = &Peer{}
	}
	group := func(g int) []netip.Prefix {
		out := make([]netip.Prefix, size)
		for i := range out {
			out[i] = netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(g), byte(i)}), 32)
		}
		return out
	}
	c := PeerChange{Add: ps}
	for g := range groups {
		for _, q := range group(g) {
			c.Routes = append(c.Routes, Route{Prefix: q, Peer: ps[0]})
		}
	}
	if err := e.UpdatePeers(c); err != nil {
		t.Fatal(err)
	}
	changes := 300
	if testing.Short() {
		changes = 100
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var seen atomic.Int64
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(1, 2))
			for !stop.Load() {
				rt := e.routes.Load()
				g := rng.IntN(groups)
				var owner *Peer
				for i, q := range group(g) {
					p, ok := rt.t.Lookup(q.Addr())
					if !ok {
						t.Errorf("group %d: %v has no route in a snapshot", g, q)
						return
					}
					if i == 0 {
						owner = p
					} else if p != owner {
						t.Errorf("group %d half moved in a snapshot", g)
						return
					}
				}
				seen.Add(1)
			}
		}()
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range changes {
		g, to := rng.IntN(groups), ps[rng.IntN(len(ps))]
		var c PeerChange
		for _, q := range group(g) {
			c.Routes = append(c.Routes, Route{Prefix: q, Peer: to})
		}
		if err := e.UpdatePeers(c); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d snapshots checked during %d changes", seen.Load(), changes)
}
