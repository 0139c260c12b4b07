//go:build linux

package fastgw

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"

	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/noise"
)

// fakeMap is a LAN prefix map of unlimited size that records its content.
type fakeMap map[netip.Prefix]bool

func (m fakeMap) AddPrefix(p netip.Prefix) error {
	if m[p] {
		return fmt.Errorf("%v added twice", p)
	}
	m[p] = true
	return nil
}

func (m fakeMap) DeletePrefix(p netip.Prefix) error {
	if !m[p] {
		return fmt.Errorf("%v deleted but not there", p)
	}
	delete(m, p)
	return nil
}

type anyMAC struct{}

func (anyMAC) Resolve(netip.Addr) ([6]byte, bool) { return [6]byte{2, 0, 0, 0, 0, 1}, true }

// TestPrefixMapRanks: with more prefixes than the map holds, the map holds
// the first by rank (earlier peers first, each one's prefixes in the order
// they came), a freed slot goes to the best waiting prefix, a prefix of an
// earlier peer takes a slot back from a later one, and only the prefixes
// a change names are touched.
func TestPrefixMapRanks(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) { testPrefixMapRanks(t, batch) })
	}
}

// batchMap is a fakeMap that takes a family's prefixes in one call, as
// *afxdp.Port does (AddPrefixes), each as AddPrefix; it refuses refuse
// (the map full, as the kernel's batch stops at the entry it refuses) and
// records the size of each call.
type batchMap struct {
	fakeMap
	refuse netip.Prefix
	calls  *[]int
	// dels, if not nil, records the size of each DeletePrefixes call.
	dels *[]int
}

// DeletePrefixes deletes a family's prefixes in one call, as *afxdp.Port
// does, each as DeletePrefix: it stops at one not in the map, as the
// kernel's batch does (ENOENT).
func (m batchMap) DeletePrefixes(pfxs []netip.Prefix) (int, error) {
	if m.dels != nil {
		*m.dels = append(*m.dels, len(pfxs))
	}
	for i, p := range pfxs {
		if !m.fakeMap[p] {
			return i, fmt.Errorf("delete prefix %v: %w", p, syscall.ENOENT)
		}
		delete(m.fakeMap, p)
	}
	return len(pfxs), nil
}

func (m batchMap) AddPrefixes(pfxs []netip.Prefix) (int, error) {
	*m.calls = append(*m.calls, len(pfxs))
	for i, p := range pfxs {
		if p == m.refuse {
			return i, fmt.Errorf("add prefix %v: %w", p, syscall.ENOSPC)
		}
		if err := m.AddPrefix(p); err != nil {
			return i, err
		}
	}
	return len(pfxs), nil
}

