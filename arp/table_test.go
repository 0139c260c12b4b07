package arp

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// fakeClock is a settable clock for Config.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type probe struct {
	ip      netip.Addr
	mac     MAC
	unicast bool
}

// recProber records the requests a table makes.
type recProber struct{ probes []probe }

func (p *recProber) Probe(ip netip.Addr, mac MAC, unicast bool) {
	p.probes = append(p.probes, probe{ip, mac, unicast})
}

func newTestTable() (*Table, *fakeClock, *recProber) {
	c := &fakeClock{t: time.Unix(1e9, 0)}
	p := &recProber{}
	t := NewTable(Config{
		ReachableTime: 30 * time.Second, RefreshBefore: 5 * time.Second, RetransTimer: time.Second,
		MaxMulticast: 3, MaxUnicast: 3, StaleTime: 60 * time.Second, FailedTime: 3 * time.Second,
		MaxEntries: 16, Prober: p, Now: c.Now,
	})
	return t, c, p
}

func checkState(t *testing.T, tb *Table, ip netip.Addr, want State) {
	t.Helper()
	if got, _ := tb.State(ip); got != want {
		t.Errorf("State(%v) = %v, want %v", ip, got, want)
	}
}

func TestTableResolveRetriesThenFails(t *testing.T) {
	tb, clk, p := newTestTable()
	if got := tb.Resolve(ip4B); got != StateIncomplete {
		t.Fatalf("Resolve(%v) = %v, want incomplete", ip4B, got)
	}
	tb.Resolve(ip4B) // more frames: no more requests
	if len(p.probes) != 1 || p.probes[0].unicast {
		t.Fatalf("probes after Resolve = %+v, want one broadcast", p.probes)
	}
	// At most one request a second (RetransTimer).
	for _, step := range []struct {
		after  time.Duration
		probes int
		state  State
	}{
		{500 * time.Millisecond, 1, StateIncomplete},
		{500 * time.Millisecond, 2, StateIncomplete},
		{100 * time.Millisecond, 2, StateIncomplete},
		{900 * time.Millisecond, 3, StateIncomplete},
		{time.Second, 3, StateFailed}, // MaxMulticast reached
	} {
		clk.Add(step.after)
		tb.Tick()
		if len(p.probes) != step.probes {
			t.Errorf("after %v: probes = %d, want %d", step.after, len(p.probes), step.probes)
		}
		checkState(t, tb, ip4B, step.state)
	}
	if got := tb.Resolve(ip4B); got != StateFailed {
		t.Errorf("Resolve(failed) = %v, want failed", got)
	}
	if len(p.probes) != 3 {
		t.Errorf("Resolve on a failed entry sent a request: %d probes", len(p.probes))
	}
	clk.Add(3 * time.Second)
	tb.Tick()
	checkState(t, tb, ip4B, StateNone)
	if s := tb.Stats(); s.Failed != 1 || s.Requests != 3 {
		t.Errorf("Stats = %+v, want Failed 1, Requests 3", s)
	}
}

func TestTableConfirmExpireRefresh(t *testing.T) {
	tb, clk, p := newTestTable()
	tb.Resolve(ip4B)
	if _, ok := tb.Lookup(ip4B); ok {
		t.Fatal("Lookup(incomplete) hit")
	}
	tb.Confirm(ip4B, macB)
	if mac, ok := tb.Lookup(ip4B); !ok || mac != macB {
		t.Fatalf("Lookup after Confirm = %v, %v, want %v, true", mac, ok, macB)
	}
	checkState(t, tb, ip4B, StateReachable)
	// Used (the Lookup above): refreshed RefreshBefore ahead of expiry.
	clk.Add(24 * time.Second)
	tb.Tick()
	checkState(t, tb, ip4B, StateReachable)
	clk.Add(time.Second) // 25 s = 30 - 5
	tb.Tick()
	checkState(t, tb, ip4B, StateProbe)
	if last := p.probes[len(p.probes)-1]; !last.unicast || last.mac != macB {
		t.Errorf("refresh probe = %+v, want unicast to %v", last, macB)
	}
	if _, ok := tb.Lookup(ip4B); !ok {
		t.Error("Lookup(probe) missed; a probing entry stays usable")
	}
	tb.Confirm(ip4B, macB)
	checkState(t, tb, ip4B, StateReachable)

	// Not used: expires to stale, still usable, then removed.
	clk.Add(30 * time.Second)
	tb.Tick()
	checkState(t, tb, ip4B, StateStale)
	n := len(p.probes)
	clk.Add(60 * time.Second)
	tb.Tick()
	checkState(t, tb, ip4B, StateNone)
	if len(p.probes) != n {
		t.Errorf("unused stale entry was probed")
	}
	if _, ok := tb.Lookup(ip4B); ok {
		t.Error("Lookup(removed) hit")
	}
}

