//go:build linux

package fastgw

import (
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/internal/logcap"
)

// routeJob is the route work of one change (UpdatePeers) into the
// exception TUN: the deletes of the routes of the prefixes that left the
// configuration and no longer fit (leave), then the installs of the
// routes of the prefixes that entered it.
type routeJob struct {
	del  []netip.Prefix
	reqs []routeReq
	kept int // leftPrefixes.max, for del's log lines (set by the worker)
}

// routeQueue carries the route work of the changes out of d.mu and the
// control plane's lock (gateway.Device's), which the handshakes, the
// timers and `wg show` need: a set adding 100,000 peers of two prefixes
// each held it for 5-13 s of netlink work on a shared core (README,
// "Large configurations"). One worker goroutine at a time does the jobs
// in the order the changes queued them, so that two changes of one prefix
// (an add, then the delete of a later change) reach the kernel in their
// order; it starts with the first job queued and ends when none is left,
// or at stop. Its fields are guarded by mu.
type routeQueue struct {
	mu      sync.Mutex
	cond    sync.Cond // on mu: done or stopped changed
	jobs    []routeJob
	queued  uint64 // jobs ever queued
	done    uint64 // of those, finished (or dropped at stop)
	running bool   // a worker runs
	stopped bool
	// stopping tells the worker to end after its chunk (stopRoutes).
	stopping atomic.Bool
	wg       sync.WaitGroup
}

// routeChunk is how many routes the worker sends under d.routeMu at a
// time: between chunks it sees stopRoutes, and the restores (which take
// d.routeMu under d.mu) wait for one chunk at most, not a whole change.
const routeChunk = 4096

// queueRoutes queues j for the route worker, starting it if none runs;
// after stopRoutes it drops j (the exception TUN and its routes are going
// away). d.mu held.
func (d *dataplane_) queueRoutes(j routeJob) {
	if len(j.del) == 0 && len(j.reqs) == 0 {
		return
	}
	q := &d.rq
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopped {
		return
	}
	q.jobs = append(q.jobs, j)
	q.queued++
	if !q.running {
		q.running = true
		q.wg.Add(1)
		go d.routeWorker()
	}
}

// routeWorker does the queued jobs in order until none is left or
// stopRoutes.
func (d *dataplane_) routeWorker() {
	q := &d.rq
	defer q.wg.Done()
	for {
		q.mu.Lock()
		if len(q.jobs) == 0 || q.stopped {
			q.running = false
			q.mu.Unlock()
			return
		}
		j := q.jobs[0]
		q.jobs[0] = routeJob{}
		q.jobs = q.jobs[1:]
		q.mu.Unlock()
		if d.routeHook != nil {
			d.routeHook()
		}
		// Under d.mu, so after the change that queued the job has
		// let it go (the LAN map's part of the change, balance,
		// follows the queueing): on a core shared with it, the
		// routes' netlink work does not lengthen the change, and the
		// control plane's lock.
		d.lock()
		j.kept = d.left.max
		d.mu.Unlock()
		d.doRouteJob(j)
		q.mu.Lock()
		if !q.stopped {
			q.done++
		}
		q.cond.Broadcast()
		q.mu.Unlock()
	}
}

// doRouteJob deletes and installs the routes of j, each result logged as
// installRoute and deleteLeft log them (capped per job: maxPrefixWarnings
// lines of a kind and a count), and marks the configured prefixes whose
// key a route of the host's holds (noteTaken).
func (d *dataplane_) doRouteJob(j routeJob) {
	var taken []netip.Prefix
	for del := j.del; len(del) > 0 && !d.rq.stopping.Load(); {
		n := min(len(del), routeChunk)
		d.routeMu.Lock()
		d.deleteLeft(d.rwarn, del[:n], j.kept)
		d.routeMu.Unlock()
		del = del[n:]
	}
	for reqs := j.reqs; len(reqs) > 0 && !d.rq.stopping.Load(); {
		n := min(len(reqs), routeChunk)
		chunk := d.keepHostRoutes(reqs[:n])
		d.routeMu.Lock()
		taken = append(taken, d.routeAll(d.rwarn, chunk)...)
		d.routeMu.Unlock()
		reqs = reqs[n:]
	}
	d.routeMu.Lock()
	d.rwarn.Flush()
	d.routeMu.Unlock()
	if len(taken) == 0 || d.rq.stopping.Load() {
		return
	}
	// Listed outside d.mu: a change (under the control plane's lock)
	// waits for d.mu, not for the dump of the whole table.
	ours, err := d.excRoutes()
	d.lock()
	defer d.mu.Unlock()
	defer d.warn.Flush()
	d.markTaken(taken, ours, err)
}

