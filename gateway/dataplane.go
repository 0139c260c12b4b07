package gateway

import (
	"time"

	"github.com/wgpio/wgpio/fastpath"
)

// Dataplane is what the control plane needs of the fast path: the
// control-plane side of *fastpath.Engine (see that type for each method's
// contract). Tests supply a fake.
type Dataplane interface {
	// UpdatePeers applies one change of the peer set and the allowed IPs
	// in one atomic swap (fastpath.Engine.UpdatePeers): its cost follows
	// the change's size, not the configuration's. An error after the
	// engine took the change (a full LAN prefix map) leaves the engine
	// with all of it.
	UpdatePeers(c fastpath.PeerChange) error
	// Handshakes delivers received handshake messages (types 1–3).
	Handshakes() <-chan fastpath.HandshakeMessage
	// UnderLoad reports whether the handshake queue is at least 1/8 full.
	UnderLoad() bool
	// Send posts a control packet on a worker's mailbox; it copies the
	// payload and reports false if the mailbox was full, which the
	// device counts (DropMailboxFull), not the dataplane; or if the
	// dataplane is closed, which the device counts DropClosed when the
	// dataplane has a Closed() bool method saying so
	// (fastpath.Engine.Closed), DropMailboxFull otherwise.
	Send(queue int, pkt fastpath.ControlPacket) bool
	// SendWait is Send waiting up to timeout for room in a full mailbox
	// (fastpath.Engine.SendWait); false if the wait ran out, or at once
	// while the worker is stalled (a wait for it ran out before and it has
	// taken no mail since); counted as Send's.
	SendWait(queue int, pkt fastpath.ControlPacket, timeout time.Duration) bool
	// Kick wakes the workers (keypairs or endpoints changed).
	Kick()
	// Now is the dataplane's clock in ns.
	Now() int64
	// Indexes is the receiver-index table.
	Indexes() *fastpath.IndexTable
	// Retire marks an unpublished keypair dead at once and erases its keys
	// once no worker can still be using it (the grace period; see
	// fastpath.Engine.Retire).
	Retire(kp *fastpath.Keypair)
	// Reap erases the keys of retired keypairs whose grace period has
	// ended and returns how many still wait; the device calls it on its
	// tick.
	Reap() (pending int)
}

// laterDataplane is a Dataplane that can leave part of a change to be
// done once the device's lock is released (fastgw: the configuration's
// tables and the LAN map's inserts of a large change, which held the lock
// for 0.3-0.5 s at 100,000 peers). UpdatePeersLater is UpdatePeers that
// does what the workers need (the engine's snapshot swap: they see the
// whole change from its return on) and returns the rest as later (nil:
// nothing left), which does it, if no call of the dataplane's did it
// first, and returns its error, as UpdatePeers would have. The dataplane
// does the parts left in the order of the changes, before any part of a
// later change, whether later is called or not.
type laterDataplane interface {
	UpdatePeersLater(c fastpath.PeerChange) (later func() error, err error)
}

// dataplaneWaiter is a Dataplane that does part of a change after
// UpdatePeers has returned, outside the device's lock, which handshakes,
// timers and `wg show` need (fastgw installs the kernel routes of the new
// prefixes into its exception TUN so: seconds for 100,000 peers).
// WaitApplied waits until that work is done for every change UpdatePeers
// returned for before the call, or dropped because the dataplane is
// closing. The UAPI's set requests and AddPeers call it once they have
// released the lock, so that they return with their change in effect, as
// when all of it was done under the lock.
type dataplaneWaiter interface {
	WaitApplied()
}

// waitApplied waits for the dataplane's work of the changes published so
// far (dataplaneWaiter); d.mu not held.
func (d *Device) waitApplied() {
	if w, ok := d.dp.(dataplaneWaiter); ok {
		w.WaitApplied()
	}
}