func TestTableStaleUsedProbesThenFails(t *testing.T) {
	tb, clk, p := newTestTable()
	tb.Learn(ip4B, macB) // a request from B to us: stale
	checkState(t, tb, ip4B, StateStale)
	if len(p.probes) != 0 {
		t.Fatalf("Learn sent requests: %+v", p.probes)
	}
	tb.Tick() // publishes the new entry
	checkState(t, tb, ip4B, StateStale)
	if _, ok := tb.Lookup(ip4B); !ok {
		t.Fatal("Lookup(stale) missed")
	}
	tb.Tick()
	checkState(t, tb, ip4B, StateProbe)
	for i := 0; i < 3; i++ {
		clk.Add(time.Second)
		tb.Tick()
	}
	checkState(t, tb, ip4B, StateFailed)
	if len(p.probes) != 3 {
		t.Errorf("probes = %d, want 3 (MaxUnicast)", len(p.probes))
	}
	if _, ok := tb.Lookup(ip4B); ok {
		t.Error("Lookup(failed) hit")
	}
}

func TestTableLearnDoesNotAbortRequest(t *testing.T) {
	tb, clk, p := newTestTable()
	tb.Resolve(ip4B)
	tb.Learn(ip4B, macB) // B asks for us while our request is out
	checkState(t, tb, ip4B, StateProbe)
	if mac, ok := tb.Lookup(ip4B); !ok || mac != macB {
		t.Errorf("Lookup after Learn = %v, %v, want %v, true", mac, ok, macB)
	}
	clk.Add(time.Second)
	tb.Tick()
	if len(p.probes) != 2 {
		t.Fatalf("probes = %d, want 2: the request goes on after Learn", len(p.probes))
	}
	tb.Confirm(ip4B, macB)
	checkState(t, tb, ip4B, StateReachable)
}

func TestTableRefusesUnaskedAndBounds(t *testing.T) {
	tb, _, _ := newTestTable()
	tb.Confirm(ip4B, macB)
	checkState(t, tb, ip4B, StateNone)
	tb.Learn(ip4B, Broadcast)
	tb.Learn(ip4B, MAC{0x01, 0, 0x5e, 0, 0, 1})
	checkState(t, tb, ip4B, StateNone)
	for i := 0; i < 40; i++ {
		tb.Learn(netip.AddrFrom4([4]byte{198, 18, 1, byte(i)}), macB)
	}
	if tb.Len() != 12 {
		t.Errorf("Len = %d, want 12 (three quarters of MaxEntries)", tb.Len())
	}
	if s := tb.Stats(); s.Ignored != 1 || s.Full != 28 {
		t.Errorf("Stats = %+v, want Ignored 1, Full 28", s)
	}
}

