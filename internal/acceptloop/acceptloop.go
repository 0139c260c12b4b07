// Package acceptloop takes connections from a listener for a server that
// must outlive a bad moment: Accept fails for a while when the process
// or the system runs out of file descriptors (EMFILE, ENFILE) or kernel
// memory (ENOBUFS, ENOMEM), and a loop that ended on its first error
// left the gateway's UAPI (`wg show`), stats and capture sockets dead
// until a restart. Accept waits and tries again instead, as net/http's
// server does, and ends only when the listener is closed. Server serves
// a listener's connections with a bound on how many at once, so that a
// client that opens connections without end costs a bounded number of
// goroutines and buffers.
package acceptloop

import (
	"errors"
	"net"
	"os"
	"time"
)

// Delays between failed Accepts: from MinDelay, doubling, at most
// MaxDelay. A descriptor freed is used within MaxDelay, and a listener
// that keeps failing costs one Accept per MaxDelay.
const (
	MinDelay = 5 * time.Millisecond
	MaxDelay = time.Second
)

// Accept returns the next connection of ln. An error other than the
// listener's closing (net.ErrClosed, or os.ErrClosed, which a listener
// built over a file may answer: wireguard-go's UAPI listener answers
// with its closed inotify file's) is given to
// onErr (if not nil) once per run of failures, when the run starts, and
// Accept tries again after a delay; it returns an error only when ln is
// closed, and that error then. Safe for concurrent use as ln.Accept is.
func Accept(ln net.Listener, onErr func(error)) (net.Conn, error) {
	delay := time.Duration(0)
	for {
		c, err := ln.Accept()
		if err == nil {
			return c, nil
		}
		if errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrClosed) {
			return nil, err
		}
		if delay == 0 {
			if onErr != nil {
				onErr(err)
			}
			delay = MinDelay
		} else {
			delay = min(2*delay, MaxDelay)
		}
		time.Sleep(delay)
	}
}

// Retrying returns ln with an Accept that is Accept's: failures are given
// to onErr (if not nil) once per run and tried again, and an error is
// returned only once ln is closed. For a server whose own loop ends at an
// accept error it does not take for temporary: net/http's Server.Serve
// tries EMFILE again but closes its listener and returns at ENOBUFS,
// ENOMEM or EPROTO, which left `/metrics` refusing every scrape until a
// restart. Close and Addr are ln's.
func Retrying(ln net.Listener, onErr func(error)) net.Listener {
	return retrying{ln, onErr}
}

type retrying struct {
	net.Listener
	onErr func(error)
}

func (r retrying) Accept() (net.Conn, error) { return Accept(r.Listener, r.onErr) }
