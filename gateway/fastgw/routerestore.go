//go:build linux

package fastgw

// The routes into the exception TUN again after the kernel removed them,
// and the prefixes a route of the host's holds (taken, yielded, retaken).

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/internal/nldump"
)

// restoreRoutes installs again the route into the exception TUN of every
// prefix of the configuration and every prefix that left it (the kernel
// removed them when the interface went down: Gateway.watchException),
// and returns how many it tried. A prefix that left the configuration and
// has a route of another's now is no longer kept (restoreLeft).
func (d *dataplane_) restoreRoutes() int {
	d.WaitApplied() // not to wait for the worker's whole queue under d.mu (routeMu)
	d.lock()
	defer d.mu.Unlock()
	d.routeMu.Lock()
	defer d.routeMu.Unlock()
	defer d.warn.Flush()
	var routes []routeReq
	for p, e := range d.entries {
		if !e.hostRouted {
			routes = append(routes, routeReq{p: p})
		}
	}
	d.noteTaken(d.routeAll(d.warn, routes))
	d.retakeLocked()
	return len(d.entries) + d.restoreLeft(func(netip.Prefix) bool { return true })
}

// Retake follows the host's routes of the configured prefixes' keys when
// an address of the WAN or LAN changed; subnets are the interfaces'
// addresses of now with their prefix lengths. A prefix whose key a route
// of the host's held (hostRouted) is routed into the exception TUN again
// when that route is gone (an address removed, a static route deleted):
// without, the host's own packets to it took its other routes, a default
// route out of the WAN in cleartext. And an IPv4 prefix routed into the
// exception TUN that is the subnet of an address added since gives that
// subnet back to the host: the kernel appends the connected route behind
// ours (fib_magic's NLM_F_APPEND, the same key and metric 0), so ours took
// the host's LAN (or WAN subnet) into the tunnel. (IPv6's connected route,
// metric 256, goes before ours, 1024.)
func (d *dataplane_) Retake(subnets []netip.Prefix) {
	if d == nil {
		return
	}
	d.lock()
	defer d.mu.Unlock()
	d.routeMu.Lock()
	defer d.routeMu.Unlock()
	defer d.warn.Flush()
	d.yieldConnected(subnets)
	d.retakeLocked()
}

// yieldConnected gives the key of each IPv4 prefix of the configuration
// that is the subnet of one of subnets, routed into the exception TUN, to
// a route of the host's of the same key (destination, TOS 0, metric 0:
// the kernel's connected route, appended behind ours) where the main
// table holds one: ours is deleted and installed again, which the kernel
// refuses (EEXIST), and noteTaken leaves the key to the host's route, with
// its warning. Where none is, nothing is touched (each delete left a gap
// in which the host's packets to the prefix took its other routes). A
// host route of another metric (NetworkManager's prefix routes, metric
// 100 and more) is not followed: ours, metric 0, goes first. d.mu and
// d.routeMu held.
func (d *dataplane_) yieldConnected(subnets []netip.Prefix) {
	if d.excLink == nil {
		return
	}
	var taken []netip.Prefix
	for _, s := range subnets {
		p := s.Masked()
		e := d.entries[p]
		if !p.Addr().Is4() || p.Bits() == 0 || e == nil || e.hostRouted || slices.Contains(taken, p) || !d.hostHoldsKey(p) {
			continue
		}
		if err := d.nl.RouteDel(d.excRoute(p)); err != nil && !errors.Is(err, unix.ESRCH) {
			d.warn.Warn("an allowed-IPs prefix is the subnet of an address added to the WAN or LAN: give its key back to the host's route", "prefix", p, "err", err)
			continue
		}
		if d.route(d.warn, p, false) {
			taken = append(taken, p)
		}
	}
	d.noteTaken(taken)
}

// hostHoldsKey reports whether the main table holds a route of the key of
// p (an IPv4 prefix: destination, TOS 0, metric 0) that is not ours into
// the exception TUN; false when the routes cannot be listed.
func (d *dataplane_) hostHoldsKey(p netip.Prefix) bool {
	filter := &netlink.Route{Table: unix.RT_TABLE_MAIN, Dst: d.excRoute(p).Dst}
	routes, err := nldump.Retry(func() ([]netlink.Route, error) {
		return d.nl.RouteListFiltered(netlink.FAMILY_V4, filter, netlink.RT_FILTER_TABLE|netlink.RT_FILTER_DST)
	})
	if err != nil {
		d.warn.Warn("list the routes of an allowed-IPs prefix that is an interface's subnet", "prefix", p, "err", err)
		return false
	}
	for _, r := range routes {
		if r.LinkIndex != d.excLink.Attrs().Index && r.Priority == 0 && r.Tos == 0 {
			return true
		}
	}
	return false
}

// retakeLocked routes into the exception TUN again the prefixes whose
// key a route of the host's held when that route is gone (Retake); d.mu
// and d.routeMu held.
func (d *dataplane_) retakeLocked() {
	if d.hostRouted == 0 || d.excLink == nil {
		return
	}
	for p, e := range d.entries {
		if e.hostRouted && d.installRoute(d.warn, p, d.nl.RouteAdd) == nil {
			e.hostRouted = false
			d.hostRouted--
			d.warn.Log(slog.LevelInfo, "the host's route of an allowed-IPs prefix is gone: the prefix is routed into the exception TUN again", "prefix", p)
		}
	}
}

