package fastpath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/gaissmai/bart"

	"github.com/wgpio/wgpio/header"
)

// routeTable is the immutable allowed-IPs snapshot workers read
// (ARCHITECTURE.md, "Shared state"): published whole behind
// Engine.routes, never written after. Successive snapshots share the
// prefix table's untouched nodes: a change copies only the nodes on the
// paths to the prefixes it touches (bart's persistent operations).
type routeTable struct {
	t   *bart.Table[*Peer]
	own map[netip.Addr]struct{}
	// own4 holds own's IPv4 addresses (big-endian), for ownSource, and
	// own4Bits one bit for each (ownBit): a source whose bit is clear is
	// none of them.
	own4     []uint32
	own4Bits uint64
}

// newRouteTable is an empty snapshot with our own addresses own.
func newRouteTable(own map[netip.Addr]struct{}) *routeTable {
	return withOwn(new(bart.Table[*Peer]), own)
}

// withOwn is the snapshot of the prefix table t with our own addresses
// own.
func withOwn(t *bart.Table[*Peer], own map[netip.Addr]struct{}) *routeTable {
	rt := &routeTable{t: t, own: own}
	for a := range own {
		if a.Is4() {
			b := a.As4()
			rt.own4 = append(rt.own4, binary.BigEndian.Uint32(b[:]))
			var h [16]byte
			copy(h[12:], b[:])
			rt.own4Bits |= 1 << ownBit(h[:])
		}
	}
	return rt
}

// ownSourceScan is how many IPv4 addresses of its own a host may have for
// ownSource to compare a source with each; past it, a map lookup.
const ownSourceScan = 16

// mayOwn reports whether the IP packet p may be from one of the host's own
// IPv4 addresses: false, for all but a few percent of sources when the
// host has a handful of addresses, settles it with a multiply and a
// shift, inlined; true means: ask ownSource.
func (rt *routeTable) mayOwn(p []byte) bool { return rt.own4Bits>>ownBit(p)&1 != 0 }

// isOwn reports whether a is one of our own addresses (the tunnel's, the
// host's and their directed broadcasts). A map lookup: for rare paths.
func (rt *routeTable) isOwn(a netip.Addr) bool {
	_, ok := rt.own[a.Unmap()]
	return ok
}

// ownBit hashes bytes 12-15 of p (an IPv4 source; part of an IPv6 one) to
// a bit of own4Bits.
func ownBit(p []byte) uint32 { return binary.LittleEndian.Uint32(p[12:16]) * 0x9e3779b1 >> 26 }

// ownSource reports whether the IP packet p (header checked) is IPv4 from
// one of the host's own addresses: from the LAN or the tunnel, a packet
// Linux takes for a martian source (fib_validate_source refuses a local
// address as the source of a packet received, accept_local being off),
// and a spoof of the gateway toward the other side. Linux checks no IPv6
// source so, nor does ownSource. Callers ask mayOwn first. A few compares
// for the usual handful of addresses, a map lookup past ownSourceScan.
//
//go:noinline
func (rt *routeTable) ownSource(p []byte) bool {
	if p[0]>>4 != header.IPv4Version {
		return false
	}
	if len(rt.own4) > ownSourceScan {
		_, ok := rt.own[netip.AddrFrom4([4]byte(p[12:16]))]
		return ok
	}
	s := binary.BigEndian.Uint32(p[12:16])
	for _, a := range rt.own4 {
		if a == s {
			return true
		}
	}
	return false
}

// Route gives a prefix of the allowed IPs to a peer (UpdatePeers).
type Route struct {
	Prefix netip.Prefix
	// Peer is the prefix's owner; nil takes the prefix out of the table.
	Peer *Peer
}

// PeerChange is one change of the peer set and the allowed IPs, applied by
// UpdatePeers with one swap of the snapshot: workers see all of it or
// none. Its cost grows with its own size, not the configuration's.
type PeerChange struct {
	// Remove are peers leaving the set (their IDs are freed, and a peer
	// of Add may take one at once). Their prefixes must leave the table
	// or move to other peers in Routes of the same change. Store each
	// one's Removed first, as the gateway does: the workers then drop
	// what they still hold or get for it (peer_removed), and what still
	// names it after a new peer took its ID (a burst of the routes from
	// before, a mailed control packet) keeps off the new peer's state.
	Remove []*Peer
	// Add are peers joining the set; each gets an ID.
	Add []*Peer
	// Routes are applied in order after Remove and Add; every Peer named
	// must be in the set after them.
	Routes []Route
}

// Empty reports whether c changes nothing.
func (c *PeerChange) Empty() bool { return len(c.Remove)+len(c.Add)+len(c.Routes) == 0 }

// cloneAbove decides between the two ways to make the next prefix table:
// a change of up to cloneAbove + size/16 routes is applied with persistent
// operations (each copies the few nodes on its path, microseconds), a
// larger one on a full copy of the table (linear in its size, but
// nanoseconds per insert after).
const cloneAbove = 256

