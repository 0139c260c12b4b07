package fastpath

import "time"

// SendWait is Send for a control packet that cost the sender real work (a
// handshake response is four Curve25519 operations): when the mailbox of
// queue (modulo the number of workers, as in Send) is full it waits for
// room, up to timeout, instead of refusing at once. It copies pkt.Payload
// and returns false only if the mailbox stayed full for timeout,
// uncounted, as Send: the caller counts it (gateway's mailbox_full). The
// caller blocks meanwhile, so it must hold no lock the worker or other
// senders need; a worker drains its mailbox every turn, so a full mailbox
// means the worker is behind, not asleep.
//
// A wait that runs out marks the worker stalled: until it takes mail from
// its mailbox again, SendWait to it refuses at once when the mailbox is
// full, as Send does, instead of waiting. A worker that does not
// run for a while (descheduled, or stuck) so costs each handshake worker
// one wait of timeout, not one per message for its queue, and the
// handshakes for the other workers' queues go on. After Close it returns
// false at once, as Send does. Safe for concurrent use.
func (e *Engine) SendWait(queue int, pkt ControlPacket, timeout time.Duration) bool {
	if e.closing.Load() {
		return false // no worker would take it (uncounted)
	}
	w := e.workers[uint(queue)%uint(len(e.workers))]
	m := mail{ctl: pkt}
	m.ctl.Payload = append([]byte(nil), pkt.Payload...)
	select {
	case w.mailbox <- m:
		w.waiter.Ring()
		return true
	default:
	}
	w.waiter.Ring() // the worker may be parked behind a burst of senders
	if w.stalled.Load() {
		return false
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case w.mailbox <- m:
		w.waiter.Ring()
		return true
	case <-t.C:
		w.stalled.Store(true)
		return false
	}
}