func testPrefixMapRanks(t *testing.T, batch bool) {
	eng := testEngine(t)
	m := fakeMap{}
	var lan prefixMap = m
	if batch {
		lan = batchMap{fakeMap: m, calls: new([]int)}
	}
	d := newDataplane(eng, lan, 4, slog.New(slog.DiscardHandler), nil)
	pfx := func(i int) netip.Prefix { return netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 19, byte(i), 0}), 24) }
	v6 := netip.MustParsePrefix("2001:db8::/32")
	inMap := func(want ...int) {
		t.Helper()
		var got []int
		for p := range m {
			if p.Addr().Is4() {
				got = append(got, int(p.Addr().As4()[2]))
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) || !m[v6] {
			t.Fatalf("map holds %v (and %v: %v), want %v (and it)", got, v6, m[v6], want)
		}
	}
	pa, pb := &fastpath.Peer{}, &fastpath.Peer{}
	// Peer a: 1, 2 and the IPv6 prefix; peer b: 10..15. Capacity 4 per family.
	c := fastpath.PeerChange{Add: []*fastpath.Peer{pa, pb}}
	for _, i := range []int{1, 2} {
		c.Routes = append(c.Routes, fastpath.Route{Prefix: pfx(i), Peer: pa})
	}
	c.Routes = append(c.Routes, fastpath.Route{Prefix: v6, Peer: pa})
	for i := 10; i < 16; i++ {
		c.Routes = append(c.Routes, fastpath.Route{Prefix: pfx(i), Peer: pb})
	}
	err := d.UpdatePeers(c)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("UpdatePeers with 8 IPv4 prefixes for 4 slots = %v, want ENOSPC", err)
	}
	// No exception TUN: the prefixes left out are not said to reach the
	// tunnel through it (the kernel forwarded a LAN ping to one in
	// cleartext out of the WAN, by a default route).
	if msg := err.Error(); strings.Contains(msg, "exception TUN (slowly)") || !strings.Contains(msg, "cleartext") {
		t.Errorf("the error without an exception TUN: %q, want it to say that the kernel forwards the others by the host's routes", msg)
	}
	inMap(1, 2, 10, 11)
	// a's prefix 2 leaves: b's next takes its slot.
	err = d.UpdatePeers(fastpath.PeerChange{Routes: []fastpath.Route{{Prefix: pfx(2)}}})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("still more than fit: %v, want ENOSPC", err)
	}
	inMap(1, 10, 11, 12)
	// It comes back: a was configured before b, it takes the slot back.
	d.UpdatePeers(fastpath.PeerChange{Routes: []fastpath.Route{{Prefix: pfx(2), Peer: pa}}})
	inMap(1, 2, 10, 11)
	// A prefix moving from b to a ranks as a's newest.
	d.UpdatePeers(fastpath.PeerChange{Routes: []fastpath.Route{{Prefix: pfx(15), Peer: pa}}})
	inMap(1, 2, 10, 15)
	// Peer b leaves with its prefixes: everything fits, no error.
	c = fastpath.PeerChange{Remove: []*fastpath.Peer{pb}}
	for i := 10; i < 15; i++ {
		c.Routes = append(c.Routes, fastpath.Route{Prefix: pfx(i)})
	}
	if err := d.UpdatePeers(c); err != nil {
		t.Fatalf("UpdatePeers that frees the map = %v, want nil", err)
	}
	// Without an exception TUN, b's prefix that was in the map stays
	// there (forget): the engine drops what the LAN sends it.
	inMap(1, 2, 10, 15)
	if len(d.entries) != 4 || d.waiting[0].Len()+d.waiting[1].Len() != 0 || d.keptN[0] != 1 {
		t.Errorf("%d prefixes configured, %d waiting, %d kept; want 4, 0 and 1", len(d.entries), d.waiting[0].Len()+d.waiting[1].Len(), d.keptN[0])
	}
	// A kept prefix that comes back takes its slot as it is (fakeMap
	// fails an add of a prefix it holds).
	if err := d.UpdatePeers(fastpath.PeerChange{Routes: []fastpath.Route{{Prefix: pfx(15)}}}); err != nil {
		t.Fatal(err)
	}
	if err := d.UpdatePeers(fastpath.PeerChange{Routes: []fastpath.Route{{Prefix: pfx(15), Peer: pa}}}); err != nil {
		t.Fatalf("UpdatePeers bringing a kept prefix back = %v, want nil", err)
	}
	inMap(1, 2, 10, 15)
	// A prefix of the configuration takes a kept one's slot.
	if err := d.UpdatePeers(fastpath.PeerChange{Routes: []fastpath.Route{{Prefix: pfx(20), Peer: pa}}}); err != nil {
		t.Fatalf("UpdatePeers for a kept prefix's slot = %v, want nil", err)
	}
	inMap(1, 2, 15, 20)
	if d.keptN[0] != 0 || len(d.kept) != 0 {
		t.Errorf("%d (%d) prefixes kept, want 0", d.keptN[0], len(d.kept))
	}
}

// TestPrefixMapConfigurationOrder: when one change configures more
// prefixes than the map holds (a start-up from a file, a wg setconf), the
// map holds those of the peers listed first, each peer's in the order
// listed (README "Large configurations"), whatever order the control
// plane keeps its change in.
func TestPrefixMapConfigurationOrder(t *testing.T) {
	a, b, err := memport.NewPair(memport.Config{Name: "po", MACA: net.HardwareAddr{2, 0, 0, 0, 9, 1}, MACB: net.HardwareAddr{2, 0, 0, 0, 9, 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer b.Close()
	pfx := func(i int) netip.Prefix { return netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 19, byte(i), 0}), 24) }
	key := func(i int) noise.PublicKey {
		var k noise.PublicKey
		k[0], k[1] = byte(i), 0x5a
		return k
	}
	const capacity, peers = 16, 64
	for _, tc := range []struct {
		name string
		cs   []gateway.PeerConfig
	}{
		{"a prefix per peer", func() (cs []gateway.PeerConfig) {
			for i := range peers {
				cs = append(cs, gateway.PeerConfig{PublicKey: key(i), AllowedIPs: []netip.Prefix{pfx(i)}})
			}
			return cs
		}()},
		{"one peer's prefixes", func() (cs []gateway.PeerConfig) {
			c := gateway.PeerConfig{PublicKey: key(0)}
			for i := range peers {
				c.AllowedIPs = append(c.AllowedIPs, pfx(i))
			}
			return append(cs, c)
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng, err := fastpath.New(fastpath.Config{LAN: a, WAN: b, ListenPort: 51820, WANAddr4: netip.MustParseAddr("198.18.0.1"),
				WANResolver: anyMAC{}, LANResolver: anyMAC{}})
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			m := fakeMap{}
			dev, err := gateway.New(gateway.Options{Dataplane: newDataplane(eng, m, capacity, slog.New(slog.DiscardHandler), nil)})
			if err != nil {
				t.Fatal(err)
			}
			defer dev.Close()
			if err := dev.AddPeers(tc.cs); !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("AddPeers of %d prefixes for %d slots = %v, want ENOSPC", peers, capacity, err)
			}
			var missing []netip.Prefix
			for i := range capacity {
				if !m[pfx(i)] {
					missing = append(missing, pfx(i))
				}
			}
			if len(missing) > 0 || len(m) != capacity {
				t.Errorf("map holds %d prefixes, of the first %d listed not %v", len(m), capacity, missing)
			}
		})
	}
}