// TestTableLearnFloodLeavesRoom: senders that ask for our address from ever
// new addresses (each learnt) fill three quarters of the table at most, so
// the neighbours the gateway asks for still get entries; once those are
// taken too, a forced collection evicts the learnt entries nobody used
// that are 5 s old, at most once a second, and a used one stays. Before,
// a flood of 70 new senders a second kept every new next hop out (Resolve
// answered StateNone) until the entries aged out after a minute.
func TestTableLearnFloodLeavesRoom(t *testing.T) {
	tb, clk, _ := newTestTable() // MaxEntries 16
	addr := func(a, b byte) netip.Addr { return netip.AddrFrom4([4]byte{198, 18, a, b}) }
	for i := range 40 {
		tb.Learn(addr(1, byte(i)), macB)
	}
	tb.Tick()
	if _, ok := tb.Lookup(addr(1, 0)); !ok { // used: never evicted
		t.Fatal("a learnt entry is not found")
	}
	tb.Tick()
	for i := range 4 {
		if st := tb.Resolve(addr(2, byte(i))); st != StateIncomplete {
			t.Fatalf("Resolve of next hop %d under the flood = %v, want incomplete", i, st)
		}
	}
	if st := tb.Resolve(addr(2, 9)); st != StateNone {
		t.Fatalf("Resolve with every entry young = %v, want none (full)", st)
	}
	clk.Add(6 * time.Second)
	tb.Tick() // the requests fail; the learnt entries stay stale
	if st := tb.Resolve(addr(2, 10)); st != StateIncomplete {
		t.Fatalf("Resolve after 6 s = %v, want incomplete (room made)", st)
	}
	s := tb.Stats()
	if s.Evicted == 0 || tb.Len() > 16 {
		t.Errorf("Stats = %+v, Len %d: want evictions, at most 16 entries", s, tb.Len())
	}
	if st, _ := tb.State(addr(1, 0)); st == StateNone {
		t.Error("the learnt entry in use was evicted")
	}
	// A second collection within the second is not run.
	for i := range 16 {
		tb.Learn(addr(3, byte(i)), macB)
	}
	if got := tb.Stats().Evicted; got != s.Evicted {
		t.Errorf("Evicted %d → %d within one second, want no second collection", s.Evicted, got)
	}
}

func TestTableSetExternal(t *testing.T) {
	tb, clk, p := newTestTable()
	tb.Set(ip6B, macB, StateReachable)
	clk.Add(time.Hour)
	tb.Tick()
	if mac, ok := tb.Lookup(ip6B); !ok || mac != macB {
		t.Errorf("Lookup(external) after an hour = %v, %v, want %v, true", mac, ok, macB)
	}
	tb.Set(ip6B, macB, StateFailed)
	if _, ok := tb.Lookup(ip6B); ok {
		t.Error("Lookup(external failed) hit")
	}
	tb.Delete(ip6B)
	checkState(t, tb, ip6B, StateNone)
	if len(p.probes) != 0 {
		t.Errorf("external entries were probed: %+v", p.probes)
	}
}

// TestTableKernelEntriesUnbounded: the kernel's entries (Set) are never
// refused, however many (the kernel bounds them: gc_thresh3, permanent
// entries), and do not take the room of the table's own: with many more
// than MaxEntries mirrored, a next hop is still resolved and the learnt
// ones keep their three quarters. Before, a mirror past 4,096 kernel
// entries refused the rest (Full), and every LAN host beyond was
// unreachable through the fast path while the kernel forwarded to it.
func TestTableKernelEntriesUnbounded(t *testing.T) {
	tb, _, _ := newTestTable() // MaxEntries 16
	addr := func(a, b byte) netip.Addr { return netip.AddrFrom4([4]byte{198, 18, a, b}) }
	for i := range 100 {
		tb.Set(addr(1, byte(i)), macB, StateReachable)
	}
	tb.Tick() // the burst's snapshot
	for i := range 100 {
		if _, ok := tb.Lookup(addr(1, byte(i))); !ok {
			t.Fatalf("kernel entry %d of 100 not found", i)
		}
	}
	for i := range 40 {
		tb.Learn(addr(2, byte(i)), macB)
	}
	if st := tb.Resolve(addr(3, 1)); st != StateIncomplete {
		t.Errorf("Resolve beside 100 kernel entries = %v, want incomplete", st)
	}
	if got, want := tb.Len(), 100+12+1; got != want {
		t.Errorf("Len = %d, want %d (100 kernel's, 12 learnt, 1 resolved)", got, want)
	}
	if s := tb.Stats(); s.Full != 28 {
		t.Errorf("Full = %d, want 28 (the learnt ones past three quarters of 16)", s.Full)
	}
	// Own entries the kernel's listing makes its own (Set) leave the
	// room they took; deleted, the kernel's leave none behind.
	tb.Set(addr(3, 1), macB, StateReachable)
	for i := range 100 {
		tb.Delete(addr(1, byte(i)))
	}
	if got := tb.Len(); got != 13 {
		t.Errorf("Len after the deletions = %d, want 13", got)
	}
	for i := range 4 {
		if st := tb.Resolve(addr(4, byte(i))); st != StateIncomplete {
			t.Fatalf("Resolve %d after = %v, want incomplete (12 own entries of 16)", i, st)
		}
	}
	if st := tb.Resolve(addr(4, 9)); st != StateNone {
		t.Errorf("Resolve with 16 own entries = %v, want none (full)", st)
	}
}

