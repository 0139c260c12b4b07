//go:build linux

package nldump

import (
	"errors"
	"time"

	"github.com/vishvananda/netlink"
)

// Tries is how many times Retry runs a dump at most: a table that changes
// at every dump is read as the last try left it (with
// netlink.ErrDumpInterrupted).
const Tries = 16

// Retry returns dump's result, running it again while it fails with
// netlink.ErrDumpInterrupted, at most Tries times in all (then the last
// result and its error). Any other error is returned at once. The caller
// decides what an interrupted last result is worth; a follower tries
// again later.
func Retry[T any](dump func() (T, error)) (T, error) {
	var (
		v   T
		err error
	)
	for range Tries {
		v, err = dump()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return v, err
		}
	}
	return v, err
}

// A follower tries a failed re-read again after AgainDelay, doubling up
// to AgainMaxDelay while it keeps failing.
const (
	AgainDelay    = 100 * time.Millisecond
	AgainMaxDelay = 5 * time.Second
)

// Again is a follower's timer for trying its failed re-reads again (an
// interface's addresses, a routing table: Retry's errors once its tries
// ran out, or an error of the kernel, ENOBUFS, ENOMEM). A follower
// re-reads when a notification says something changed; a re-read that
// failed and was dropped left what it was for (an address change, a
// route the kernel flushed) unapplied until some other change came. The
// zero value has none due. Not safe for concurrent use: one follower's.
type Again struct {
	// C fires when a try is due; nil when none is.
	C     <-chan time.Time
	delay time.Duration
}

// After records the outcome of the re-reads just made: when one failed,
// it arms C for the next try (AgainDelay, then twice the last delay, at
// most AgainMaxDelay), unless a try is due already; when none failed, it
// disarms C and the next failure waits AgainDelay again.
func (a *Again) After(failed bool) {
	if !failed {
		a.C, a.delay = nil, 0
		return
	}
	if a.C != nil {
		return
	}
	a.delay = min(max(2*a.delay, AgainDelay), AgainMaxDelay)
	a.C = time.After(a.delay)
}

// Fired records that C fired: the follower re-reads what failed now.
func (a *Again) Fired() { a.C = nil }