// deleteFails is a prefix map whose deletions all fail.
type deleteFails struct{ fakeMap }

func (deleteFails) DeletePrefix(p netip.Prefix) error { return fmt.Errorf("%v: %w", p, syscall.EIO) }

// countHandler counts the records of each message.
type countHandler struct{ n map[string]int }

func (h countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countHandler) Handle(_ context.Context, r slog.Record) error {
	h.n[r.Message]++
	return nil
}
func (h countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countHandler) WithGroup(string) slog.Handler      { return h }

// TestPrefixWarningsCapped: a change whose every prefix fails the same
// way logs maxPrefixWarnings lines and one count, not a line a prefix.
func TestPrefixWarningsCapped(t *testing.T) {
	eng := testEngine(t)
	h := countHandler{n: map[string]int{}}
	d := newDataplane(eng, deleteFails{fakeMap{}}, 1<<20, slog.New(h), nil)
	const n = 1000
	peers := make([]*fastpath.Peer, n)
	add, remove := fastpath.PeerChange{}, fastpath.PeerChange{}
	for i := range peers {
		peers[i] = &fastpath.Peer{}
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 1}), 32)
		add.Add = append(add.Add, peers[i])
		add.Routes = append(add.Routes, fastpath.Route{Prefix: p, Peer: peers[i]})
		remove.Remove = append(remove.Remove, peers[i])
		remove.Routes = append(remove.Routes, fastpath.Route{Prefix: p})
	}
	if err := d.UpdatePeers(add); err != nil {
		t.Fatal(err)
	}
	// The map's deletes are an exception TUN's gateway's (without, forget
	// keeps the prefixes in the map); d.nl is not used by a removal.
	d.excLink = &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Index: 1}}
	d.UpdatePeers(remove)
	want := map[string]int{
		"delete prefix from the LAN XDP map":                                           maxPrefixWarnings,
		"delete prefix from the LAN XDP map (more of the same, not logged one by one)": 1,
	}
	if diff := cmp.Diff(want, h.n); diff != "" {
		t.Errorf("lines logged by message (-want +got):\n%s", diff)
	}
}

// TestPrefixMapBatch: a change's prefixes for free slots go into the map
// in one call per family, in rank order; when the map refuses one (full:
// the kernel's batch stops there), the change fails naming it, the ones
// before it are in the map and it and those after it wait for a slot,
// which a later change gives them.
func TestPrefixMapBatch(t *testing.T) {
	eng := testEngine(t)
	pfx := func(i int) netip.Prefix { return netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 19, byte(i), 0}), 24) }
	m := batchMap{fakeMap: fakeMap{}, refuse: pfx(3), calls: new([]int)}
	d := newDataplane(eng, m, 8, slog.New(slog.DiscardHandler), nil)
	p := &fastpath.Peer{}
	c := fastpath.PeerChange{Add: []*fastpath.Peer{p}}
	for i := 1; i <= 5; i++ {
		c.Routes = append(c.Routes, fastpath.Route{Prefix: pfx(i), Peer: p})
	}
	err := d.UpdatePeers(c)
	if err == nil || !strings.Contains(err.Error(), pfx(3).String()) {
		t.Fatalf("UpdatePeers with the map refusing %v = %v, want an error naming it", pfx(3), err)
	}
	if !slices.Equal(*m.calls, []int{5}) {
		t.Errorf("batch calls %v, want one of 5", *m.calls)
	}
	if len(m.fakeMap) != 2 || !m.fakeMap[pfx(1)] || !m.fakeMap[pfx(2)] {
		t.Errorf("map holds %v, want %v and %v", m.fakeMap, pfx(1), pfx(2))
	}
	for i := 1; i <= 5; i++ {
		if e := d.entries[pfx(i)]; e == nil || e.mapped != (i < 3) {
			t.Errorf("%v: entry %+v, want mapped %v", pfx(i), e, i < 3)
		}
	}
	// The map takes it again: the next change maps the three waiting.
	m.refuse = netip.Prefix{}
	d.lan = m
	if err := d.UpdatePeers(fastpath.PeerChange{Routes: []fastpath.Route{{Prefix: pfx(6), Peer: p}}}); err != nil {
		t.Fatalf("UpdatePeers once the map takes them = %v", err)
	}
	if len(m.fakeMap) != 6 || d.waiting[0].Len() != 0 {
		t.Errorf("map holds %d prefixes with %d waiting, want 6 and 0", len(m.fakeMap), d.waiting[0].Len())
	}
}

