package arp

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// State is a neighbour entry's state, in the manner of RFC 4861 §7.3.2
// (used for IPv4 too). DELAY is folded into PROBE: a stale entry that is
// used is probed at once.
type State uint8

// States. Entries in StateReachable, StateStale and StateProbe have a MAC
// and are found by Table.Lookup; the others are not.
const (
	StateNone       State = iota // no entry
	StateIncomplete              // requests sent, no answer yet
	StateReachable               // confirmed within ReachableTime
	StateStale                   // known but not confirmed recently; probed when used
	StateProbe                   // known, unicast requests outstanding to confirm it
	StateFailed                  // no answer after the retries; kept FailedTime as a negative entry
)

var stateNames = [...]string{"none", "incomplete", "reachable", "stale", "probe", "failed"}

// String returns the state's lowercase name.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "state?"
}

// usable reports whether an entry in state s has a MAC that may be used.
func (s State) usable() bool { return s == StateReachable || s == StateStale || s == StateProbe }

// Prober sends a request for a neighbour's link-layer address: an ARP
// request or neighbour solicitation to the broadcast / solicited-node group
// when unicast is false, or straight to mac when unicast is true (a refresh,
// RFC 4861 §7.3.3 PROBE). Owned mode sends frames (see FrameProber); shared
// mode asks the kernel (see KernelProber). It is called from the goroutine
// that calls Table.Tick or Table.Resolve, with the table's lock held: it
// must not call back into the Table and should not block.
type Prober interface {
	Probe(ip netip.Addr, mac MAC, unicast bool)
}

// Config sets a Table's timers and bounds. Zero fields take the defaults
// named on each.
type Config struct {
	// ReachableTime is how long a confirmation lasts (RFC 4861 §10
	// REACHABLE_TIME, default 30 s).
	ReachableTime time.Duration
	// RefreshBefore: an entry used since its last confirmation is probed
	// (unicast) this long before it would turn stale, so that a busy
	// neighbour never drops out of the hot path. Default ReachableTime/5.
	RefreshBefore time.Duration
	// RetransTimer is the least time between two requests for one
	// neighbour (RFC 4861 §10 RETRANS_TIMER, default 1 s).
	RetransTimer time.Duration
	// MaxMulticast is the number of broadcast/multicast requests for an
	// incomplete entry (MAX_MULTICAST_SOLICIT, default 3).
	MaxMulticast int
	// MaxUnicast is the number of unicast probes before a known entry
	// fails (MAX_UNICAST_SOLICIT, default 3).
	MaxUnicast int
	// StaleTime: a stale entry not used for this long is removed
	// (default 60 s).
	StaleTime time.Duration
	// FailedTime: a failed entry is remembered this long, and new frames
	// for it are refused at once (default 3 s).
	FailedTime time.Duration
	// MaxEntries bounds the table's own entries (default 4096): those
	// it resolves (Resolve) and learns (Learn), the kernel's mirrored
	// ones (Set) apart. Learning fills three quarters of it at most: the
	// last quarter is kept for the neighbours the gateway asks for
	// (Resolve), so that senders that ask for our address from ever new
	// addresses cannot keep a new next hop out. A table at its bound
	// evicts, at most once a second, the entries nobody used that are
	// stale or failed and 5 s old or more (Linux's forced collection,
	// neigh_forced_gc, keeps those updated in the last 5 s); what still
	// finds no room is refused and counted (TableStats.Full). The
	// kernel's entries are bounded by the kernel (net.ipv4.neigh.default.
	// gc_thresh3 and IPv6's, beside the permanent entries an operator
	// adds) and never refused: a mirror that refused them past 4,096
	// made every further neighbour of a large LAN (or of peers on the
	// WAN's link) unreachable through the fast path while the kernel,
	// its thresholds raised for such a link, forwarded to them.
	MaxEntries int
	// Prober sends the requests; nil sends none (a table fed only by
	// Set, Learn and Confirm).
	Prober Prober
	// Now is the clock (default time.Now); tests pass a fake one.
	Now func() time.Time
}

