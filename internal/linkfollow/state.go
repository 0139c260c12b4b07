//go:build linux

package linkfollow

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// linkUp reports whether the interface a describes can carry frames:
// administratively up (ip link set dev X up) and with carrier (for a
// veth: its other end up too).
func linkUp(a netlink.LinkAttrs) bool {
	return a.Flags&net.FlagUp != 0 && a.RawFlags&unix.IFF_LOWER_UP != 0
}

// StateLog logs the changes of whether followed interfaces are up (linkUp),
// for a gateway's OnLink: at warning level when one goes down, naming
// what does not leave, where it is counted (Counted) and the fix, at info
// level when it comes back. While a port's link is without carrier, the
// kernel drops what the gateway sends out of it without telling the
// sender; set down, the interface takes nothing (an AF_XDP port's TX ring
// holds it until it is up); and nothing arrives: without this line the
// gateway stays silent. The first state seen of an interface is logged
// only if it is down. A flapping link (a bad cable, a switch port
// bouncing) is logged FlapLines times a FlapWindow at most: the changes
// past that are counted, and once the window has passed one line tells
// how many there were and the state the link is in then. Safe for
// concurrent use; the zero value is not usable: Log and What are
// required.
type StateLog struct {
	Log *slog.Logger
	// What names the side ("WAN", "LAN"); Counted says where the gateway
	// counts what it sends while the link is down (its stats command's
	// words), for the warning.
	What, Counted string

	mu     sync.Mutex
	states map[int]*linkState // by interface index
	// now and after are time.Now and time.AfterFunc (tests replace them).
	now   func() time.Time
	after func(time.Duration, func())
}

// FlapLines and FlapWindow bound a StateLog's lines for one interface:
// FlapLines changes logged in a FlapWindow, the rest summed up (our
// choice: four lines are two flaps, down and up again).
const (
	FlapLines  = 4
	FlapWindow = time.Minute
)

type linkState struct {
	up      bool
	name    string
	logged  int       // changes logged since start
	start   time.Time // of the window
	skipped int       // changes not logged in the window
	timer   bool      // a summary is due at the window's end
}

// Note logs a's state if it changed since the last Note of its index.
func (s *StateLog) Note(a netlink.LinkAttrs) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.states == nil {
		s.states = map[int]*linkState{}
	}
	if s.now == nil {
		s.now, s.after = time.Now, func(d time.Duration, f func()) { time.AfterFunc(d, f) }
	}
	up := linkUp(a)
	st, seen := s.states[a.Index]
	if !seen {
		st = &linkState{}
		s.states[a.Index] = st
	}
	was := st.up
	st.up, st.name = up, a.Name
	if seen && was == up || !seen && up {
		return
	}
	now := s.now()
	if now.Sub(st.start) >= FlapWindow {
		st.start, st.logged = now, 0
	}
	if st.logged >= FlapLines {
		st.skipped++
		if !st.timer {
			st.timer = true
			s.after(st.start.Add(FlapWindow).Sub(now), func() { s.summary(a.Index) })
		}
		return
	}
	st.logged++
	s.line(a, up)
}

// line logs a's state up (s.mu held).
func (s *StateLog) line(a netlink.LinkAttrs, up bool) {
	if up {
		s.Log.Info(s.What+" link up again: forwarding through it resumes", "interface", a.Name)
		return
	}
	s.Log.Warn(s.What+" link down: nothing arrives through it, and what the gateway sends out of it does not leave ("+s.Counted+"; the kernel counts its drops as TX dropped: ip -s link show dev "+a.Name+") until it is up again",
		"interface", a.Name, "admin_up", a.Flags&net.FlagUp != 0, "carrier", a.RawFlags&unix.IFF_LOWER_UP != 0,
		"fix", "ip link set dev "+a.Name+" up, or check the cable or the link's other end")
}

// summary logs, at the end of a window in which changes of interface
// index went unlogged, how many and the link's state now; a new window
// starts.
func (s *StateLog) summary(index int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.states[index]
	state, level := "up", slog.LevelInfo
	if !st.up {
		state, level = "down", slog.LevelWarn
	}
	s.Log.Log(context.Background(), level, s.What+" link flapping: changes not logged (at most "+strconv.Itoa(FlapLines)+" lines a minute); it is "+state+" now",
		"interface", st.name, "changes_not_logged", st.skipped)
	st.start, st.logged, st.skipped, st.timer = s.now(), 0, 0, false
}