// TestTableKernelBurstPublishedOnce: a burst of the kernel's changes
// nobody waits for (a listing of thousands of neighbours) costs one
// snapshot, and its entries are found from the next Tick; an entry
// Resolve asked for is published the moment the kernel's answer makes it
// usable, and a usable entry not yet published is published when Resolve
// asks for it. Before, every new or changed entry published a snapshot of
// the whole table: 20,000 new entries took 63 s.
func TestTableKernelBurstPublishedOnce(t *testing.T) {
	tb, clk, _ := newTestTable()
	clk.Add(time.Second)
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}) }
	before := tb.Changes()
	for i := range 5000 {
		tb.Set(addr(i), macB, StateReachable)
	}
	if n := tb.Changes() - before; n > 1 {
		t.Errorf("5,000 new kernel entries published %d snapshots, want 1 at most before the Tick", n)
	}
	tb.Tick()
	for i := range 5000 {
		if _, ok := tb.Lookup(addr(i)); !ok {
			t.Fatalf("kernel entry %d not found after the Tick", i)
		}
	}
	waited := netip.MustParseAddr("198.18.7.7")
	tb.Resolve(waited) // frames wait for it
	tb.Set(waited, macB, StateIncomplete)
	tb.Set(waited, macB, StateReachable)
	if _, ok := tb.Lookup(waited); !ok {
		t.Error("an entry Resolve asked for is not found when the kernel's answer makes it usable")
	}
	other := netip.MustParseAddr("198.18.7.8")
	tb.Set(other, macB, StateReachable) // within minPublishGap: not published yet
	if st := tb.Resolve(other); st != StateReachable {
		t.Fatalf("Resolve(%v) = %v", other, st)
	}
	if _, ok := tb.Lookup(other); !ok {
		t.Error("a usable entry Resolve asked for is not found at once")
	}
}

// TestTablePruneKernel: a listing of the kernel's neighbours deletes the
// mirrored entries it does not hold, and only those.
func TestTablePruneKernel(t *testing.T) {
	tb, _, _ := newTestTable()
	tb.Set(ip4B, macB, StateReachable)
	tb.Set(ip6B, macB, StateStale)
	tb.Resolve(netip.MustParseAddr("198.18.9.9"))
	if n := tb.PruneKernel(map[netip.Addr]struct{}{ip6B: {}}); n != 1 {
		t.Errorf("PruneKernel deleted %d, want 1", n)
	}
	checkState(t, tb, ip4B, StateNone)
	checkState(t, tb, ip6B, StateStale)
	checkState(t, tb, netip.MustParseAddr("198.18.9.9"), StateIncomplete)
	if _, ok := tb.Lookup(ip4B); ok {
		t.Error("the pruned entry is still found")
	}
}