func (c *Config) defaults() {
	if c.ReachableTime <= 0 {
		c.ReachableTime = 30 * time.Second
	}
	if c.RefreshBefore <= 0 {
		c.RefreshBefore = c.ReachableTime / 5
	}
	if c.RetransTimer <= 0 {
		c.RetransTimer = time.Second
	}
	if c.MaxMulticast <= 0 {
		c.MaxMulticast = 3
	}
	if c.MaxUnicast <= 0 {
		c.MaxUnicast = 3
	}
	if c.StaleTime <= 0 {
		c.StaleTime = 60 * time.Second
	}
	if c.FailedTime <= 0 {
		c.FailedTime = 3 * time.Second
	}
	if c.MaxEntries <= 0 {
		c.MaxEntries = 4096
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// entry is one neighbour. Fields other than used are guarded by Table.mu.
type entry struct {
	used atomic.Bool // set by Lookup (only when clear), cleared by Tick

	ip        netip.Addr
	mac       MAC
	state     State
	external  bool      // set through Set (kernel mirror): no own aging
	asked     bool      // Resolve asked for it while it was not usable: frames wait
	wasUsed   bool      // used since the last confirmation / since stale
	confirmed time.Time // last confirmation (Reachable)
	since     time.Time // entered the current state
	nextProbe time.Time // earliest time of the next request
	probes    int       // requests sent in the current state
}

// TableStats are a Table's counters.
type TableStats struct {
	Requests  uint64 // requests handed to the Prober
	Failed    uint64 // entries that turned failed
	Full      uint64 // entries refused because the table was full
	Evicted   uint64 // unused stale or failed entries deleted to make room
	Confirmed uint64 // confirmations accepted
	Ignored   uint64 // confirmations for neighbours we did not ask for
}

// Table is a neighbour cache for one interface (or one port: entries are
// keyed by address without zone). Lookup is lock-free and safe for
// concurrent use from any number of queue goroutines; every other method is
// safe for concurrent use and takes a mutex. Tick must be called regularly
// (every 100 ms or so, or use Run) to age entries and send retries. Make one
// with NewTable.
type Table struct {
	snap atomic.Pointer[snapshot]
	cfg  Config
	seed uint64

	mu      sync.Mutex
	entries map[netip.Addr]*entry // guarded by mu
	// kernel counts the entries of entries that are the kernel's
	// (external): MaxEntries bounds the others. Guarded by mu.
	kernel int
	stats  TableStats // guarded by mu
	// dirty says the snapshot is behind the entries, to publish at
	// Tick: written under mu, read without it by learn's shortcut,
	// which must not take a snapshot behind for the entries' state.
	dirty  atomic.Bool
	lastGC time.Time // guarded by mu; the last forced collection (room)
	// lastPublish is when publishSoon last published (guarded by mu).
	lastPublish time.Time
	// published counts the snapshots published (Changes).
	published atomic.Uint64
}

// forcedGCAge is the least age of an entry a forced collection evicts.
const forcedGCAge = 5 * time.Second

// room reports whether one more own entry fits, learnt (Learn: up to three
// quarters of MaxEntries) or asked for (Resolve: all of it), after a
// forced collection when the table is at that bound and none ran in the
// last second: every entry that is not the kernel's (external), not used
// since its last confirmation, and stale or failed for forcedGCAge or
// more, is deleted (counted as Evicted). Caller holds mu.
func (t *Table) room(now time.Time, learn bool) bool {
	limit := t.cfg.MaxEntries
	if learn {
		limit -= limit / 4
	}
	if len(t.entries)-t.kernel < limit {
		return true
	}
	if now.Sub(t.lastGC) < time.Second {
		return false
	}
	t.lastGC = now
	for ip, e := range t.entries {
		if e.external || e.wasUsed || e.used.Load() || e.state != StateStale && e.state != StateFailed || now.Sub(e.since) < forcedGCAge {
			continue
		}
		delete(t.entries, ip)
		t.stats.Evicted++
		t.dirty.Store(true) // out of Lookup at the next Tick (or publish)
	}
	return len(t.entries)-t.kernel < limit
}

// NewTable returns an empty table.
func NewTable(cfg Config) *Table {
	cfg.defaults()
	t := &Table{cfg: cfg, entries: make(map[netip.Addr]*entry), seed: rand.Uint64()}
	t.snap.Store(buildSnapshot(nil, t.seed))
	return t
}

// key drops the zone: a table serves one link.
func key(ip netip.Addr) netip.Addr { return ip.Unmap().WithZone("") }

// Lookup returns the MAC of ip if the table holds a usable entry for it
// (reachable, stale or probe). It takes no lock and allocates nothing: it
// reads the current immutable snapshot. A hit marks the entry used, so that
// Tick refreshes it before it expires (one atomic store per entry per tick,
// not per packet). IPv4-mapped IPv6 addresses are looked up as IPv4; zones
// are ignored.
func (t *Table) Lookup(ip netip.Addr) (MAC, bool) {
	s := t.snap.Load()
	// As16 maps IPv4 to ::ffff:a.b.c.d, the same 16 bytes as the
	// IPv4-mapped form, so no Unmap is needed.
	a := ip.As16()
	hi, lo := binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:])
	for i := s.index(hi, lo); ; i = (i + 1) & s.mask {
		sl := &s.slots[i]
		if sl.e == nil {
			return MAC{}, false
		}
		if sl.hi == hi && sl.lo == lo {
			if !sl.e.used.Load() {
				sl.e.used.Store(true)
			}
			return sl.mac, true
		}
	}
}