// keepHostRoutes returns reqs without the replaces of the prefixes found
// since they were queued to be the keys of routes of the host's
// (hostRouted: an earlier job met EEXIST): UpdatePeers asks to replace the
// route of a prefix that comes back to the configuration while it is
// among those that left (its route kept), but a prefix that left and came
// back before the worker reached the job that added it was never ours,
// and the replace would take the host's route (a connected subnet, a
// static route) into the exception TUN. reqs is changed in place. d.mu
// not held (taken for the look-ups).
func (d *dataplane_) keepHostRoutes(reqs []routeReq) []routeReq {
	d.lock()
	defer d.mu.Unlock()
	if d.hostRouted == 0 {
		return reqs
	}
	out := reqs[:0]
	for _, r := range reqs {
		if e := d.entries[r.p]; r.replace && e != nil && e.hostRouted {
			continue
		}
		out = append(out, r)
	}
	return out
}

// deleteLeft deletes the routes into the exception TUN of old, prefixes
// that left the configuration and no longer fit (leave), in batches as
// routeAll installs them, a failure logged to w, the deletions to
// d.leftLog (kept is how many are kept):
// the LAN's traffic to them follows the host's other routes again, as
// after `ip route del PREFIX dev NAME`. d.routeMu held.
func (d *dataplane_) deleteLeft(w *logcap.Log, old []netip.Prefix, kept int) {
	errs := make([]error, len(old))
	if d.rs != nil && len(old) > 1 {
		d.rs.do(routeDelete, old, d.excLink.Attrs().Index, errs)
	} else {
		for i := range errs {
			errs[i] = errNoAck
		}
	}
	for i, p := range old {
		err := errs[i]
		if err == errNoAck {
			err = d.nl.RouteDel(d.excRoute(p))
		}
		// ESRCH: the kernel removed it (the interface went down) or it
		// is another's now (restoreLeft); either way not ours to delete.
		if err != nil && !errors.Is(err, unix.ESRCH) {
			w.Warn("delete the route into the exception TUN of a prefix that left the configuration", "prefix", p, "err", err)
			continue
		}
		d.leftLog.note(d.log, p, kept, time.Now())
	}
}

// WaitApplied waits until the route work of every change UpdatePeers
// returned for before the call is done, the part of a change left to do
// (UpdatePeersLater) first (gateway's dataplaneWaiter): the
// UAPI's sets and Device.AddPeers wait so, after they release the
// control plane's lock, and return once the routes of the prefixes they
// added are in the kernel's table, as when the routes were installed
// under the lock. It returns at once after stopRoutes (the gateway is
// closing: the routes not installed by then are not).
func (d *dataplane_) WaitApplied() {
	d.lock() // the change left to do queues its routes (UpdatePeersLater)
	d.mu.Unlock()
	q := &d.rq
	q.mu.Lock()
	defer q.mu.Unlock()
	for target := q.queued; q.done < target && !q.stopped; {
		q.cond.Wait()
	}
}

// stopRoutes drops the route jobs not begun, releases WaitApplied's
// waiters, and waits for the worker to end its chunk (routeChunk); the
// changes made after it queue no route work. Gateway.Close calls it
// before it closes the device (whose UAPI connections may wait in
// WaitApplied) and the route socket. Safe to call more than once.
func (d *dataplane_) stopRoutes() {
	q := &d.rq
	q.mu.Lock()
	q.stopped = true
	q.stopping.Store(true)
	q.jobs = nil
	q.done = q.queued
	q.cond.Broadcast()
	q.mu.Unlock()
	q.wg.Wait()
}