// TestPrefixMapBatchDelete: the prefixes a change takes out of the
// configuration leave the map in one call per family (a removal of most
// of a large configuration, Close: one bpf(2) call each made it 200,000
// calls under the device's lock); the kept ones stay, a prefix that left
// comes back in a later change, and one the map lost meanwhile stops the
// batch there, is logged by name, and the others of the change still
// leave the map, one by one.
func TestPrefixMapBatchDelete(t *testing.T) {
	eng := testEngine(t)
	h := countHandler{n: map[string]int{}}
	m := batchMap{fakeMap: fakeMap{}, calls: new([]int), dels: new([]int)}
	d := newDataplane(eng, m, 1<<20, slog.New(h), nil)
	v4 := func(i int) netip.Prefix { return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(i), 1}), 32) }
	v6 := func(i int) netip.Prefix {
		return netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(i)}), 128)
	}
	const n = 100
	peers := make([]*fastpath.Peer, n)
	add := fastpath.PeerChange{}
	for i := range peers {
		peers[i] = &fastpath.Peer{}
		add.Add = append(add.Add, peers[i])
		add.Routes = append(add.Routes, fastpath.Route{Prefix: v4(i), Peer: peers[i]}, fastpath.Route{Prefix: v6(i), Peer: peers[i]})
	}
	if err := d.UpdatePeers(add); err != nil {
		t.Fatal(err)
	}
	// Deletes are an exception TUN's gateway's (without, forget keeps
	// the prefixes in the map); d.nl is not used by a removal.
	d.excLink = &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Index: 1}}
	remove := func(from, to int) fastpath.PeerChange {
		var c fastpath.PeerChange
		for i := from; i < to; i++ {
			c.Remove = append(c.Remove, peers[i])
			c.Routes = append(c.Routes, fastpath.Route{Prefix: v4(i)}, fastpath.Route{Prefix: v6(i)})
		}
		return c
	}
	if err := d.UpdatePeers(remove(0, 80)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(*m.dels, []int{80, 80}) {
		t.Errorf("delete calls %v, want one of 80 per family", *m.dels)
	}
	check := func(gone func(i int) bool) {
		t.Helper()
		for i := range n {
			if m.fakeMap[v4(i)] == gone(i) || m.fakeMap[v6(i)] == gone(i) {
				t.Errorf("peer %d's prefixes in the map: %v, %v; want %v", i, m.fakeMap[v4(i)], m.fakeMap[v6(i)], !gone(i))
			}
		}
		if got := d.inMap[0].Len() + d.inMap[1].Len(); got != len(m.fakeMap) {
			t.Errorf("%d prefixes counted in the map, %d there", got, len(m.fakeMap))
		}
	}
	check(func(i int) bool { return i < 80 })
	// Peer 0's prefixes come back, with a peer of their own (no
	// exception TUN meanwhile: its routes would need d.nl).
	back := &fastpath.Peer{}
	c := fastpath.PeerChange{Add: []*fastpath.Peer{back}, Routes: []fastpath.Route{{Prefix: v4(0), Peer: back}, {Prefix: v6(0), Peer: back}}}
	exc := d.excLink
	d.excLink = nil
	if err := d.UpdatePeers(c); err != nil {
		t.Fatalf("UpdatePeers bringing prefixes back = %v", err)
	}
	d.excLink = exc
	check(func(i int) bool { return i > 0 && i < 80 })
	// The map lost one of the next change's: logged by name, the
	// others leave.
	lost := v4(85)
	delete(m.fakeMap, lost)
	*m.dels = nil
	if err := d.UpdatePeers(remove(80, 90)); err != nil {
		t.Fatal(err)
	}
	check(func(i int) bool { return i > 0 && i < 90 })
	if !slices.Equal(*m.dels, []int{10, 10}) {
		t.Errorf("delete calls %v, want one of 10 per family (the rest of the IPv4 one by one)", *m.dels)
	}
	if got := h.n["delete prefix from the LAN XDP map"]; got != 1 {
		t.Errorf("%d failed deletes logged, want 1 (%v)", got, lost)
	}
}