// Peek is Lookup without marking the entry used: for a caller that
// sends nothing to ip now, so that the table's Tick does not ask again
// for an entry gone stale on its account. Lock-free.
func (t *Table) Peek(ip netip.Addr) (MAC, bool) {
	s := t.snap.Load()
	a := ip.As16()
	hi, lo := binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:])
	for i := s.index(hi, lo); ; i = (i + 1) & s.mask {
		sl := &s.slots[i]
		if sl.e == nil {
			return MAC{}, false
		}
		if sl.hi == hi && sl.lo == lo {
			return sl.mac, true
		}
	}
}

// State returns the state and MAC of ip's entry (StateNone if there is
// none). Takes the lock; for tests and diagnostics.
func (t *Table) State(ip netip.Addr) (State, MAC) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.entries[key(ip)]; e != nil {
		return e.state, e.mac
	}
	return StateNone, MAC{}
}

// Len returns the number of entries in every state.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.entries)
}

// Stats returns a copy of the counters.
func (t *Table) Stats() TableStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stats
}

// Resolve asks for ip's MAC when the hot path missed: it makes an
// incomplete entry and sends the first request at once. Later requests are
// sent by Tick, at most one per RetransTimer per neighbour and MaxMulticast
// in all, so calling Resolve for every waiting frame costs no extra
// traffic. It returns the entry's state after the call: StateFailed means
// frames for ip should be dropped now; StateNone means the table is full.
func (t *Table) Resolve(ip netip.Addr) State {
	ip = key(ip)
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.entries[ip]; e != nil {
		switch {
		case e.external && !e.state.usable():
			// A kernel entry that is incomplete or failed: ask the
			// kernel again, at most once per RetransTimer.
			e.asked = true
			if now := t.cfg.Now(); !now.Before(e.nextProbe) {
				t.probe(e, now, false)
			}
		case e.state.usable() && t.dirty.Load():
			// Usable, perhaps not published yet (Set's batching): the
			// caller waits for it.
			t.publish()
		}
		return e.state
	}
	now := t.cfg.Now()
	if !t.room(now, false) {
		t.stats.Full++
		return StateNone
	}
	e := &entry{ip: ip, state: StateIncomplete, since: now, asked: true}
	t.entries[ip] = e
	t.probe(e, now, false)
	return e.state
}

// probe sends one request for e and schedules the next. Caller holds mu.
func (t *Table) probe(e *entry, now time.Time, unicast bool) {
	e.probes++
	e.nextProbe = now.Add(t.cfg.RetransTimer)
	if t.cfg.Prober != nil {
		t.stats.Requests++
		t.cfg.Prober.Probe(e.ip, e.mac, unicast)
	}
}

// Confirm records a reachability confirmation of ip at mac: an ARP reply
// or a solicited neighbour advertisement addressed to us (RFC 4861 §7.2.5).
// It only updates an entry that exists (we asked): an unsolicited answer
// for an address we never asked for is counted and ignored, so that
// answers cannot fill the table.
func (t *Table) Confirm(ip netip.Addr, mac MAC) {
	ip = key(ip)
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entries[ip]
	if e == nil || e.external {
		t.stats.Ignored++
		return
	}
	now := t.cfg.Now()
	changed := !e.state.usable() || e.mac != mac
	e.mac, e.state, e.confirmed, e.since, e.probes, e.wasUsed = mac, StateReachable, now, now, 0, false
	e.nextProbe = time.Time{}
	t.stats.Confirmed++
	if changed {
		t.publish()
	}
}

