package gateway

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/internal/uapiserve"
)

// Start runs the handshake pool (Options.HandshakeWorkers goroutines
// receiving Dataplane.Handshakes and sending initiations; pool.go) and the
// timers (Tick every TickInterval on the real clock, in a goroutine of its
// own) and, if Options.Name is set, serves the UAPI socket. It returns an
// error only if the socket cannot be made, or when its first call comes
// after Close (wrapping net.ErrClosed); nothing runs then. Start runs
// once: a later call starts nothing and returns the first call's result
// (nil for a device started before it was closed).
func (d *Device) Start() error {
	d.startOnce.Do(func() {
		errClosed := fmt.Errorf("gateway: start: device closed: %w", net.ErrClosed)
		if d.closed() {
			d.startErr = errClosed
			return
		}
		var l net.Listener
		if d.opts.Name != "" {
			if l, d.startErr = uapiserve.Listen(d.opts.Name); d.startErr != nil {
				d.startErr = fmt.Errorf("gateway: %w", d.startErr)
				return
			}
		}
		// Under mu, Close (which closes done before it takes mu, then
		// closes d.uapi and waits for d.wg) either sees the listener and
		// the goroutines counted, or is seen here: nothing is left
		// running, nor the socket open, on a closed device.
		d.mu.Lock()
		if d.closed() {
			d.mu.Unlock()
			if l != nil {
				l.Close()
			}
			d.startErr = errClosed
			return
		}
		if l != nil {
			d.uapi = l
			d.wg.Add(1)
		}
		d.wg.Add(d.opts.HandshakeWorkers + 1)
		d.mu.Unlock()
		if l != nil {
			go d.serveUAPI(l)
		}
		d.pool.async.Store(true)
		for range d.opts.HandshakeWorkers {
			go d.handshakeWorker()
		}
		go d.tickLoop()
		d.keepalivesAtStart()
	})
	return d.startErr
}

// keepalivesAtStart marks the device started and sends a keepalive to
// every peer with a persistent keepalive, which starts a handshake where
// there is no session: a peer behind NAT that is configured to keep its
// mapping open opens it when the device comes up, not at its first
// packet (wireguard-go's Device.Up and the kernel's wg_open do the
// same).
func (d *Device) keepalivesAtStart() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.started.Store(true)
	now := d.now()
	for _, p := range d.byKey {
		p.mu.Lock()
		on := p.keepalive != 0
		p.mu.Unlock()
		if on {
			d.sendKeepaliveLocked(p, now)
		}
	}
}

// minTickGap is the shortest wait between two ticks of tickLoop: timers
// due closer together than this fire together.
const minTickGap = 5 * time.Millisecond

// minWakeGap is the shortest wait between a tick and one a dataplane's
// wake brings (controlWaker): under a flood of first packets for peers
// without a session the ticks come at most this often, each taking every
// peer the workers listed since the last.
const minWakeGap = time.Millisecond

// controlWaker is the optional side of a Dataplane whose workers say when
// the control plane should tick at once (fastpath.Engine.ControlWake: a
// packet waits for a handshake or a neighbour).
type controlWaker interface {
	ControlWake() <-chan struct{}
}

// tickLoop runs Tick until Close: every TickInterval (when the workers
// publish their stamps), sooner when the timer heap's earliest deadline
// comes first (not sooner than minTickGap after the last tick), so that a
// timer fires within a few ms of its deadline rather than up to a tick
// late, and at once (not sooner than minWakeGap after the last tick) when
// the dataplane's workers wake it (controlWaker), so that the first packet
// for a peer without a session has its initiation sent within a
// millisecond, as Linux's WireGuard and wireguard-go send it when the
// packet is queued, not up to a TickInterval later.
func (d *Device) tickLoop() {
	defer d.wg.Done()
	var wake <-chan struct{}
	if w, ok := d.dp.(controlWaker); ok {
		wake = w.ControlWake()
	}
	t := time.NewTimer(d.opts.TickInterval)
	defer t.Stop()
	last := time.Now()
	next := last.Add(d.opts.TickInterval)
	for {
		select {
		case <-d.done:
			return
		case <-t.C:
		case <-wake:
			if early := last.Add(minWakeGap); time.Now().Before(early) {
				if early.Before(next) {
					next = early
					t.Reset(time.Until(early))
				}
				continue
			}
		}
		now := d.now()
		d.Tick(now)
		d.pool.claim.settle()
		d.replyBufs.expire(time.Now())
		wait := d.opts.TickInterval
		if due, ok := d.nextDeadline(); ok {
			wait = min(wait, max(time.Duration(due-d.now()), minTickGap))
		}
		last = time.Now()
		next = last.Add(wait)
		t.Reset(wait)
	}
}

// Close stops the loops, removes the UAPI socket, and zeroes every key the
// device holds. The received handshake messages still waiting for a
// handshake worker are dropped, counted (DropClosed); those still in the
// dataplane's queue are the dataplane's (fastpath.Engine.Close counts
// them). The dataplane is not closed: the keypairs' keys are erased
// as soon as its workers have passed a batch boundary (Close waits up to
// 100 ms for that, closeReapWait; what is left then goes at the
// dataplane's next Reap or its Close).
func (d *Device) Close() error {
	d.closeOnce.Do(func() {
		close(d.done)
		d.mu.Lock()
		l := d.uapi
		d.mu.Unlock()
		if l != nil {
			l.Close() // serveUAPI closes its connections and returns
		}
		d.wg.Wait()
		d.pool.dropQueued(&d.stats)
		d.pool.claim.release()
		d.pool.async.Store(false)
		d.mu.Lock()
		d.removeAllPeersLocked()
		if d.id != nil {
			d.retiredIDs = append(d.retiredIDs, d.id)
			d.hasRetired.Store(true)
			d.id = nil
		}
		d.private.Zero()
		d.publishLocked()
		d.mu.Unlock()
		d.bg.Wait() // the background precomputation stops at done
		d.zeroRetired()
		d.pool.clear()
		d.touchMu.Lock()
		clear(d.touched)
		d.touched = nil
		d.touchMu.Unlock()
		for end := time.Now().Add(closeReapWait); d.dp.Reap() > 0 && time.Now().Before(end); {
			time.Sleep(time.Millisecond)
		}
		if e, ok := d.dp.(*fastpath.Engine); ok {
			engineDevices.CompareAndDelete(e, d) // a new Device may take it
		}
	})
	return nil
}

// WANAddrs returns the outer source addresses the device gives its peers'
// endpoints (the last SetWANAddrs, or the options'): once they are the new
// ones, every peer's endpoint has moved to them. Safe for concurrent use.
func (d *Device) WANAddrs() (addr4, addr6 netip.Addr) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.opts.WANAddr4, d.opts.WANAddr6
}
