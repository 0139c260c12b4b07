package allowedips

import (
	"iter"
	"maps"
	"net/netip"

	"golang.zx2c4.com/wireguard/device"
)

// Peers models a wireguard-go device's peers and their allowed IPs
// (masked), each allowed IP one peer's. The zero value has no peer; not
// safe for concurrent use.
type Peers struct {
	peers  map[device.NoisePublicKey]map[netip.Prefix]struct{}
	owners map[netip.Prefix]device.NoisePublicKey
}

// NewPeers returns a Peers with room for about n allowed IPs.
func NewPeers(n int) *Peers {
	return &Peers{peers: make(map[device.NoisePublicKey]map[netip.Prefix]struct{}, n),
		owners: make(map[netip.Prefix]device.NoisePublicKey, n)}
}

// AddPeer creates peer k, without allowed IPs, if it does not exist.
func (m *Peers) AddPeer(k device.NoisePublicKey) {
	if m.peers == nil {
		*m = *NewPeers(0)
	}
	if _, ok := m.peers[k]; !ok {
		m.peers[k] = make(map[netip.Prefix]struct{})
	}
}

// Allow gives p (masked) to peer k, created if need be, taking it from
// the peer that had it.
func (m *Peers) Allow(k device.NoisePublicKey, p netip.Prefix) {
	m.AddPeer(k)
	p = p.Masked()
	if owner, ok := m.owners[p]; ok {
		delete(m.peers[owner], p)
	}
	m.owners[p] = k
	m.peers[k][p] = struct{}{}
}

// Owners maps each allowed IP to its peer: the union of the allowed IPs.
// The map is the model's own: the caller reads it and does not keep it
// past the next change.
func (m *Peers) Owners() map[netip.Prefix]device.NoisePublicKey { return m.owners }

// Peer returns peer k's allowed IPs and whether the peer exists. The map
// is the model's own, as Owners'.
func (m *Peers) Peer(k device.NoisePublicKey) (map[netip.Prefix]struct{}, bool) {
	ps, ok := m.peers[k]
	return ps, ok
}

// All yields each peer and its allowed IPs (the model's own maps, as
// Owners'), in no order.
func (m *Peers) All() iter.Seq2[device.NoisePublicKey, map[netip.Prefix]struct{}] {
	return maps.All(m.peers)
}

// NumPeers is the number of peers.
func (m *Peers) NumPeers() int { return len(m.peers) }

// Follow applies ops, those of a set wireguard-go took whole, to the
// model as wireguard-go's IpcSetOperation applies them to the device
// (device/uapi.go: a private_key removes the peer of its public key,
// device.SetPrivateKey; a public_key line selects or creates the peer;
// update_only on a created peer and remove remove it and leave the rest
// of its section ignored; replace_allowed_ips empties its allowed IPs;
// allowed_ip=p gives p to it, taken from the peer that had it, -p takes p
// from it if it has p) and returns the difference the set made to the
// union of the allowed IPs: add entered it, del left it (each masked,
// disjoint; a prefix moved between peers is in neither). It reports
// false, the model then to be rebuilt (GetWriter), when a peer the set
// names exists in the model but not in the device (exists) or the other
// way round: the device's own public key names a peer wireguard-go
// ignores, or the model has drifted from the device. O(len(ops) + the
// allowed IPs of the peers removed or replaced).
func (m *Peers) Follow(ops []Op, exists func(device.NoisePublicKey) bool) (add, del []netip.Prefix, ok bool) {
	if m.peers == nil {
		*m = *NewPeers(0)
	}
	before := make(map[netip.Prefix]bool) // had an owner before the set
	touch := func(p netip.Prefix) {
		if _, ok := before[p]; !ok {
			_, had := m.owners[p]
			before[p] = had
		}
	}
	drop := func(k device.NoisePublicKey) {
		for p := range m.peers[k] {
			touch(p)
			delete(m.owners, p)
		}
		clear(m.peers[k])
	}
	named := make(map[device.NoisePublicKey]struct{})
	var cur device.NoisePublicKey
	var created, ignored bool
	for _, op := range ops {
		if op.Kind == OpPrivateKey {
			// wireguard-go removes the peer of the key's public key when the
			// key changes; when it does not, no such peer exists (a peer of
			// the device's own public key is ignored), in the model too
			// unless the model drifted, which the check below finds.
			named[op.Peer] = struct{}{}
			if _, ok := m.peers[op.Peer]; ok {
				drop(op.Peer)
				delete(m.peers, op.Peer)
			}
			continue
		}
		if op.Kind == OpPublicKey {
			cur, ignored = op.Peer, false
			named[cur] = struct{}{}
			_, ok := m.peers[cur]
			if created = !ok; created {
				m.peers[cur] = make(map[netip.Prefix]struct{})
			}
			continue
		}
		if ignored {
			continue
		}
		switch op.Kind {
		case OpUpdateOnly, OpRemove:
			if op.Kind == OpUpdateOnly && !created {
				continue
			}
			drop(cur)
			delete(m.peers, cur)
			ignored = true
		case OpReplaceAllowedIPs:
			drop(cur)
		case OpAllowedIP:
			touch(op.Prefix)
			owner, had := m.owners[op.Prefix]
			switch {
			case op.Del && had && owner == cur:
				delete(m.owners, op.Prefix)
				delete(m.peers[cur], op.Prefix)
			case !op.Del:
				if had {
					delete(m.peers[owner], op.Prefix)
				}
				m.owners[op.Prefix] = cur
				m.peers[cur][op.Prefix] = struct{}{}
			}
		}
	}
	for k := range named {
		_, ok := m.peers[k]
		if ok != exists(k) {
			return nil, nil, false
		}
	}
	for p, had := range before {
		_, has := m.owners[p]
		switch {
		case has && !had:
			add = append(add, p)
		case had && !has:
			del = append(del, p)
		}
	}
	return add, del, true
}