// Learn records that ip is at mac without confirming it: the sender of an
// ARP request or of a neighbour solicitation addressed to us, or an
// unsolicited advertisement (RFC 4861 §7.2.3: create or update as STALE).
// A request outstanding for ip is not aborted: an incomplete entry keeps its
// request count and timer and goes on as PROBE, so the neighbour is still
// confirmed; a probe goes on. Only frames addressed to us should be learnt
// (the Responder checks that); the table bounds the entries it creates. A
// new entry, and a new MAC for an entry Lookup already answers, show in
// Lookup from the next Tick (100 ms with Run's default), so that a flood
// of requests whose sender's MAC changes each time costs a snapshot a
// Tick, not one each; an entry frames wait for (incomplete, failed) is
// answered at once.
func (t *Table) Learn(ip netip.Addr, mac MAC) { t.learn(ip, mac, true) }

// Update is Learn for an entry the table has, and makes none: what an
// announcement of a neighbour's not addressed to us teaches, an ARP
// frame's sender (RFC 826's merge: a gratuitous ARP, RFC 5227 §3) or an
// unsolicited advertisement with the Override flag (RFC 4861 §7.2.5,
// §7.2.6), as Linux's neighbour table updates an entry from them: a
// next hop or host that moved to another MAC (a router replaced, a VRRP
// failover) is used at its new MAC, as STALE, from the next Tick (100
// ms with Run's default), where it was reached again only after its
// entry failed. It reports whether the entry changed. Anyone on the link
// can send such a frame, as to Linux: a flood of them costs a snapshot a
// Tick, not one each.
func (t *Table) Update(ip netip.Addr, mac MAC) bool { return t.learn(ip, mac, false) }

