package gateway

import (
	"sync"
	"sync/atomic"
)

// initBatch is how many queued initiations a handshake worker sends before
// it looks at the received messages again.
const initBatch = 16

// handshakePool is the handshake workers' second source of work, beside
// the dataplane's channel of received messages: the peers whose timers
// asked for an initiation (initiateLocked). The timers only decide; the
// two Curve25519 operations of an initiation run on a handshake worker, so
// that a tick that starts thousands of handshakes stays short. A peer is
// queued at most once (peer.initQueued), so the queue never holds more
// than the peers. Before Start (and after Close) async is false and
// initiations are sent inline, as tests that drive Tick by hand expect.
type handshakePool struct {
	async atomic.Bool
	bell  chan struct{} // one token per worker that may find work

	mu    sync.Mutex
	queue []*peer
}

func (q *handshakePool) init(workers int) {
	q.bell = make(chan struct{}, workers)
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

func (q *handshakePool) clear() {
	q.mu.Lock()
	clear(q.queue)
	q.queue = nil
	q.mu.Unlock()
}

// handshakeWorker is one of the pool's goroutines: it processes received
// handshake messages (HandleMessage) and the initiations the timers queued
// until Close. The workers share the dataplane's bounded channel, so its
// fill, which Dataplane.UnderLoad judges, is the pool's backlog.
func (d *Device) handshakeWorker() {
	defer d.wg.Done()
	hs := d.dp.Handshakes()
	var batch [initBatch]*peer
	for {
		select {
		case <-d.done:
			return
		case m, ok := <-hs:
			if !ok {
				hs = nil
				continue
			}
			d.HandleMessage(m)
		case <-d.pool.bell:
			n, more := d.pool.pop(batch[:])
			if more {
				d.pool.ring()
			}
			for _, p := range batch[:n] {
				d.runInitiation(p)
			}
			clear(batch[:n])
		}
	}
}

// runInitiation sends the initiation a timer queued for p, unless p was
// removed or reset since.
func (d *Device) runInitiation(p *peer) {
	d.idMu.RLock()
	defer d.idMu.RUnlock()
	p.mu.Lock()
	if !p.initQueued || p.removed {
		p.mu.Unlock()
		return
	}
	p.initQueued = false
	d.sendInitiationLocked(p, d.now())
	p.mu.Unlock()
	d.touch(p)
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