// UpdatePeers applies c: the peers of c.Remove leave the set, those of
// c.Add join it (with new IDs; a peer keeps its ID while it is in the
// set), then c.Routes set or clear the owners of their prefixes; then one
// atomic swap publishes the new snapshot and the workers are woken. It
// checks c first and on an error changes nothing: a peer added twice or
// already in the set (of this engine or another's), one removed that is
// not, an invalid prefix, or a route to a peer that is not in the set
// after the change.
//
// Cost: O(len(c.Remove) + len(c.Add) + len(c.Routes) × trie depth) for a
// small change, whatever the number of peers configured. Safe for
// concurrent use (serialised with SetPeers).
func (e *Engine) UpdatePeers(c PeerChange) error {
	e.peersMu.Lock()
	defer e.peersMu.Unlock()
	if err := e.checkChangeLocked(&c); err != nil {
		return err
	}
	for _, p := range c.Remove {
		e.releaseIDLocked(p)
	}
	for _, p := range c.Add {
		e.assignIDLocked(p)
	}
	old := e.routes.Load()
	t := old.t
	if len(c.Routes) > 0 {
		if len(c.Routes) > cloneAbove+t.Size()/16 {
			t = t.Clone()
			for _, r := range c.Routes {
				if r.Peer == nil {
					t.Delete(r.Prefix)
				} else {
					t.Insert(r.Prefix, r.Peer)
				}
			}
		} else {
			for _, r := range c.Routes {
				if r.Peer == nil {
					t = t.DeletePersist(r.Prefix)
				} else {
					t = t.InsertPersist(r.Prefix, r.Peer)
				}
			}
		}
	}
	e.routes.Store(&routeTable{t: t, own: old.own, own4: old.own4, own4Bits: old.own4Bits})
	e.Kick()
	return nil
}

func (e *Engine) checkChangeLocked(c *PeerChange) error {
	removing := make(map[*Peer]bool, len(c.Remove))
	for _, p := range c.Remove {
		if _, ok := e.members[p]; !ok || removing[p] {
			return errors.New("fastpath: UpdatePeers: a removed peer is not in the set (or removed twice)")
		}
		removing[p] = true
	}
	adding := make(map[*Peer]bool, len(c.Add))
	for _, p := range c.Add {
		if p == nil {
			return errors.New("fastpath: UpdatePeers: a nil peer added")
		}
		if e.elsewhere(p) {
			return fmt.Errorf("fastpath: UpdatePeers: %w", errOtherEngine)
		}
		if _, ok := e.members[p]; (ok && !removing[p]) || adding[p] {
			return errors.New("fastpath: UpdatePeers: an added peer is already in the set (or added twice)")
		}
		adding[p] = true
	}
	for _, r := range c.Routes {
		if !r.Prefix.IsValid() {
			return fmt.Errorf("fastpath: UpdatePeers: invalid prefix %v", r.Prefix)
		}
		if r.Peer == nil || adding[r.Peer] {
			continue
		}
		if _, ok := e.members[r.Peer]; !ok || removing[r.Peer] {
			return fmt.Errorf("fastpath: UpdatePeers: %v routed to a peer not in the set", r.Prefix)
		}
	}
	return nil
}

// assignIDLocked adds p to the set with the most recently freed ID, else
// the next unused one, so that IDs stay below the largest set's size.
func (e *Engine) assignIDLocked(p *Peer) {
	if n := len(e.freeIDs); n > 0 {
		p.ID = e.freeIDs[n-1]
		e.freeIDs = e.freeIDs[:n-1]
	} else {
		p.ID = e.nextID
		e.nextID++
	}
	if p.SrcPorts == 0 {
		p.SrcPorts = max(e.cfg.SourcePorts, 1)
	}
	e.members[p] = struct{}{}
	p.engine.Store(e)
}

func (e *Engine) releaseIDLocked(p *Peer) {
	delete(e.members, p)
	e.freeIDs = append(e.freeIDs, p.ID)
	p.engine.CompareAndSwap(e, nil)
}

// errOtherEngine is the error for a peer joining e while it is in another
// engine's set.
var errOtherEngine = errors.New("a peer is in another engine's set (a Peer joins one engine at a time: remove it there first, or close that engine)")

// elsewhere reports whether p is in another engine's set.
func (e *Engine) elsewhere(p *Peer) bool {
	o := p.engine.Load()
	return o != nil && o != e
}

// SetPeers replaces the set of peers and their allowed IPs (allowed[i] for
// peers[i]) with one atomic swap of the snapshot that workers read. A prefix
// listed for two peers goes to the later one (as in wireguard-go). Peer IDs
// are assigned here; a peer keeps its ID across calls while it is listed.
// It rebuilds the whole prefix table: UpdatePeers changes a part. It
// returns an error, and changes nothing, for lists of different lengths,
// a nil peer, a peer in another engine's set or an invalid prefix.
func (e *Engine) SetPeers(peers []*Peer, allowed [][]netip.Prefix) error {
	if len(allowed) != len(peers) {
		return errors.New("fastpath: SetPeers needs one allowed-IPs list per peer")
	}
	e.peersMu.Lock()
	defer e.peersMu.Unlock()
	keep := make(map[*Peer]bool, len(peers))
	for _, p := range peers {
		if p == nil {
			return errors.New("fastpath: SetPeers: a nil peer")
		}
		if e.elsewhere(p) {
			return fmt.Errorf("fastpath: SetPeers: %w", errOtherEngine)
		}
		keep[p] = true
	}
	for _, list := range allowed {
		for _, pfx := range list {
			if !pfx.IsValid() {
				return fmt.Errorf("fastpath: SetPeers: invalid prefix %v", pfx)
			}
		}
	}
	for p := range e.members {
		if !keep[p] {
			e.releaseIDLocked(p)
		}
	}
	for _, p := range peers {
		if _, ok := e.members[p]; !ok {
			e.assignIDLocked(p)
		}
	}
	rt := newRouteTable(e.routes.Load().own)
	for i, p := range peers {
		for _, pfx := range allowed[i] {
			rt.t.Insert(pfx.Masked(), p)
		}
	}
	e.routes.Store(rt)
	e.Kick()
	return nil
}
