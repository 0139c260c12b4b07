package arp

import (
	"net/netip"
	"time"
)

// The kernel's entries in a Table (shared mode: KernelNeighbours mirrors
// the kernel's neighbour table into it through Set and PruneKernel).

// Set installs ip at mac in state s as an external entry that the table
// does not age or probe: the mirror of a kernel neighbour (shared mode).
// A state that is not usable (incomplete, failed, none) removes ip from
// Lookup; StateNone deletes the entry.
func (t *Table) Set(ip netip.Addr, mac MAC, s State) {
	ip = key(ip)
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entries[ip]
	if s == StateNone {
		if e != nil {
			if e.external {
				t.kernel--
			}
			delete(t.entries, ip)
			t.publishSoon(t.cfg.Now(), false)
		}
		return
	}
	now := t.cfg.Now()
	if e == nil {
		// The kernel bounds its entries (MaxEntries says how): none
		// is refused.
		e = &entry{ip: ip}
		t.entries[ip] = e
	}
	if !e.external {
		t.kernel++
	}
	changed := e.state.usable() != s.usable() || (s.usable() && e.mac != mac)
	waited := e.asked && s.usable()
	e.mac, e.state, e.external, e.since, e.confirmed = mac, s, true, now, now
	if waited {
		e.asked = false
	}
	if changed {
		t.publishSoon(now, waited)
	}
}

// minPublishGap is the least time between two snapshots of the kernel's
// changes that nobody waits for (Set, publishSoon): a snapshot costs the
// whole table (some 0.4 ms at 4,096 entries), and a burst of the kernel's
// notifications (a listing of tens of thousands of neighbours, an `ip
// neigh flush`) published one by one took time quadratic in the table's
// size (20,000 new entries: 63 s of the follower's time; 4,096: 1.6 s).
const minPublishGap = 10 * time.Millisecond

// publishSoon publishes a change of the kernel's entries now when frames
// wait for it (waited: an entry Resolve asked for became usable) or no
// snapshot was published for minPublishGap, else at the next Tick (100
// ms with Run's default; Resolve publishes a usable entry at once). Caller
// holds mu.
func (t *Table) publishSoon(now time.Time, waited bool) {
	if waited || now.Sub(t.lastPublish) >= minPublishGap {
		t.publish()
		t.lastPublish = now
		return
	}
	t.dirty.Store(true)
}

// PruneKernel deletes the kernel's entries (Set) whose addresses listed
// does not hold (keyed as the table keys them: unmapped, no zone): listed
// is a whole listing of the kernel's neighbours that the table mirrors
// (KernelNeighbours' resync). The table's own entries stay. It returns
// how many it deleted.
func (t *Table) PruneKernel(listed map[netip.Addr]struct{}) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for ip, e := range t.entries {
		if _, ok := listed[ip]; !e.external || ok {
			continue
		}
		delete(t.entries, ip)
		t.kernel--
		n++
	}
	if n > 0 {
		t.publish()
	}
	return n
}

// Delete removes ip's entry.
func (t *Table) Delete(ip netip.Addr) { t.Set(ip, MAC{}, StateNone) }
