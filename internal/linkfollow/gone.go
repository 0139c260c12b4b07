//go:build linux

package linkfollow

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
)

// GoneError is a gateway's failure when an interface it runs on was
// deleted (or moved to another namespace) while it ran (Config.OnGone):
// the gateway keeps running but nothing crosses through that interface,
// and one of the same name created again is a new interface (a new
// index) that its sockets, XDP program and followers are not on.
type GoneError struct {
	// What names the interface's role: "WAN interface", "LAN VLAN
	// device", "exception TUN".
	What string
	// Name is its name as last seen ("" if unknown); Index its index.
	Name  string
	Index int
}

func (e *GoneError) Error() string {
	return fmt.Sprintf("%s %s was deleted (or moved to another network namespace) while the gateway ran", e.What, e.name())
}

// name is the interface's name, or "of index N" when unknown.
func (e *GoneError) name() string {
	if e.Name == "" {
		return fmt.Sprintf("of index %d", e.Index)
	}
	return e.Name
}

// Restart is the end of a gateway's log line for an interface deleted
// (Failure.Gone's meaning) that a restart takes again once it is back.
const Restart = "stopping so that the service restarts the gateway, which refuses to start (no interface of that name) until the interface is back"

// PortGone is the meaning (Failure.Gone) of the deletion of the interface
// of a gateway's side named what ("WAN", "LAN") that its AF_XDP port is
// open on.
func PortGone(what string) string {
	return "the gateway's " + what + " AF_XDP sockets and XDP program were on it, so nothing crosses it, and an interface of that name created again is a new one they are not on; " + Restart
}

// Failure is a running gateway's failure: the first error Report gets
// (the gateway's interface deleted) is sent once on the channel C
// returns, which is never closed; a later Report, or one after Closing,
// sends nothing. The zero value is ready; safe for concurrent use.
type Failure struct {
	make, send sync.Once
	ch         chan error
	closing    atomic.Bool
}

// C returns the channel the failure is sent on (capacity one: Report
// never waits). One receive takes the error: a caller that needs it in
// two places hands it on.
func (f *Failure) C() <-chan error {
	f.make.Do(func() { f.ch = make(chan error, 1) })
	return f.ch
}

// Closing marks the gateway as closing: its own Close deletes the
// interfaces it created (the exception TUN), which is no failure, and an
// interface deleted meanwhile no longer matters.
func (f *Failure) Closing() { f.closing.Store(true) }

// Gone logs at error level that the interface e names was deleted (the
// kernel tells a move to another namespace alike: RTM_DELLINK), and
// meaning: what was on it and what happens (Restart, for most), and
// reports e (Report). Nothing is logged once Closing was called.
func (f *Failure) Gone(log *slog.Logger, e *GoneError, meaning string) {
	if f.closing.Load() {
		return
	}
	log.Error(fmt.Sprintf("%s %s was deleted (or moved to another network namespace): %s", e.What, e.name(), meaning),
		"interface", e.Name, "index", e.Index)
	f.Report(e)
}

// Report sends err on C if it is the first failure and the gateway is
// not closing, and reports whether it did.
func (f *Failure) Report(err error) (sent bool) {
	if f.closing.Load() {
		return false
	}
	f.send.Do(func() {
		f.C()
		f.ch <- err
		sent = true
	})
	return sent
}