func TestHolder(t *testing.T) {
	tb, clk, _ := newTestTable()
	h := NewHolder[int](tb, 2, 3, 0)
	for i, want := range []bool{true, true, false} { // per neighbour 2
		if got := h.Hold(ip4B, i); got != want {
			t.Errorf("Hold(B, %d) = %v, want %v", i, got, want)
		}
	}
	ipC := netip.MustParseAddr("198.18.0.3")
	if !h.Hold(ipC, 10) {
		t.Error("Hold(C, 10) = false, want true")
	}
	if h.Hold(netip.MustParseAddr("198.18.0.4"), 20) { // per queue 3
		t.Error("Hold past perQueue = true, want false")
	}
	var sent, dropped []int
	send := func(ip netip.Addr, mac MAC, f int) {
		if ip != ip4B || mac != macB {
			t.Errorf("send(%v, %v, %d), want %v at %v", ip, mac, f, ip4B, macB)
		}
		sent = append(sent, f)
	}
	drop := func(f int) { dropped = append(dropped, f) }
	h.Release(send, drop)
	if len(sent)+len(dropped) != 0 || h.Len() != 3 {
		t.Fatalf("Release before resolution: sent %v dropped %v len %d", sent, dropped, h.Len())
	}
	tb.Confirm(ip4B, macB)
	h.Release(send, drop)
	if fmt.Sprint(sent) != "[0 1]" || h.Len() != 1 {
		t.Errorf("Release after Confirm: sent %v, len %d; want [0 1], 1", sent, h.Len())
	}
	clk.Add(3 * time.Second) // MaxMulticast × RetransTimer
	h.Release(send, drop)
	if fmt.Sprint(dropped) != "[10]" || h.Len() != 0 {
		t.Errorf("Release after wait: dropped %v, len %d; want [10], 0", dropped, h.Len())
	}
	if h.Overflow != 2 || h.Expired != 1 || h.Released != 2 || h.Held != 3 {
		t.Errorf("counters = held %d released %d overflow %d expired %d, want 3 2 2 1", h.Held, h.Released, h.Overflow, h.Expired)
	}
	// A failed neighbour is refused at once.
	for i := 0; i < 4; i++ {
		clk.Add(time.Second)
		tb.Tick()
	}
	checkState(t, tb, ipC, StateFailed)
	if h.Hold(ipC, 11) || h.Failed != 1 {
		t.Errorf("Hold(failed) accepted or not counted (Failed %d)", h.Failed)
	}
}

func fillTable(n int) (*Table, []netip.Addr) {
	tb := NewTable(Config{MaxEntries: 2 * n})
	ips := make([]netip.Addr, n)
	for i := range ips {
		ips[i] = netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)})
		if i%2 == 1 {
			ips[i] = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte(i >> 8), 15: byte(i)})
		}
		tb.Learn(ips[i], MAC{2, 0, 0, 0, byte(i >> 8), byte(i)})
	}
	tb.Tick()
	return tb, ips
}

func TestLookupNoAllocs(t *testing.T) {
	tb, ips := fillTable(100)
	h := NewHolder[int](tb, 4, 16, 0)
	h.Hold(ips[3], 1)
	send := func(netip.Addr, MAC, int) {}
	drop := func(int) {}
	allocs := testing.AllocsPerRun(1000, func() {
		if _, ok := tb.Lookup(ips[7]); !ok {
			t.Fatal("miss")
		}
		tb.Lookup(netip.MustParseAddr("198.18.200.1"))
		h.Release(send, drop)
	})
	if allocs != 0 {
		t.Errorf("Lookup/Release allocs = %v, want 0", allocs)
	}
}

func TestLookupAllEntries(t *testing.T) {
	tb, ips := fillTable(1000)
	for i, ip := range ips {
		want := MAC{2, 0, 0, 0, byte(i >> 8), byte(i)}
		if got, ok := tb.Lookup(ip); !ok || got != want {
			t.Fatalf("Lookup(%v) = %v, %v, want %v, true", ip, got, ok, want)
		}
	}
	if _, ok := tb.Lookup(netip.MustParseAddr("::ffff:198.18.0.2")); !ok {
		t.Error("Lookup(IPv4-mapped) missed")
	}
}

