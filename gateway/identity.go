package gateway

// The device's static identity: its private key, replaced at run time
// (UAPI private_key=), and the erasure of the identities it replaced.

import (
	"cmp"

	"github.com/wgpio/wgpio/noise"
)

// PublicKey returns the device's static public key (zero without a private
// key).
func (d *Device) PublicKey() noise.PublicKey {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.id == nil {
		return noise.PublicKey{}
	}
	return d.id.PublicKey()
}

// SetPrivateKey replaces the static private key (zero: none). As in
// wireguard-go, every session ends (the peers' keypairs are dropped and
// zeroed; new handshakes follow on demand) and a peer whose public key is the
// new key's own is removed. After Close it does nothing: the device keeps
// no key its Close would not erase.
func (d *Device) SetPrivateKey(k noise.PrivateKey) {
	d.mu.Lock()
	if d.closed() {
		d.mu.Unlock()
		return
	}
	d.setPrivateKeyLocked(k)
	d.publishLocked()
	d.mu.Unlock()
	d.zeroRetired()
}

// setPrivateKeyLocked replaces the identity. The old one may still be in
// use by a handshake worker or Tick (they hold idMu for reading): it is
// zeroed by zeroRetired, which the caller runs once it has released mu.
func (d *Device) setPrivateKeyLocked(k noise.PrivateKey) {
	// Kept clamped (RFC 7748 §5), as wireguard-go keeps it: the same
	// identity (X25519 clamps on use), so that a key set again unclamped
	// (a file's, through a reload or wg syncconf; the UAPI clamps) is
	// the key the device has, and its sessions go on.
	if !k.IsZero() {
		k.Clamp()
	}
	if d.id != nil && d.private.Equal(&k) {
		return
	}
	if d.id != nil {
		d.retiredIDs = append(d.retiredIDs, d.id)
		d.hasRetired.Store(true)
		d.id = nil
	}
	d.private.Zero()
	d.private = k
	if !k.IsZero() {
		d.id = noise.NewStaticIdentityCounting(k, d.clock, &d.noiseStats) // counts across keys (Stats.Noise)
	}
	// Every peer gets a handshake of the new identity below: those
	// waiting for the next publish to be precomputed are of the old one
	// (zeroed). Dropped, so that a set request that changes the key again
	// and again (any length, published once at its end) holds one
	// handshake per peer, not one per peer per private_key line: 266 KB
	// of such lines at 1,000 peers held 3,450,000 of them, 1.6 GB.
	clear(d.precompute)
	d.precompute = d.precompute[:0]
	for _, p := range d.peers.Append(nil) {
		if d.id != nil {
			self := d.id.PublicKey()
			if self.Equal(&p.pub) {
				d.removePeerLocked(p)
				continue
			}
		}
		var hs *noise.Handshake
		if d.id != nil {
			hs = noise.NewHandshake(d.id, p.pub, p.psk)
			d.precompute = append(d.precompute, hs)
		}
		p.mu.Lock()
		d.expireSessionLocked(p)
		// A replay stays refused (§5.4.2): the new handshake takes
		// the peer's timestamps over from the last one, which is kept
		// (zeroed) while the device has no key.
		if old := cmp.Or(p.hs, p.lastHS); old != nil && hs != nil {
			hs.Inherit(old)
		}
		if p.hs != nil {
			p.hs.Zero()
			p.lastHS = p.hs
		}
		if hs != nil {
			p.lastHS = nil
		}
		p.hs = hs
		p.mu.Unlock()
		d.touch(p)
	}
}

// zeroRetired zeroes the identities setPrivateKeyLocked replaced, once no
// handshake worker or tick uses them any more. Called without mu held (a
// worker holding idMu may be waiting for mu to look a peer up).
func (d *Device) zeroRetired() {
	if !d.hasRetired.Load() {
		return
	}
	d.mu.Lock()
	d.hasRetired.Store(false)
	ids := d.retiredIDs
	d.retiredIDs = nil
	d.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	d.idMu.Lock()
	for _, id := range ids {
		id.Zero()
	}
	d.idMu.Unlock()
}
