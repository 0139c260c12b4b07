package gateway

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/noise"
	"github.com/wgpio/wgpio/protocol"
)

// DefaultHandshakeBacklog is the default capacity of the handshake pool's
// queue of admitted messages (Options.HandshakeBacklog), as the kernel's
// MAX_QUEUED_INCOMING_HANDSHAKES (4096) twice over: a reconnect storm of
// ten thousand peers, each retrying with its cookie within the same jitter
// window, waits there for its Curve25519 work; from an eighth full the
// device is under load (whitepaper §5.3) and admission answers messages
// without a valid MAC2 with cookie replies instead of queueing them
// (admit). A message that waited longer than
// REKEY_TIMEOUT is dropped unanswered (handshake_stale): its sender has
// sent a new one since, and answering the old one would cost the DH work
// for a response the sender can no longer use.
const DefaultHandshakeBacklog = 8192

// initBatch is how many queued initiations a handshake worker sends before
// it looks at the received messages again.
const initBatch = 16

// handshakePool is the work of the handshake workers: the received
// messages that passed admission (msgs, filled from the dataplane's
// channel by admit; its fill is the backlog the under-load rule judges),
// and the peers whose timers asked for an initiation (initiateLocked). The timers only decide;
// the two Curve25519 operations of an initiation run on a handshake worker,
// so that a tick that starts thousands of handshakes stays short. A peer is
// queued at most once (peer.initQueued), so that queue never holds more
// than the peers. Before Start (and after Close) async is false and
// initiations are sent inline, as tests that drive Tick by hand expect.
type handshakePool struct {
	async atomic.Bool
	bell  chan struct{} // one token per worker that may find work
	msgs  chan fastpath.HandshakeMessage
	peak  atomic.Int64 // the largest backlog of msgs seen

	mu    sync.Mutex
	queue []*peer

	// claim tells the fast path how many Ps the workers keep busy
	// (claim.go).
	claim procClaim
}

func (q *handshakePool) init(workers, backlog int) {
	q.bell = make(chan struct{}, workers)
	q.msgs = make(chan fastpath.HandshakeMessage, backlog)
	q.claim.init(workers)
}

// loaded reports whether the received messages waiting reach an eighth of
// the queue (the kernel's and wireguard-go's "under load" mark), at least
// one: a queue of fewer than 8 places is not under load while empty.
func (q *handshakePool) loaded() bool { return len(q.msgs) >= max(cap(q.msgs)/8, 1) }

// admit screens a received handshake message before it may take a place
// in the pool's queue (screen: no Curve25519 work): a malformed one or one
// with a bad MAC1 is dropped, and under load an initiation or response
// without a valid MAC2 is answered with a cookie reply here and now
// (whitepaper §5.3, §5.4.7), so that the queue holds only work for the
// handshake workers: messages whose sender proved its address, and those
// that came while not under load. A proven message is thus never queued
// behind unproven ones, and a storm's first round costs a cookie reply per
// peer, not a place in the queue. A cookie reply, which costs no
// Curve25519 work either and proves nothing (64 bytes from any source, no
// MAC), is consumed here (consumeOther), as is a message of another type
// dropped: a flood of them never takes the queue's places from proven
// initiations. Under load a proven message is held to its source's rate
// (noise.SourceLimiter) here too, once, so that one source with a cookie
// cannot fill the queue with messages refused later (handleQueued does not
// charge them again). When the queue is full the message is
// dropped (handshake_backlog_full) rather than waited for, so that the
// screening of the messages behind it goes on. The workers screen again
// (the load may have changed; MAC1 and MAC2 cost a BLAKE2s each).
func (d *Device) admit(m fastpath.HandshakeMessage) {
	d.idMu.RLock()
	_, underLoad, ok := d.screen(m, d.now())
	switch {
	case !ok:
	case m.Data[0] != noise.TypeInitiation && m.Data[0] != noise.TypeResponse:
		d.consumeOther(m)
		ok = false
	case underLoad && !d.limiter.Allow(m.Src.Addr()):
		d.stats.drop(DropRateLimited)
		ok = false
	}
	d.idMu.RUnlock()
	if !ok {
		return
	}
	select {
	case d.pool.msgs <- m:
		if n := int64(len(d.pool.msgs)); n > d.pool.peak.Load() {
			d.pool.peak.Store(n)
		}
	default:
		d.stats.drop(DropHandshakeBacklogFull)
	}
}

// push queues p and wakes a worker.
func (q *handshakePool) push(p *peer) {
	q.mu.Lock()
	q.queue = append(q.queue, p)
	q.mu.Unlock()
	q.ring()
}

func (q *handshakePool) ring() {
	select {
	case q.bell <- struct{}{}:
	default:
	}
}

// pop takes up to len(dst) queued peers into dst and reports how many, and
// whether more wait.
func (q *handshakePool) pop(dst []*peer) (n int, more bool) {
	q.mu.Lock()
	n = copy(dst, q.queue)
	rest := copy(q.queue, q.queue[n:])
	clear(q.queue[rest:])
	q.queue = q.queue[:rest]
	if rest == 0 && cap(q.queue) > 4096 {
		q.queue = nil // a storm is over: give its memory back
	}
	q.mu.Unlock()
	return n, rest > 0
}

// backlog is the number of initiations waiting.
func (q *handshakePool) backlog() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue)
}

// dropQueued empties the queue of received messages, counting each
// closed: at Close, once no worker takes from it (nor admits into it).
func (q *handshakePool) dropQueued(c *counters) {
	for {
		select {
		case <-q.msgs:
			c.drop(DropClosed)
		default:
			return
		}
	}
}