// TestLookupConcurrentWithUpdates has readers look up settled entries while
// the owner learns, publishes and deletes others: every reader sees every
// settled entry with its MAC in every snapshot, and a churned address
// either missing or with its MAC, never another. (Under -race it also
// checks the snapshot publication.)
func TestLookupConcurrentWithUpdates(t *testing.T) {
	// A clock that stands still: the used, never confirmed entries would
	// otherwise be probed and fail after a few seconds of a slow run.
	t0 := time.Unix(1_700_000_000, 0)
	tb := NewTable(Config{MaxEntries: 128, Now: func() time.Time { return t0 }})
	ips := make([]netip.Addr, 64)
	for i := range ips {
		ips[i] = netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)})
		if i%2 == 1 {
			ips[i] = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte(i >> 8), 15: byte(i)})
		}
		tb.Learn(ips[i], MAC{2, 0, 0, 0, byte(i >> 8), byte(i)})
	}
	tb.Tick()
	want := make([]MAC, len(ips))
	for i := range ips {
		want[i] = MAC{2, 0, 0, 0, byte(i >> 8), byte(i)}
	}
	churn := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 19, byte(i >> 8), byte(i)}) }
	done := make(chan struct{})
	var wg sync.WaitGroup
	var passes [2]int
	var bad [2]string
	for g := range passes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				for i, ip := range ips {
					if got, ok := tb.Lookup(ip); (!ok || got != want[i]) && bad[g] == "" {
						bad[g] = fmt.Sprintf("Lookup(%v) = %v, %v during updates, want %v, true", ip, got, ok, want[i])
					}
				}
				if got, ok := tb.Lookup(churn(passes[g] % 2000)); ok && got != macB && bad[g] == "" {
					bad[g] = fmt.Sprintf("Lookup(churned %v) = %v, true, want %v or a miss", churn(passes[g]%2000), got, macB)
				}
				passes[g]++
			}
		}()
	}
	for i := 0; i < 2000; i++ {
		ip := churn(i)
		tb.Learn(ip, macB)
		tb.Tick()
		if got, ok := tb.Lookup(ip); !ok || got != macB {
			t.Fatalf("Lookup(%v) after Learn and Tick = %v, %v, want %v, true", ip, got, ok, macB)
		}
		tb.Delete(ip)
	}
	close(done)
	wg.Wait()
	for g := range passes {
		if bad[g] != "" {
			t.Errorf("reader %d: %s", g, bad[g])
		}
	}
	tb.Tick()
	for i, ip := range ips {
		if got, ok := tb.Lookup(ip); !ok || got != want[i] {
			t.Errorf("Lookup(%v) after the updates = %v, %v, want %v, true", ip, got, ok, want[i])
		}
	}
	if _, ok := tb.Lookup(churn(1999)); ok {
		t.Errorf("Lookup(%v) after Delete and Tick found it", churn(1999))
	}
}

