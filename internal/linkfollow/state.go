//go:build linux

package linkfollow

import (
	"log/slog"
	"net"

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
// only if it is down. Not safe for concurrent use (one Follow goroutine
// calls it); the zero value is not usable: Log and What are required.
type StateLog struct {
	Log *slog.Logger
	// What names the side ("WAN", "LAN"); Counted says where the gateway
	// counts what it sends while the link is down (its stats command's
	// words), for the warning.
	What, Counted string
	states        map[int]bool // each index's last state
}

// Note logs a's state if it changed since the last Note of its index.
func (s *StateLog) Note(a netlink.LinkAttrs) {
	if s.states == nil {
		s.states = map[int]bool{}
	}
	up := linkUp(a)
	was, seen := s.states[a.Index]
	s.states[a.Index] = up
	switch {
	case seen && was == up, !seen && up:
	case up:
		s.Log.Info(s.What+" link up again: forwarding through it resumes", "interface", a.Name)
	default:
		s.Log.Warn(s.What+" link down: nothing arrives through it, and what the gateway sends out of it does not leave ("+s.Counted+"; the kernel counts its drops as TX dropped: ip -s link show dev "+a.Name+") until it is up again",
			"interface", a.Name, "admin_up", a.Flags&net.FlagUp != 0, "carrier", a.RawFlags&unix.IFF_LOWER_UP != 0,
			"fix", "ip link set dev "+a.Name+" up, or check the cable or the link's other end")
	}
}