// learn is Learn (create) or Update; it reports whether an entry changed
// or was made.
func (t *Table) learn(ip netip.Addr, mac MAC, create bool) bool {
	if mac.IsMulticast() || mac.IsZero() {
		return false
	}
	ip = key(ip)
	// Fast path without the lock: a usable entry with the same MAC is
	// left as it is in every state, so a busy neighbour's requests cost
	// no lock. Not while a change waits for the Tick (dirty): the
	// snapshot may still hold the MAC the entry had before it, and a
	// neighbour that went back to that MAC within the Tick (a failover
	// and failback, or a spoofed request followed by the host's own)
	// would be left at the other.
	if !t.dirty.Load() {
		if m, ok := t.Peek(ip); ok && m == mac {
			return false
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.cfg.Now()
	e := t.entries[ip]
	if e == nil {
		if !create {
			return false
		}
		if !t.room(now, true) {
			t.stats.Full++
			return false
		}
		e = &entry{ip: ip, mac: mac, state: StateStale, since: now}
		t.entries[ip] = e
		// Nobody waits for a neighbour we did not ask for: publish
		// it with the next Tick, so that a burst of new neighbours
		// costs one snapshot, not one each.
		t.dirty.Store(true)
		return true
	}
	if e.external {
		return false
	}
	waited := !e.state.usable() // frames are held or dropped for want of it
	switch e.state {
	case StateIncomplete:
		e.mac, e.state = mac, StateProbe // keep probes and nextProbe
	case StateProbe:
		if e.mac == mac {
			return false
		}
		e.mac = mac
	default:
		if e.mac == mac && e.state != StateFailed {
			return false
		}
		e.mac, e.state, e.since, e.wasUsed, e.probes = mac, StateStale, now, false, 0
	}
	if !create || !waited {
		// An announcement, or a request to us, that anyone on the
		// link can send: a new MAC for an entry in use is published
		// with the next Tick, so that a flood of them, each with
		// another MAC, costs a snapshot a Tick, not one each.
		t.dirty.Store(true)
		return true
	}
	t.publish() // frames wait for this entry (incomplete, failed)
	return true
}

// Tick ages the entries and sends the requests that are due: retries for
// incomplete entries (then FAILED), unicast refreshes for used entries near
// expiry and for used stale entries (PROBE, then FAILED), expiry of
// reachable entries to STALE, and removal of unused stale and old failed
// entries. Call it every 100 ms or so from one goroutine (see Run).
func (t *Table) Tick() {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.cfg.Now()
	changed := false
	for ip, e := range t.entries {
		if e.used.Load() {
			e.used.Store(false)
			e.wasUsed = true
		}
		if e.external {
			// The kernel ages its own entries; a stale one that is
			// in use here is refreshed by asking the kernel to
			// probe it (shared mode has no traffic of its own
			// through the kernel to do so).
			if e.state == StateStale && e.wasUsed && !now.Before(e.nextProbe) {
				e.wasUsed = false
				t.probe(e, now, true)
			}
			continue
		}
		switch e.state {
		case StateIncomplete:
			if now.Before(e.nextProbe) {
				break
			}
			if e.probes < t.cfg.MaxMulticast {
				t.probe(e, now, false)
				break
			}
			e.state, e.since = StateFailed, now
			t.stats.Failed++
		case StateReachable:
			expiry := e.confirmed.Add(t.cfg.ReachableTime)
			if !now.Before(expiry) {
				e.state, e.since, e.wasUsed, e.probes = StateStale, now, false, 0
				break
			}
			if e.wasUsed && !now.Before(expiry.Add(-t.cfg.RefreshBefore)) {
				e.state, e.since, e.probes = StateProbe, now, 0
				t.probe(e, now, true)
			}
		case StateStale:
			if e.wasUsed {
				e.state, e.since, e.probes = StateProbe, now, 0
				t.probe(e, now, true)
				break
			}
			if now.Sub(e.since) >= t.cfg.StaleTime {
				delete(t.entries, ip)
				changed = true
			}
		case StateProbe:
			if now.Before(e.nextProbe) {
				break
			}
			if e.probes < t.cfg.MaxUnicast {
				t.probe(e, now, true)
				break
			}
			e.state, e.since = StateFailed, now
			t.stats.Failed++
			changed = true
		case StateFailed:
			if now.Sub(e.since) >= t.cfg.FailedTime {
				delete(t.entries, ip)
			}
		}
	}
	if changed || t.dirty.Load() {
		t.publish()
	}
}

// Run calls Tick every interval (100 ms if 0) until done is closed.
func (t *Table) Run(done <-chan struct{}, interval time.Duration) {
	if interval <= 0 {
		interval = 100 * time.Millisecond
	}
	tk := time.NewTicker(interval)
	defer tk.Stop()
	for {
		select {
		case <-done:
			return
		case <-tk.C:
			t.Tick()
		}
	}
}

// publish builds and swaps in a new snapshot. Caller holds mu.
func (t *Table) publish() {
	t.snap.Store(buildSnapshot(t.entries, t.seed))
	t.dirty.Store(false)
	t.published.Add(1)
}

// Changes counts the snapshots published: it grows whenever what Lookup
// answers may have changed (an entry became usable or unusable, changed
// its MAC, or went), and not for a retry of a neighbour that stays
// unresolved, so that a caller backing off between lookups of an
// unresolved address (gateway's followNeighbourLocked) can look again at
// once when it moves. Safe for concurrent use.
func (t *Table) Changes() uint64 { return t.published.Load() }

// snapshot is an immutable open-addressed hash table of the usable
// entries: power-of-two slots, at most half full, linear probing. It is
// never written after it is published.
type snapshot struct {
	mask  uint64
	seed  uint64 // the table's random seed
	shift uint8  // 64 - log2(len(slots))
	slots []slot
}

// index is the home slot of an address: a seeded multiply-xorshift mix
// whose top bits select the slot (Fibonacci hashing, Knuth TAOCP vol. 3
// §6.4). The random seed keeps neighbours that choose their addresses
// (any IPv6 host picks its interface identifier) from steering entries
// into one cluster and slowing every lookup.
func (s *snapshot) index(hi, lo uint64) uint64 {
	h := (hi ^ s.seed) * 0x9e3779b97f4a7c15
	h ^= lo
	h ^= h >> 32
	h *= 0xd6e8feb86659fd93
	return h >> s.shift
}

type slot struct {
	hi, lo uint64 // the address as 16 bytes, big-endian halves
	mac    MAC
	e      *entry // nil: empty slot
}

func buildSnapshot(entries map[netip.Addr]*entry, seed uint64) *snapshot {
	n := 0
	for _, e := range entries {
		if e.state.usable() {
			n++
		}
	}
	size, bits := 8, uint8(3)
	for size < 2*n {
		size <<= 1
		bits++
	}
	s := &snapshot{mask: uint64(size - 1), seed: seed, shift: 64 - bits, slots: make([]slot, size)}
	for ip, e := range entries {
		if !e.state.usable() {
			continue
		}
		a := ip.As16()
		hi, lo := binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:])
		i := s.index(hi, lo)
		for s.slots[i].e != nil {
			i = (i + 1) & s.mask
		}
		s.slots[i] = slot{hi: hi, lo: lo, mac: e.mac, e: e}
	}
	return s
}