// BenchmarkLookup compares the lock-free snapshot with the obvious
// reference, a map behind a sync.RWMutex.
func BenchmarkLookup(b *testing.B) {
	for _, n := range []int{16, 1024} {
		tb, ips := fillTable(n)
		b.Run(fmt.Sprintf("snapshot/%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, ok := tb.Lookup(ips[i&(n-1)]); !ok {
					b.Fatal("miss")
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lookups/s")
		})
		var mu sync.RWMutex
		m := make(map[netip.Addr]MAC)
		for _, ip := range ips {
			m[ip] = macB
		}
		b.Run(fmt.Sprintf("rwmutex-map/%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				mu.RLock()
				_, ok := m[ips[i&(n-1)]]
				mu.RUnlock()
				if !ok {
					b.Fatal("miss")
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lookups/s")
		})
	}
}

// TestSnapshotSpread checks that 4096 addresses of one /64 with sequential
// interface identifiers fill the open-addressed snapshot without long
// clusters.
func TestSnapshotSpread(t *testing.T) {
	tb := NewTable(Config{MaxEntries: 4096})
	for i := 0; i < 4096; i++ {
		tb.Learn(netip.AddrFrom16([16]byte{0x20, 0x01, 0x00, 0x02, 12: byte(i >> 24), 13: byte(i >> 16), 14: byte(i >> 8), 15: byte(i)}), macB)
	}
	tb.Tick()
	s := tb.snap.Load()
	longest, run := 0, 0
	for _, sl := range s.slots {
		if sl.e == nil {
			run = 0
			continue
		}
		run++
		longest = max(longest, run)
	}
	if longest > 64 {
		t.Errorf("longest cluster = %d slots of %d, want ≤ 64", longest, len(s.slots))
	}
}

// TestTableUpdatePublishedAtTick: Table.Update (an announcement anyone on
// the link can send) changes an entry at once but publishes it with the
// next Tick: a flood of announcements with changing MACs builds no
// snapshot each, and Lookup has the last MAC after the Tick. It makes no
// entry for an address the table does not have.
func TestTableUpdatePublishedAtTick(t *testing.T) {
	tb, _, _ := newTestTable()
	tb.Learn(ip4B, macB)
	tb.Tick()
	snap := tb.snap.Load()
	macs := []MAC{{2, 0, 0, 0, 0, 0x0c}, {2, 0, 0, 0, 0, 0x0d}}
	for i := range 1000 {
		if !tb.Update(ip4B, macs[i%2]) {
			t.Fatalf("Update %d: no change", i)
		}
	}
	if tb.snap.Load() != snap {
		t.Error("a snapshot built before the Tick")
	}
	if mac, _ := tb.Lookup(ip4B); mac != macB {
		t.Errorf("Lookup before the Tick = %v, want still %v", mac, macB)
	}
	tb.Tick()
	if mac, ok := tb.Lookup(ip4B); !ok || mac != macs[1] {
		t.Errorf("Lookup after the Tick = %v, %v; want %v", mac, ok, macs[1])
	}
	ip4C := netip.MustParseAddr("198.18.0.77")
	if tb.Update(ip4C, macB) {
		t.Error("Update made an entry")
	}
	checkState(t, tb, ip4C, StateNone)
}

// TestTableLearnChangePublishedAtTick: requests to us whose sender's MAC
// changes each time (anyone on the link can send them) cost a snapshot a
// Tick, not one each; an entry frames wait for is answered at once.
func TestTableLearnChangePublishedAtTick(t *testing.T) {
	tb, _, _ := newTestTable()
	tb.Learn(ip4B, macB)
	tb.Tick()
	snap := tb.snap.Load()
	macs := []MAC{{2, 0, 0, 0, 0, 0x0c}, {2, 0, 0, 0, 0, 0x0d}}
	for i := range 1000 {
		tb.Learn(ip4B, macs[i%2])
	}
	if tb.snap.Load() != snap {
		t.Error("a snapshot built before the Tick")
	}
	tb.Tick()
	if mac, ok := tb.Lookup(ip4B); !ok || mac != macs[1] {
		t.Errorf("Lookup after the Tick = %v, %v; want %v", mac, ok, macs[1])
	}
	ip4C := netip.MustParseAddr("198.18.0.78")
	if s := tb.Resolve(ip4C); s != StateIncomplete {
		t.Fatalf("Resolve = %v, want incomplete", s)
	}
	tb.Learn(ip4C, macB)
	if mac, ok := tb.Lookup(ip4C); !ok || mac != macB {
		t.Errorf("Lookup of an entry frames wait for, after Learn = %v, %v; want %v at once", mac, ok, macB)
	}
}

// TestTableFlipBackWithinTick: a neighbour whose MAC changes and changes
// back within one Tick (a failover and failback; a spoofed request, then
// the host's own) is left at its last MAC, by requests to us (Learn) as by
// announcements (Update). Learn's lock-free shortcut compared the MAC with
// the snapshot, which a change deferred to the Tick had left behind the
// entry: the last MAC matched the stale snapshot and was dropped, and the
// Tick published the other one (a helper counted 6 s of frames to the
// wrong MAC before the entry failed and was resolved again).
func TestTableFlipBackWithinTick(t *testing.T) {
	m1, m2 := MAC{2, 0, 0, 0, 0, 1}, MAC{2, 0, 0, 0, 0, 2}
	for name, learn := range map[string]func(*Table, netip.Addr, MAC){
		"Learn":  (*Table).Learn,
		"Update": func(tb *Table, ip netip.Addr, m MAC) { tb.Update(ip, m) },
	} {
		tb, _, _ := newTestTable()
		tb.Learn(ip4B, m1)
		tb.Tick()
		learn(tb, ip4B, m2)
		learn(tb, ip4B, m1)
		tb.Tick()
		if mac, ok := tb.Lookup(ip4B); !ok || mac != m1 {
			t.Errorf("%s: Lookup after %v, %v and a Tick = %v, %v; want %v", name, m2, m1, mac, ok, m1)
		}
	}
}
