//go:build linux

package fastgw

import (
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
)

// offWANEvery is the least time between two of offWANLog's lines.
const offWANEvery = time.Minute

// offWANLog says, at most once an offWANEvery, that the host routes a
// destination the fast path sends to out of an interface other than the
// WAN: the fast path sends only out of its WAN port, so what it has for
// that destination is dropped, where Linux's wg0 and wireguard-go send it
// by the host's route. A peer whose endpoint is there (a road warrior on
// the LAN that uses the gateway as its server) never connects: its
// handshakes count no_wan_route, its `wg set` succeeded and `wg show`
// looks right, and before this line nothing said why. note runs on the
// workers (resolver.HasRoute: a control frame dropped as no_wan_route,
// an ICMP error to the WAN not sent): an atomic load, and the line is
// written by a goroutine of its own (the interface's name is a netlink
// request). The zero value with log set is ready; a nil one says nothing.
type offWANLog struct {
	log  *slog.Logger
	wan  string                   // the WAN interface's name
	name func(ifindex int) string // an interface's name ("" if unknown)
	last atomic.Int64             // Unix ns of the last line
	wg   sync.WaitGroup           // the line's goroutine (Gateway.Close waits for it)
}

// note records that dst's route leads out of interface ifindex (not the
// WAN's) at now.
func (l *offWANLog) note(dst netip.Addr, ifindex int, now time.Time) {
	if l == nil || l.log == nil {
		return
	}
	t := now.UnixNano()
	last := l.last.Load()
	if last != 0 && t-last < int64(offWANEvery) || !l.last.CompareAndSwap(last, t) {
		return
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		ifname := ""
		if l.name != nil {
			ifname = l.name(ifindex)
		}
		l.log.Warn("the host routes a destination of the fast path out of another interface than the WAN: the fast path sends only out of the WAN, so what it has for that destination is dropped (a peer whose configured endpoint is there is not reached: its handshakes count no_wan_route; an ICMP error to it is not sent); route it out of the WAN (said at most once a minute)",
			"destination", dst, "route_interface", ifname, "route_ifindex", ifindex, "wan", l.wan)
	}()
}

// wait waits for the line being written, if any (Gateway.Close, once
// the workers that call note stopped, before the namespace handle the
// line's netlink request uses is closed). A nil l waits for nothing.
func (l *offWANLog) wait() {
	if l != nil {
		l.wg.Wait()
	}
}

// linkName is the name of the gateway's namespace's interface of index
// ifindex, or "" when it cannot be read; a handle of its own, as the
// gateway's is not for concurrent use.
func (g *Gateway) linkName(ifindex int) string {
	h, err := netlink.NewHandleAt(g.nsHandle)
	if err != nil {
		return ""
	}
	defer h.Close()
	l, err := h.LinkByIndex(ifindex)
	if err != nil {
		return ""
	}
	return l.Attrs().Name
}