func (q *handshakePool) clear() {
	q.mu.Lock()
	clear(q.queue)
	q.queue = nil
	q.mu.Unlock()
}

// handshakeWorker is one of the pool's goroutines, until Close. It takes,
// first, every message waiting in the dataplane's channel (admit: no
// Curve25519 work, so that a storm's unproven messages are answered or
// dropped at the rate they come, by every worker, instead of filling the
// channel), then one message of the pool's queue (HandleMessage) or a
// batch of the initiations the timers queued. It yields the processor
// after each (runtime.Gosched): the workers, one per CPU, would otherwise
// keep every P busy with Curve25519 work for up to the runtime's 10 ms
// preemption slice at a time, and the UAPI, the tick and the dataplane's
// workers (whose locked threads need a P too) would wait behind them. A
// yield with nothing else to run costs well under a microsecond, against
// about a quarter of a millisecond of work per message. The time it
// spends outside its wait for work is what the pool claims of the Ps
// (procClaim).
func (d *Device) handshakeWorker() {
	defer d.wg.Done()
	hs := d.dp.Handshakes()
	var batch [initBatch]*peer
	d.pool.claim.add(1)
	defer d.pool.claim.add(-1)
	for {
		d.intake(hs)
		w, m := d.pool.next(d.done, hs, false)
		if w == workNone {
			d.pool.claim.add(-1)
			w, m = d.pool.next(d.done, hs, true)
			d.pool.claim.add(1)
		}
		switch w {
		case workDone:
			return
		case workClosed:
			hs = nil // a closed channel is never ready again
			continue
		case workAdmit:
			d.admit(m)
		case workMessage:
			if m.Received != 0 && d.now()-m.Received > int64(protocol.RekeyTimeout) {
				d.stats.drop(DropHandshakeStale)
				continue
			}
			d.handleQueued(m)
		case workInitiations:
			n, more := d.pool.pop(batch[:])
			if more {
				d.pool.ring()
			}
			for _, p := range batch[:n] {
				d.runInitiation(p)
				runtime.Gosched()
			}
			clear(batch[:n])
		}
		d.pool.claim.settle()
		runtime.Gosched()
	}
}

// work is what a handshake worker found (handshakePool.next).
type work int

const (
	workNone        work = iota // nothing waits (only without blocking)
	workDone                    // the device is closing
	workClosed                  // the dataplane's channel is closed
	workAdmit                   // a message of the dataplane's channel
	workMessage                 // a message of the pool's queue
	workInitiations             // the bell: initiations are queued
)

// next takes the next piece of work: a message of the dataplane's channel
// hs (to admit), of the pool's queue, or the bell of queued initiations;
// with block it waits for one (or done), without it returns workNone when
// nothing waits.
func (q *handshakePool) next(done <-chan struct{}, hs <-chan fastpath.HandshakeMessage, block bool) (work, fastpath.HandshakeMessage) {
	if !block {
		select {
		case <-done:
			return workDone, fastpath.HandshakeMessage{}
		case m, ok := <-hs:
			if !ok {
				return workClosed, m
			}
			return workAdmit, m
		case m := <-q.msgs:
			return workMessage, m
		case <-q.bell:
			return workInitiations, fastpath.HandshakeMessage{}
		default:
			return workNone, fastpath.HandshakeMessage{}
		}
	}
	select {
	case <-done:
		return workDone, fastpath.HandshakeMessage{}
	case m, ok := <-hs:
		if !ok {
			return workClosed, m
		}
		return workAdmit, m
	case m := <-q.msgs:
		return workMessage, m
	case <-q.bell:
		return workInitiations, fastpath.HandshakeMessage{}
	}
}

// intake admits what waits in the dataplane's channel, without blocking.
func (d *Device) intake(hs <-chan fastpath.HandshakeMessage) {
	for {
		select {
		case m, ok := <-hs:
			if !ok {
				return
			}
			d.admit(m)
		default:
			return
		}
	}
}

// runInitiation sends the initiation a timer queued for p, unless p was
// removed or reset since, and arms its retry from now (the timers do not
// retry an initiation still queued); the message is posted after p's lock and the
// identity's are released, from the source the route toward an endpoint
// not heard from chooses (sendSource, which may ask the kernel), and a
// full mailbox is waited on (sendWait).
func (d *Device) runInitiation(p *peer) {
	d.idMu.RLock()
	p.mu.Lock()
	if !p.initQueued || p.removed {
		p.mu.Unlock()
		d.idMu.RUnlock()
		return
	}
	p.initQueued = false
	var msg [noise.InitiationSize]byte
	now := d.now()
	pkt, ok := d.makeInitiationLocked(p, now, &msg)
	if ok && p.retransmitAt != 0 {
		// The retry and the RekeyTimeout limit count from when the
		// initiation leaves, not from when the timers asked for it
		// (whitepaper §6.1, §6.4): after a wait in a storm's backlog
		// its retry would otherwise follow it at once.
		p.lastInitSent, p.initSent = now, true
		p.retransmitAt = now + int64(protocol.RekeyTimeout) + int64(d.opts.Jitter())
	}
	queue, attempt := p.fp.ID, p.attempts+1
	p.mu.Unlock()
	d.idMu.RUnlock()
	d.touch(p)
	if ok {
		pkt.Src = d.sendSource(p.fp, pkt)
		if d.sendWait(queue, pkt) {
			d.initiationSent(p, attempt)
		}
	}
}

// touch asks the next tick to evaluate p's timers: a handshake worker or
// the UAPI changed its timer state.
func (d *Device) touch(p *peer) {
	if p.touched.Load() || p.touched.Swap(true) {
		return
	}
	d.touchMu.Lock()
	d.touched = append(d.touched, p)
	d.touchMu.Unlock()
}