// noteTaken tells which of taken, configured prefixes whose route route
// found there already (EEXIST), have a route of the host's rather than
// ours (the routes into the exception TUN are listed once to tell), marks
// their entries hostRouted and warns of each; d.mu held.
func (d *dataplane_) noteTaken(taken []netip.Prefix) {
	if len(taken) == 0 {
		return
	}
	ours, err := d.excRoutes()
	d.markTaken(taken, ours, err)
}

// markTaken is noteTaken with the routes into the exception TUN listed
// (ours, or the listing's error err); d.mu held.
func (d *dataplane_) markTaken(taken []netip.Prefix, ours map[netip.Prefix]bool, err error) {
	if err != nil {
		d.warn.Warn("allowed-IPs prefixes whose key the main table holds already: tell which are routed elsewhere", "err", err)
		return
	}
	for _, p := range taken {
		e := d.entries[p]
		if e == nil && !ours[p] {
			// It left the configuration before the route worker
			// found its key the host's: the route that left kept
			// was never ours (a return would replace the host's).
			d.left.Remove(p)
		}
		if ours[p] || e == nil || e.hostRouted {
			continue
		}
		e.hostRouted = true
		d.hostRouted++
		d.warn.Warn("an allowed-IPs prefix is the key of a route of the host's (an interface's subnet, a static route): that route stays and none is made into the exception TUN, so the host's own packets to it, and those its kernel forwards, take that route, not the tunnel (wg-quick up refuses such a prefix: File exists)", "prefix", p)
	}
}

// restoreLeft installs again the routes into the exception TUN of the
// prefixes that left the configuration (forget) for which want reports
// true, and returns how many it tried; d.mu and d.routeMu held. A prefix whose key
// (destination, TOS 0, metric 0 or IPv6's 1024) the main table holds in
// a route not into the exception TUN (routeAll's EEXIST; the routes into
// it are listed to tell, once, only when some prefix met one) is no
// longer kept: `ip route del PREFIX dev NAME` gave it back, and the route
// the operator (or a routing daemon) added then is theirs. Replaced, as
// every route was restored before, it carried their traffic into the
// exception TUN, whose engine drops it (no_route), from the TUN's next
// down and up on (TestLeftPrefixRoutedElsewhere).
func (d *dataplane_) restoreLeft(want func(netip.Prefix) bool) int {
	var routes []routeReq
	for p := range d.left.All() {
		if want(p) {
			routes = append(routes, routeReq{p: p})
		}
	}
	n := len(routes)
	taken := d.routeAll(d.warn, routes)
	if len(taken) == 0 {
		return n
	}
	ours, err := d.excRoutes()
	if err != nil {
		d.warn.Warn("routes kept for prefixes that left the configuration: tell which are routed elsewhere now", "err", err)
		return n
	}
	for _, p := range taken {
		if !ours[p] {
			d.left.Remove(p)
			d.warn.Log(slog.LevelInfo, "a prefix that left the configuration is routed elsewhere now: its route into the exception TUN is no longer kept", "prefix", p)
		}
	}
	return n
}

// excRoutes lists the destinations of the main table's routes into the
// exception TUN.
func (d *dataplane_) excRoutes() (map[netip.Prefix]bool, error) {
	routes, err := nldump.Retry(func() ([]netlink.Route, error) {
		return d.nl.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{LinkIndex: d.excLink.Attrs().Index}, netlink.RT_FILTER_OIF)
	})
	if err != nil {
		return nil, fmt.Errorf("list the routes into the exception TUN: %w", err)
	}
	have := make(map[netip.Prefix]bool, len(routes))
	for _, r := range routes {
		if r.Dst == nil {
			continue
		}
		if ip, ok := netip.AddrFromSlice(r.Dst.IP); ok {
			if len(r.Dst.Mask) == net.IPv4len {
				ip = ip.Unmap()
			}
			ones, _ := r.Dst.Mask.Size()
			have[netip.PrefixFrom(ip, ones)] = true
		}
	}
	return have, nil
}

// restoreMissingRoutes installs again the routes into the exception TUN
// of the configuration's prefixes and of those that left it (forget)
// that the kernel's main table lacks (Gateway.restoreMissing), and
// returns how many; its failures are logged as UpdatePeers' are (capped
// per kind, counted at its end). A prefix that left the configuration and
// has a route of another's now is no longer kept (restoreLeft). A prefix
// added while the routes are listed may be installed twice (a replace:
// harmless).
func (d *dataplane_) restoreMissingRoutes() (int, error) {
	if d.excLink == nil {
		return 0, nil
	}
	d.WaitApplied() // the worker's routes: not missing, and not waited for under d.mu
	have, err := d.excRoutes()
	if err != nil {
		return 0, err
	}
	d.lock()
	defer d.mu.Unlock()
	d.routeMu.Lock()
	defer d.routeMu.Unlock()
	defer d.warn.Flush()
	var routes []routeReq
	for p, e := range d.entries {
		if p.Bits() > 0 && !have[p] && !e.hostRouted {
			routes = append(routes, routeReq{p: p})
		}
	}
	n := len(routes)
	d.noteTaken(d.routeAll(d.warn, routes))
	d.retakeLocked()
	return n + d.restoreLeft(func(p netip.Prefix) bool { return !have[p] }), nil
}
